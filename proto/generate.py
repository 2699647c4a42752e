"""Regenerate the checked-in gRPC/protobuf Python code from proto/**/*.proto.

Usage: ``python proto/generate.py [OUTPUT_ROOT]`` (default: the repository root, so
the modules land in ``twinaudit/<service>/v1/``). The drift test generates into a
temporary directory and compares the bytes with the checked-in files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent


def proto_files() -> list[Path]:
    """Return every .proto file under proto/, sorted."""
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out: Path) -> list[Path]:
    """Generate Python modules for every .proto file under ``out``; return the files made."""
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *[str(p.relative_to(PROTO_ROOT)) for p in proto_files()],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    made = []
    for proto in proto_files():
        package_dir = out / proto.relative_to(PROTO_ROOT).parent
        for parent in [package_dir, *package_dir.parents]:
            if parent == out or out not in parent.parents:
                break
            init = parent / "__init__.py"
            if not init.exists():
                init.write_text("")
        made += sorted(package_dir.glob(f"{proto.stem}_pb2*"))
    return made


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT
    for path in generate(target):
        print(path.relative_to(target))
