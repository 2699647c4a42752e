"""Model files an oracle serves: which format a file is in, loading it, what it declares.

:func:`load_model` turns a file into a :class:`LoadedModel`: a ``torch.nn.Module`` that
maps an NCHW float32 batch to the model's output, with the format's name, the framework
that runs it, and what the file itself declares about its input (the image shape, a
fixed batch size). The formats (:data:`FORMATS`):

- ``torchscript``: a TorchScript archive (``torch.jit.save``; ``torch.jit.load``);
- ``torch-export``: a ``torch.export`` archive (``torch.export.save``, a ``.pt2`` file).
  Its program declares its input: the shape (N, C, H, W) and whether the batch N is
  dynamic or fixed. A fixed batch is honoured: the oracle runs batches of exactly that
  size (:class:`LoadedModel.fixed_batch`);
- ``state-dict``: tensors saved with ``torch.save(model.state_dict())``, read with
  ``torch.load(weights_only=True)`` into the module an ``arch`` callable returns;
- ``safetensors``: a ``.safetensors`` file of tensors, read with
  ``safetensors.torch.load_file`` into ``arch()``;
- ``pickle``: a whole module saved with ``torch.save(model)``. Unpickling it runs
  whatever code the file names, so it is loaded only when the caller trusts the file
  (``trust_pickle``); otherwise it is refused with an error naming ``--trust-pickle``;
- ``onnx``: an ONNX model run by ``onnxruntime`` on the CPU. Its one input must be a
  float32 tensor (N, C, H, W); its first output is the model's output. Like a
  ``torch-export`` program, it declares its input shape and whether its batch is fixed.

:func:`detect_format` names a file's format from its name and content: ``.onnx``,
``.pt2`` and ``.safetensors`` files by their suffix (and safetensors by its header);
with ``arch``, anything else is a state dict; without, a TorchScript archive is
recognised by its ``code/`` entries, and a ``torch.save`` file is read with
``weights_only=True`` first: a state dict there needs ``arch``, and a file that needs
unpickling is ``pickle``. Every failure is an :class:`~twinaudit.protocol.errors.InputError`
with a one-line message; what the file declares and does not fit the oracle (an input
that is not float32, not of rank 4, more than one input) is a
:class:`~twinaudit.protocol.errors.ModelMismatchError`.

The digest (:attr:`LoadedModel.digest`) of a torch model is
:func:`~twinaudit.practitioner.torch_oracle.state_dict_digest` of its weights, whatever file
they came from (a state dict, safetensors, TorchScript or a pickle of the same weights
have one digest); an ONNX model's is the SHA-256 of its file. Imports torch; safetensors
and onnxruntime only when such a file is loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch

from twinaudit.protocol.errors import InputError, ModelMismatchError
from twinaudit.protocol.oracles.model_inputs import check_dims
from twinaudit.wire.torchvision_shim import prepare_torchvision

#: Every format :func:`load_model` reads.
FORMATS: Final = ("torchscript", "torch-export", "state-dict", "safetensors", "pickle", "onnx")
#: Formats whose file holds only weights, loaded into what ``arch`` returns.
WEIGHTS_FORMATS: Final = ("state-dict", "safetensors")
#: The flag that allows unpickling (named in the refusal).
TRUST_PICKLE_FLAG: Final = "--trust-pickle"
#: Largest safetensors header a file may announce (the format's own limit is 100 MB).
_MAX_SAFETENSORS_HEADER: Final = 100_000_000


@dataclass(frozen=True)
class LoadedModel:
    """A model loaded from a file, and what the file says about it.

    ``module`` maps an NCHW float32 batch to the model's output. ``digest`` is the hex
    model digest (None: the oracle computes the state-dict digest of ``module``).
    ``input_shape`` is the image shape (H, W, C) the file declares, None when it
    declares none or leaves one of them dynamic; ``fixed_batch`` the batch size it
    requires, None when the batch is dynamic or the file does not say.
    ``declared_input`` is the (N, C, H, W) input as the file declares it, None for each
    dynamic dimension; empty for a format that declares none (TorchScript, weights, a
    pickle).
    """

    module: torch.nn.Module
    model_format: str
    framework: str
    digest: str | None = None
    input_shape: tuple[int, int, int] | None = None
    fixed_batch: int | None = None
    declared_input: tuple[int | None, ...] = ()


#: How a message names a file of each format.
_FILE_NAMES: Final = {
    "torchscript": "a TorchScript file",
    "torch-export": "the torch.export program",
    "state-dict": "a state dict",
    "safetensors": "a safetensors file",
    "pickle": "a pickled module",
    "onnx": "the ONNX model",
}
#: The dimensions of an (N, C, H, W) input, as a message names them.
_DIMENSIONS: Final = ("batch", "channels", "height", "width")


def undeclared_shape(loaded: LoadedModel) -> str:
    """Say why ``loaded`` has no input shape to probe: what its file declares, if anything.

    One clause for an error message, such as ``the ONNX model declares its input
    (N, C, H, W) as (?, 1, ?, ?), its height and width dynamic``.
    """
    what = _FILE_NAMES.get(loaded.model_format, f"a {loaded.model_format} file")
    if len(loaded.declared_input) != len(_DIMENSIONS):
        return f"{what} does not declare its input shape"
    shown = ", ".join("?" if d is None else str(d) for d in loaded.declared_input)
    declared = f"{what} declares its input (N, C, H, W) as ({shown})"
    dims = zip(_DIMENSIONS[1:], loaded.declared_input[1:], strict=True)
    dynamic = [name for name, size in dims if size is None]
    if not dynamic:
        return declared
    names = ", ".join(dynamic[:-1]) + " and " + dynamic[-1] if len(dynamic) > 1 else dynamic[0]
    return f"{declared}, its {names} dynamic"


def torch_framework() -> str:
    """Return the framework text of a torch model: ``"torch <version>"``."""
    return f"torch {torch.__version__}"


def first_line(exc: BaseException) -> str:
    """Return the first line of an exception's text (its type name if it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def resolve_callable(spec: str, what: str = "--arch") -> Any:
    """Import ``MODULE:CALLABLE`` (attributes may be dotted) and return the callable.

    The current directory is put on ``sys.path`` so a project's own module imports, and
    torchvision (which the module, or ``transformers``, may import) is made importable
    first (:func:`twinaudit.wire.torchvision_shim.prepare_torchvision`).
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise InputError(f"{what} must be MODULE:CALLABLE, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    prepare_torchvision()
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"cannot import {module_name!r}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise InputError(f"{module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise InputError(f"{spec!r} is not callable")
    return target


def _is_safetensors(path: Path) -> bool:
    """Tell whether a file starts as a safetensors file does (a header length, then ``{``)."""
    with path.open("rb") as handle:
        head = handle.read(9)
    if len(head) < 9:
        return False
    length = int.from_bytes(head[:8], "little")
    return head[8:9] == b"{" and 2 <= length <= _MAX_SAFETENSORS_HEADER


def _zip_kind(path: Path) -> str | None:
    """Return ``"torchscript"``, ``"torch-save"`` or None (not a torch zip archive)."""
    if not zipfile.is_zipfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return None
    if any("/code/" in name or name.endswith("/constants.pkl") for name in names):
        return "torchscript"
    if any(name.endswith("/data.pkl") for name in names):
        return "torch-save"
    return None


def _is_pickle(path: Path) -> bool:
    """Tell whether a file starts with a pickle's protocol opcode (a legacy torch.save)."""
    with path.open("rb") as handle:
        return handle.read(1) == b"\x80"


def _weights_only(path: Path) -> object:
    """``torch.load(path, weights_only=True)``; pickled objects raise ``UnpicklingError``."""
    return torch.load(path, map_location="cpu", weights_only=True)


def _needs_unpickling(exc: pickle.UnpicklingError) -> bool:
    """Tell whether torch refused a weights-only load for the objects the file names."""
    return "Unsupported global" in str(exc)


def _unpickling_reason(exc: BaseException) -> str:
    """Return the line of a refused weights-only load that says why (or the first line)."""
    _, marker, rest = str(exc).partition("WeightsUnpickler error:")
    lines = [line.strip() for line in rest.splitlines() if line.strip()]
    return lines[0] if marker and lines else first_line(exc)


def detect_format(path: Path, arch: str | None) -> str:
    """Return the format of ``path`` (see the module docstring); refuse what none reads."""
    if not path.is_file():
        raise InputError(f"model file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return "onnx"
    if suffix == ".pt2":
        return "torch-export"
    if suffix == ".safetensors" or _is_safetensors(path):
        return "safetensors"
    if arch is not None:
        return "state-dict"
    kind = _zip_kind(path)
    if kind == "torchscript":
        return "torchscript"
    if kind == "torch-save" or _is_pickle(path):
        try:
            content = _weights_only(path)
        except pickle.UnpicklingError as exc:
            if _needs_unpickling(exc):
                return "pickle"
            raise InputError(f"cannot read {str(path)!r}: {_unpickling_reason(exc)}") from None
        except Exception as exc:  # torch raises many types for unreadable files
            raise InputError(f"cannot read {str(path)!r}: {first_line(exc)}") from None
        if isinstance(content, dict):
            raise InputError(
                f"{str(path)!r} holds a state dict: give --arch MODULE:CALLABLE, a callable "
                "returning the module to load it into"
            )
        raise InputError(f"{str(path)!r} holds {type(content).__name__}, not a model")
    return "torchscript"


def load_model(
    path: Path,
    *,
    arch: str | None = None,
    model_format: str | None = None,
    trust_pickle: bool = False,
    threads: int | None = None,
) -> LoadedModel:
    """Load the model file ``path`` in ``model_format`` (None: :func:`detect_format`).

    ``arch`` (``MODULE:CALLABLE``) is required by, and only by, the weights formats.
    ``trust_pickle`` allows the ``pickle`` format. ``threads`` bounds onnxruntime's
    intra-op threads (torch's are the caller's). Every failure is an ``InputError``.
    """
    if model_format is None:
        model_format = detect_format(path, arch)
    elif not path.is_file():
        raise InputError(f"model file {str(path)!r} does not exist")
    if model_format not in FORMATS:
        raise InputError(f"unknown model format {model_format!r}; known: {', '.join(FORMATS)}")
    if (arch is not None) != (model_format in WEIGHTS_FORMATS):
        if arch is None:
            raise InputError(
                f"a {model_format} file holds weights only: give --arch MODULE:CALLABLE, "
                "a callable returning the module to load them into"
            )
        raise InputError(f"--arch is for state dicts and safetensors, not a {model_format} file")
    loaders: dict[str, Callable[[], LoadedModel]] = {
        "torchscript": lambda: _torchscript(path),
        "torch-export": lambda: _torch_export(path),
        "state-dict": lambda: _into_arch(path, arch, _read_state_dict, "state-dict"),
        "safetensors": lambda: _into_arch(path, arch, _read_safetensors, "safetensors"),
        "pickle": lambda: _pickle(path, trust_pickle),
        "onnx": lambda: _onnx(path, threads),
    }
    return loaders[model_format]()


def _torchscript(path: Path) -> LoadedModel:
    try:
        module: torch.nn.Module = torch.jit.load(  # type: ignore[no-untyped-call]
            str(path), map_location="cpu"
        )
    except (RuntimeError, ValueError) as exc:
        raise InputError(
            f"{str(path)!r} is not TorchScript (a state dict needs --arch, a torch.export "
            f"archive ends in .pt2, an ONNX model in .onnx): {first_line(exc)}"
        ) from None
    return LoadedModel(module, "torchscript", torch_framework())


def _image_input(shape: tuple[int | None, ...], what: str) -> tuple[int, int, int] | None:
    """Return the (H, W, C) an (N, C, H, W) input declares (None if any of them is dynamic)."""
    if len(shape) != 4:
        raise ModelMismatchError(
            "input-shape", f"{what} takes a rank-{len(shape)} input, not images (N, C, H, W)"
        )
    check_dims([d for d in shape if d is not None], what + "'s input")  # before any probe
    _, channels, height, width = shape
    if channels is None or height is None or width is None:
        return None
    return (height, width, channels)


def _torch_export(path: Path) -> LoadedModel:
    try:
        program = torch.export.load(path)
        module: torch.nn.Module = program.module()
    except Exception as exc:  # torch raises many types for unreadable archives
        raise InputError(
            f"cannot load the torch.export archive {str(path)!r}: {first_line(exc)}"
        ) from None
    inputs = set(program.graph_signature.user_inputs)
    values = [
        node.meta.get("val")
        for node in program.graph.nodes
        if node.op == "placeholder" and node.name in inputs
    ]
    what = "the torch.export program"
    if len(values) != 1 or not isinstance(values[0], torch.Tensor):
        raise ModelMismatchError("input", f"{what} takes {len(values)} inputs, not one image batch")
    value = values[0]
    if value.dtype != torch.float32:
        raise ModelMismatchError(
            "dtype", f"{what} takes {value.dtype} input; the oracle feeds torch.float32"
        )
    shape = tuple(d if isinstance(d, int) else None for d in value.shape)
    input_shape = _image_input(shape, what)
    return LoadedModel(
        module,
        "torch-export",
        torch_framework(),
        input_shape=input_shape,
        fixed_batch=shape[0],
        declared_input=shape,
    )


def _read_state_dict(path: Path) -> object:
    if _zip_kind(path) == "torchscript":
        raise InputError(f"{str(path)!r} is a TorchScript archive: serve it without --arch")
    try:
        return _weights_only(path)
    except pickle.UnpicklingError as exc:
        if not _needs_unpickling(exc):
            reason = _unpickling_reason(exc)
            raise InputError(f"cannot read a state dict from {str(path)!r}: {reason}") from None
        raise InputError(
            f"{str(path)!r} holds pickled objects, not only tensors (a whole module saved "
            f"with torch.save(model)?): serve it without --arch, with {TRUST_PICKLE_FLAG}"
        ) from None
    except Exception as exc:  # torch raises many types for unreadable files
        message = f"cannot read a state dict from {str(path)!r}: {first_line(exc)}"
        raise InputError(message) from None


def _read_safetensors(path: Path) -> object:
    try:
        safetensors_torch: Any = importlib.import_module("safetensors.torch")
    except ImportError as exc:
        raise InputError(f"safetensors files need the safetensors package: {exc}") from None
    try:
        return safetensors_torch.load_file(path, device="cpu")
    except Exception as exc:  # SafetensorError, OSError, ...
        raise InputError(f"cannot read safetensors from {str(path)!r}: {first_line(exc)}") from None


def _into_arch(
    path: Path, arch: str | None, read: Callable[[Path], object], model_format: str
) -> LoadedModel:
    assert arch is not None
    model = resolve_callable(arch)()
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"{arch!r} returned {type(model).__name__}, not a torch.nn.Module")
    state = read(path)
    if not isinstance(state, dict):
        raise InputError(f"{str(path)!r} holds {type(state).__name__}, not a state dict")
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        text = " ".join(str(exc).split())
        raise InputError(f"the state dict does not fit {arch!r}: {text}") from None
    return LoadedModel(model, model_format, torch_framework())


def _pickle(path: Path, trust_pickle: bool) -> LoadedModel:
    if not trust_pickle:
        raise InputError(
            f"{str(path)!r} is a pickled module (torch.save(model)), and unpickling runs "
            f"whatever code it names: load it only if you trust the file, with "
            f"{TRUST_PICKLE_FLAG} (or save it as TorchScript, torch.export, safetensors or ONNX)"
        )
    if os.getcwd() not in sys.path:  # the module's classes are found as --arch finds them
        sys.path.append(os.getcwd())
    prepare_torchvision()  # the classes may be torchvision's or transformers'
    try:
        model = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # unpickling can raise anything
        raise InputError(
            f"cannot unpickle {str(path)!r} ({type(exc).__name__}: {first_line(exc)}); "
            "the classes it names must be importable"
        ) from None
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"{str(path)!r} holds {type(model).__name__}, not a torch.nn.Module")
    return LoadedModel(model, "pickle", torch_framework())


class OnnxModule(torch.nn.Module):
    """An onnxruntime session as a module: an NCHW float32 batch in, the first output out.

    It has no parameters; what identifies it is its file's digest. A session that
    refuses the input raises ``ValueError`` (the in-process oracles map it to
    ``InputError``).
    """

    def __init__(self, session: Any, input_name: str, output_name: str) -> None:
        """Run ``session``, feeding ``input_name`` and returning ``output_name``."""
        super().__init__()
        self._session = session
        self._input_name = input_name
        self._output_name = output_name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Run the session on ``x`` (float32 NCHW) and return its output as a tensor."""
        feed = {self._input_name: np.ascontiguousarray(x.detach().cpu().numpy())}
        try:
            (out,) = self._session.run([self._output_name], feed)
        except Exception as exc:  # onnxruntime's own exception types
            raise ValueError(first_line(exc)) from None
        return torch.from_numpy(np.array(out))


#: ONNX element types of floating-point tensors (the output must be one).
_ONNX_FLOATS: Final = ("tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)")


def _onnx_dims(dims: object) -> tuple[int | None, ...]:
    """Return an ONNX shape with symbolic or unknown dimensions as None."""
    if not isinstance(dims, list | tuple):
        return ()
    return tuple(d if isinstance(d, int) and d > 0 else None for d in dims)


def _onnx(path: Path, threads: int | None) -> LoadedModel:
    try:
        onnxruntime: Any = importlib.import_module("onnxruntime")
    except ImportError as exc:
        raise InputError(f"ONNX models need the onnxruntime package: {exc}") from None
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    try:
        session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime's own exception types
        raise InputError(f"cannot load the ONNX model {str(path)!r}: {first_line(exc)}") from None
    what = "the ONNX model"
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1:
        names = ", ".join(i.name for i in inputs)
        raise ModelMismatchError("input", f"{what} takes {len(inputs)} inputs ({names}), not one")
    (model_input,) = inputs
    if model_input.type != "tensor(float)":
        raise ModelMismatchError(
            "dtype", f"{what} takes {model_input.type} input; the oracle feeds tensor(float)"
        )
    if outputs[0].type not in _ONNX_FLOATS:
        raise ModelMismatchError(
            "dtype", f"{what}'s first output is {outputs[0].type}, not floating-point"
        )
    shape = _onnx_dims(model_input.shape)
    input_shape = _image_input(shape, what)
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return LoadedModel(
        OnnxModule(session, model_input.name, outputs[0].name),
        "onnx",
        f"onnxruntime {onnxruntime.__version__}",
        digest=digest,
        input_shape=input_shape,
        fixed_batch=shape[0],
        declared_input=shape,
    )
