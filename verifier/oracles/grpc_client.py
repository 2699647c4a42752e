"""Any oracle reached over gRPC (``twinaudit.oracle.v1.Oracle``).

:class:`GrpcOracle` implements every oracle interface — ``classify``,
``embed_images``, ``token_logprobs``, ``embed_image_text`` — by the matching RPC;
which of them the remote model answers is in its description's capabilities, and
the claim checks those before it sends anything. :class:`GrpcClassifierOracle` is
the same client for a remote that must offer ``classify``.

Every call carries a deadline of ``timeout_s`` seconds for the whole call, and its
reply is refused before it is parsed if it is longer than the values asked for can
take (:mod:`.grpc_replies`: 64 KiB and 10 bytes a value). Failures become
:class:`~twinaudit.protocol.errors.OracleError`:

- ``UNAVAILABLE`` (nothing listening, connection lost, TLS failure) → ``"unreachable"``;
- ``DEADLINE_EXCEEDED`` → ``"deadline"``;
- any other status, and any answer that is malformed (wrong output kind or number
  of classes, wrong length or dimension, NaN, a probability outside [0, 1] or a
  vector not summing to 1, a label out of range, a positive log-probability) →
  ``"invalid-answer"``.

A batch is split into requests of at most the oracle's ``max_batch`` images (or
texts), each request and its expected answer within the message limit.

Signed answers (spec §10.8): inside :meth:`GrpcOracle.signed_batches`, every request
carries the claim's nonce, and the reply of an oracle whose Describe names an
``answer_key`` must carry a valid signature of its answer batch, checked as the reply
arrives (a missing or bad one is ``"invalid-answer"``); each checked batch is kept for
the transcript (:class:`~twinaudit.protocol.oracles.signed_answers.SignedBatch`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, Final

import grpc
import numpy as np
import numpy.typing as npt

from twinaudit.protocol.claim.requests import queries_per_request
from twinaudit.protocol.errors import InputError, OracleError, ParameterError
from twinaudit.protocol.oracles.base import (
    ClassifierOracle,
    ClassifyAnswer,
    F32Images,
    OracleInfo,
    check_images,
)
from twinaudit.protocol.oracles.embedding import MAX_EMBEDDING_DIM, EmbeddingAnswer, EncoderOracle
from twinaudit.protocol.oracles.image_text import ImageTextAnswer, ImageTextOracle
from twinaudit.protocol.oracles.language import LanguageModelOracle, LogprobAnswer, check_texts
from twinaudit.protocol.oracles.signed_answers import (
    SignedBatch,
    check_answer_batch,
    classify_rows,
    embedding_rows,
    image_query_digest,
    logprob_rows,
    text_query_digest,
)
from twinaudit.wire import transport
from twinaudit.wire.oracle.v1 import oracle_pb2

from .grpc_replies import MAX_REPLY_OBJECTS, CappedMethod, reply_cap

#: The oracle service's full name.
_SERVICE: Final = oracle_pb2.DESCRIPTOR.services_by_name["Oracle"].full_name
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


def _floats(values: Any) -> npt.NDArray[np.float64]:
    """Return a repeated double field (an array, :mod:`.proto_reader`) as float64."""
    return np.asarray(values, dtype=np.float64)


def _embeddings(values: Any, count: int, dim: int, what: str) -> npt.NDArray[np.float64]:
    if count == 0:
        if len(values):
            raise OracleError("invalid-answer", f"{what}: values for no query")
        return np.zeros((0, max(dim, 1)), dtype=np.float64)
    if not 1 <= dim <= MAX_EMBEDDING_DIM or len(values) != count * dim:
        raise OracleError(
            "invalid-answer", f"{what}: {len(values)} values of dimension {dim} for {count} queries"
        )
    return _floats(values).reshape(count, dim)


def classify_answer(answer: Any, count: int, info: OracleInfo) -> ClassifyAnswer:
    """Return the checked answer of a ``ClassifyResponse`` for ``count`` images."""
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
        probs = _floats(answer.probabilities)
        result = ClassifyAnswer(probabilities=probs.reshape(count, info.n_classes))
    else:
        if len(answer.probabilities) or len(answer.labels) != count:
            raise OracleError(
                "invalid-answer",
                f"expected {count} labels, got {len(answer.labels)} and probabilities",
            )
        labels = np.asarray(answer.labels, dtype=np.int64)
        result = ClassifyAnswer(labels=labels)
    return result.validate(count, info.n_classes)


def logprob_answer(answer: Any, count: int) -> LogprobAnswer:
    """Return the checked answer of a ``TokenLogprobsResponse`` for ``count`` texts."""
    if len(answer.items) != count:
        raise OracleError(
            "invalid-answer", f"TokenLogprobs answered {len(answer.items)} texts, asked {count}"
        )
    vectors = tuple(_floats(item.logprobs) for item in answer.items)
    return LogprobAnswer(vectors).validate(count)


class GrpcOracle(ClassifierOracle, EncoderOracle, LanguageModelOracle, ImageTextOracle):
    """Query a remote oracle through an open channel (see :func:`transport.make_channel`)."""

    def __init__(
        self,
        channel: grpc.Channel,
        timeout_s: float = transport.DEFAULT_DEADLINE_S,
        *,
        max_message_bytes: int = transport.MAX_MESSAGE_BYTES,
        max_query_bytes: int = 0,
    ) -> None:
        """Use ``channel`` with a deadline of ``timeout_s`` seconds on every call.

        Requests and replies are held to ``max_message_bytes``, except that one image
        query above it goes alone in a request of at most ``max_query_bytes`` (0: the
        same cap; an oracle channel of :func:`~twinaudit.verifier.oracles.dial.dial_oracle` sends
        :data:`~twinaudit.wire.transport.MAX_QUERY_MESSAGE_BYTES`, spec §10.2 step 5).
        """
        if not timeout_s > 0:
            raise ParameterError(f"timeout must be positive, got {timeout_s!r}")
        self._methods = {
            name: CappedMethod(channel, _SERVICE, name, getattr(oracle_pb2, f"{name}Response"))
            for name in ("Describe", "Classify", "EmbedImages", "TokenLogprobs", "EmbedImageText")
        }
        self._timeout_s = float(timeout_s)
        self._max_message_bytes = max_message_bytes
        self._max_query_bytes = max(max_query_bytes, max_message_bytes)
        self._info: OracleInfo | None = None
        #: Per thread: the claim nonce and the signed batches of a :meth:`signed_batches`.
        self._signing = threading.local()

    @contextlib.contextmanager
    def signed_batches(self, claim_nonce: bytes) -> Iterator[list[SignedBatch]]:
        """Send ``claim_nonce`` with every request of this thread; collect signed batches.

        Inside the block each reply of an oracle that names an answer key is checked
        under that key as it arrives (spec §10.8) and appended, in call order, to the
        list yielded; an oracle without a key appends nothing.
        """
        batches: list[SignedBatch] = []
        self._signing.state = (claim_nonce, batches)
        try:
            yield batches
        finally:
            self._signing.state = None

    def _nonce(self) -> bytes:
        """Return the claim nonce this thread sends (empty outside :meth:`signed_batches`)."""
        state = getattr(self._signing, "state", None)
        return b"" if state is None else state[0]

    def _check_signature(self, request: Any, answer: Any, rows: list[Any]) -> None:
        """Check the reply's signature of ``rows`` (spec §10.8) and keep the batch.

        Only inside :meth:`signed_batches` and for an oracle whose Describe names an
        answer key; a missing or invalid signature is ``invalid-answer``.
        """
        state = getattr(self._signing, "state", None)
        key = self.info.answer_key
        if state is None or not key:
            return
        nonce, batches = state
        images = tuple(image_query_digest(i.pixels_f32le) for i in getattr(request, "images", []))
        texts = tuple(text_query_digest(t) for t in getattr(request, "texts", []))
        signature = bytes(answer.answer_signature)
        check_answer_batch(key, nonce, [*images, *texts], rows, signature)
        batches.append(SignedBatch(images, texts, tuple(rows), signature))

    def _call(
        self, name: str, request: Any, values: int = 0, objects: int = MAX_REPLY_OBJECTS
    ) -> Any:
        """Call method ``name``; its reply may hold ``values`` values (:func:`reply_cap`).

        It may hold ``objects`` messages and strings (one per text for TokenLogprobs).
        """
        cap = reply_cap(values, self._max_message_bytes)
        try:
            return self._methods[name](
                request, timeout=self._timeout_s, max_bytes=cap, max_objects=objects
            )
        except grpc.RpcError as exc:
            raise _rpc_error(exc, name) from None

    @property
    def info(self) -> OracleInfo:
        """Return the remote description (asked once, then cached)."""
        if self._info is None:
            answer = self._call("Describe", oracle_pb2.DescribeRequest())
            info = OracleInfo(
                model_name=answer.model_name,
                model_digest=answer.model_digest,
                capabilities=tuple(answer.capabilities),
                classify_output=answer.classify_output,
                n_classes=answer.n_classes,
                max_batch=answer.max_batch,
                framework=answer.framework,
                model_format=answer.model_format,
                input_shape=tuple(int(d) for d in answer.input_shape),
                answer_key=bytes(answer.answer_key),
            )
            self._check_info(info)
            self._info = info
        return self._info

    def _check_info(self, info: OracleInfo) -> None:
        """Check a fresh description (subclasses may require a capability)."""

    def _require(self, capability: str) -> OracleInfo:
        info = self.info
        info.require(capability)
        return info

    def _per_image(self, image_shape: tuple[int, int, int]) -> int:
        pixels = 4 * image_shape[0] * image_shape[1] * image_shape[2]
        image_bytes = oracle_pb2.Image(
            height=image_shape[0],
            width=image_shape[1],
            channels=image_shape[2],
            pixels_f32le=bytes(pixels),
        ).ByteSize()
        assert isinstance(image_bytes, int)
        return 1 + _varint_len(image_bytes) + image_bytes

    def batch_size(self, image_shape: tuple[int, int, int], per_answer: int | None = None) -> int:
        """Return how many images of ``image_shape`` (H, W, C) fit in one request.

        ``per_answer`` is the most answer bytes per image (default: a classify answer;
        an embedding answer may take ``8·MAX_EMBEDDING_DIM`` bytes).
        """
        info = self.info
        per_image = self._per_image(image_shape)
        if per_answer is None:
            per_answer = 8 * info.n_classes if info.classify_output == "probabilities" else 3
        room = self._max_message_bytes - _MESSAGE_SLACK
        alone = self._max_query_bytes - _MESSAGE_SLACK
        return queries_per_request(info.max_batch, room, per_image, alone, answer_bytes=per_answer)

    def queries_per_request(self, shape: tuple[int, int, int], capability: str) -> int:
        """Return how many images of ``shape`` one request holds (:meth:`batch_size`)."""
        return self.batch_size(shape, None if capability == "classify" else 8 * MAX_EMBEDDING_DIM)

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Classify float32 (N, H, W, C) images in [0, 1] remotely, in as many calls as needed."""
        images = check_images(images)
        info = self._require("classify")
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
                ],
                claim_nonce=self._nonce(),
            )
            answer = self._call("Classify", request, chunk.shape[0] * max(info.n_classes, 1))
            part = classify_answer(answer, chunk.shape[0], info)
            self._check_signature(request, answer, classify_rows(part))
            parts.append(part)
        return ClassifyAnswer.concatenate(parts)

    @staticmethod
    def _images(chunk: F32Images) -> list[oracle_pb2.Image]:
        _, height, width, channels = chunk.shape
        little = np.ascontiguousarray(chunk, dtype="<f4")
        return [
            oracle_pb2.Image(
                height=height, width=width, channels=channels, pixels_f32le=image.tobytes()
            )
            for image in little
        ]

    def embed_images(self, images: F32Images) -> EmbeddingAnswer:
        """Embed float32 (N, H, W, C) images in [0, 1] remotely, in as many calls as needed."""
        images = check_images(images)
        self._require("embed-images")
        n, height, width, channels = images.shape
        step = self.batch_size((height, width, channels), 8 * MAX_EMBEDDING_DIM)
        parts: list[EmbeddingAnswer] = []
        for start in range(0, n, step):
            chunk = images[start : start + step]
            request = oracle_pb2.EmbedImagesRequest(
                images=self._images(chunk), claim_nonce=self._nonce()
            )
            answer = self._call("EmbedImages", request, chunk.shape[0] * MAX_EMBEDDING_DIM)
            values = _embeddings(answer.values, chunk.shape[0], answer.dim, "EmbedImages")
            parts.append(EmbeddingAnswer(values).validate(chunk.shape[0]))
            self._check_signature(request, answer, embedding_rows(values))
        return EmbeddingAnswer.concatenate(parts)

    def _text_batches(self, texts: list[str]) -> list[list[str]]:
        """Split texts into requests of at most max_batch texts and the message limit."""
        info, room = self.info, self._max_message_bytes - _MESSAGE_SLACK
        batches: list[list[str]] = [[]]
        size = 0
        for text in texts:
            cost = len(text.encode("utf-8")) + 8
            if batches[-1] and (len(batches[-1]) >= info.max_batch or size + cost > room):
                batches.append([])
                size = 0
            batches[-1].append(text)
            size += cost
        return batches

    def token_logprobs(self, texts: list[str]) -> LogprobAnswer:
        """Ask the remote model for each text's token log-probabilities."""
        texts = check_texts(texts)
        self._require("token-logprobs")
        parts: list[LogprobAnswer] = []
        for batch in self._text_batches(texts):
            request = oracle_pb2.TokenLogprobsRequest(texts=batch, claim_nonce=self._nonce())
            tokens = sum(2 * len(text.encode("utf-8")) + 2 for text in batch)
            # One object a text, and the signature (spec §10.8).
            answer = self._call("TokenLogprobs", request, tokens, objects=len(batch) + 1)
            part = logprob_answer(answer, len(batch))
            self._check_signature(request, answer, logprob_rows(part))
            parts.append(part)
        return LogprobAnswer.concatenate(parts)

    def embed_image_text(self, images: F32Images | None, texts: list[str]) -> ImageTextAnswer:
        """Embed images and texts remotely: in one request when both fit, else in parts.

        Parts carry images only (in chunks) and then texts only.
        """
        if images is None and not texts:
            raise InputError("embed at least one image or text")
        images = check_images(images) if images is not None else None
        texts = check_texts(texts) if texts else []
        info = self._require("embed-image-text")
        n = 0 if images is None else images.shape[0]
        step = n
        if images is not None:
            step = self.batch_size(images.shape[1:], 8 * MAX_EMBEDDING_DIM)
        text_batches = self._text_batches(texts) if texts else []
        requests: list[oracle_pb2.EmbedImageTextRequest] = []
        if images is not None and n <= step and len(text_batches) <= 1:
            both = oracle_pb2.EmbedImageTextRequest(images=self._images(images), texts=texts)
            if n + len(texts) <= info.max_batch and both.ByteSize() < self._max_message_bytes // 2:
                requests.append(both)
        if not requests:
            for start in range(0, n, max(step, 1)):  # captions alone: n = step = 0
                assert images is not None
                chunk = images[start : start + step]
                requests.append(oracle_pb2.EmbedImageTextRequest(images=self._images(chunk)))
            requests += [oracle_pb2.EmbedImageTextRequest(texts=b) for b in text_batches]
        image_parts: list[npt.NDArray[np.float64]] = []
        text_parts: list[npt.NDArray[np.float64]] = []
        dims: set[int] = set()
        for request in requests:
            request.claim_nonce = self._nonce()
            queries = len(request.images) + len(request.texts)
            answer = self._call("EmbedImageText", request, queries * MAX_EMBEDDING_DIM)
            dims.add(answer.dim)
            image_parts.append(
                _embeddings(answer.image_values, len(request.images), answer.dim, "images")
            )
            text_parts.append(
                _embeddings(answer.text_values, len(request.texts), answer.dim, "texts")
            )
            rows = embedding_rows(image_parts[-1]) + embedding_rows(text_parts[-1])
            self._check_signature(request, answer, rows)
        if len(dims) != 1:
            raise OracleError("invalid-answer", "EmbedImageText answered different dimensions")
        result = ImageTextAnswer(np.concatenate(image_parts), np.concatenate(text_parts))
        return result.validate(n, len(texts))


class GrpcClassifierOracle(GrpcOracle):
    """A :class:`GrpcOracle` whose remote must offer ``classify`` (checked on ``info``)."""

    def _check_info(self, info: OracleInfo) -> None:
        info.require_classify()
