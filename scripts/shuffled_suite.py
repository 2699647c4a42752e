"""Run the whole test suite in shuffled orders and record each run (issue #44 item 5).

``python scripts/shuffled_suite.py --runs 5`` runs ``pytest -p randomly`` once per seed
(``--seeds 11,12`` names them; by default seeds follow the last recorded one), each in a
fresh interpreter, and appends one JSON line per run to
``docs/results-data/shuffled-suite.jsonl``: the commit and whether the tree was clean,
the seed, the test counts and the ids of every failed test (from pytest's JUnit XML),
the wall and CPU seconds, the machine, and the load average sampled every 15 s (its
minimum, mean and maximum), so that a run on a loaded machine says so.

``make test-shuffled-record`` calls it. A run that fails is recorded too: the record is
the evidence that the suite passes in every order tried, or of what failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
RECORDS: Final = ROOT / "docs" / "results-data" / "shuffled-suite.jsonl"
LOAD_EVERY_S: Final = 15.0


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _machine() -> dict[str, Any]:
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {
        "cpus": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": round(pages / 2**30, 1),
        "python": platform.python_version(),
        "system": platform.platform(),
    }


class _LoadSampler(threading.Thread):
    """Samples the one-minute load average until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self._done = threading.Event()

    def run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._done.wait(LOAD_EVERY_S):
                return

    def stop(self) -> dict[str, float]:
        self._done.set()
        self.join()
        s = self.samples or [os.getloadavg()[0]]
        return {
            "min": round(min(s), 2),
            "mean": round(sum(s) / len(s), 2),
            "max": round(max(s), 2),
            "samples": len(s),
        }


def _junit_counts(path: Path) -> dict[str, Any]:
    """Test counts and failed ids from pytest's JUnit XML file."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise ValueError(f"{path}: no testsuite element")
    failed: list[str] = []
    for case in suite.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname', '')}::{case.get('name', '')}")
    tests = int(suite.get("tests", "0"))
    failures = int(suite.get("failures", "0"))
    errors = int(suite.get("errors", "0"))
    skipped = int(suite.get("skipped", "0"))
    return {
        "tests": tests,
        "passed": tests - failures - errors - skipped,
        "failed": failures,
        "errors": errors,
        "skipped": skipped,
        "failed_ids": failed,
    }


def run_once(seed: int, extra: list[str]) -> dict[str, Any]:
    """Run the suite once in the order of ``seed``; return its record."""
    with tempfile.TemporaryDirectory(prefix="shuffled-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "randomly",
            f"--randomly-seed={seed}",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            *extra,
        ]
        started = datetime.now(UTC)
        commit = _git("rev-parse", "HEAD")
        clean = _git("status", "--porcelain", "--untracked-files=no") == ""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        sampler = _LoadSampler()
        sampler.start()
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, check=False)
        wall = time.monotonic() - t0
        load = sampler.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        counts = _junit_counts(junit) if junit.exists() else {"junit": "missing"}
    return {
        "started": started.isoformat(timespec="seconds"),
        "commit": commit,
        "clean_tree": clean,
        "seed": seed,
        "command": " ".join(["python", *(a for a in cmd[1:] if not a.startswith("--junitxml="))]),
        "extra_args": extra,
        "exit_code": proc.returncode,
        **counts,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "load_1min": load,
        "machine": _machine(),
    }


def _last_seed() -> int:
    if not RECORDS.exists():
        return 0
    seeds = [json.loads(line)["seed"] for line in RECORDS.read_text().splitlines() if line]
    return max(seeds, default=0)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run, record, and exit 1 if any run failed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="how many shuffled runs (default 5)")
    ap.add_argument("--seeds", help="comma-separated seeds (default: after the last recorded)")
    ap.add_argument("--no-record", action="store_true", help="print records, append nothing")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments, after --")
    args = ap.parse_args(argv)
    if args.seeds:
        seeds = [int(s) for s in args.seeds.split(",")]
    else:
        first = _last_seed() + 1
        seeds = list(range(first, first + args.runs))
    worst = 0
    for seed in seeds:
        record = run_once(seed, list(args.pytest_args))
        line = json.dumps(record, sort_keys=True)
        print(line, flush=True)
        if not args.no_record:
            with RECORDS.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
        if record["exit_code"] != 0:
            worst = 1
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
