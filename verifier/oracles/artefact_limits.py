"""Caps on a model artefact, checked before anything loads it (``verifier model add``).

A held model is loaded in its sandboxed child (:mod:`twinaudit.verifier.oracles.sandbox`), under
memory and time limits; these caps refuse the obvious resource attacks earlier, from
the file's structure alone, without running or unpickling anything (finding N4 of
issue #40: a 1.2 MB zip-bomb ``.pt`` drove ``model add`` to 2.4 GB, a 205-byte ONNX
file declaring a 65536² input stalled it for 307 s):

- :data:`MAX_ARTEFACT_BYTES`: the file's size;
- zip archives (torch ``.pt``, TorchScript, ``.pt2``), read with :mod:`zipfile`'s
  central directory: :data:`MAX_ZIP_MEMBERS` members, :data:`MAX_UNCOMPRESSED_BYTES`
  uncompressed in all, and at most :data:`MAX_ZIP_RATIO` times the file's size once
  that total exceeds :data:`RATIO_FLOOR_BYTES` (torch stores its tensors uncompressed,
  a ratio of about 1);
- ONNX files, read with the ``onnx`` package's protobuf parser (the graph is never
  run): each declared input within the caps of
  :mod:`twinaudit.protocol.oracles.model_inputs` (its side and its elements; fixed
  dimensions, a symbolic batch counting 1); the same caps apply to ``--input-shape``
  (:func:`~twinaudit.protocol.oracles.model_inputs.check_input_shape`).

Each refusal is a :class:`~twinaudit.protocol.errors.LimitExceededError` naming its cap.
"""

from __future__ import annotations

import importlib
import zipfile
from pathlib import Path
from typing import Any, Final

from twinaudit.protocol.errors import InputError, LimitExceededError
from twinaudit.protocol.oracles.model_inputs import check_dims

GIB: Final = 1 << 30
MIB: Final = 1 << 20
#: Largest model file an arbiter holds.
MAX_ARTEFACT_BYTES: Final = 4 * GIB
#: Most members of a zip archive.
MAX_ZIP_MEMBERS: Final = 100_000
#: Most bytes a zip archive's members hold uncompressed, in all.
MAX_UNCOMPRESSED_BYTES: Final = 8 * GIB
#: Largest ratio of uncompressed bytes to the file's size (above the floor).
MAX_ZIP_RATIO: Final = 20
#: Uncompressed bytes below which the ratio is not checked (small, compressible archives).
RATIO_FLOOR_BYTES: Final = 64 * MIB
#: Largest ONNX file parsed here (the graph is read whole); a larger one is checked by
#: the sandboxed child, which refuses the same declared inputs before its probe.
MAX_ONNX_PARSE_BYTES: Final = 256 * MIB


def check_artefact(path: Path) -> None:
    """Refuse (``LimitExceededError``) a model file over the caps, before it is loaded."""
    size = path.stat().st_size
    if size > MAX_ARTEFACT_BYTES:
        raise LimitExceededError("model file size", size, MAX_ARTEFACT_BYTES)
    if zipfile.is_zipfile(path):
        check_zip(path, size)
    elif path.suffix.lower() == ".onnx" and size <= MAX_ONNX_PARSE_BYTES:
        check_onnx(path)


def check_zip(path: Path, size: int) -> None:
    """Check a zip archive's member count, uncompressed total and ratio from its directory."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InputError(f"{str(path)!r} is not a readable zip archive: {exc}") from None
    if len(members) > MAX_ZIP_MEMBERS:
        raise LimitExceededError("zip archive members", len(members), MAX_ZIP_MEMBERS)
    total = sum(member.file_size for member in members)
    if total > MAX_UNCOMPRESSED_BYTES:
        raise LimitExceededError("zip archive uncompressed bytes", total, MAX_UNCOMPRESSED_BYTES)
    if total > RATIO_FLOOR_BYTES and total > MAX_ZIP_RATIO * size:
        raise LimitExceededError("zip archive decompression ratio", total // size, MAX_ZIP_RATIO)


def check_onnx(path: Path) -> None:
    """Check an ONNX graph's declared input dimensions (parsed, never run).

    Needs the ``onnx`` package (extra ``formats``); without it (and for files over
    :data:`MAX_ONNX_PARSE_BYTES`), the child refuses the same inputs before its probe
    (:func:`twinaudit.practitioner.formats.load_model`), under its memory limit.
    """
    try:
        onnx: Any = importlib.import_module("onnx")
    except ImportError:
        return
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises protobuf's DecodeError and others
        raise InputError(f"{str(path)!r} is not a readable ONNX model: {exc}") from None
    initializers = {tensor.name for tensor in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue  # a weight with a default, not an input
        dims = value.type.tensor_type.shape.dim
        fixed = [d.dim_value for d in dims if d.HasField("dim_value")]
        check_dims(fixed, f"ONNX input {value.name[:100]!r}")


__all__ = [
    "MAX_ARTEFACT_BYTES",
    "MAX_UNCOMPRESSED_BYTES",
    "MAX_ZIP_MEMBERS",
    "MAX_ZIP_RATIO",
    "check_artefact",
]
