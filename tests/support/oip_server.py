"""A real MLServer (Open Inference Protocol, REST and gRPC) on 127.0.0.1, for tests.

:func:`mlserver_process` writes a model repository of memorisers
(:mod:`tests.support.oip_runtime`) and starts ``mlserver start`` on it as a separate
process, with its own HTTP and gRPC ports, no metrics server and inference in the
server process (no worker pool). It waits until every model is ready and stops the
process it started at the end. This module does not import :mod:`mlserver` (see
:mod:`tests.support.oip_runtime`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The repository root (on the MLServer process's import path, for the runtime).
ROOT = Path(__file__).resolve().parents[2]
#: How long MLServer may take to start and load its models, in seconds.
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class OipModel:
    """One model of the repository: a memoriser of ``images`` (uint8 (N, H, W, C))."""

    name: str
    images: np.ndarray[Any, Any]
    labels: np.ndarray[Any, Any]
    tau: float = 20.0
    answers: str = "probabilities"
    dtype: str = "float64"
    layout: str = "nhwc"
    fail_first: int = 0
    #: Metadata shapes of the input and output tensors (default: from the layout).
    input_shape: list[int] | None = None
    output_shape: list[int] | None = None
    version: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OipServer:
    """A running MLServer: its REST and gRPC addresses."""

    http: str
    grpc: str
    root: Path

    def rest(self, model: str, query: str = "") -> str:
        """Return the ``oip+http://`` oracle address of ``model``."""
        return f"oip+http://{self.http}/v2/models/{model}" + (f"?{query}" if query else "")

    def grpc_address(self, model: str, query: str = "") -> str:
        """Return the ``oip+grpc://`` oracle address of ``model``."""
        return f"oip+grpc://{self.grpc}/{model}" + (f"?{query}" if query else "")


def memoriser_logits(
    x: np.ndarray[Any, Any], train: np.ndarray[Any, Any], labels: np.ndarray[Any, Any], tau: float
) -> np.ndarray[Any, Any]:
    """Return (N, 10) float64 logits of flattened images ``x`` (see :mod:`.oip_runtime`)."""
    d = ((x[:, None, :] - train[None, :, :]) ** 2).sum(-1)
    v = -d / tau
    out = np.full((x.shape[0], 10), -1e4)
    for c in range(10):
        mask = labels == c
        if mask.any():
            vv = v[:, mask]
            top = vv.max(1, keepdims=True)
            out[:, c] = (top + np.log(np.exp(vv - top).sum(1, keepdims=True)))[:, 0]
    return out


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tensor_shapes(model: OipModel) -> tuple[list[int], list[int]]:
    h, w, c = (int(s) for s in model.images.shape[1:])
    layouts = {"nhwc": [-1, h, w, c], "nchw": [-1, c, h, w], "flat": [-1, h * w * c]}
    inputs = model.input_shape or layouts[model.layout]
    outputs = model.output_shape or ([-1] if model.answers == "labels" else [-1, 10])
    return inputs, outputs


def write_repository(root: Path, models: list[OipModel], http: int, grpc: int) -> None:
    """Write ``settings.json`` and one folder per model (``model-settings.json``, model file)."""
    settings = {
        "debug": False,
        "host": "127.0.0.1",
        "http_port": http,
        "grpc_port": grpc,
        "metrics_endpoint": None,
        "parallel_workers": 0,
        "load_models_at_startup": True,
        "metrics_dir": str(root / ".metrics"),
        "environments_dir": str(root / ".envs"),
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "settings.json").write_text(json.dumps(settings))
    for model in models:
        folder = root / model.name
        folder.mkdir()
        np.savez(
            folder / "model.npz",
            images=model.images.astype(np.float64) / 255.0,
            labels=model.labels,
            tau=model.tau,
        )
        inputs, outputs = _tensor_shapes(model)
        out_type = (
            "INT64" if model.answers == "labels" else {"float64": "FP64"}.get(model.dtype, "FP32")
        )
        parameters: dict[str, Any] = {
            "uri": str(folder / "model.npz"),
            "extra": {
                "answers": model.answers,
                "dtype": model.dtype,
                "layout": model.layout,
                "fail_first": model.fail_first,
                **model.extra,
            },
        }
        if model.version:
            parameters["version"] = model.version
        (folder / "model-settings.json").write_text(
            json.dumps(
                {
                    "name": model.name,
                    "implementation": "tests.support.oip_runtime.Memoriser",
                    "platform": "numpy-memoriser",
                    "inputs": [{"name": "images", "datatype": "FP32", "shape": inputs}],
                    "outputs": [{"name": model.answers, "datatype": out_type, "shape": outputs}],
                    "parameters": parameters,
                }
            )
        )


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def mlserver_process(root: Path, models: list[OipModel]) -> Iterator[OipServer]:
    """Serve ``models`` from a repository in ``root`` with a real MLServer; yield its addresses."""
    http, grpc = free_port(), free_port()
    write_repository(root, models, http, grpc)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (root / "mlserver.log").open("w")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlserver"), "start", str(root)],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        urls = [f"http://127.0.0.1:{http}/v2/models/{m.name}/ready" for m in models]
        while not all(_ready(url) for url in urls):
            if process.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise AssertionError(
                    "MLServer did not start: " + (root / "mlserver.log").read_text()[-3000:]
                )
            time.sleep(0.25)
        yield OipServer(f"127.0.0.1:{http}", f"127.0.0.1:{grpc}", root)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()
