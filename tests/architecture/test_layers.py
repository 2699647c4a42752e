"""The layer contracts of pyproject.toml hold, and a deliberate violation breaks them.

`make lint` runs ``lint-imports`` with the contracts of ``[tool.importlinter]``
(docs/architecture.md draws the layers). Here the same command runs on the repository,
then on a copy of its Python files with one forbidden import added per contract.
"""

import os
import shutil
import subprocess
import sys
import tomllib
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "importlinter"
]
PACKAGES = CONFIG["root_packages"]
CONTRACTS = {contract["id"]: contract["name"] for contract in CONFIG["contracts"]}

#: One import per contract that only that contract's rule forbids, and the package
#: (dotted) whose new module ``deliberate_violation`` makes it.
VIOLATIONS = {
    "roles": ("twinaudit.owner", "import twinaudit.verifier.claim\n"),
    "tooling": ("twinaudit.cli", "import demo.run\n"),
    "protocol-pure": ("twinaudit.protocol.claim", "import grpc\n"),
    "no-torch-for-the-arbiter": ("twinaudit.verifier.escrow", "import torch\n"),
    "one-root": ("tests", "import protocol.errors\n"),
}

#: Imports the roles contract forbids, each in a module of the first package.
ROLE_VIOLATIONS = [
    ("twinaudit.protocol", "import twinaudit.wire.transport\n"),
    ("twinaudit.wire", "import twinaudit.verifier.claim\n"),
    ("twinaudit.owner", "import twinaudit.cli.main\n"),
    ("twinaudit.verifier", "import twinaudit.owner.vault\n"),
    ("twinaudit.practitioner", "import twinaudit.verifier.oracles.held\n"),
    ("twinaudit.verifier.oracles", "import twinaudit.practitioner.torch_oracle\n"),
    ("twinaudit.witness", "import twinaudit.verifier.escrow.store\n"),
    ("twinaudit.verifier", "import twinaudit.witness.cosigner\n"),
]


def _lint_imports(cwd):
    command = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(command), "--no-cache", "--no-logo", "--config", str(ROOT / "pyproject.toml")],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


def _not_python(folder, names):
    def skip(name):
        if name == "__pycache__":
            return True
        return not name.endswith(".py") and not (Path(folder) / name).is_dir()

    return [name for name in names if skip(name)]


def _copy_python_files(target):
    """Copy the packages' Python files, the roles' folders as the links lead (files, not links)."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, target / package, ignore=_not_python)


def test_every_contract_is_kept():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in CONTRACTS.values():
        assert f"{name} KEPT" in result.stdout, result.stdout


def test_every_contract_has_a_violation_case():
    assert set(VIOLATIONS) == set(CONTRACTS)


def test_the_roles_are_the_installed_roots_subpackages():
    """Each role's folder is reached through the root: twinaudit/<role> links to it."""
    for role in ("protocol", "wire", "owner", "verifier", "practitioner", "witness"):
        link = ROOT / "twinaudit" / role
        assert link.is_symlink(), link
        assert link.resolve() == (ROOT / role).resolve()


def _assert_breaks(tmp_path, contract, package, line):
    """A new module of ``package`` holding ``line`` breaks ``contract``; return the run."""
    _copy_python_files(tmp_path)
    clean = _lint_imports(tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    module = tmp_path.joinpath(*package.split("."), "deliberate_violation.py")
    module.write_text(line, encoding="utf-8")
    broken = _lint_imports(tmp_path)
    assert broken.returncode != 0
    assert f"{CONTRACTS[contract]} BROKEN" in broken.stdout, broken.stdout
    assert f"{package}.deliberate_violation" in broken.stdout
    return broken


@pytest.mark.parametrize("contract", sorted(VIOLATIONS))
def test_a_deliberate_violation_fails(tmp_path, contract):
    package, line = VIOLATIONS[contract]
    _assert_breaks(tmp_path, contract, package, line)


@pytest.mark.parametrize(("package", "line"), ROLE_VIOLATIONS)
def test_each_layer_and_role_boundary_is_kept(tmp_path, package, line):
    """A lower layer importing a higher one, or a role importing another, breaks ``roles``."""
    _assert_breaks(tmp_path, "roles", package, line)


def test_bench_does_not_import_the_test_package(tmp_path):
    """bench/ uses public modules only (issue #21): ``tests`` is its sibling, not below it."""
    broken = _assert_breaks(tmp_path, "tooling", "bench", "import tests.support.data\n")
    assert "bench is not allowed to import tests" in broken.stdout, broken.stdout


def test_the_top_level_packages_import_one_another_without_a_cycle():
    sys.path.insert(0, str(ROOT))
    try:
        graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    depends: dict[str, set[str]] = {package: set() for package in PACKAGES}
    for module in graph.modules:
        source = module.split(".")[0]
        for imported in graph.find_modules_directly_imported_by(module):
            target = imported.split(".")[0]
            if target != source:
                depends[source].add(target)
    try:
        order = list(TopologicalSorter(depends).static_order())
    except CycleError as error:
        pytest.fail(f"package-level cycle: {error.args[1]}")
    assert order.index("twinaudit") < order.index("demo") < order.index("evaluation")


def _ruff_on(filename, source):
    """Run ``ruff check`` on ``source`` as if it were the repository file ``filename``."""
    command = Path(sys.executable).parent / "ruff"
    return subprocess.run(
        [str(command), "check", "--output-format", "concise", "--stdin-filename", filename, "-"],
        cwd=ROOT,
        input=source,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


PRIVATE_USES = {
    "an imported private name": (
        '"""x."""\n\nfrom twinaudit.protocol.encoding import _walk\n\nprint(_walk)\n'
    ),
    "a private attribute": (
        '"""x."""\n\nimport twinaudit.protocol.encoding as enc\n\nprint(enc._walk)\n'
    ),
}


@pytest.mark.parametrize("package", ["bench", "evaluation"])
@pytest.mark.parametrize("use", sorted(PRIVATE_USES))
def test_bench_and_evaluation_use_public_names_only(package, use):
    """`make lint` (ruff: PLC2701, SLF001) refuses a private name in bench/ and evaluation/."""
    source = PRIVATE_USES[use]
    broken = _ruff_on(f"{package}/deliberate_violation.py", source)
    assert broken.returncode != 0
    assert "_walk" in broken.stdout, broken.stdout
    # The same lines elsewhere (the packages' own tests may reach inside) pass the rule.
    assert _ruff_on("tests/deliberate_violation.py", source).returncode == 0


def test_a_new_subpackage_of_the_root_must_be_placed_in_a_layer(tmp_path):
    """The roles contract is exhaustive: a module of ``twinaudit`` in no layer breaks it."""
    _assert_breaks(tmp_path, "roles", "twinaudit", '"""A new part of the package."""\n')
