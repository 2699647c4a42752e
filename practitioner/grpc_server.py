"""Serve any :class:`Oracle` as the gRPC service ``twinaudit.oracle.v1.Oracle``.

``Describe`` answers the oracle's :class:`OracleInfo`. Each query RPC is served when
the oracle implements its interface and lists its capability — ``Classify``
(:class:`ClassifierOracle`, ``classify``), ``EmbedImages`` (:class:`EncoderOracle`,
``embed-images``), ``TokenLogprobs`` (:class:`LanguageModelOracle`,
``token-logprobs``), ``EmbedImageText`` (:class:`ImageTextOracle`,
``embed-image-text``) — and answers ``UNIMPLEMENTED`` otherwise. Every request is
checked before the model sees it, and every answer validated before it is sent.
Request checks and their status codes:

- more than :data:`transport.MAX_MESSAGE_BYTES` (or the servicer's smaller
  ``max_request_bytes``), except a request of one image, which may take up to
  :data:`transport.MAX_QUERY_MESSAGE_BYTES` (the largest image's float32 query, spec
  §10.2 step 5), or more images (texts) than ``max_batch``: ``RESOURCE_EXHAUSTED``;
- no image (no text, or neither for ``EmbedImageText``), images of different
  shapes, a side outside 1..4096, channels not 1 or 3, ``pixels_f32le`` not
  ``4·H·W·C`` bytes, an intensity not finite or outside [0, 1], a text of 0 or more
  than 65,536 UTF-8 bytes: ``INVALID_ARGUMENT``.

An oracle served with an answer key (``answer_key``, spec §10.8) names its public key in
``Describe`` and signs every reply with it (:mod:`.answer_signing`), over the request's
``claim_nonce``, its queries' digests and the reply's answers.

Errors of the oracle map through :func:`twinaudit.wire.transport.status_for`, except
that a malformed answer of the model itself is ``INTERNAL``; any other exception is
``INTERNAL`` with a generic message (details go to the log, not the peer).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar

import grpc
import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from twinaudit.protocol.errors import InputError, LimitExceededError, OracleError, TwinauditError
from twinaudit.protocol.items import MAX_IMAGE_SIDE
from twinaudit.protocol.oracles.base import (
    ClassifierOracle,
    ClassifyAnswer,
    F32Images,
    Oracle,
    OracleInfo,
)
from twinaudit.protocol.oracles.embedding import EncoderOracle
from twinaudit.protocol.oracles.image_text import ImageTextOracle
from twinaudit.protocol.oracles.language import LanguageModelOracle, check_texts
from twinaudit.protocol.oracles.signed_answers import classify_rows, embedding_rows, logprob_rows
from twinaudit.wire import transport
from twinaudit.wire.observe import NO_METRICS, Metrics
from twinaudit.wire.oracle.v1 import oracle_pb2, oracle_pb2_grpc

from .answer_signing import AnswerSigner

#: Full name of the service (for the health service).
SERVICE_NAME: Final = "twinaudit.oracle.v1.Oracle"

_log = logging.getLogger(__name__)
T = TypeVar("T")


def _check_size(request: Any, max_request_bytes: int) -> None:
    size = request.ByteSize()
    if size > max_request_bytes:
        raise LimitExceededError("request bytes", size, max_request_bytes)


def decode_images(request: Any, max_batch: int, max_request_bytes: int) -> F32Images:
    """Check a request's ``images`` and return them as float32 (N, H, W, C)."""
    _check_size(request, max_request_bytes)
    count = len(request.images)
    if count > max_batch:
        raise LimitExceededError("images per classify request", count, max_batch)
    if count > 1:  # only a request of one query may exceed the usual message cap
        _check_size(request, min(max_request_bytes, transport.MAX_MESSAGE_BYTES))
    if count == 0:
        raise InputError("a request needs at least one image")
    first = request.images[0]
    shape = (first.height, first.width, first.channels)
    if not (
        1 <= shape[0] <= MAX_IMAGE_SIDE and 1 <= shape[1] <= MAX_IMAGE_SIDE and shape[2] in (1, 3)
    ):
        raise InputError(f"image shape {shape} outside 1..{MAX_IMAGE_SIDE} x C in {{1, 3}}")
    expected = 4 * shape[0] * shape[1] * shape[2]
    # Every length is checked before anything is allocated: the total is then bounded
    # by the request size.
    for index, image in enumerate(request.images):
        got = (image.height, image.width, image.channels)
        if got != shape:
            raise InputError(f"image {index} has shape {got}, image 0 has {shape}")
        if len(image.pixels_f32le) != expected:
            raise InputError(
                f"image {index} has {len(image.pixels_f32le)} pixel bytes, expected {expected}"
            )
    out = np.empty((count, *shape), dtype=np.float32)
    for index, image in enumerate(request.images):
        out[index] = np.frombuffer(image.pixels_f32le, dtype="<f4").reshape(shape)
    if not bool(np.all((out >= 0.0) & (out <= 1.0))):
        raise InputError("image intensities must be finite and in [0, 1]")
    return out


def decode_texts(request: Any, max_batch: int, max_request_bytes: int) -> list[str]:
    """Check a request's ``texts`` and return them."""
    _check_size(request, min(max_request_bytes, transport.MAX_MESSAGE_BYTES))
    if len(request.texts) > max_batch:
        raise LimitExceededError("texts per request", len(request.texts), max_batch)
    return check_texts(list(request.texts))


def describe_response(info: OracleInfo) -> oracle_pb2.DescribeResponse:
    """Return the ``DescribeResponse`` of a description."""
    return oracle_pb2.DescribeResponse(
        model_name=info.model_name,
        model_digest=info.model_digest,
        capabilities=sorted(info.capabilities),
        classify_output=info.classify_output,
        n_classes=info.n_classes,
        max_batch=info.max_batch,
        framework=info.framework,
        model_format=info.model_format,
        input_shape=list(info.input_shape),
        answer_key=info.answer_key,
    )


def classify_response(answer: ClassifyAnswer, n_classes: int) -> oracle_pb2.ClassifyResponse:
    """Return the ``ClassifyResponse`` of an answer (probabilities row-major)."""
    if answer.probabilities is not None:
        return oracle_pb2.ClassifyResponse(
            output="probabilities",
            n_classes=n_classes,
            probabilities=answer.probabilities.reshape(-1).tolist(),
        )
    assert answer.labels is not None
    return oracle_pb2.ClassifyResponse(
        output="label", n_classes=n_classes, labels=answer.labels.tolist()
    )


class OracleServicer(oracle_pb2_grpc.OracleServicer):
    """The ``Oracle`` service backed by an :class:`Oracle` (see the module docstring)."""

    def __init__(
        self,
        oracle: Oracle,
        *,
        max_request_bytes: int = transport.MAX_QUERY_MESSAGE_BYTES,
        answer_key: Ed25519PrivateKey | None = None,
    ) -> None:
        """Serve ``oracle``; requests above ``max_request_bytes`` are refused.

        With ``answer_key`` every reply is signed with it and ``Describe`` names its
        public key (spec §10.8).
        """
        self._oracle = oracle
        self._signer = AnswerSigner(answer_key) if answer_key is not None else None
        info = oracle.info
        if self._signer is not None:
            info = dataclasses.replace(info, answer_key=self._signer.public_key)
        self._info = info
        self._max_request_bytes = max_request_bytes

    def _signature(self, request: Any, answers: Callable[[], list[Any]]) -> bytes:
        """Return the reply's signature (spec §10.8), or empty bytes without a key."""
        if self._signer is None:
            return b""
        return self._signer.sign(request, answers())

    def Describe(  # noqa: N802 - gRPC method name
        self, request: oracle_pb2.DescribeRequest, context: grpc.ServicerContext
    ) -> oracle_pb2.DescribeResponse:
        """Answer the oracle's description."""
        return describe_response(self._info)

    def _serve(
        self,
        context: grpc.ServicerContext,
        interface: type,
        capability: str,
        answer: Callable[[Any], T],
    ) -> T:
        """Run ``answer(oracle)`` if the oracle offers ``capability``; map its errors."""
        if not isinstance(self._oracle, interface) or capability not in self._info.capabilities:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"this oracle does not offer {capability}")
        try:
            return answer(self._oracle)
        except OracleError as exc:
            # The model itself misbehaved: not the caller's fault.
            status = (
                grpc.StatusCode.INTERNAL
                if exc.reason == "invalid-answer"
                else transport.status_for(exc)
            )
            transport.abort_with_error(context, exc, status)
        except TwinauditError as exc:
            transport.abort_with_error(context, exc)
        except Exception:
            _log.exception("oracle failed on a %s request", capability)
            context.abort(grpc.StatusCode.INTERNAL, "internal error in the oracle")
            raise

    def _images(self, request: Any) -> F32Images:
        """Check a request's images against this oracle's limits; return them."""
        return decode_images(request, self._info.max_batch, self._max_request_bytes)

    def _texts(self, request: Any) -> list[str]:
        """Check a request's texts against this oracle's limits; return them."""
        return decode_texts(request, self._info.max_batch, self._max_request_bytes)

    def Classify(  # noqa: N802 - gRPC method name
        self, request: oracle_pb2.ClassifyRequest, context: grpc.ServicerContext
    ) -> oracle_pb2.ClassifyResponse:
        """Check the request, classify its images, answer probabilities or labels."""
        return self._serve(
            context, ClassifierOracle, "classify", lambda o: self._classify(o, request)
        )

    def _classify(
        self, oracle: ClassifierOracle, request: oracle_pb2.ClassifyRequest
    ) -> oracle_pb2.ClassifyResponse:
        """Classify the request's images; the answer must be the announced output."""
        info = self._info
        images = self._images(request)
        result = oracle.classify(images).validate(images.shape[0], info.n_classes)
        if result.output != info.classify_output:
            raise OracleError(
                "invalid-answer",
                f"the oracle answered {result.output!r}, announced {info.classify_output!r}",
            )
        response = classify_response(result, info.n_classes)
        response.answer_signature = self._signature(request, lambda: classify_rows(result))
        return response

    def EmbedImages(  # noqa: N802 - gRPC method name
        self, request: oracle_pb2.EmbedImagesRequest, context: grpc.ServicerContext
    ) -> oracle_pb2.EmbedImagesResponse:
        """Check the request, embed its images, answer the embeddings row-major."""
        return self._serve(
            context, EncoderOracle, "embed-images", lambda o: self._embed_images(o, request)
        )

    def _embed_images(
        self, oracle: EncoderOracle, request: oracle_pb2.EmbedImagesRequest
    ) -> oracle_pb2.EmbedImagesResponse:
        """Embed the request's images."""
        images = self._images(request)
        result = oracle.embed_images(images).validate(images.shape[0])
        return oracle_pb2.EmbedImagesResponse(
            dim=result.dim,
            values=result.embeddings.reshape(-1).tolist(),
            answer_signature=self._signature(request, lambda: embedding_rows(result.embeddings)),
        )

    def TokenLogprobs(  # noqa: N802 - gRPC method name
        self, request: oracle_pb2.TokenLogprobsRequest, context: grpc.ServicerContext
    ) -> oracle_pb2.TokenLogprobsResponse:
        """Check the request, answer every text's token log-probabilities."""
        return self._serve(
            context, LanguageModelOracle, "token-logprobs", lambda o: self._logprobs(o, request)
        )

    def _logprobs(
        self, oracle: LanguageModelOracle, request: oracle_pb2.TokenLogprobsRequest
    ) -> oracle_pb2.TokenLogprobsResponse:
        """Answer the request's texts' token log-probabilities."""
        texts = self._texts(request)
        result = oracle.token_logprobs(texts).validate(len(texts))
        return oracle_pb2.TokenLogprobsResponse(
            items=[oracle_pb2.TokenLogprobs(logprobs=v.tolist()) for v in result.logprobs],
            answer_signature=self._signature(request, lambda: logprob_rows(result)),
        )

    def EmbedImageText(  # noqa: N802 - gRPC method name
        self, request: oracle_pb2.EmbedImageTextRequest, context: grpc.ServicerContext
    ) -> oracle_pb2.EmbedImageTextResponse:
        """Check the request, embed its images and texts (either list may be empty)."""
        return self._serve(
            context, ImageTextOracle, "embed-image-text", lambda o: self._image_text(o, request)
        )

    def _image_text(
        self, oracle: ImageTextOracle, request: oracle_pb2.EmbedImageTextRequest
    ) -> oracle_pb2.EmbedImageTextResponse:
        """Embed the request's images and texts (at most ``max_batch`` in all)."""
        total, limit = len(request.images) + len(request.texts), self._info.max_batch
        if total > limit:
            raise LimitExceededError("images and texts per request", total, limit)
        if not request.images and not request.texts:
            raise InputError("a request needs at least one image or text")
        images = self._images(request) if request.images else None
        texts = self._texts(request) if request.texts else []
        n_images = 0 if images is None else images.shape[0]
        result = oracle.embed_image_text(images, texts).validate(n_images, len(texts))

        def rows() -> list[Any]:
            return embedding_rows(result.images) + embedding_rows(result.texts)

        return oracle_pb2.EmbedImageTextResponse(
            dim=int(result.images.shape[1]),
            image_values=result.images.reshape(-1).tolist(),
            text_values=result.texts.reshape(-1).tolist(),
            answer_signature=self._signature(request, rows),
        )


def add_oracle_service(server: Any, oracle: Oracle, **kwargs: Any) -> None:
    """Register an :class:`OracleServicer` for ``oracle`` on ``server``."""
    servicer = OracleServicer(oracle, **kwargs)
    oracle_pb2_grpc.add_OracleServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]


def serve_oracle(
    oracle: Oracle,
    listen: str,
    *,
    tls: transport.TlsFiles | None = None,
    max_workers: int = 4,
    metrics: Metrics = NO_METRICS,
    reflection: bool = False,
    answer_key: Ed25519PrivateKey | None = None,
) -> tuple[grpc.Server, int]:
    """Start a server (health service included) for ``oracle``; return it and its port.

    Every RPC is logged and counted in ``metrics`` (:mod:`twinaudit.wire.observe`);
    ``reflection`` serves gRPC reflection; ``answer_key`` signs every answer (§10.8).
    """
    return transport.make_server(
        listen,
        lambda server: add_oracle_service(server, oracle, answer_key=answer_key),
        tls=tls,
        max_workers=max_workers,
        service_names=(SERVICE_NAME,),
        metrics=metrics,
        reflection=reflection,
        max_receive_bytes=transport.MAX_QUERY_MESSAGE_BYTES,
    )
