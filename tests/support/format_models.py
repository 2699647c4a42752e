"""Model files in every format ``oracle serve`` loads, and models that do not fit (tests only).

:func:`write_formats` saves one seeded :class:`~demo.tiny_cnn.TinyCNN` as
TorchScript, ``torch.export`` archives (dynamic and fixed batch), a state dict,
safetensors, a pickled whole module and ONNX (dynamic and fixed batch). The ONNX
graphs are built with the ``onnx`` helper API from the same weights (Conv, Relu,
MaxPool, Flatten, Gemm: the CNN's own layers), so every file computes the same
function. Nothing is downloaded.

The modules below (each an ``--arch`` entry point) break one rule of what a
classifier oracle serves, for the refusals at ``serve`` time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from demo.tiny_cnn import TinyCNN

#: The input shape of :class:`TinyCNN`, as ``--input-shape`` spells it.
SHAPE = "28,28,1"


def tiny_cnn(seed: int = 1) -> TinyCNN:
    """Return a TinyCNN with weights from ``seed`` (global RNG untouched), in eval mode."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyCNN().eval()


def tiny_cnn_onnx(model: TinyCNN, path: Path, batch: str | int = "N") -> Path:
    """Write ``model`` as an ONNX graph (input ``x`` (batch, 1, 28, 28)); return ``path``."""
    from onnx import TensorProto, helper, numpy_helper

    weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny-cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    _save_onnx(graph, path)
    return path


def _save_onnx(graph: object, path: Path) -> None:
    from onnx import checker, helper, save

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime reads
    checker.check_model(model)
    save(model, str(path))


def onnx_linear(
    path: Path, *, input_type: str = "float", output_type: str = "float", inputs: int = 1
) -> Path:
    """Write a linear (N, 1, 28, 28) → (N, 10) ONNX model with the given element types.

    ``input_type``/``output_type`` are ``"float"``, ``"double"`` or (output) ``"int64"``
    (an ArgMax); ``inputs=2`` adds a second input added to the first.
    """
    from onnx import TensorProto, helper, numpy_helper

    types = {"float": TensorProto.FLOAT, "double": TensorProto.DOUBLE}
    weight = np.random.default_rng(0).normal(0, 0.05, (28 * 28, 10)).astype(np.float32)
    x = helper.make_tensor_value_info("x", types[input_type], ["N", 1, 28, 28])
    feeds = [x]
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT)]
    if inputs == 2:
        feeds.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 1, 28, 28]))
        nodes.append(helper.make_node("Add", ["xf", "z"], ["xs"]))
    else:
        nodes.append(helper.make_node("Identity", ["xf"], ["xs"]))
    nodes += [
        helper.make_node("Flatten", ["xs"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "W"], ["logits"]),
    ]
    if output_type == "int64":
        nodes.append(helper.make_node("ArgMax", ["logits"], ["y"], axis=1, keepdims=1))
        y = helper.make_tensor_value_info("y", TensorProto.INT64, ["N", 1])
    else:
        nodes.append(helper.make_node("Cast", ["logits"], ["y"], to=types[output_type]))
        y = helper.make_tensor_value_info("y", types[output_type], ["N", 10])
    graph = helper.make_graph(
        nodes, "linear", feeds, [y], initializer=[numpy_helper.from_array(weight, "W")]
    )
    _save_onnx(graph, path)
    return path


def write_formats(directory: Path, model: TinyCNN) -> dict[str, Path]:
    """Save ``model`` in every format; return the files by name."""
    files = {
        "torchscript": directory / "model.ts",
        "torch-export": directory / "model.pt2",
        "torch-export fixed batch": directory / "fixed.pt2",
        "state-dict": directory / "weights.pt",
        "safetensors": directory / "weights.safetensors",
        "pickle": directory / "whole.pt",
        "onnx": directory / "model.onnx",
        "onnx fixed batch": directory / "fixed.onnx",
    }
    torch.jit.script(model).save(str(files["torchscript"]))
    batch = torch.export.Dim("batch")
    dynamic = torch.export.export(model, (torch.zeros(2, 1, 28, 28),), dynamic_shapes=({0: batch},))
    torch.export.save(dynamic, files["torch-export"])
    torch.export.save(
        torch.export.export(model, (torch.zeros(1, 1, 28, 28),)), files["torch-export fixed batch"]
    )
    torch.save(model.state_dict(), files["state-dict"])
    from safetensors.torch import save_file

    save_file(model.state_dict(), str(files["safetensors"]))
    torch.save(model, files["pickle"])
    tiny_cnn_onnx(model, files["onnx"])
    tiny_cnn_onnx(model, files["onnx fixed batch"], batch=1)
    return files


class _Head(nn.Module):
    """A linear head on 28×28×1 images; subclasses change what it answers."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.fc = nn.Linear(28 * 28, classes)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))


class ReturnsTuple(_Head):
    """Answers ``(logits, features)``, as many models with auxiliary outputs do."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.logits(x), x


class ReturnsMaps(_Head):
    """Answers (N, classes, 1, 1), a convolutional head left unflattened."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x)[:, :, None, None]


class OneAtATime(_Head):
    """Flattens the whole batch into one row: only a batch of one image works."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.reshape(1, -1))


class ReturnsLabels(_Head):
    """Answers the top class (int64), not logits."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x).argmax(dim=1, keepdim=True)


class ReturnsNan(_Head):
    """Answers NaN logits."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x) * float("nan")


class OneClass(_Head):
    """A one-class head."""

    def __init__(self) -> None:
        super().__init__(classes=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x)


class HalfPrecision(_Head):
    """float16 weights: a float32 image is refused."""

    def __init__(self) -> None:
        super().__init__()
        self.half()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x)


class Float64Input(nn.Module):
    """A module exported with a float64 example input (``torch.export`` keeps the dtype)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(28 * 28, 10, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))


class AnySize(nn.Module):
    """A grey-image classifier of any height and width (a convolution, then global pooling).

    Exported with dynamic height and width, its file declares no image size.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1)
        return self.fc(pooled.flatten(1))


def onnx_export(model: nn.Module, path: Path, dynamic: tuple[int, ...] = (0,)) -> Path:
    """Write ``model`` with ``torch.onnx.export``, its default exporter, as a practitioner would.

    The example input is two 28×28 grey images; ``dynamic`` names the dimensions of the
    (N, C, H, W) input left dynamic (the batch by default; none: every size fixed).
    """
    names = {0: "batch", 2: "height", 3: "width"}
    shapes = ({d: torch.export.Dim(names[d]) for d in dynamic},) if dynamic else None
    torch.onnx.export(
        model.eval(), (torch.zeros(2, 1, 28, 28),), str(path), dynamic_shapes=shapes, verbose=False
    )
    return path
