from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Image(_message.Message):
    __slots__ = ("height", "width", "channels", "pixels_f32le")
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    PIXELS_F32LE_FIELD_NUMBER: _ClassVar[int]
    height: int
    width: int
    channels: int
    pixels_f32le: bytes
    def __init__(self, height: _Optional[int] = ..., width: _Optional[int] = ..., channels: _Optional[int] = ..., pixels_f32le: _Optional[bytes] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("model_name", "model_digest", "capabilities", "classify_output", "n_classes", "max_batch", "framework", "model_format", "input_shape", "answer_key")
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_DIGEST_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CLASSIFY_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    N_CLASSES_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    FRAMEWORK_FIELD_NUMBER: _ClassVar[int]
    MODEL_FORMAT_FIELD_NUMBER: _ClassVar[int]
    INPUT_SHAPE_FIELD_NUMBER: _ClassVar[int]
    ANSWER_KEY_FIELD_NUMBER: _ClassVar[int]
    model_name: str
    model_digest: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    classify_output: str
    n_classes: int
    max_batch: int
    framework: str
    model_format: str
    input_shape: _containers.RepeatedScalarFieldContainer[int]
    answer_key: bytes
    def __init__(self, model_name: _Optional[str] = ..., model_digest: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., classify_output: _Optional[str] = ..., n_classes: _Optional[int] = ..., max_batch: _Optional[int] = ..., framework: _Optional[str] = ..., model_format: _Optional[str] = ..., input_shape: _Optional[_Iterable[int]] = ..., answer_key: _Optional[bytes] = ...) -> None: ...

class ClassifyRequest(_message.Message):
    __slots__ = ("images", "claim_nonce")
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NONCE_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[Image]
    claim_nonce: bytes
    def __init__(self, images: _Optional[_Iterable[_Union[Image, _Mapping]]] = ..., claim_nonce: _Optional[bytes] = ...) -> None: ...

class ClassifyResponse(_message.Message):
    __slots__ = ("output", "n_classes", "probabilities", "labels", "answer_signature")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    N_CLASSES_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    output: str
    n_classes: int
    probabilities: _containers.RepeatedScalarFieldContainer[float]
    labels: _containers.RepeatedScalarFieldContainer[int]
    answer_signature: bytes
    def __init__(self, output: _Optional[str] = ..., n_classes: _Optional[int] = ..., probabilities: _Optional[_Iterable[float]] = ..., labels: _Optional[_Iterable[int]] = ..., answer_signature: _Optional[bytes] = ...) -> None: ...

class EmbedImagesRequest(_message.Message):
    __slots__ = ("images", "claim_nonce")
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NONCE_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[Image]
    claim_nonce: bytes
    def __init__(self, images: _Optional[_Iterable[_Union[Image, _Mapping]]] = ..., claim_nonce: _Optional[bytes] = ...) -> None: ...

class EmbedImagesResponse(_message.Message):
    __slots__ = ("dim", "values", "answer_signature")
    DIM_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    dim: int
    values: _containers.RepeatedScalarFieldContainer[float]
    answer_signature: bytes
    def __init__(self, dim: _Optional[int] = ..., values: _Optional[_Iterable[float]] = ..., answer_signature: _Optional[bytes] = ...) -> None: ...

class TokenLogprobsRequest(_message.Message):
    __slots__ = ("texts", "claim_nonce")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NONCE_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    claim_nonce: bytes
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., claim_nonce: _Optional[bytes] = ...) -> None: ...

class TokenLogprobs(_message.Message):
    __slots__ = ("logprobs",)
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, logprobs: _Optional[_Iterable[float]] = ...) -> None: ...

class TokenLogprobsResponse(_message.Message):
    __slots__ = ("items", "answer_signature")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[TokenLogprobs]
    answer_signature: bytes
    def __init__(self, items: _Optional[_Iterable[_Union[TokenLogprobs, _Mapping]]] = ..., answer_signature: _Optional[bytes] = ...) -> None: ...

class EmbedImageTextRequest(_message.Message):
    __slots__ = ("images", "texts", "claim_nonce")
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NONCE_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[Image]
    texts: _containers.RepeatedScalarFieldContainer[str]
    claim_nonce: bytes
    def __init__(self, images: _Optional[_Iterable[_Union[Image, _Mapping]]] = ..., texts: _Optional[_Iterable[str]] = ..., claim_nonce: _Optional[bytes] = ...) -> None: ...

class EmbedImageTextResponse(_message.Message):
    __slots__ = ("dim", "image_values", "text_values", "answer_signature")
    DIM_FIELD_NUMBER: _ClassVar[int]
    IMAGE_VALUES_FIELD_NUMBER: _ClassVar[int]
    TEXT_VALUES_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    dim: int
    image_values: _containers.RepeatedScalarFieldContainer[float]
    text_values: _containers.RepeatedScalarFieldContainer[float]
    answer_signature: bytes
    def __init__(self, dim: _Optional[int] = ..., image_values: _Optional[_Iterable[float]] = ..., text_values: _Optional[_Iterable[float]] = ..., answer_signature: _Optional[bytes] = ...) -> None: ...
