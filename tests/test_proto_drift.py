"""The checked-in generated gRPC code is exactly what proto/generate.py makes from proto/."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_generator():
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_matches_the_proto_files(tmp_path):
    generator = _load_generator()
    made = generator.generate(tmp_path)
    assert made, "no .proto files found"
    fresh = {p.relative_to(tmp_path) for p in made}
    checked_in = {p.relative_to(ROOT) for p in (ROOT / "twinaudit").rglob("*_pb2*.py*")}
    assert fresh == checked_in, f"generated set differs: {sorted(fresh ^ checked_in)}"
    stale = [
        str(rel)
        for rel in sorted(fresh)
        if (tmp_path / rel).read_bytes() != (ROOT / rel).read_bytes()
    ]
    assert not stale, f"generated code is stale, run: python proto/generate.py ({stale})"


def test_every_proto_package_is_versioned():
    for proto in (ROOT / "proto").rglob("*.proto"):
        text = proto.read_text(encoding="utf-8")
        rel = proto.relative_to(ROOT / "proto").parent.as_posix().replace("/", ".")
        assert f"package {rel};" in text, proto
        assert rel.split(".")[-1].startswith("v"), f"{proto} is not in a versioned package"
