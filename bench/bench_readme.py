"""Time the README's commands on this machine: ``python -m bench.bench_readme``.

The README states how long its first commands take; this benchmark is where those
figures come from (issue #44 item 3). It runs, in this checkout's ``.venv``:

- **set-up** (``--setup``): ``make .venv/.installed`` in a fresh clone of this checkout,
  the README's first step on a new machine (it downloads the pinned packages, so it
  needs the package index);
- **demo**: what ``make demo`` runs, ``python -m demo`` with the Makefile's arguments;
- **quick start**: the README's quick-start block, as written, in a scratch folder, on
  ``--photos`` sample photos of mixed sizes (scikit-image's and scikit-learn's, and a
  3088×2056 landscape made from one of them) with labels, the servers on free ports.

For each it measures the wall time and the CPU time of every process it started
(user + system, children included), and for the quick start each command's own. The
load average before and after says whether the cores were free. One JSON line is
appended to ``docs/results-data/readme-times.jsonl`` (``--no-record`` leaves it), and
:func:`readme_phrases` gives the sentences the README must quote from the latest
record, which ``tests/cli/test_readme_times.py`` checks.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
RECORDS: Final = ROOT / "docs" / "results-data" / "readme-times.jsonl"
README: Final = ROOT / "README.md"
#: The heading whose first shell block is the quick start.
QUICK_START: Final = "## Quick start"
#: How many photos the quick start marks by default: the issue's "29 real photos"
#: in spirit, a small folder of mixed sizes.
PHOTOS: Final = 24


@dataclass(frozen=True)
class Timing:
    """One timed step: its name, wall seconds and CPU seconds (user + system)."""

    name: str
    wall_s: float
    cpu_s: float


def _cpu_of_children() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def run_timed(name: str, argv: Sequence[str], cwd: Path, env: dict[str, str]) -> Timing:
    """Run ``argv`` to its end and return its wall and CPU time (children included)."""
    cpu0, wall0 = _cpu_of_children(), time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True)
    return Timing(name, time.perf_counter() - wall0, _cpu_of_children() - cpu0)


def quick_start_lines(readme: Path = README) -> list[str]:
    """Return the command lines of the README's first shell block under its quick start."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    heading = next(n for n, line in enumerate(lines) if line.startswith(QUICK_START))
    start = next(n for n in range(heading, len(lines)) if lines[n].strip() in ("```sh", "```bash"))
    end = next(n for n in range(start + 1, len(lines)) if lines[n].strip() == "```")
    commands: list[str] = []
    pending = ""
    for line in lines[start + 1 : end]:
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        pending += stripped.removesuffix("\\").strip() + " "
        if not stripped.endswith("\\"):
            commands.append(pending.strip())
            pending = ""
    return commands


def _free_port() -> int:
    import socket  # noqa: PLC0415 - only here

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_photos(folder: Path, labels: Path, count: int) -> list[tuple[int, int]]:
    """Write ``count`` sample JPEG photos of mixed sizes and their labels; return the sizes."""
    from PIL import Image  # noqa: PLC0415 - the ml extra

    from bench.bench_perceptual import sample_photos  # noqa: PLC0415

    photos = sample_photos()
    folder.mkdir(parents=True)
    sizes = []
    with labels.open("w", newline="") as stream:
        rows = csv.writer(stream)
        rows.writerow(["filename", "label"])
        for index in range(count):
            name, pixels = photos[index % len(photos)]
            image = Image.fromarray(pixels).convert("RGB")
            if index >= len(photos):  # the same photo again, mirrored: another item
                image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            file = f"{index:03d}-{name}.jpg"
            image.save(folder / file, quality=92)
            sizes.append(image.size)
            rows.writerow([file, index % 3])
    return sizes


def quick_start_localiser(folder: Path) -> Callable[[str], str]:
    """Return what makes a quick-start word or line run in ``folder``.

    The reader's photos and labels become ``folder``'s, the runs folder is in ``folder``
    and the servers listen on free ports (one port per server, the same in every line).
    """
    names = {
        "~/photos.csv": str(folder / "photos.csv"),
        "~/photos": str(folder / "photos"),
        "runs/try": str(folder / "try"),
        "127.0.0.1:7443": f"127.0.0.1:{_free_port()}",
        "127.0.0.1:7500": f"127.0.0.1:{_free_port()}",
    }
    pattern = re.compile("|".join(re.escape(k) for k in sorted(names, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda m: names[m.group()], text)


def quick_start_script(folder: Path, marks: Path) -> str:
    """Return the quick start as a bash script that runs in ``folder`` and times each line.

    After each foreground command it appends the time and the shell's ``times`` to
    ``marks``; the servers it starts are stopped and waited for when it ends, so their
    CPU time counts in the total.
    """
    localise = quick_start_localiser(folder)
    out = [
        "set -e",
        f"cd {shlex.quote(str(ROOT))}",
        "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT",
        f'mark() {{ printf \'@@ %s %s\\n\' "$1" "$(date +%s.%N)" >> {shlex.quote(str(marks))};'
        f" times >> {shlex.quote(str(marks))}; }}",
        # Waits up to a minute for a server to accept connections on a port.
        "listening() { for _ in $(seq 600); do (: > /dev/tcp/127.0.0.1/$1) 2>/dev/null"
        " && return 0; sleep 0.1; done; return 1; }",
        "mark start",
    ]
    for index, line in enumerate(quick_start_lines()):
        command = localise(line)
        if command.endswith("&"):  # a server: wait until it listens
            listen = re.search(r"--listen 127\.0\.0\.1:(\d+)", command)
            if listen is None:
                raise ValueError(f"a background command of the quick start listens nowhere: {line}")
            out.append(command)
            out.append(f"listening {listen.group(1)}")
            out.append(f"mark {index}")
        elif command.startswith("kill "):
            out.append("sleep 0")  # the trap stops the servers and waits for them
        else:
            out.append(command)
            out.append(f"mark {index}")
    return "\n".join(out) + "\n"


_TIME = re.compile(r"(\d+)m([\d.]+)s")


def _seconds(text: str) -> float:
    match = _TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"not a bash time: {text!r}")
    return int(match.group(1)) * 60 + float(match.group(2))


def read_marks(marks: Path, lines: list[str]) -> list[Timing]:
    """Return each marked command's wall and CPU time from the script's ``marks`` file."""
    stamps: list[tuple[str, float, float]] = []
    rows = marks.read_text(encoding="utf-8").splitlines()
    for at in range(0, len(rows), 3):
        _, label, wall = rows[at].split()
        shell = [_seconds(t) for t in rows[at + 1].split()]
        children = [_seconds(t) for t in rows[at + 2].split()]
        stamps.append((label, float(wall), sum(shell) + sum(children)))
    timings = []
    for (_, wall0, cpu0), (label, wall1, cpu1) in itertools.pairwise(stamps):
        words = lines[int(label)].split()
        timings.append(Timing(" ".join(words[:3]), wall1 - wall0, cpu1 - cpu0))
    return timings


def machine() -> dict[str, object]:
    """Describe this machine: CPU model, cores, Python."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.machine()}",
    }


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def time_setup(scratch: Path, env: dict[str, str]) -> Timing:
    """Clone this checkout and time ``make .venv/.installed`` there."""
    clone = scratch / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    return run_timed("make .venv/.installed", ["make", ".venv/.installed"], clone, env)


def time_demo(env: dict[str, str]) -> Timing:
    """Time what ``make demo`` runs, in this checkout's ``.venv``."""
    python = ROOT / ".venv" / "bin" / "python"
    args = shlex.split(env.get("DEMO_ARGS", ""))
    return run_timed("make demo", [str(python), "-m", "demo", *args], ROOT, env)


def time_quick_start(scratch: Path, env: dict[str, str], photos: int) -> dict[str, object]:
    """Run the README's quick start on ``photos`` sample photos; return its timings."""
    sizes = write_photos(scratch / "photos", scratch / "photos.csv", photos)
    marks = scratch / "marks.txt"
    script = scratch / "quick-start.sh"
    script.write_text(quick_start_script(scratch, marks), encoding="utf-8")
    total = run_timed("quick start", ["bash", str(script)], ROOT, env)
    steps = read_marks(marks, quick_start_lines())
    megapixels = sum(w * h for w, h in sizes) / 1e6
    return {
        "photos": photos,
        "megapixels": round(megapixels, 1),
        "total": asdict(total),
        "steps": [asdict(s) for s in steps],
    }


def readme_phrases(record: dict[str, object]) -> list[str]:
    """Return the sentences the README quotes from ``record``, exactly as it must write them."""
    phrases = []
    demo = record.get("demo")
    if isinstance(demo, dict):
        phrases.append(
            f"{demo['cpu_s'] / 60:.1f} CPU-minutes, {demo['wall_s'] / 60:.1f} minutes"
            f" on {record['machine']['cores']} cores"  # type: ignore[index]
        )
    quick = record.get("quick_start")
    if isinstance(quick, dict):
        total = quick["total"]
        phrases.append(
            f"{quick['photos']} photos ({quick['megapixels']} MP in all):"
            f" {total['cpu_s'] / 60:.1f} CPU-minutes, {total['wall_s'] / 60:.1f} minutes"
        )
    setup = record.get("setup")
    if isinstance(setup, dict):
        phrases.append(f"set-up took {setup['wall_s'] / 60:.1f} minutes")
    before = record["load_before"][0]  # type: ignore[index]
    after = record["load_after"][2]  # type: ignore[index]
    phrases.append(
        f"(`python -m bench readme`, {record['date']}, load {before:.1f} at its start and"
        f" {after:.1f} over its last 15 minutes)"
    )
    return phrases


def latest_record(path: Path = RECORDS) -> dict[str, object]:
    """Return the last record of ``path``."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    record: dict[str, object] = json.loads(lines[-1])
    return record


def main(argv: list[str] | None = None) -> None:
    """Time the README's commands and append the record."""
    parser = argparse.ArgumentParser(prog="python -m bench readme", description=__doc__)
    parser.add_argument("--setup", action="store_true", help="also time the set-up in a clone")
    parser.add_argument("--no-demo", action="store_true", help="leave out make demo")
    parser.add_argument("--photos", type=int, default=PHOTOS, help="photos for the quick start")
    parser.add_argument("--no-record", action="store_true", help="print only")
    args = parser.parse_args([] if argv is None else argv)
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}"}
    env.pop("TWINAUDIT_ARBITER", None)
    env.pop("TWINAUDIT_ARBITER_KEY", None)
    record: dict[str, object] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": _commit(),
        "machine": machine(),
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    with tempfile.TemporaryDirectory(prefix="bench-readme-") as scratch_name:
        scratch = Path(scratch_name)
        if args.setup:
            record["setup"] = asdict(time_setup(scratch, env))
            print(f"set-up: {record['setup']}", flush=True)
        quick = time_quick_start(scratch, env, args.photos)
        record["quick_start"] = quick
        for step in quick["steps"]:  # type: ignore[attr-defined]
            print(f"  {step['name']:<40} wall {step['wall_s']:8.1f} s  cpu {step['cpu_s']:8.1f} s")
        print(f"quick start: {quick['total']}", flush=True)
    if not args.no_demo:
        record["demo"] = asdict(time_demo(env))
        print(f"demo: {record['demo']}", flush=True)
    record["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(record))
    print("README phrases:", *readme_phrases(record), sep="\n  ")
    if not args.no_record:
        with RECORDS.open("a", encoding="utf-8") as stream:
            stream.write(json.dumps(record, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
