"""Serve any :class:`ClassifierOracle` as the gRPC service ``twinaudit.oracle.v1.Oracle``.

``Describe`` answers the oracle's :class:`OracleInfo`; ``Classify`` checks the request
before the model sees it and answers probabilities or labels. The other RPCs of the
service answer ``UNIMPLEMENTED``. Request checks and their status codes:

- more than :data:`transport.MAX_MESSAGE_BYTES` (or the servicer's smaller
  ``max_request_bytes``), or more images than ``max_batch``: ``RESOURCE_EXHAUSTED``;
- no image, images of different shapes, a side outside 1..4096, channels not 1 or
  3, ``pixels_f32le`` not ``4·H·W·C`` bytes, an intensity not finite or outside
  [0, 1]: ``INVALID_ARGUMENT``.

Errors of the oracle map through :func:`twinaudit.transport.status_for`, except
that a malformed answer of the model itself is ``INTERNAL``; any other exception is
``INTERNAL`` with a generic message (details go to the log, not the peer).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import grpc
import numpy as np

from protocol.errors import InputError, LimitExceededError, OracleError, TwinauditError
from protocol.items import MAX_IMAGE_SIDE
from twinaudit import transport
from twinaudit.oracle.v1 import oracle_pb2, oracle_pb2_grpc

from .base import ClassifierOracle, ClassifyAnswer, F32Images, OracleInfo

#: Full name of the service (for the health service).
SERVICE_NAME: Final = "twinaudit.oracle.v1.Oracle"

_log = logging.getLogger(__name__)


def decode_images(
    request: oracle_pb2.ClassifyRequest, max_batch: int, max_request_bytes: int
) -> F32Images:
    """Check a ``ClassifyRequest`` and return its images as float32 (N, H, W, C)."""
    size = request.ByteSize()
    if size > max_request_bytes:
        raise LimitExceededError("classify request bytes", size, max_request_bytes)
    count = len(request.images)
    if count > max_batch:
        raise LimitExceededError("images per classify request", count, max_batch)
    if count == 0:
        raise InputError("a classify request needs at least one image")
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


def describe_response(info: OracleInfo) -> oracle_pb2.DescribeResponse:
    """Return the ``DescribeResponse`` of a description."""
    return oracle_pb2.DescribeResponse(
        model_name=info.model_name,
        model_digest=info.model_digest,
        capabilities=sorted(info.capabilities),
        classify_output=info.classify_output,
        n_classes=info.n_classes,
        max_batch=info.max_batch,
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
    """The ``Oracle`` service backed by a :class:`ClassifierOracle`."""

    def __init__(
        self, oracle: ClassifierOracle, *, max_request_bytes: int = transport.MAX_MESSAGE_BYTES
    ) -> None:
        """Serve ``oracle``; requests above ``max_request_bytes`` are refused."""
        self._oracle = oracle
        self._info = oracle.info
        self._max_request_bytes = max_request_bytes

    def Describe(  # noqa: N802 - gRPC method name
        self, request: oracle_pb2.DescribeRequest, context: grpc.ServicerContext
    ) -> oracle_pb2.DescribeResponse:
        """Answer the oracle's description."""
        return describe_response(self._info)

    def Classify(  # noqa: N802 - gRPC method name
        self, request: oracle_pb2.ClassifyRequest, context: grpc.ServicerContext
    ) -> oracle_pb2.ClassifyResponse:
        """Check the request, classify its images, answer probabilities or labels."""
        info = self._info
        try:
            images = decode_images(request, info.max_batch, self._max_request_bytes)
            answer = self._oracle.classify(images).validate(images.shape[0], info.n_classes)
            if answer.output != info.classify_output:
                raise OracleError(
                    "invalid-answer",
                    f"the oracle answered {answer.output!r}, announced {info.classify_output!r}",
                )
            return classify_response(answer, info.n_classes)
        except OracleError as exc:
            # The model itself misbehaved: not the caller's fault.
            status = (
                grpc.StatusCode.INTERNAL
                if exc.reason == "invalid-answer"
                else transport.status_for(exc)
            )
            context.abort(status, exc.diagnostics())
            raise  # unreachable: abort raises
        except TwinauditError as exc:
            context.abort(transport.status_for(exc), exc.diagnostics())
            raise  # unreachable: abort raises
        except Exception:
            _log.exception("oracle failed on a classify request")
            context.abort(grpc.StatusCode.INTERNAL, "internal error in the oracle")
            raise


def add_oracle_service(server: Any, oracle: ClassifierOracle, **kwargs: Any) -> None:
    """Register an :class:`OracleServicer` for ``oracle`` on ``server``."""
    servicer = OracleServicer(oracle, **kwargs)
    oracle_pb2_grpc.add_OracleServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]


def serve_oracle(
    oracle: ClassifierOracle,
    listen: str,
    *,
    tls: transport.TlsFiles | None = None,
    max_workers: int = 4,
) -> tuple[grpc.Server, int]:
    """Start a server (health service included) for ``oracle``; return it and its port."""
    return transport.make_server(
        listen,
        lambda server: add_oracle_service(server, oracle),
        tls=tls,
        max_workers=max_workers,
        service_names=(SERVICE_NAME,),
    )
