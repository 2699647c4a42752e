"""One error taxonomy (spec §2.2): every error of every role is in protocol/errors.py."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from twinaudit.protocol import errors

ROOT = Path(__file__).resolve().parents[2]
#: The folders of the installed package (twinaudit/<role> links to them).
PACKAGE_FOLDERS = (
    "protocol",
    "wire",
    "owner",
    "verifier",
    "practitioner",
    "witness",
    "twinaudit/cli",
)
TAXONOMY = ROOT / "protocol" / "errors.py"


def _taxonomy_classes() -> dict[str, type[errors.TwinauditError]]:
    return {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, errors.TwinauditError)
    }


def _base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def test_no_module_outside_the_taxonomy_defines_a_twinaudit_error():
    known = set(_taxonomy_classes())
    outside = []
    for folder in PACKAGE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == TAXONOMY:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and _base_names(node) & known:
                    outside.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert outside == []


def test_every_code_is_named_in_spec_section_2_2():
    spec = (ROOT / "spec" / "protocol.md").read_text(encoding="utf-8")
    section = spec[spec.index("### 2.2 Error codes") : spec.index("### 2.3 ")]
    named = set(re.findall(r"`([a-z][a-z-]+)`", section))
    codes = {cls.code for cls in _taxonomy_classes().values()} - {"error"}  # the abstract base
    assert codes - named == set()
    assert {"claim-busy", "vault-integrity", "model-mismatch"} <= codes


def test_the_moved_errors_keep_their_codes_and_messages(tmp_path):
    assert errors.ClaimBusyError("x").code == errors.ClaimsChangedError("x").code == "claim-busy"
    assert errors.UnknownRecordError("x").code == errors.UnknownClaimError("x").code == "not-found"
    assert errors.ReplayedRequestError("x").code == "invalid-state"
    escrowed = errors.RootAlreadyEscrowedError(b"\x01" * 32, 4)
    assert escrowed.code == "invalid-state" and "as record 4; a root is escrowed once" in str(
        escrowed
    )
    limited = errors.RateLimitedError("10.0.0.1", 5, 0.5, 2.0)
    assert (limited.code, limited.what, limited.size, limited.limit) == (
        "limit-exceeded",
        "escrow commits",
        6,
        5,
    )
    assert str(limited) == (
        "escrow rate limit reached for 10.0.0.1 (5 at once, 0.5/s after that); retry in 2.0 s"
    )
    full = errors.VaultStorageError(tmp_path, "write chunk 3", OSError(28, "No space left"))
    assert full.code == "vault-storage" and "could not write chunk 3: the disk is full" in str(full)
    damaged = errors.VaultIntegrityError(tmp_path, "manifest.msgpack", "is missing")
    assert damaged.code == "vault-integrity" and damaged.file == "manifest.msgpack"
    assert errors.ModelMismatchError("dtype", "x").diagnostics() == "[model-mismatch] dtype: x"
    assert errors.ParaphraserError("unreachable", "x").code == "paraphraser-failed"
