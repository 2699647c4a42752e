"""The two transports of the Open Inference Protocol: REST (JSON) and gRPC.

Both offer the same three calls to :class:`~verifier.oracles.oip_oracle.OipOracle`:
``framework()`` (the server's name and version, from its metadata; ``""`` when the
server does not say), ``model_metadata()`` and ``infer(tensor, output)``. Every call
has the address's deadline. Failures are :class:`~protocol.errors.OracleError`:

- the server could not answer — gRPC ``UNAVAILABLE``, HTTP 502, 503 or 504 or another
  5xx, a refused or reset connection — is a :class:`TransientError`, which
  :func:`with_retries` sends again, at most ``retries`` times, after 0.1 s, 0.2 s,
  0.4 s …; once they are spent it is ``unreachable`` (no answer) or
  ``invalid-answer`` (an error answer);
- no answer before the deadline (gRPC ``DEADLINE_EXCEEDED``, a socket timeout) is
  ``deadline``, and is not retried (the server may still be working on it);
- any other error answer (HTTP 4xx, any other gRPC status), and any reply that is not
  what the protocol defines, is ``invalid-answer`` at once.

A REST reply above :data:`MAX_RESPONSE_BYTES` is refused. Nothing is contacted until
a call is made.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

import grpc
import numpy as np

from protocol.errors import OracleError
from wire.oip.v2 import grpc_predict_v2_pb2 as pb
from wire.oip.v2 import grpc_predict_v2_pb2_grpc as pb_grpc

from .oip_address import OipAddress
from .oip_tensors import (
    DTYPES,
    MAX_RANK,
    MAX_TENSORS,
    ModelMeta,
    Tensor,
    check_shape,
    model_meta,
    model_meta_from_json,
    tensor_meta,
)

#: Largest REST reply read, in bytes.
MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
#: Most bytes of tensor data in one request: gRPC servers accept 4 MiB messages by
#: default, and a REST request is held to the same.
MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024 - 64 * 1024
#: Wire bytes per element: a JSON number takes at most 24 characters with its comma.
REST_ELEMENT_BYTES: Final = 24
#: First pause before a retry, in seconds; each later one doubles.
RETRY_PAUSE_S: Final = 0.1

T = TypeVar("T")


class TransientError(OracleError):
    """The server could not answer this time; the request may be sent again."""


def with_retries(call: Callable[[], T], retries: int, *, pause_s: float = RETRY_PAUSE_S) -> T:
    """Return ``call()``, sending it again up to ``retries`` times on a :class:`TransientError`.

    The last failure is re-raised as a plain :class:`OracleError` with its reason.
    """
    for attempt in range(retries + 1):
        try:
            return call()
        except TransientError as exc:
            if attempt == retries:
                tries = f" (tried {retries + 1} times)" if retries else ""
                message = str(exc).removeprefix(f"oracle {exc.reason}: ")
                raise OracleError(exc.reason, f"{message}{tries}") from None
            time.sleep(pause_s * (1 << attempt))
    raise AssertionError("unreachable")


class OipTransport(Protocol):
    """What the OIP oracle asks of a server (REST or gRPC)."""

    def element_bytes(self, datatype: str) -> int:
        """Return the wire bytes of one element of ``datatype`` in a request."""

    def framework(self) -> str:
        """Return the server's ``"name version"`` from its metadata, or ``""``."""

    def model_metadata(self) -> ModelMeta:
        """Return the model's metadata."""

    def infer(self, tensor: Tensor, output: str) -> Tensor:
        """Send one input tensor, ask for ``output``; return that output tensor."""

    def close(self) -> None:
        """Release the connection."""


def _server_text(name: object, version: object) -> str:
    if not isinstance(name, str) or not isinstance(version, str) or not name:
        return ""
    text = f"{name} {version}".strip()
    return text if len(text.encode()) <= 128 else ""


# -- REST ---------------------------------------------------------------------------


def _flatten(data: object, what: str) -> list[Any]:
    """Return a JSON tensor's elements, flat: a flat list, or nested lists (row-major)."""
    level: list[Any] = data if isinstance(data, list) else [data]
    for _ in range(MAX_RANK):
        if not any(isinstance(item, list) for item in level):
            return level
        if not all(isinstance(item, list) for item in level):
            raise OracleError("invalid-answer", f"{what}: nested data of uneven depth")
        level = [value for item in level for value in item]
    raise OracleError("invalid-answer", f"{what}: data nested deeper than {MAX_RANK}")


def rest_tensor(value: object) -> Tensor:
    """Read one output tensor of a REST inference reply, strictly."""
    if not isinstance(value, dict):
        raise OracleError("invalid-answer", "an output of the reply is not an object")
    meta = tensor_meta(value.get("name"), value.get("datatype"), value.get("shape"), "output")
    check_shape(list(meta.shape), "output", free=False)
    if meta.datatype not in DTYPES:
        raise OracleError("invalid-answer", f"output {meta.name!r} has datatype {meta.datatype}")
    items = _flatten(value.get("data"), f"output {meta.name!r}")
    if meta.datatype == "BOOL":
        ok = all(isinstance(v, bool) for v in items)
    elif meta.datatype.startswith("FP"):
        ok = all(isinstance(v, int | float) and not isinstance(v, bool) for v in items)
    else:
        ok = all(isinstance(v, int) and not isinstance(v, bool) for v in items)
    if not ok:
        raise OracleError(
            "invalid-answer", f"output {meta.name!r} holds values not {meta.datatype}"
        )
    dtype = np.float64 if meta.datatype.startswith("FP") else DTYPES[meta.datatype]
    try:
        data = np.array(items, dtype=dtype)
    except OverflowError:
        raise OracleError(
            "invalid-answer", f"output {meta.name!r} overflows {meta.datatype}"
        ) from None
    return Tensor(meta.name, meta.datatype, meta.shape, data)


class RestTransport:
    """The OIP REST API of one model (``{base}/v2/models/NAME[/versions/V]``)."""

    def __init__(self, address: OipAddress, *, ca: bytes | None = None) -> None:
        """Talk to ``address``; ``ca`` (PEM) verifies an ``oip+https`` server."""
        self._address = address
        self._timeout_s = address.options.timeout_s
        version = f"/versions/{address.version}" if address.version else ""
        self._root = f"{address.base_url}/v2"
        self._model_url = f"{self._root}/models/{address.model}{version}"
        self._context: ssl.SSLContext | None = None
        if address.scheme == "oip+https":
            self._context = ssl.create_default_context(cadata=ca.decode() if ca else None)

    def element_bytes(self, datatype: str) -> int:
        """Return the JSON bytes one element may take."""
        return REST_ELEMENT_BYTES

    def _request(self, url: str, body: bytes | None) -> Any:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        request = urllib.request.Request(url, data=body, headers=headers)
        what = url.removeprefix(self._address.base_url)
        try:
            with urllib.request.urlopen(
                request, timeout=self._timeout_s, context=self._context
            ) as reply:
                data: bytes = reply.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = _error_text(exc)
            message = f"{what} answered HTTP {exc.code}{detail}"
            if exc.code >= 500:
                raise TransientError("invalid-answer", message) from None
            raise OracleError("invalid-answer", message) from None
        except TimeoutError:
            raise OracleError("deadline", f"{what}: no answer in {self._timeout_s:g} s") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError | socket.timeout):
                raise OracleError(
                    "deadline", f"{what}: no answer in {self._timeout_s:g} s"
                ) from None
            raise TransientError("unreachable", f"{self._address.target}: {reason}") from None
        if len(data) > MAX_RESPONSE_BYTES:
            raise OracleError("invalid-answer", f"{what}: reply above {MAX_RESPONSE_BYTES} bytes")
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise OracleError("invalid-answer", f"{what}: the reply is not JSON") from None

    def framework(self) -> str:
        """Return ``"name version"`` from ``GET /v2`` (``""`` if the server says nothing)."""
        try:
            reply = self._request(self._root, None)
        except TransientError:
            raise
        except OracleError as exc:
            if exc.reason == "deadline":
                raise
            return ""
        if not isinstance(reply, dict):
            return ""
        return _server_text(reply.get("name"), reply.get("version"))

    def model_metadata(self) -> ModelMeta:
        """Return ``GET /v2/models/NAME[/versions/V]``."""
        return model_meta_from_json(self._request(self._model_url, None))

    def infer(self, tensor: Tensor, output: str) -> Tensor:
        """``POST …/infer`` one input tensor; return the output named ``output``."""
        body = json.dumps(
            {
                "inputs": [
                    {
                        "name": tensor.name,
                        "shape": list(tensor.shape),
                        "datatype": tensor.datatype,
                        "data": tensor.data.tolist(),
                    }
                ],
                "outputs": [{"name": output}],
            },
            allow_nan=False,
        ).encode()
        reply = self._request(f"{self._model_url}/infer", body)
        outputs = reply.get("outputs") if isinstance(reply, dict) else None
        if not isinstance(outputs, list) or not 1 <= len(outputs) <= MAX_TENSORS:
            raise OracleError("invalid-answer", "the inference reply has no outputs list")
        return _select([rest_tensor(o) for o in outputs], output)

    def close(self) -> None:
        """Nothing to release (one connection per request)."""


def _error_text(exc: urllib.error.HTTPError) -> str:
    """Return ``": <the server's error>"`` from an error reply's JSON, or ``""``."""
    try:
        body = json.loads(exc.read(4096))
    except (ValueError, OSError, UnicodeDecodeError):
        return ""
    message = body.get("error") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        return ""
    line = message.splitlines()[0][:200]
    return f": {line}"


def _select(outputs: list[Tensor], name: str) -> Tensor:
    for tensor in outputs:
        if tensor.name == name:
            return tensor
    names = [t.name for t in outputs]
    raise OracleError("invalid-answer", f"the reply has outputs {names}, not {name!r}")


# -- gRPC ---------------------------------------------------------------------------

#: The InferTensorContents field of each datatype (FP16 travels as raw bytes).
_CONTENTS: Final = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
}


def _rpc_error(exc: grpc.RpcError, what: str) -> OracleError:
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    line = (details or "").splitlines()[0][:200] if details else ""
    if code == grpc.StatusCode.UNAVAILABLE:
        return TransientError("unreachable", f"{what}: {line}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return OracleError("deadline", f"{what}: no answer before the deadline")
    name = code.name if code is not None else "UNKNOWN"
    return OracleError("invalid-answer", f"{what} answered status {name}: {line}")


def grpc_tensor(output: Any, raw: bytes | None) -> Tensor:
    """Read one output tensor of a ``ModelInferResponse`` (typed contents or raw bytes)."""
    meta = tensor_meta(output.name, output.datatype, list(output.shape), "output")
    check_shape(list(meta.shape), "output", free=False)
    dtype = DTYPES.get(meta.datatype)
    if dtype is None:
        raise OracleError("invalid-answer", f"output {meta.name!r} has datatype {meta.datatype}")
    if raw is not None:
        if len(raw) % dtype.itemsize:
            raise OracleError("invalid-answer", f"output {meta.name!r}: raw bytes of odd length")
        data = np.frombuffer(raw, dtype=dtype).copy()
    elif meta.datatype in _CONTENTS:
        values = getattr(output.contents, _CONTENTS[meta.datatype])
        data = np.array(values, dtype=np.float64 if meta.datatype.startswith("FP") else dtype)
    else:
        raise OracleError("invalid-answer", f"output {meta.name!r} ({meta.datatype}) is not raw")
    return Tensor(meta.name, meta.datatype, meta.shape, data)


class GrpcTransport:
    """The OIP gRPC API (``inference.GRPCInferenceService``) of one model."""

    def __init__(self, address: OipAddress, channel: grpc.Channel) -> None:
        """Talk to the model of ``address`` over ``channel``."""
        self._address = address
        self._channel = channel
        self._stub: Any = pb_grpc.GRPCInferenceServiceStub(channel)  # type: ignore[no-untyped-call]
        self._timeout_s = address.options.timeout_s

    def element_bytes(self, datatype: str) -> int:
        """Return the protobuf bytes one element may take (a small integer: 2)."""
        return max(2, DTYPES[datatype].itemsize)

    def _call(self, method: Any, request: Any, what: str) -> Any:
        try:
            return method(request, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise _rpc_error(exc, what) from None

    def framework(self) -> str:
        """Return ``"name version"`` from ``ServerMetadata`` (``""`` if it fails)."""
        try:
            reply = self._call(
                self._stub.ServerMetadata, pb.ServerMetadataRequest(), "ServerMetadata"
            )
        except TransientError:
            raise
        except OracleError as exc:
            if exc.reason == "deadline":
                raise
            return ""
        return _server_text(reply.name, reply.version)

    def model_metadata(self) -> ModelMeta:
        """Return ``ModelMetadata`` of the model."""
        reply = self._call(
            self._stub.ModelMetadata,
            pb.ModelMetadataRequest(name=self._address.model, version=self._address.version),
            "ModelMetadata",
        )

        def tensors(items: Any, what: str) -> list[Any]:
            if len(items) > MAX_TENSORS:
                raise OracleError("invalid-answer", f"the model has over {MAX_TENSORS} {what}s")
            return [tensor_meta(t.name, t.datatype, list(t.shape), what) for t in items]

        return model_meta(
            reply.name,
            list(reply.versions),
            reply.platform,
            tensors(reply.inputs, "input"),
            tensors(reply.outputs, "output"),
        )

    def infer(self, tensor: Tensor, output: str) -> Tensor:
        """Send one ``ModelInfer``; return the output named ``output``."""
        request = pb.ModelInferRequest(
            model_name=self._address.model,
            model_version=self._address.version,
            outputs=[pb.ModelInferRequest.InferRequestedOutputTensor(name=output)],
        )
        entry = request.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        if tensor.datatype in _CONTENTS:
            getattr(entry.contents, _CONTENTS[tensor.datatype]).extend(tensor.data.tolist())
        else:
            request.raw_input_contents.append(tensor.data.astype(DTYPES[tensor.datatype]).tobytes())
        reply = self._call(self._stub.ModelInfer, request, "ModelInfer")
        outputs = list(reply.outputs)
        raw = list(reply.raw_output_contents)
        if not 1 <= len(outputs) <= MAX_TENSORS or (raw and len(raw) != len(outputs)):
            raise OracleError("invalid-answer", "ModelInfer answered no outputs, or raw of others")
        return _select(
            [grpc_tensor(o, raw[i] if raw else None) for i, o in enumerate(outputs)], output
        )

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()
