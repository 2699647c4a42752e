"""A model on an Open Inference Protocol server (KServe v2), queried as an oracle.

:class:`OipOracle` is an image classifier (``classify``) or an image encoder
(``embed-images``) served by any OIP server — Triton, KServe, MLServer, TorchServe —
over REST or gRPC, named by an oracle address (:mod:`.oip_address`). Its description
comes from the server: the model's metadata (name, versions, platform, input and
output tensors) and the server's own (its name and version), read with the address's
options into an :class:`~twinaudit.verifier.oracles.oip_tensors.OipPlan` the first time
:attr:`info` is read. It is the arbiter's reading of what the server declares; as with
any oracle, the arbiter cannot check which model answers.

A batch is sent in requests of at most the plan's ``max_batch`` images and at most
the address's ``request_bytes`` of tensor data (default
:data:`~twinaudit.verifier.oracles.oip_transport.MAX_REQUEST_BYTES`) (a fixed-batch
model gets exactly its batch, padded with blank images whose answers are dropped).
Each request has the address's deadline for the whole call, its reply is capped by
what the request asks for (:meth:`~twinaudit.verifier.oracles.oip_tensors.OipPlan.answer_values`),
and it is retried only when the server could not answer
(:func:`~twinaudit.verifier.oracles.oip_transport.with_retries`).
"""

from __future__ import annotations

import threading

import numpy as np

from twinaudit.protocol.claim.requests import queries_per_request
from twinaudit.protocol.oracles.base import (
    ClassifierOracle,
    ClassifyAnswer,
    F32Images,
    OracleInfo,
    check_images,
)
from twinaudit.protocol.oracles.embedding import EmbeddingAnswer, EncoderOracle
from twinaudit.wire.transport import TlsFiles, make_channel

from .oip_address import OipAddress, parse_oip_address
from .oip_tensors import OipPlan, Tensor, plan_model
from .oip_transport import (
    GrpcTransport,
    OipTransport,
    RestTransport,
    with_retries,
)


class OipOracle(ClassifierOracle, EncoderOracle):
    """A classifier or encoder behind an OIP server (see the module)."""

    def __init__(self, address: OipAddress, transport: OipTransport) -> None:
        """Query the model of ``address`` through ``transport`` (nothing is sent yet)."""
        self._address = address
        self._transport = transport
        self._plan: OipPlan | None = None
        self._lock = threading.Lock()

    @property
    def address(self) -> OipAddress:
        """Return the parsed oracle address."""
        return self._address

    @property
    def plan(self) -> OipPlan:
        """Return how the model is queried (read from the server once, then kept)."""
        with self._lock:
            if self._plan is None:
                retries = self._address.options.retries
                framework = with_retries(self._transport.framework, retries)
                meta = with_retries(self._transport.model_metadata, retries)
                self._plan = plan_model(self._address, meta, framework)
            return self._plan

    @property
    def info(self) -> OracleInfo:
        """Return the description built from the server's metadata and the address."""
        return self.plan.info

    def queries_per_request(self, shape: tuple[int, int, int], capability: str) -> int:
        """Return the images of ``shape`` per request: the fixed batch, or as many as fit.

        A request holds at most the plan's ``max_batch`` images and the address's
        ``request_bytes`` of tensor data (spec §10.2 step 5); ``limit-exceeded`` when
        one image's tensor is larger.
        """
        plan = self.plan
        per_image = int(np.prod(shape)) * self._transport.element_bytes(plan.input.datatype)
        request_bytes = self._address.options.request_bytes
        return queries_per_request(
            plan.max_batch, request_bytes, per_image, fixed_batch=plan.fixed_batch
        )

    def _run(self, images: F32Images, capability: str) -> list[tuple[Tensor, int]]:
        images = check_images(images)
        plan = self.plan
        plan.info.require(capability)
        plan.check_images(images)
        step = self.queries_per_request(images.shape[1:], capability)
        answers = []
        for start in range(0, images.shape[0], step):
            chunk = images[start : start + step]
            tensor = plan.encode(chunk)

            def send(tensor: Tensor = tensor) -> Tensor:
                values = plan.answer_values(tensor.shape[0])
                return self._transport.infer(tensor, plan.output.name, values)

            answers.append((with_retries(send, self._address.options.retries), chunk.shape[0]))
        return answers

    def classify(self, images: F32Images) -> ClassifyAnswer:
        """Classify float32 (N, H, W, C) images in [0, 1] on the server."""
        plan = self.plan
        parts = [plan.classify_answer(t, n) for t, n in self._run(images, "classify")]
        return ClassifyAnswer.concatenate(parts).validate(images.shape[0], plan.n_classes)

    def embed_images(self, images: F32Images) -> EmbeddingAnswer:
        """Embed float32 (N, H, W, C) images in [0, 1] on the server."""
        plan = self.plan
        parts = [plan.embedding_answer(t, n) for t, n in self._run(images, "embed-images")]
        return EmbeddingAnswer.concatenate(parts).validate(images.shape[0])

    def close(self) -> None:
        """Release the connection."""
        self._transport.close()


def dial_oip(endpoint: str, *, tls: TlsFiles | None = None) -> OipOracle:
    """Return the oracle an ``oip+…`` address names (parsed now; contacted on first use).

    ``tls`` are the arbiter's oracle TLS files: an ``oip+grpc`` channel uses them as
    a ``HOST:PORT`` oracle's would (TLS when given), and an ``oip+https`` server is
    verified with their CA (the system's when none).
    """
    address = parse_oip_address(endpoint)
    transport: OipTransport
    if address.transport == "grpc":
        transport = GrpcTransport(address, make_channel(address.target, tls=tls))
    else:
        ca = tls.ca.read_bytes() if tls is not None and tls.ca is not None else None
        transport = RestTransport(address, ca=ca)
    return OipOracle(address, transport)
