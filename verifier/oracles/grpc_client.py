"""A :class:`ClassifierOracle` reached over gRPC (``twinaudit.oracle.v1.Oracle``).

Every call carries a deadline of ``timeout_s`` seconds. Failures become
:class:`~protocol.errors.OracleError`:

- ``UNAVAILABLE`` (nothing listening, connection lost, TLS failure) → ``"unreachable"``;
- ``DEADLINE_EXCEEDED`` → ``"deadline"``;
- any other status, and any answer that is malformed (wrong output kind or number
  of classes, wrong length, NaN, a probability outside [0, 1] or a vector not
  summing to 1, a label out of range) → ``"invalid-answer"``.

A ``classify`` batch is split into requests of at most the oracle's ``max_batch``
images, each request and its expected answer within the message limit.
"""

from __future__ import annotations

from typing import Any, Final

import grpc
import numpy as np

from protocol.errors import LimitExceededError, OracleError, ParameterError
from twinaudit import transport
from twinaudit.oracle.v1 import oracle_pb2, oracle_pb2_grpc

from .base import ClassifierOracle, ClassifyAnswer, F32Images, OracleInfo, check_images

#: Room kept in a message for its fixed fields (output kind, n_classes, headers).
_MESSAGE_SLACK: Final = 256


def _varint_len(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def _rpc_error(exc: grpc.RpcError, what: str) -> OracleError:
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    if code == grpc.StatusCode.UNAVAILABLE:
        return OracleError("unreachable", f"{what}: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return OracleError("deadline", f"{what}: no answer before the deadline")
    name = code.name if code is not None else "UNKNOWN"
    return OracleError("invalid-answer", f"{what} answered status {name}: {details}")


class GrpcClassifierOracle(ClassifierOracle):
    """Query a remote oracle through an open channel (see :func:`transport.make_channel`)."""

    def __init__(
        self,
        channel: grpc.Channel,
        timeout_s: float = transport.DEFAULT_DEADLINE_S,
        *,
        max_message_bytes: int = transport.MAX_MESSAGE_BYTES,
    ) -> None:
        """Use ``channel`` with a deadline of ``timeout_s`` seconds on every call."""
        if not timeout_s > 0:
            raise ParameterError(f"timeout must be positive, got {timeout_s!r}")
        self._stub: Any = oracle_pb2_grpc.OracleStub(channel)  # type: ignore[no-untyped-call]
        self._timeout_s = float(timeout_s)
        self._max_message_bytes = max_message_bytes
        self._info: OracleInfo | None = None

    def _call(self, method: Any, request: Any, what: str) -> Any:
        try:
            return method(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise _rpc_error(exc, what) from None

    @property
    def info(self) -> OracleInfo:
        """Return the remote description (asked once, then cached); must offer ``classify``."""
        if self._info is None:
            answer = self._call(self._stub.Describe, oracle_pb2.DescribeRequest(), "Describe")
            info = OracleInfo(
                model_name=answer.model_name,
                model_digest=answer.model_digest,
                capabilities=tuple(answer.capabilities),
                classify_output=answer.classify_output,
                n_classes=answer.n_classes,
                max_batch=answer.max_batch,
            )
            info.require_classify()
            self._info = info
        return self._info

    def batch_size(self, image_shape: tuple[int, int, int]) -> int:
        """Return how many images of ``image_shape`` (H, W, C) fit in one request."""
        info = self.info
        pixels = 4 * image_shape[0] * image_shape[1] * image_shape[2]
        image_bytes = oracle_pb2.Image(
            height=image_shape[0],
            width=image_shape[1],
            channels=image_shape[2],
            pixels_f32le=bytes(pixels),
        ).ByteSize()
        assert isinstance(image_bytes, int)
        per_image = 1 + _varint_len(image_bytes) + image_bytes
        per_answer = 8 * info.n_classes if info.classify_output == "probabilities" else 3
        room = self._max_message_bytes - _MESSAGE_SLACK
        count = min(info.max_batch, room // per_image, room // per_answer)
        if count < 1:
            raise LimitExceededError(
                "bytes per classify request", per_image + _MESSAGE_SLACK, self._max_message_bytes
            )
        return count

    def _parse(self, answer: Any, count: int, info: OracleInfo) -> ClassifyAnswer:
        if answer.output != info.classify_output or answer.n_classes != info.n_classes:
            raise OracleError(
                "invalid-answer",
                f"answer is {answer.output!r} over {answer.n_classes} classes; described "
                f"{info.classify_output!r} over {info.n_classes}",
            )
        if info.classify_output == "probabilities":
            if len(answer.labels) or len(answer.probabilities) != count * info.n_classes:
                raise OracleError(
                    "invalid-answer",
                    f"expected {count} x {info.n_classes} "
                    f"probabilities, got {len(answer.probabilities)} and labels",
                )
            probs = np.array(answer.probabilities, dtype=np.float64)
            result = ClassifyAnswer(probabilities=probs.reshape(count, info.n_classes))
        else:
            if len(answer.probabilities) or len(answer.labels) != count:
                raise OracleError(
                    "invalid-answer",
                    f"expected {count} labels, got {len(answer.labels)} and probabilities",
                )
            result = ClassifyAnswer(labels=np.array(answer.labels, dtype=np.int64))
        return result.validate(count, info.n_classes)

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Classify float32 (N, H, W, C) images in [0, 1] remotely, in as many calls as needed."""
        images = check_images(images)
        info = self.info
        n, height, width, channels = images.shape
        step = self.batch_size((height, width, channels))
        little = np.ascontiguousarray(images, dtype="<f4")
        parts: list[ClassifyAnswer] = []
        for start in range(0, n, step):
            chunk = little[start : start + step]
            request = oracle_pb2.ClassifyRequest(
                images=[
                    oracle_pb2.Image(
                        height=height, width=width, channels=channels, pixels_f32le=image.tobytes()
                    )
                    for image in chunk
                ]
            )
            answer = self._call(self._stub.Classify, request, "Classify")
            parts.append(self._parse(answer, chunk.shape[0], info))
        return ClassifyAnswer.concatenate(parts)
