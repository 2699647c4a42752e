"""Regenerate the checked-in gRPC/protobuf Python code from proto/**/*.proto.

Usage: ``python proto/generate.py [OUTPUT_ROOT]`` (default: the repository root, so
the modules land in ``wire/<service>/v1/``). The drift test generates into a
temporary directory and compares the bytes with the checked-in files.

The .proto files sit under ``proto/twinaudit/`` because their packages are the wire
names ``twinaudit.<service>.v1``; another protocol's file (the Open Inference
Protocol's, package ``inference``) sits under ``proto/oip/v2/`` and its modules go to
``wire/oip/v2/``. protoc names each Python module after the path of its
.proto file, which would put them in ``twinaudit.<service>.v1``, beside the roles; they
belong to the wire layer, the folder ``wire/`` installed as ``twinaudit.wire``, so their
modules are ``twinaudit.wire.<service>.v1``. So protoc writes into a scratch directory,
exactly as it always has, and each module is moved to ``wire/`` with the three places
where protoc spells its Python location rewritten: the stubs' import of the messages,
the messages' ``__module__`` and the file named in the stubs' version warning (and a
foreign file's messages go to a descriptor pool of their own, ``_DEFAULT_POOL``). Every
other byte is protoc's: the serialized descriptors (file ``twinaudit/<service>/v1/
<service>.proto``, package ``twinaudit.<service>.v1``), the method paths and the
message classes are those of the .proto files, so nothing on the wire changes.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
#: The directory under proto/ holding the wire packages ``twinaudit.<service>.v1``.
PROTO_PACKAGE_ROOT = "twinaudit"
#: The folder the generated modules live in (the wire layer)...
PYTHON_PACKAGE = "wire"
#: ...which is installed, and imported, as ``twinaudit.wire`` (docs/architecture.md).
INSTALLED_ROOT = "twinaudit"
#: Directories of other protocols' .proto files, which keep their own package names:
#: the Open Inference Protocol (package ``inference``), whose client the verifier has.
FOREIGN_DIRS = (Path("oip", "v2"),)


def proto_files() -> list[Path]:
    """Return every .proto file under proto/, sorted."""
    return sorted(PROTO_ROOT.rglob("*.proto"))


def python_location(proto_dir: Path) -> Path:
    """Return the package directory (under ``wire/``) of the modules of ``proto_dir``'s files.

    Our own wire packages ``twinaudit.<service>.v1`` live in ``wire/<service>/v1/``.
    Another protocol's file keeps its own package (OIP's is ``inference``); it sits in
    one of :data:`FOREIGN_DIRS`, and its modules in the same path under ``wire/``.
    """
    if proto_dir.parts[:1] == (PROTO_PACKAGE_ROOT,):
        return Path(PYTHON_PACKAGE, *proto_dir.parts[1:])
    if proto_dir in FOREIGN_DIRS:
        return Path(PYTHON_PACKAGE, *proto_dir.parts)
    raise SystemExit(f"{proto_dir} is neither under proto/{PROTO_PACKAGE_ROOT}/ nor foreign")


#: What protoc writes to register a file in the process's default descriptor pool, and
#: what a foreign file's module writes instead: a pool of its own. Servers and clients of
#: the same protocol (MLServer, tritonclient) register the same message names in the
#: default pool, and a second registration of a name fails; with its own pool each
#: module loads whatever else the process has loaded.
_DEFAULT_POOL = (
    "_descriptor_pool.Default().AddSerializedFile(",
    "_descriptor_pool.DescriptorPool().AddSerializedFile(",
)


def _relocations(proto_dir: Path, python_dir: Path, stem: str) -> dict[str, list[tuple[str, str]]]:
    """Return, per generated file name, the exact text protoc writes and what replaces it."""
    old_module = ".".join(proto_dir.parts)
    new_module = ".".join([INSTALLED_ROOT, *python_dir.parts])
    own_pool = [_DEFAULT_POOL] if proto_dir in FOREIGN_DIRS else []
    return {
        f"{stem}_pb2.py": [
            (f"'{old_module}.{stem}_pb2'", f"'{new_module}.{stem}_pb2'"),
            *own_pool,
        ],
        f"{stem}_pb2.pyi": [],
        f"{stem}_pb2_grpc.py": [
            (
                f"from {old_module} import {stem}_pb2 as ",
                f"from {new_module} import {stem}_pb2 as ",
            ),
            (
                f"generated code in {proto_dir.as_posix()}/{stem}_pb2_grpc.py",
                f"generated code in {python_dir.as_posix()}/{stem}_pb2_grpc.py",
            ),
        ],
    }


def _relocate(text: str, edits: list[tuple[str, str]], name: str) -> str:
    """Apply ``edits`` to ``text``; each must match exactly once (a new protoc fails loudly)."""
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(f"{name}: expected {old!r} once, found it {text.count(old)} times")
        text = text.replace(old, new)
    return text


def generate(out: Path) -> list[Path]:
    """Generate Python modules for every .proto file under ``out``; return the files made."""
    out.mkdir(parents=True, exist_ok=True)
    made = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        args = [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"--python_out={scratch}",
            f"--pyi_out={scratch}",
            f"--grpc_python_out={scratch}",
            *[str(p.relative_to(PROTO_ROOT)) for p in proto_files()],
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        for proto in proto_files():
            proto_dir = proto.relative_to(PROTO_ROOT).parent
            python_dir = python_location(proto_dir)
            package_dir = out / python_dir
            package_dir.mkdir(parents=True, exist_ok=True)
            relocations = _relocations(proto_dir, python_dir, proto.stem)
            generated = sorted((scratch / proto_dir).glob(f"{proto.stem}_pb2*"))
            if sorted(p.name for p in generated) != sorted(relocations):
                raise SystemExit(f"{proto}: protoc made {[p.name for p in generated]}")
            for source in generated:
                text = source.read_bytes().decode("utf-8")
                text = _relocate(text, relocations[source.name], source.name)
                target = package_dir / source.name
                target.write_bytes(text.encode("utf-8"))
                made.append(target)
            for parent in [package_dir, *package_dir.parents]:
                if parent == out or out not in parent.parents:
                    break
                init = parent / "__init__.py"
                if not init.exists():
                    init.write_text("")
    return made


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT
    for path in generate(target):
        print(path.relative_to(target))
