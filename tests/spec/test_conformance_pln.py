"""Run every case of spec/vectors/pln.json: the protocol logarithm, bit for bit (§10.3.1).

Each batch is read from its JSON alone, as a second implementation would; the file must
be what the builder produces; and the platform's ``log``/``log1p`` must fail many of the
cases (the file's point: an almost-right logarithm does not pass it).
"""

import json
import math
from pathlib import Path

import pytest

from spec.tools import vectors_pln
from spec.tools.vectors_core import render
from twinaudit.protocol.basic_log import pln, pln1m

VECTOR_FILE = Path(__file__).resolve().parents[2] / "spec" / "vectors" / "pln.json"
DOC = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))
FUNCTIONS = {"pln": pln, "pln1m": pln1m}
PLATFORM = {"pln": math.log, "pln1m": lambda q: math.log1p(-q)}


def _pairs(case):
    return zip(case["input"]["x"], case["expected"]["y"], strict=True)


@pytest.mark.parametrize("case", DOC["cases"], ids=lambda c: c["name"])
def test_every_argument_gives_the_expected_bits(case):
    fn = FUNCTIONS[case["kind"]]
    wrong = [x for x, y in _pairs(case) if fn(float.fromhex(x)).hex() != y]
    assert not wrong, f"{len(wrong)} arguments differ, first {wrong[0]}"


def test_the_platform_logarithms_fail_the_file():
    """math.log and math.log1p(-q) instead of pln and pln1m fail hundreds of arguments."""
    failed = total = 0
    for case in DOC["cases"]:
        platform = PLATFORM[case["kind"]]
        for x, y in _pairs(case):
            total += 1
            failed += platform(float.fromhex(x)).hex() != y
    assert total > 9000
    assert failed > 1000, (failed, total)


def test_the_file_is_what_the_builder_writes():
    assert VECTOR_FILE.read_text(encoding="utf-8") == render(vectors_pln.build()), (
        "spec/vectors/pln.json is stale: run python -m spec.tools.vectors_pln and review"
    )
