from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class CommitRequest(_message.Message):
    __slots__ = ("spec_version", "root", "n_pairs", "item_kind", "owner", "claim_key")
    SPEC_VERSION_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    N_PAIRS_FIELD_NUMBER: _ClassVar[int]
    ITEM_KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    CLAIM_KEY_FIELD_NUMBER: _ClassVar[int]
    spec_version: str
    root: bytes
    n_pairs: int
    item_kind: str
    owner: str
    claim_key: bytes
    def __init__(self, spec_version: _Optional[str] = ..., root: _Optional[bytes] = ..., n_pairs: _Optional[int] = ..., item_kind: _Optional[str] = ..., owner: _Optional[str] = ..., claim_key: _Optional[bytes] = ...) -> None: ...

class CommitResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: bytes
    def __init__(self, receipt: _Optional[bytes] = ...) -> None: ...

class GetRecordRequest(_message.Message):
    __slots__ = ("index",)
    INDEX_FIELD_NUMBER: _ClassVar[int]
    index: int
    def __init__(self, index: _Optional[int] = ...) -> None: ...

class GetRecordResponse(_message.Message):
    __slots__ = ("entry", "log_size", "inclusion_proof", "checkpoint")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    LOG_SIZE_FIELD_NUMBER: _ClassVar[int]
    INCLUSION_PROOF_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    entry: bytes
    log_size: int
    inclusion_proof: _containers.RepeatedScalarFieldContainer[bytes]
    checkpoint: bytes
    def __init__(self, entry: _Optional[bytes] = ..., log_size: _Optional[int] = ..., inclusion_proof: _Optional[_Iterable[bytes]] = ..., checkpoint: _Optional[bytes] = ...) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCheckpointResponse(_message.Message):
    __slots__ = ("checkpoint", "checkpoint_note")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_NOTE_FIELD_NUMBER: _ClassVar[int]
    checkpoint: bytes
    checkpoint_note: bytes
    def __init__(self, checkpoint: _Optional[bytes] = ..., checkpoint_note: _Optional[bytes] = ...) -> None: ...

class GetInclusionProofRequest(_message.Message):
    __slots__ = ("index", "size")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    index: int
    size: int
    def __init__(self, index: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class GetInclusionProofResponse(_message.Message):
    __slots__ = ("proof",)
    PROOF_FIELD_NUMBER: _ClassVar[int]
    proof: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, proof: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetConsistencyProofRequest(_message.Message):
    __slots__ = ("old_size", "new_size")
    OLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    NEW_SIZE_FIELD_NUMBER: _ClassVar[int]
    old_size: int
    new_size: int
    def __init__(self, old_size: _Optional[int] = ..., new_size: _Optional[int] = ...) -> None: ...

class GetConsistencyProofResponse(_message.Message):
    __slots__ = ("proof",)
    PROOF_FIELD_NUMBER: _ClassVar[int]
    proof: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, proof: _Optional[_Iterable[bytes]] = ...) -> None: ...

class GetEntriesRequest(_message.Message):
    __slots__ = ("start", "count")
    START_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    start: int
    count: int
    def __init__(self, start: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class GetEntriesResponse(_message.Message):
    __slots__ = ("entries", "log_size")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LOG_SIZE_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedScalarFieldContainer[bytes]
    log_size: int
    def __init__(self, entries: _Optional[_Iterable[bytes]] = ..., log_size: _Optional[int] = ...) -> None: ...
