"""docs/practitioner.md's formats table: each "saved with" line writes what its row serves.

Issue #44: the table's commands ran against files the tests wrote their own way, so
a saving line that fails in the project's environment (``torch.onnx.export`` without
onnxscript) went unnoticed. Here each torch row's Python is run as written, on the
tiny CNN with the example batch the page names, and the row's ``oracle serve`` command
builds its oracle from the file it wrote, in-process (nothing is served): the file
loads in the format the row says, and the model is probed at 28×28×1 with 10 classes.
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.support.cli_processes import ROOT

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")  # the formats extra; its onnxscript is needed, not skipped

import safetensors.torch  # noqa: E402

from tests.support import format_models as fm  # noqa: E402
from twinaudit.cli import cmd_oracle  # noqa: E402
from twinaudit.cli.main import build_parser  # noqa: E402

PRACTITIONER = ROOT / "docs" / "practitioner.md"
#: The page's stand-in for a user's architecture, and the test's (the tiny CNN's weights).
ARCH = ("mypackage.models:make_net", "tests.support.docs_world:make_net")


def _rows() -> list[tuple[str, str, str]]:
    """Return the formats table's torch rows: (format, the line saving it, the serve command)."""
    rows = []
    for line in PRACTITIONER.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not line.startswith("| "):
            continue
        saved, served = re.findall(r"`([^`]+)`", cells[1]), re.findall(r"`([^`]+)`", cells[2])
        if saved and saved[0].startswith(("torch.", "safetensors.")) and served:
            rows.append((cells[0], saved[0], served[0]))
    return rows


def test_the_table_has_a_saving_line_for_every_torch_format():
    assert [row[0] for row in _rows()] == [
        "TorchScript",
        "`torch.export`, dynamic batch",
        "`torch.export`, fixed batch",
        "state dict",
        "safetensors",
        "pickled module",
        "ONNX",
    ]


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning")
@pytest.mark.parametrize(("name", "saved", "served"), _rows(), ids=[r[0] for r in _rows()])
def test_a_saving_line_writes_what_its_row_serves(name, saved, served, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    # the page's example: a model of 28×28 grey images and an example batch of two
    scope = {"torch": torch, "safetensors": safetensors, "model": fm.tiny_cnn()}
    scope["x"] = torch.zeros(2, 1, 28, 28)
    exec(saved, scope)  # the documentation's own line, run as a reader would
    words = shlex.split(served.replace(*ARCH))
    args = build_parser().parse_args([*words[1:], "--threads", "1"])
    assert args.model.is_file(), (name, saved)
    oracle = cmd_oracle.make_oracle(args)
    assert (oracle.info.input_shape, oracle.info.n_classes) == ((28, 28, 1), 10), name
