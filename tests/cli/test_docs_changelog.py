"""docs/CHANGELOG.md is kept by version (Keep a Changelog) and agrees with pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from datetime import date
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
_RELEASE = re.compile(r"\[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})")


def changelog_errors(text: str, version: str) -> list[str]:
    """Return what is wrong with a changelog ``text`` for the package ``version``."""
    errors = []
    headings = re.findall(r"^## (\[.*)$", text, flags=re.MULTILINE)
    if not headings or headings[0] != "[Unreleased]":
        errors.append("the first version heading is not ## [Unreleased]")
    releases = []
    for heading in headings[1:]:
        match = _RELEASE.fullmatch(heading)
        if match is None:
            errors.append(f"## {heading} is not ## [X.Y.Z] - YYYY-MM-DD")
            continue
        numbers = tuple(int(part) for part in match.group(1, 2, 3))
        releases.append((numbers, date.fromisoformat(match.group(4))))
    if releases != sorted(releases, reverse=True) or len(set(releases)) != len(releases):
        errors.append("the releases are not newest first, each once")
    if releases and ".".join(map(str, releases[0][0])) != version:
        errors.append(f"the newest release is not the package's version {version}")
    for block in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        if not block.startswith("["):
            continue
        for section in re.findall(r"^### (.*)$", block, flags=re.MULTILINE):
            if section not in SECTIONS:
                errors.append(f"### {section} is not one of {', '.join(SECTIONS)}")
    return errors


def _version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def test_the_changelog_is_by_version_and_names_the_package_version():
    text = (ROOT / "docs" / "CHANGELOG.md").read_text(encoding="utf-8")
    assert changelog_errors(text, _version()) == []


GOOD = "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- x\n\n## [0.2.0] - 2027-02-01\n\n### Fixed\n\n- y\n\n## [0.1.0] - 2027-01-01\n"  # noqa: E501


@pytest.mark.parametrize(
    ("text", "version", "error"),
    [
        (GOOD, "0.2.0", None),
        ("## [Unreleased]\n\n### Added\n", "0.1.0", None),  # nothing released yet
        (GOOD, "0.3.0", "the newest release is not the package's version 0.3.0"),
        (GOOD.replace("## [Unreleased]\n", ""), "0.2.0", "not ## [Unreleased]"),
        (GOOD.replace("[0.1.0] - 2027-01-01", "[0.1.0]"), "0.2.0", "is not ## [X.Y.Z]"),
        (GOOD.replace("[0.1.0]", "[0.3.0]"), "0.2.0", "newest first"),
        (GOOD.replace("### Fixed", "### Improved"), "0.2.0", "### Improved is not one of"),
    ],
)
def test_what_the_check_refuses(text, version, error):
    errors = changelog_errors(text, version)
    if error is None:
        assert errors == []
    else:
        assert any(error in found for found in errors), errors
