"""Run the benchmarks: ``python -m bench [NAME ...]`` (all of them when no name is given).

Each ``bench/bench_<name>.py`` module has a ``main()`` that prints its figures; every
ratio a benchmark reports is measured within the same run.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from pathlib import Path


def available() -> list[str]:
    """Return the names of the benchmark modules in this package."""
    here = Path(__file__).resolve().parent
    return sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules([str(here)])
        if m.name.startswith("bench_")
    )


def main(argv: list[str] | None = None) -> int:
    """Run the named benchmarks (all by default) and print their figures."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "names", nargs="*", help=f"benchmarks to run (default: all of {available()})"
    )
    args = parser.parse_args(argv)
    names = args.names or available()
    unknown = sorted(set(names) - set(available()))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {available()}")
    for name in names:
        print(f"\n=== bench {name} ===", flush=True)
        start = time.perf_counter()
        importlib.import_module(f"bench.bench_{name}").main()
        print(f"=== bench {name}: {time.perf_counter() - start:.1f} s ===", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
