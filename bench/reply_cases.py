"""The worst replies we could construct for each parser of a model server's reply (issue #40 N3).

:mod:`bench.bench_decoders` measures them as it measures the decoders of the other
parties' bytes: peak memory per reply byte and seconds per MiB. The parsers:

- the OIP REST inference reply (:func:`~twinaudit.verifier.oracles.oip_transport.rest_outputs`),
  its model and server metadata and error bodies
  (:func:`~twinaudit.wire.json_reply.load_small`), at their caps;
- the OpenAI-compatible completions reply
  (:func:`~twinaudit.practitioner.openai_lm.parse_completions`);
- the gRPC replies: the OIP ``ModelInferResponse``
  (:func:`~twinaudit.verifier.oracles.oip_transport.grpc_outputs`) and the ``twinaudit.oracle.v1``
  ``ClassifyResponse`` and ``TokenLogprobsResponse``
  (:func:`~twinaudit.verifier.oracles.grpc_client.classify_answer`,
  :func:`~twinaudit.verifier.oracles.grpc_client.logprob_answer`), each read from its bytes as the
  clients read them (:func:`~twinaudit.verifier.oracles.grpc_replies.read_capped`, with the
  objects the client allows: 1,024, or one per text asked for TokenLogprobs). Until
  issue #40 was closed protobuf's C parser read them, outside Python's allocator, so
  for these the peak resident memory is taken too (:data:`NATIVE`).

A REST reply's size is bounded before it is parsed by the cap of its request
(:func:`~twinaudit.verifier.oracles.oip_transport.rest_reply_cap`; 64 KiB and 32 bytes per value
asked for): the inference replies here are about 2 MiB, those of a request for about
65,000 values; the metadata replies are at their 256 KiB cap.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import numpy as np

from twinaudit.practitioner.openai_lm import parse_completions
from twinaudit.protocol.oracles.base import MAX_CLASSIFY_IMAGES, OracleInfo
from twinaudit.verifier.oracles.grpc_client import classify_answer, logprob_answer
from twinaudit.verifier.oracles.grpc_replies import MAX_REPLY_OBJECTS, read_capped
from twinaudit.verifier.oracles.oip_tensors import model_meta_from_json
from twinaudit.verifier.oracles.oip_transport import MAX_METADATA_BYTES, grpc_outputs, rest_outputs
from twinaudit.wire.json_reply import load_small
from twinaudit.wire.oip.v2 import grpc_predict_v2_pb2 as oip_pb
from twinaudit.wire.oracle.v1 import oracle_pb2

Case = tuple[str, str, bytes, Callable[[bytes], object]]

#: The size of the inference replies, about.
SIZE = 2 * 2**20
#: The parsers whose memory is partly outside Python's allocator (protobuf's C parser).
NATIVE = frozenset({"OIP gRPC reply", "oracle gRPC Classify", "oracle gRPC TokenLogprobs"})
INFER = "OIP REST inference reply"


def _reply(data: bytes, shape: list[int], datatype: str = "FP32", extra: bytes = b"") -> bytes:
    head = json.dumps({"name": "y", "datatype": datatype, "shape": shape}).encode()[:-1]
    return b'{"model_name": "m", ' + extra + b'"outputs": [' + head + b', "data": ' + data + b"}]}"


def _list(unit: bytes, count: int) -> bytes:
    return b"[" + b",".join([unit] * count) + b"]"


def _rest(max_values: int) -> Callable[[bytes], object]:
    def parse(data: bytes) -> object:
        return rest_outputs(data, max_values)

    return parse


def rest_inference_cases() -> Iterator[Case]:
    """The inference reply of a request for about 65,000 values, at about 2 MiB."""
    floats = _list(b"0.1234567890123", SIZE // 16)
    count = SIZE // 16
    yield INFER, "floats, 15 digits (valid)", _reply(floats, [count]), _rest(count)
    rows = _list(_list(b"0.12345", 10), SIZE // 82)
    n = SIZE // 82
    yield INFER, "rows of 10 floats (valid)", _reply(rows, [n, 10]), _rest(10 * n)
    zeros = SIZE // 2
    yield INFER, "'0,' at one value per 2 bytes", _reply(_list(b"0", zeros), [zeros]), _rest(zeros)
    labels = _list(b"7", zeros)
    yield (
        INFER,
        "INT64 labels '7,' (valid)",
        _reply(labels, [zeros], "INT64"),
        _rest(zeros),
    )
    yield INFER, "'0,' beyond the values asked for", _reply(_list(b"0", zeros), [3]), _rest(3)
    yield INFER, "nested empty lists (N3)", _reply(_list(b"[]", SIZE // 3), [1, 3]), _rest(3)
    deep = _list(b"[" * 7 + b"0" + b"]" * 7, SIZE // 16)
    yield INFER, "lists 8 deep", _reply(deep, [1]), _rest(SIZE)
    yield INFER, "strings as data", _reply(_list(b'"ab"', SIZE // 5), [1]), _rest(SIZE)
    skipped = b'"parameters": ' + _list(b'{"ab": ["cd"]}', SIZE // 15) + b", "
    yield INFER, "2 MiB of parameters passed over", _reply(b"[0.5]", [1], extra=skipped), _rest(1)


def _metadata(data: bytes) -> object:
    return model_meta_from_json(load_small(data, "the model metadata"))


def metadata_cases() -> Iterator[Case]:
    """Model metadata at its 256 KiB cap (8192 JSON values at most)."""
    name = "OIP REST metadata"
    tensors = [
        {"name": f"t{i:03d}" + "x" * 200, "datatype": "FP32", "shape": [-1, 224, 224, 3]}
        for i in range(64)
    ]
    valid = {"name": "m", "versions": ["1"], "platform": "p", "inputs": tensors, "outputs": tensors}
    yield name, "64 inputs and 64 outputs (valid)", json.dumps(valid).encode(), _metadata
    cap = MAX_METADATA_BYTES
    strings = b'{"name": "m", "versions": ' + _list(b'"ab"', cap // 5 - 8) + b"}"
    yield name, "versions of 'ab' (refused)", strings, _metadata
    yield name, "nested lists (refused)", b"[" * (cap // 2) + b"]" * (cap // 2), _metadata
    maps = b'{"a":' * (cap // 6) + b"0" + b"}" * (cap // 6)
    yield name, "nested objects (refused)", maps, _metadata
    few = b'{"name": "' + b"\\u00e9" * (cap // 6 - 4) + b'"}'
    yield name, "one name of escaped characters", few, _metadata


def _completions(prompts: list[str]) -> Callable[[bytes], object]:
    def parse(data: bytes) -> object:
        return parse_completions(data, prompts)

    return parse


def completions_cases() -> Iterator[Case]:
    """Replies of about 2 MiB for 16 prompts (the relay's default batch)."""
    name = "OpenAI completions reply"
    tokens = SIZE // 16 // 16
    prompts = ["ab" * tokens] * 16

    def choices(token: str, value: object, extra: dict[str, object] | None = None) -> bytes:
        choice = {
            "text": prompts[0],
            "logprobs": {
                "tokens": [token] * tokens,
                "token_logprobs": [None] + [value] * (tokens - 1),
            },
            **(extra or {}),
        }
        return json.dumps({"choices": [dict(choice, index=i) for i in range(16)]}).encode()

    yield name, "2-character tokens (valid)", choices("ab", -0.5), _completions(prompts)
    yield name, "log-probabilities 0", choices("a", 0), _completions(prompts)
    nested = {"top_logprobs": [[[]]] * tokens}
    yield name, "nested lists passed over", choices("a", 0, nested), _completions(prompts)
    wrong = choices("a", "x")
    yield name, "strings as log-probabilities", wrong, _completions(prompts)


def _read(message_type: object, data: bytes, objects: int = MAX_REPLY_OBJECTS) -> object:
    """Read ``data`` as the client reads a reply of ``message_type`` (caps: its length)."""
    return read_capped(
        message_type.DESCRIPTOR,  # type: ignore[attr-defined]
        data,
        what="reply",
        max_bytes=len(data),
        max_objects=objects,
    )


def _grpc_outputs(data: bytes) -> object:
    return grpc_outputs(_read(oip_pb.ModelInferResponse, data), SIZE)


def _tensor(**fields: object) -> oip_pb.ModelInferResponse.InferOutputTensor:
    return oip_pb.ModelInferResponse.InferOutputTensor(name="y", **fields)


def grpc_cases() -> Iterator[Case]:
    """gRPC replies of about 2 MiB (the channel caps a message at 64 MiB)."""
    name = "OIP gRPC reply"
    count = SIZE // 4
    raw = oip_pb.ModelInferResponse(
        outputs=[_tensor(datatype="FP32", shape=[count])],
        raw_output_contents=[np.zeros(count, np.float32).tobytes()],
    )
    yield name, "raw FP32 (valid)", raw.SerializeToString(), _grpc_outputs
    typed = oip_pb.ModelInferResponse(outputs=[_tensor(datatype="FP32", shape=[count])])
    typed.outputs[0].contents.fp32_contents.extend([0.5] * count)
    yield name, "typed FP32 contents (valid)", typed.SerializeToString(), _grpc_outputs
    small = oip_pb.ModelInferResponse(outputs=[_tensor(datatype="INT64", shape=[SIZE])])
    small.outputs[0].contents.int64_contents.extend([1] * SIZE)
    yield name, "INT64 contents, 1 byte each", small.SerializeToString(), _grpc_outputs
    wide = oip_pb.ModelInferResponse(outputs=[_tensor(datatype="INT64", shape=[SIZE // 10])])
    wide.outputs[0].contents.int64_contents.extend([-1] * (SIZE // 10))
    yield name, "INT64 contents, 10 bytes each", wide.SerializeToString(), _grpc_outputs
    empty = oip_pb.ModelInferResponse(outputs=[_tensor()] * (SIZE // 5))
    yield name, "outputs with a name only (refused)", empty.SerializeToString(), _grpc_outputs
    info = OracleInfo("m", "d", ("classify",), "probabilities", 10, 4096)
    images = SIZE // 80
    probs = oracle_pb2.ClassifyResponse(
        output="probabilities", n_classes=10, probabilities=[0.1] * (10 * images)
    )

    def classify(data: bytes) -> object:
        return classify_answer(_read(oracle_pb2.ClassifyResponse, data), images, info)

    yield "oracle gRPC Classify", "probabilities (valid)", probs.SerializeToString(), classify
    info_labels = OracleInfo("m", "d", ("classify",), "label", 10, 4096)
    labels = oracle_pb2.ClassifyResponse(
        output="label", n_classes=10, labels=[1] * MAX_CLASSIFY_IMAGES
    )

    def classify_labels(data: bytes) -> object:
        answer = _read(oracle_pb2.ClassifyResponse, data)
        return classify_answer(answer, MAX_CLASSIFY_IMAGES, info_labels)

    yield "oracle gRPC Classify", "labels, 1 byte each", labels.SerializeToString(), classify_labels
    # Field 4 (labels) sent one value at a time, as protobuf also accepts: key 0x20.
    unpacked = b"\x20\x01" * MAX_CLASSIFY_IMAGES
    yield "oracle gRPC Classify", "labels unpacked (refused)", unpacked, classify_labels
    # Two-byte fields that hold nothing (empty packed labels): counted, not read.
    chunks = b"\x22\x00" * (SIZE // 2)
    yield "oracle gRPC Classify", "empty packed fields (refused)", chunks, classify_labels
    items = oracle_pb2.TokenLogprobsResponse(items=[oracle_pb2.TokenLogprobs()] * (SIZE // 2))

    def logprobs(data: bytes) -> object:
        return logprob_answer(_read(oracle_pb2.TokenLogprobsResponse, data, 16), 16)

    yield "oracle gRPC TokenLogprobs", "empty items (refused)", items.SerializeToString(), logprobs
    full = oracle_pb2.TokenLogprobsResponse(
        items=[oracle_pb2.TokenLogprobs(logprobs=[-0.5] * (SIZE // 8 // 16))] * 16
    )
    yield "oracle gRPC TokenLogprobs", "16 texts (valid)", full.SerializeToString(), logprobs


def reply_cases() -> Iterator[Case]:
    """Every reply parser's cases."""
    yield from rest_inference_cases()
    yield from metadata_cases()
    yield from completions_cases()
    yield from grpc_cases()
