from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClaimMessage(_message.Message):
    __slots__ = ("start", "openings", "part")
    START_FIELD_NUMBER: _ClassVar[int]
    OPENINGS_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    start: ClaimStart
    openings: Openings
    part: OpeningPart
    def __init__(self, start: _Optional[_Union[ClaimStart, _Mapping]] = ..., openings: _Optional[_Union[Openings, _Mapping]] = ..., part: _Optional[_Union[OpeningPart, _Mapping]] = ...) -> None: ...

class ClaimStart(_message.Message):
    __slots__ = ("spec_version", "record_index", "record_root", "model", "score", "test", "tie_rule", "max_pairs", "query_budget", "resume_claim_id", "window", "window_max", "fresh_pairs", "authorization", "dry_run", "probes")
    SPEC_VERSION_FIELD_NUMBER: _ClassVar[int]
    RECORD_INDEX_FIELD_NUMBER: _ClassVar[int]
    RECORD_ROOT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    TEST_FIELD_NUMBER: _ClassVar[int]
    TIE_RULE_FIELD_NUMBER: _ClassVar[int]
    MAX_PAIRS_FIELD_NUMBER: _ClassVar[int]
    QUERY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    RESUME_CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MAX_FIELD_NUMBER: _ClassVar[int]
    FRESH_PAIRS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    PROBES_FIELD_NUMBER: _ClassVar[int]
    spec_version: str
    record_index: int
    record_root: bytes
    model: ModelRef
    score: ScoreSpec
    test: TestSpec
    tie_rule: str
    max_pairs: int
    query_budget: int
    resume_claim_id: str
    window: int
    window_max: int
    fresh_pairs: bool
    authorization: bytes
    dry_run: bool
    probes: _containers.RepeatedCompositeFieldContainer[ImageShape]
    def __init__(self, spec_version: _Optional[str] = ..., record_index: _Optional[int] = ..., record_root: _Optional[bytes] = ..., model: _Optional[_Union[ModelRef, _Mapping]] = ..., score: _Optional[_Union[ScoreSpec, _Mapping]] = ..., test: _Optional[_Union[TestSpec, _Mapping]] = ..., tie_rule: _Optional[str] = ..., max_pairs: _Optional[int] = ..., query_budget: _Optional[int] = ..., resume_claim_id: _Optional[str] = ..., window: _Optional[int] = ..., window_max: _Optional[int] = ..., fresh_pairs: _Optional[bool] = ..., authorization: _Optional[bytes] = ..., dry_run: _Optional[bool] = ..., probes: _Optional[_Iterable[_Union[ImageShape, _Mapping]]] = ...) -> None: ...

class ImageShape(_message.Message):
    __slots__ = ("height", "width", "channels")
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    height: int
    width: int
    channels: int
    def __init__(self, height: _Optional[int] = ..., width: _Optional[int] = ..., channels: _Optional[int] = ...) -> None: ...

class ModelRef(_message.Message):
    __slots__ = ("oracle_endpoint", "name")
    ORACLE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    oracle_endpoint: str
    name: str
    def __init__(self, oracle_endpoint: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ScoreSpec(_message.Message):
    __slots__ = ("function", "k", "perturbation", "knowledge", "statistic", "margin")
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    PERTURBATION_FIELD_NUMBER: _ClassVar[int]
    KNOWLEDGE_FIELD_NUMBER: _ClassVar[int]
    STATISTIC_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    function: str
    k: int
    perturbation: str
    knowledge: str
    statistic: str
    margin: float
    def __init__(self, function: _Optional[str] = ..., k: _Optional[int] = ..., perturbation: _Optional[str] = ..., knowledge: _Optional[str] = ..., statistic: _Optional[str] = ..., margin: _Optional[float] = ...) -> None: ...

class TestSpec(_message.Message):
    __slots__ = ("name", "p", "alpha", "prior")
    NAME_FIELD_NUMBER: _ClassVar[int]
    P_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    PRIOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    p: float
    alpha: float
    prior: str
    def __init__(self, name: _Optional[str] = ..., p: _Optional[float] = ..., alpha: _Optional[float] = ..., prior: _Optional[str] = ...) -> None: ...

class PairOpening(_message.Message):
    __slots__ = ("index", "salt", "version0", "version1", "proof", "version0_size", "version1_size")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    VERSION0_FIELD_NUMBER: _ClassVar[int]
    VERSION1_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    VERSION0_SIZE_FIELD_NUMBER: _ClassVar[int]
    VERSION1_SIZE_FIELD_NUMBER: _ClassVar[int]
    index: int
    salt: bytes
    version0: bytes
    version1: bytes
    proof: _containers.RepeatedScalarFieldContainer[bytes]
    version0_size: int
    version1_size: int
    def __init__(self, index: _Optional[int] = ..., salt: _Optional[bytes] = ..., version0: _Optional[bytes] = ..., version1: _Optional[bytes] = ..., proof: _Optional[_Iterable[bytes]] = ..., version0_size: _Optional[int] = ..., version1_size: _Optional[int] = ...) -> None: ...

class Openings(_message.Message):
    __slots__ = ("pairs", "more")
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    pairs: _containers.RepeatedCompositeFieldContainer[PairOpening]
    more: bool
    def __init__(self, pairs: _Optional[_Iterable[_Union[PairOpening, _Mapping]]] = ..., more: _Optional[bool] = ...) -> None: ...

class OpeningPart(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class VerifierMessage(_message.Message):
    __slots__ = ("accepted", "request", "progress", "verdict", "dry_run")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    accepted: ClaimAccepted
    request: OpeningRequest
    progress: Progress
    verdict: VerdictReady
    dry_run: DryRunReport
    def __init__(self, accepted: _Optional[_Union[ClaimAccepted, _Mapping]] = ..., request: _Optional[_Union[OpeningRequest, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., verdict: _Optional[_Union[VerdictReady, _Mapping]] = ..., dry_run: _Optional[_Union[DryRunReport, _Mapping]] = ...) -> None: ...

class DryRunReport(_message.Message):
    __slots__ = ("oracle", "score", "n_pairs", "earlier_claims", "probes")
    ORACLE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    N_PAIRS_FIELD_NUMBER: _ClassVar[int]
    EARLIER_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    PROBES_FIELD_NUMBER: _ClassVar[int]
    oracle: bytes
    score: bytes
    n_pairs: int
    earlier_claims: int
    probes: _containers.RepeatedCompositeFieldContainer[ProbeResult]
    def __init__(self, oracle: _Optional[bytes] = ..., score: _Optional[bytes] = ..., n_pairs: _Optional[int] = ..., earlier_claims: _Optional[int] = ..., probes: _Optional[_Iterable[_Union[ProbeResult, _Mapping]]] = ...) -> None: ...

class ProbeResult(_message.Message):
    __slots__ = ("shape", "ok", "error")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    shape: ImageShape
    ok: bool
    error: str
    def __init__(self, shape: _Optional[_Union[ImageShape, _Mapping]] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class ClaimAccepted(_message.Message):
    __slots__ = ("claim_id", "n_pairs", "resumed_pairs")
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    N_PAIRS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_PAIRS_FIELD_NUMBER: _ClassVar[int]
    claim_id: str
    n_pairs: int
    resumed_pairs: int
    def __init__(self, claim_id: _Optional[str] = ..., n_pairs: _Optional[int] = ..., resumed_pairs: _Optional[int] = ...) -> None: ...

class OpeningRequest(_message.Message):
    __slots__ = ("indices",)
    INDICES_FIELD_NUMBER: _ClassVar[int]
    indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, indices: _Optional[_Iterable[int]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("pairs_opened", "draws", "successes", "has_interval", "interval_low", "interval_high", "log_statistic", "decision", "queries")
    PAIRS_OPENED_FIELD_NUMBER: _ClassVar[int]
    DRAWS_FIELD_NUMBER: _ClassVar[int]
    SUCCESSES_FIELD_NUMBER: _ClassVar[int]
    HAS_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_LOW_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_HIGH_FIELD_NUMBER: _ClassVar[int]
    LOG_STATISTIC_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    pairs_opened: int
    draws: int
    successes: int
    has_interval: bool
    interval_low: int
    interval_high: int
    log_statistic: float
    decision: str
    queries: int
    def __init__(self, pairs_opened: _Optional[int] = ..., draws: _Optional[int] = ..., successes: _Optional[int] = ..., has_interval: _Optional[bool] = ..., interval_low: _Optional[int] = ..., interval_high: _Optional[int] = ..., log_statistic: _Optional[float] = ..., decision: _Optional[str] = ..., queries: _Optional[int] = ...) -> None: ...

class VerdictReady(_message.Message):
    __slots__ = ("claim_id", "verdict", "transcript_hash")
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    TRANSCRIPT_HASH_FIELD_NUMBER: _ClassVar[int]
    claim_id: str
    verdict: bytes
    transcript_hash: bytes
    def __init__(self, claim_id: _Optional[str] = ..., verdict: _Optional[bytes] = ..., transcript_hash: _Optional[bytes] = ...) -> None: ...

class GetVerdictRequest(_message.Message):
    __slots__ = ("claim_id",)
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    claim_id: str
    def __init__(self, claim_id: _Optional[str] = ...) -> None: ...

class GetVerdictResponse(_message.Message):
    __slots__ = ("verdict", "transcript")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    TRANSCRIPT_FIELD_NUMBER: _ClassVar[int]
    verdict: bytes
    transcript: bytes
    def __init__(self, verdict: _Optional[bytes] = ..., transcript: _Optional[bytes] = ...) -> None: ...

class GetPublicKeyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPublicKeyResponse(_message.Message):
    __slots__ = ("public_key_pem", "key_id")
    PUBLIC_KEY_PEM_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    public_key_pem: bytes
    key_id: str
    def __init__(self, public_key_pem: _Optional[bytes] = ..., key_id: _Optional[str] = ...) -> None: ...
