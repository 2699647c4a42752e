"""``python -m demo``: run the end-to-end Fashion-MNIST dispute (see :mod:`demo.run`)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from .data import ENV_VAR
from .run import FULL, QUICK, run_demo, with_overrides


def _terminate(signum: int, frame: object) -> None:
    """Turn SIGTERM into an exception so servers are stopped on the way out."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run the demo; return its exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m demo",
        description="An end-to-end data-use dispute on Fashion-MNIST: arbiter, owner, two "
        "practitioners, two claims, verdicts checked and replayed, and a report.",
    )
    parser.add_argument(
        "--data",
        type=Path,
        help=f"folder with the Fashion-MNIST idx files (else ${ENV_VAR}, the Debian "
        "package's folder, or a download)",
    )
    parser.add_argument(
        "--out", type=Path, help="run directory (default runs/demo-YYYYmmdd-HHMMSS)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: exercise every stage in under a minute"
    )
    parser.add_argument(
        "--reliability",
        action="store_true",
        help="print the full run's false- and missed-detection probabilities, computed "
        "exactly (twinaudit.protocol.stats.power), and exit",
    )
    parser.add_argument("--epochs", type=int, help="override the training epochs")
    parser.add_argument("--n-train", type=int, help="override the training-set size")
    parser.add_argument("--epsilon", type=int, help="override the marks' bound")
    parser.add_argument("--seed", type=int, help="override the data/training seed")
    args = parser.parse_args(argv)
    if args.reliability:
        from .reliability import main as reliability_main  # noqa: PLC0415

        return reliability_main([])
    settings = with_overrides(
        QUICK if args.quick else FULL,
        epochs=args.epochs,
        n_train=args.n_train,
        epsilon=args.epsilon,
        seed=args.seed,
    )
    run_dir = args.out or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    if run_dir.exists() and any(run_dir.iterdir()):
        parser.error(f"run directory {run_dir} exists and is not empty")
    run_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return run_demo(run_dir.resolve(), settings, data_path=args.data)
    except KeyboardInterrupt:
        print("interrupted; servers stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
