"""docs/development.md's extras are those of pyproject.toml and the Makefile (issue #44).

The table of extras names, row by row, each extra of ``[project.optional-dependencies]``
and its packages (by distribution name, without version or extras); the sentence above
it names the extras the Makefile installs into ``.venv``; and every package of an extra
is pinned exactly in constraints.txt, as the page says.
"""

from __future__ import annotations

import re
import tomllib

from tests.support.cli_processes import ROOT

DEVELOPMENT = ROOT / "docs" / "development.md"


def _name(requirement: str) -> str:
    """Return a requirement's distribution name, normalised (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _extras() -> dict[str, set[str]]:
    """Return pyproject.toml's extras: name -> its packages' names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {
        extra: {_name(r) for r in requirements}
        for extra, requirements in project["optional-dependencies"].items()
    }


def _documented() -> dict[str, set[str]]:
    """Return the extras table of docs/development.md: extra -> the packages its row names."""
    table: dict[str, set[str]] = {}
    for line in DEVELOPMENT.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 3:
            (extra,) = re.findall(r"`([^`]+)`", cells[0])
            assert extra not in table, f"the extra {extra!r} has two rows"
            table[extra] = {_name(p) for p in re.findall(r"`([^`]+)`", cells[1])}
    return table


def test_the_extras_table_names_every_extra_and_its_packages():
    documented, declared = _documented(), _extras()
    assert documented.keys() == declared.keys()
    for extra, packages in declared.items():
        assert documented[extra] == packages, extra


def test_the_extras_the_page_says_the_venv_holds_are_the_makefile_s():
    installed = re.search(r"-e '\.\[([a-z,]+)\]'", (ROOT / "Makefile").read_text())
    said = re.search(r"editable mode with the extras\s+`([a-z,]+)`", DEVELOPMENT.read_text())
    assert installed and said
    assert said.group(1).split(",") == installed.group(1).split(",")
    assert set(installed.group(1).split(",")) <= _extras().keys()


def test_every_package_of_an_extra_is_pinned_exactly():
    pinned = {
        _name(line.split("==")[0])
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    for extra, packages in _extras().items():
        assert packages <= pinned, (extra, packages - pinned)
