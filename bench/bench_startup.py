"""Interpreter start-up with the torchvision hook's path-configuration file, and without.

Run with ``python -m bench startup``. The hook (:mod:`twinaudit.wire.torchvision_hook`) adds a line
that :mod:`site` runs at every start of the environment's interpreter, so its cost is
paid by every ``python`` in ``.venv``, whatever it runs (issue #40 N11: the line that
loaded the hook module by its path cost 20–28 ms of CPU). Two figures, each from fresh
interpreters started with ``-S`` (no path-configuration file of this environment is
read) that then process one folder with :func:`site.addsitedir`, alternating an empty
folder and one holding only the hook's file, so the machine's load hits both alike:

- the time ``site.addsitedir`` takes, read inside the interpreter: the line's own cost,
  and the modules it leaves imported (none, beyond ``site``'s);
- the wall time of the whole interpreter, started and stopped, and its ratio.

Target: the line adds under 5 ms (the median of the first figure).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from twinaudit.wire import torchvision_hook

#: Interpreters started per folder.
ROUNDS = 40
#: The added milliseconds the line must stay under.
TARGET_MS = 5.0
_PROBE = (
    "import site, sys, time\n"
    "before = set(sys.modules)\n"
    "start = time.perf_counter()\n"
    "site.addsitedir(sys.argv[1])\n"
    "print((time.perf_counter() - start) * 1e3, len(set(sys.modules) - before))\n"
)


def _start(folder: Path) -> tuple[float, float, int]:
    """Start one interpreter on ``folder``; return (addsitedir ms, wall ms, new modules)."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-S", "-c", _PROBE, str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = (time.perf_counter() - start) * 1e3
    if out.stderr:
        raise RuntimeError(f"the interpreter wrote to stderr: {out.stderr[-500:]}")
    inside, modules = out.stdout.split()
    return float(inside), wall, int(modules)


def main() -> None:
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as hooked:
        torchvision_hook.install(Path(hooked))
        runs: dict[str, list[tuple[float, float, int]]] = {"without": [], "with": []}
        for _ in range(ROUNDS):
            runs["without"].append(_start(Path(empty)))
            runs["with"].append(_start(Path(hooked)))
    medians = {
        name: (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))
        for name, rows in runs.items()
    }
    print(f"{ROUNDS} interpreters each, alternating (python {sys.version.split()[0]})")
    print(f"{'':8} {'addsitedir ms':>14} {'wall ms':>9} {'new modules':>12}")
    for name, rows in runs.items():
        inside, wall = medians[name]
        modules = max(r[2] for r in rows)
        print(f"{name:8} {inside:14.2f} {wall:9.1f} {modules:12d}")
    added = medians["with"][0] - medians["without"][0]
    ratio = medians["with"][1] / medians["without"][1]
    verdict = "met" if added < TARGET_MS else "NOT met"
    print(f"the hook's line adds {added:.2f} ms (median; target < {TARGET_MS:g} ms: {verdict});")
    print(f"whole interpreter, with / without: {ratio:.2f}x (median wall times)")


if __name__ == "__main__":
    main()
