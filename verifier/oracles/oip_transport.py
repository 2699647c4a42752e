"""The two transports of the Open Inference Protocol: REST (JSON) and gRPC.

Both offer the same three calls to :class:`~twinaudit.verifier.oracles.oip_oracle.OipOracle`:
``framework()`` (the server's name and version, from its metadata; ``""`` when the
server does not say), ``model_metadata()`` and ``infer(tensor, output)``. Every call
has the address's deadline. Failures are :class:`~twinaudit.protocol.errors.OracleError`:

- the server could not answer — gRPC ``UNAVAILABLE``, HTTP 502, 503 or 504 or another
  5xx, a refused or reset connection — is a :class:`TransientError`, which
  :func:`with_retries` sends again, at most ``retries`` times, after 0.1 s, 0.2 s,
  0.4 s …; once they are spent it is ``unreachable`` (no answer) or
  ``invalid-answer`` (an error answer);
- no whole answer before the call's deadline (gRPC ``DEADLINE_EXCEEDED``, or a REST
  call still unfinished when the deadline passes) is ``deadline``, and is not retried
  (the server may still be working on it);
- any other error answer (HTTP 4xx, any other gRPC status), and any reply that is not
  what the protocol defines, is ``invalid-answer`` at once.

Every REST call is one :func:`~twinaudit.wire.http_call.http_call`: its deadline
(the address's ``timeout=``) bounds the whole call however slowly the server sends, a
redirect is refused and never followed, and the reply is capped while it streams —
metadata at :data:`MAX_METADATA_BYTES`, an inference reply at :func:`rest_reply_cap` of
the values the request asks for — and then read event by event
(:mod:`~twinaudit.wire.json_reply`), never built into Python objects as a whole
(issue #40 N2, N3, N8). A gRPC call's deadline is gRPC's own (the whole call), and its
reply is held to a cap from its request before it is parsed
(:mod:`~twinaudit.verifier.oracles.grpc_replies`). Nothing is contacted until a call is made.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, Protocol, TypeVar

import grpc
import numpy as np
import numpy.typing as npt

from twinaudit.protocol.errors import OracleError, TransientError
from twinaudit.wire.http_call import Deadline, http_call
from twinaudit.wire.json_reply import Event, Numbers, events, expect, keys, load_small, skip
from twinaudit.wire.oip.v2 import grpc_predict_v2_pb2 as pb

from .grpc_replies import CappedMethod, reply_cap
from .oip_address import DEFAULT_REQUEST_BYTES, OipAddress
from .oip_tensors import (
    DTYPES,
    MAX_RANK,
    MAX_TENSORS,
    ModelMeta,
    Tensor,
    TensorMeta,
    check_shape,
    model_meta,
    model_meta_from_json,
    tensor_meta,
)

#: Largest REST reply read, in bytes (the gRPC message cap).
MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
#: Largest REST metadata reply read (a model's or the server's metadata), in bytes.
MAX_METADATA_BYTES: Final = 256 * 1024
#: The room an inference reply has beyond its values (names, shapes, parameters), and
#: the bytes it may spend on each value it is expected to hold (a number, its comma,
#: white space and its share of the brackets of nested data).
REPLY_OVERHEAD_BYTES: Final = 64 * 1024
REST_REPLY_VALUE_BYTES: Final = 32
#: Most bytes of tensor data in one request unless the address says otherwise
#: (``request-bytes=``): gRPC servers accept 4 MiB messages by default, and a REST
#: request is held to the same.
MAX_REQUEST_BYTES: Final = DEFAULT_REQUEST_BYTES
#: Wire bytes per element: a JSON number takes at most 24 characters with its comma.
REST_ELEMENT_BYTES: Final = 24
#: First pause before a retry, in seconds; each later one doubles.
RETRY_PAUSE_S: Final = 0.1

T = TypeVar("T")


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

    def infer(self, tensor: Tensor, output: str, max_values: int) -> Tensor:
        """Send one input tensor, ask for ``output``; return that output tensor.

        ``max_values`` is the most numbers the answer should hold (the request's rows
        times the output's width): a reply with more is refused.
        """

    def close(self) -> None:
        """Release the connection."""


def _server_text(name: object, version: object) -> str:
    if not isinstance(name, str) or not isinstance(version, str) or not name:
        return ""
    text = f"{name} {version}".strip()
    return text if len(text.encode()) <= 128 else ""


# -- REST ---------------------------------------------------------------------------


def rest_reply_cap(values: int) -> int:
    """Return the byte cap of a REST inference reply expected to hold ``values`` numbers."""
    return min(MAX_RESPONSE_BYTES, REPLY_OVERHEAD_BYTES + REST_REPLY_VALUE_BYTES * values)


def _rest_output(stream: Iterator[Event], budget: int) -> Tensor:
    """Read one output object of an inference reply (just opened) into a tensor."""
    what = "an output of the inference reply"
    texts: dict[str, object] = {}
    shape: object = None
    data: Numbers | None = None
    for key, first in keys(stream, what, ("name", "datatype", "shape", "data")):
        if key in ("name", "datatype"):
            skip(stream, first[0])  # anything but a string is refused below
            texts[key] = first[1] if first[0] == "string" else None
        elif key == "shape":
            dims = Numbers()
            dims.read(stream, first, f"{what}'s shape", max_depth=1, max_count=MAX_RANK + 1)
            whole = dims.integers == len(dims.values) and not dims.inexact
            shape = [int(v) for v in dims.values] if whole and dims.depth != 0 else None
        else:
            data = Numbers()
            data.read(stream, first, what, max_depth=MAX_RANK, max_count=budget)
    meta = tensor_meta(texts.get("name"), texts.get("datatype"), shape, "output")
    check_shape(list(meta.shape), "output", free=False)
    if meta.datatype not in DTYPES:
        raise OracleError("invalid-answer", f"output {meta.name!r} has datatype {meta.datatype}")
    if data is None:
        raise OracleError("invalid-answer", f"output {meta.name!r} has no data")
    if meta.datatype == "BOOL":
        ok = data.booleans == len(data.values)
    elif meta.datatype.startswith("FP"):
        ok = data.booleans == data.others == 0
    else:
        ok = data.integers == len(data.values) and not data.inexact
    if not ok:
        raise OracleError(
            "invalid-answer", f"output {meta.name!r} holds values not {meta.datatype}"
        )
    values = data.array()
    if meta.datatype == "BOOL":
        return Tensor(meta.name, meta.datatype, meta.shape, values.astype(np.bool_))
    if not meta.datatype.startswith("FP"):
        values = _integers_as(meta, values)
    return Tensor(meta.name, meta.datatype, meta.shape, values)


def _integers_as(meta: TensorMeta, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Return integer ``values`` in ``meta``'s datatype, refusing any it cannot hold.

    A reply's integers arrive wider than their type (JSON numbers; the 32-bit contents
    field that also holds 8- and 16-bit types), and a cast would wrap 259 to 3.
    """
    dtype = DTYPES[meta.datatype]
    limits = np.iinfo(dtype.name)
    if values.size and (values.min() < limits.min or values.max() > limits.max):
        raise OracleError("invalid-answer", f"output {meta.name!r} overflows {meta.datatype}")
    return np.asarray(values, dtype=dtype)


def rest_outputs(body: bytes, max_values: int) -> list[Tensor]:
    """Read the output tensors of a REST inference reply, strictly, as it is parsed.

    At most :data:`MAX_TENSORS` outputs and ``max_values`` values in all are read; more
    is refused while parsing (:mod:`twinaudit.wire.json_reply`), and so is anything but
    numbers (or ``true``/``false`` for ``BOOL``) in an output's data.
    """
    what = "the inference reply"
    stream = events(body, what)
    first, _ = next(stream)
    expect(first, "start_map", what, "not a JSON object")
    outputs: list[Tensor] = []
    for _, (opening, _) in keys(stream, what, ("outputs",)):
        expect(opening, "start_array", what, "the outputs are not a list")
        for event, _ in stream:
            if event == "end_array":
                break
            expect(event, "start_map", what, "an output of the reply is not an object")
            if len(outputs) == MAX_TENSORS:
                raise OracleError("invalid-answer", f"the reply has over {MAX_TENSORS} outputs")
            read = sum(t.data.size for t in outputs)
            outputs.append(_rest_output(stream, max_values - read))
    for _ in stream:  # the rest: nothing but the end (trailing bytes are refused)
        pass
    if not outputs:
        raise OracleError("invalid-answer", "the inference reply has no outputs list")
    return outputs


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

    def _request(self, url: str, body: bytes | None, cap: int) -> bytes:
        """Return the body of a 2xx answer to ``url`` (see the module for the failures)."""
        what = url.removeprefix(self._address.base_url)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            reply = http_call(
                url,
                deadline=Deadline(self._timeout_s),
                max_bytes=cap,
                what=what,
                body=body,
                headers=headers,
                context=self._context,
            )
        except OracleError as exc:
            if exc.reason == "unreachable":
                reason = str(exc).removeprefix(f"oracle unreachable: {what}: ")
                raise TransientError("unreachable", f"{self._address.target}: {reason}") from None
            raise
        if not 200 <= reply.status < 300:
            message = f"{what} answered HTTP {reply.status}{_error_text(reply.body)}"
            if reply.status >= 500:
                raise TransientError("invalid-answer", message)
            raise OracleError("invalid-answer", message)
        return reply.body

    def framework(self) -> str:
        """Return ``"name version"`` from ``GET /v2`` (``""`` if the server says nothing)."""
        try:
            reply = load_small(self._request(self._root, None, MAX_METADATA_BYTES), "/v2")
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
        body = self._request(self._model_url, None, MAX_METADATA_BYTES)
        return model_meta_from_json(load_small(body, "the model metadata"))

    def infer(self, tensor: Tensor, output: str, max_values: int) -> Tensor:
        """``POST …/infer`` one input tensor; return the output named ``output``.

        The reply is read up to :func:`rest_reply_cap` of ``max_values`` bytes, and
        holds at most ``max_values`` numbers.
        """
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
        reply = self._request(f"{self._model_url}/infer", body, rest_reply_cap(max_values))
        return _select(rest_outputs(reply, max_values), output)

    def close(self) -> None:
        """Nothing to release (one connection per request)."""


def _error_text(body: bytes) -> str:
    """Return ``": <the server's error>"`` from an error reply's JSON, or ``""``."""
    try:
        reply = load_small(body, "the error reply")
    except OracleError:
        return ""
    message = reply.get("error") if isinstance(reply, dict) else None
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


def grpc_tensor(output: Any, raw: bytes | None, max_values: int) -> Tensor:
    """Read one output tensor of a ``ModelInferResponse`` (typed contents or raw bytes).

    One of more than ``max_values`` values is refused before its values are read.
    """
    meta = tensor_meta(output.name, output.datatype, [int(d) for d in output.shape], "output")
    check_shape(list(meta.shape), "output", free=False)
    dtype = DTYPES.get(meta.datatype)
    if dtype is None:
        raise OracleError("invalid-answer", f"output {meta.name!r} has datatype {meta.datatype}")
    if raw is not None:
        if len(raw) % dtype.itemsize:
            raise OracleError("invalid-answer", f"output {meta.name!r}: raw bytes of odd length")
        if len(raw) // dtype.itemsize > max_values:
            raise OracleError("invalid-answer", f"ModelInfer answered over {max_values} values")
        data = np.frombuffer(raw, dtype=dtype).copy()
    elif meta.datatype in _CONTENTS:
        values = getattr(output.contents, _CONTENTS[meta.datatype])
        if len(values) > max_values:
            raise OracleError("invalid-answer", f"ModelInfer answered over {max_values} values")
        if meta.datatype.startswith("FP"):
            data = np.asarray(values, dtype=np.float64)
        elif dtype.kind in "iu":
            data = _integers_as(meta, values)
        else:
            data = np.asarray(values, dtype=dtype)
    else:
        raise OracleError("invalid-answer", f"output {meta.name!r} ({meta.datatype}) is not raw")
    return Tensor(meta.name, meta.datatype, meta.shape, data)


def grpc_outputs(reply: Any, max_values: int) -> list[Tensor]:
    """Read the output tensors of a ``ModelInferResponse``: at most ``max_values`` values."""
    outputs = reply.outputs
    raw = reply.raw_output_contents
    if not 1 <= len(outputs) <= MAX_TENSORS or (len(raw) and len(raw) != len(outputs)):
        raise OracleError("invalid-answer", "ModelInfer answered no outputs, or raw of others")
    tensors: list[Tensor] = []
    for i, output in enumerate(outputs):
        left = max_values - sum(t.data.size for t in tensors)
        tensors.append(grpc_tensor(output, raw[i] if len(raw) else None, left))
    return tensors


class GrpcTransport:
    """The OIP gRPC API (``inference.GRPCInferenceService``) of one model."""

    def __init__(self, address: OipAddress, channel: grpc.Channel) -> None:
        """Talk to the model of ``address`` over ``channel``."""
        self._address = address
        self._channel = channel
        service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"].full_name
        self._methods = {
            name: CappedMethod(channel, service, name, getattr(pb, f"{name}Response"))
            for name in ("ServerMetadata", "ModelMetadata", "ModelInfer")
        }
        self._timeout_s = address.options.timeout_s

    def element_bytes(self, datatype: str) -> int:
        """Return the protobuf bytes one element may take (a small integer: 2)."""
        return max(2, DTYPES[datatype].itemsize)

    def _call(self, name: str, request: Any, max_bytes: int = MAX_METADATA_BYTES) -> Any:
        try:
            return self._methods[name](request, timeout=self._timeout_s, max_bytes=max_bytes)
        except grpc.RpcError as exc:
            raise _rpc_error(exc, name) from None

    def framework(self) -> str:
        """Return ``"name version"`` from ``ServerMetadata`` (``""`` if it fails)."""
        try:
            reply = self._call("ServerMetadata", pb.ServerMetadataRequest())
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
            "ModelMetadata",
            pb.ModelMetadataRequest(name=self._address.model, version=self._address.version),
        )

        def tensors(items: Any, what: str) -> list[Any]:
            if len(items) > MAX_TENSORS:
                raise OracleError("invalid-answer", f"the model has over {MAX_TENSORS} {what}s")
            return [tensor_meta(t.name, t.datatype, [int(d) for d in t.shape], what) for t in items]

        return model_meta(
            reply.name,
            list(reply.versions),
            reply.platform,
            tensors(reply.inputs, "input"),
            tensors(reply.outputs, "output"),
        )

    def infer(self, tensor: Tensor, output: str, max_values: int) -> Tensor:
        """Send one ``ModelInfer``; return the output named ``output``.

        The reply is refused, before it is parsed, if it is longer than ``max_values``
        values can take (:func:`~twinaudit.verifier.oracles.grpc_replies.reply_cap`), and so is one
        holding more than ``max_values`` values in all.
        """
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
        reply = self._call("ModelInfer", request, reply_cap(max_values))
        return _select(grpc_outputs(reply, max_values), output)

    def close(self) -> None:
        """Close the channel."""
        self._channel.close()
