"""The code, the spec document and every vector file agree on the spec version."""

import json
import re
from pathlib import Path

import pytest

from twinaudit.protocol import SPEC_VERSION
from twinaudit.protocol.errors import VersionError
from twinaudit.protocol.versioning import require_supported

SPEC = Path(__file__).resolve().parents[2] / "spec"


def test_spec_document_declares_the_implemented_version():
    text = (SPEC / "protocol.md").read_text(encoding="utf-8")
    match = re.search(r"^Spec-Version: (\S+)$", text, re.MULTILINE)
    assert match and match.group(1) == SPEC_VERSION


def test_spec_document_has_no_unmerged_placeholders():
    text = (SPEC / "protocol.md").read_text(encoding="utf-8")
    assert not re.search(r"^[A-Z]+_SECTION$", text, re.MULTILINE)


@pytest.mark.parametrize("path", sorted((SPEC / "vectors").glob("*.json")), ids=lambda p: p.name)
def test_every_vector_file_has_the_version_and_a_conformance_test(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["spec_version"] == SPEC_VERSION
    assert doc["topic"] == path.stem
    assert doc["cases"], "a vector file without cases tests nothing"
    for case in doc["cases"]:
        assert ("expected" in case) == case["valid"] and ("error" in case) != case["valid"]
    tests_dir = Path(__file__).resolve().parent  # tests/spec, beside the conformance tests
    runners = [
        p
        for p in tests_dir.glob("test_conformance_*.py")
        if f'"{path.stem}' in p.read_text(encoding="utf-8")
        or f"/{path.name}" in p.read_text(encoding="utf-8")
        or f"{path.stem}.json" in p.read_text(encoding="utf-8")
    ]
    assert runners, f"no conformance test runs {path.name}"


@pytest.mark.parametrize("bad", ["0.0", "1.0", "", None, 0.1])
def test_unknown_versions_are_refused(bad):
    with pytest.raises(VersionError):
        require_supported(bad)
    assert require_supported(SPEC_VERSION) == SPEC_VERSION
