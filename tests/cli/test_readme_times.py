"""The README's times are measured: it quotes the latest ``python -m bench readme`` record.

Issue #44 item 3: the README said ``make demo`` took "about 6 minutes on 2 cores" where two
runs measured 21 CPU-minutes. Its times now come from ``bench/bench_readme.py``, which
appends a record to ``docs/results-data/readme-times.jsonl``; this test fails when the
README does not quote the latest record's figures word for word, or states a time the
record does not give.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.bench_readme import RECORDS, latest_record, quick_start_lines, readme_phrases

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: A time as the README states one: "12.5 minutes", "21.3 CPU-minutes", "five minutes".
TIME = re.compile(
    r"\b(?:\d+(?:\.\d+)?|one|two|three|four|five|six|seven|eight|nine|ten) (?:CPU-)?minutes?\b"
)


def _readme() -> str:
    return " ".join(README.read_text(encoding="utf-8").split())


def test_the_readme_quotes_the_latest_timing_record():
    record = latest_record()
    assert record.get("demo") and record.get("quick_start") and record.get("setup"), (
        f"the latest record of {RECORDS.name} must time the set-up, the demo and the quick start"
    )
    readme = _readme()
    for phrase in readme_phrases(record):
        assert phrase in readme, f"README.md does not quote {phrase!r} from {RECORDS.name}"


def test_the_readme_states_no_unmeasured_time():
    readme = _readme()
    quoted = set(TIME.findall(readme))
    measured = {time for phrase in readme_phrases(latest_record()) for time in TIME.findall(phrase)}
    assert quoted <= measured, f"times in README.md no record gives: {sorted(quoted - measured)}"


def test_the_benchmark_reads_the_readme_s_quick_start():
    lines = quick_start_lines()
    assert lines[0].startswith(". .venv/bin/activate")
    assert any(line.startswith("twinaudit owner claim") for line in lines)
    assert lines[-1].startswith("kill ")
