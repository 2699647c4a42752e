"""The owner's item-kind table (owner/kinds.py): one handler per kind, the CLI only parses."""

from __future__ import annotations

import ast
import inspect as pyinspect
from pathlib import Path

import numpy as np
import pytest

from twinaudit.cli import cmd_owner
from twinaudit.owner import kinds
from twinaudit.owner.kinds import (
    KINDS,
    ImageOptions,
    InspectOptions,
    MarkOptions,
    item_kind,
    kind_of_input,
)
from twinaudit.owner.vault import Vault
from twinaudit.protocol.errors import InputError
from twinaudit.protocol.items import ITEM_KINDS


def test_the_table_has_one_handler_per_item_kind_of_the_protocol():
    assert set(KINDS) == set(ITEM_KINDS)
    for name, kind in KINDS.items():
        assert kind.name == name
        assert not pyinspect.isabstract(type(kind)), name
        assert item_kind(name) is kind


def test_an_unknown_kind_is_a_typed_error():
    with pytest.raises(InputError, match="unknown item kind 'audio'"):
        item_kind("audio")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("texts.jsonl", "text"),
        ("TEXTS.CSV", "text"),
        ("lines.txt", "text"),
        ("images", "image"),
        ("images.npz", "image"),
        ("train-images-idx3-ubyte.gz", "image"),
    ],
)
def test_the_input_suffix_picks_the_kind(name, kind):
    assert kind_of_input(Path(name)) == kind


@pytest.mark.parametrize(
    ("kind", "option", "value"),
    [
        ("text", "labels", Path("labels.csv")),
        ("text", "steps", 5),
        ("text", "captions", Path("captions.csv")),
        ("image", "field", "body"),
        ("image", "min_similarity", 0.9),
        ("image", "captions", Path("captions.csv")),
        ("captioned-image", "drop_unmarkable", True),
        ("captioned-image", "endpoint", "http://127.0.0.1:1/v1"),
    ],
)
def test_an_option_of_another_kind_is_refused_by_its_flag(kind, option, value):
    flag = "--" + option.replace("_", "-")
    with pytest.raises(InputError, match=f"^{flag} does not apply to --kind {kind}$"):
        KINDS[kind].check_mark_options({option: value})


def test_options_at_their_defaults_and_the_kinds_own_pass():
    KINDS["text"].check_mark_options({"labels": None, "min_similarity": 0.95, "field": "t"})
    KINDS["image"].check_mark_options({"min_similarity": 0.85, "labels": Path("l.csv")})
    KINDS["captioned-image"].check_mark_options({"captions": Path("c.csv"), "steps": 3})


def test_the_cli_does_not_branch_on_the_item_kind():
    """No comparison in cmd_owner names an item kind: the table decides."""
    tree = ast.parse(Path(pyinspect.getfile(cmd_owner)).read_text(encoding="utf-8"))
    compared = [
        node.value
        for compare in ast.walk(tree)
        if isinstance(compare, ast.Compare)
        for node in ast.walk(compare)
        if isinstance(node, ast.Constant) and node.value in ITEM_KINDS
    ]
    assert compared == []


def test_image_kind_marks_publishes_and_inspects_through_the_table(tmp_path):
    """A tiny image vault made, published and inspected by the handlers alone."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(6, 8, 8, 1), dtype=np.uint8)
    source = tmp_path / "images.npy"
    np.save(source, images)
    kind = KINDS["image"]
    options = MarkOptions(
        input=source,
        out=tmp_path / "vault",
        marker="bernoulli",
        secret=b"\x01" * 32,
        show_progress=False,
        image=ImageOptions(epsilon=4),
    )
    lines = kind.mark(options)
    assert len(lines) == 1
    assert lines[0].startswith(f"marked 6 pairs into {tmp_path / 'vault'}")
    vault = Vault.open(tmp_path / "vault")
    assert vault.item_kind == "image"
    with pytest.raises(InputError, match="--input applies to a text vault"):
        kind.publish(vault, tmp_path / "pub", original=source, show=False)
    inspection = kind.inspect(vault, InspectOptions(input=source, distance_pairs=0))
    assert inspection.holds
    assert inspection.report.to_value()["epsilon_check"]["holds"] is True
    with pytest.raises(InputError, match="--captions applies to a captioned-image vault"):
        kind.inspect(vault, InspectOptions(captions=tmp_path / "c.csv"))


def test_text_kind_refuses_inspect_options_that_read_originals(tmp_path):
    with pytest.raises(InputError, match="--sheet does not apply to a text vault"):
        KINDS["text"].inspect(None, InspectOptions(sheet=tmp_path / "s.png"))  # type: ignore[arg-type]


def test_captioned_kind_needs_captions_to_mark_and_to_inspect_originals(tmp_path):
    kind = KINDS["captioned-image"]
    with pytest.raises(InputError, match="needs --captions"):
        kind.mark(MarkOptions(input=tmp_path, out=tmp_path / "v"))
    with pytest.raises(InputError, match="with --input needs --captions"):
        kind.inspect(None, InspectOptions(input=tmp_path))  # type: ignore[arg-type]


def test_the_module_docstring_names_every_kind():
    assert kinds.__doc__ is not None
    for name in KINDS:
        assert f"``{name}``" in kinds.__doc__
