"""The checked-in generated gRPC code is exactly what proto/generate.py makes from proto/."""

import importlib
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Another protocol's .proto files keep their own package (their wire name) and live in
#: wire/ under their path in proto/ (proto/generate.py FOREIGN_DIRS).
FOREIGN = {"oip/v2/grpc_predict_v2.proto": "inference"}


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
    checked_in = {
        p.relative_to(ROOT)
        for package in ("wire", "twinaudit")
        for p in (ROOT / package).rglob("*_pb2*.py*")
        # Bytecode the interpreter cached when anything imported them is not checked in.
        if "__pycache__" not in p.parts
    }
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
        if proto.relative_to(ROOT / "proto").as_posix() in FOREIGN:
            package = FOREIGN[proto.relative_to(ROOT / "proto").as_posix()]
            assert f"package {package};" in text, proto
            assert proto.parent.name.startswith("v"), f"{proto} is not in a versioned folder"
            continue
        rel = proto.relative_to(ROOT / "proto").parent.as_posix().replace("/", ".")
        assert f"package {rel};" in text, proto
        assert rel.split(".")[-1].startswith("v"), f"{proto} is not in a versioned package"


def test_generated_modules_live_in_wire_under_their_wire_names():
    # The Python location is twinaudit.wire.<service>.v1; the descriptors (file name, package,
    # services, so every method path) are those of proto/twinaudit/<service>/v1/.
    for proto in sorted((ROOT / "proto").rglob("*.proto")):
        rel = proto.relative_to(ROOT / "proto")
        package = rel.parent.as_posix().replace("/", ".")
        module_name = "twinaudit.wire." + ".".join(rel.parent.parts[1:]) + f".{proto.stem}_pb2"
        if rel.as_posix() in FOREIGN:
            package = FOREIGN[rel.as_posix()]
            module_name = "twinaudit.wire." + ".".join(rel.parent.parts) + f".{proto.stem}_pb2"
        module = importlib.import_module(module_name)
        assert module.DESCRIPTOR.name == rel.as_posix()
        assert module.DESCRIPTOR.package == package
        for message in module.DESCRIPTOR.message_types_by_name.values():
            assert message.full_name.startswith(f"{package}.")
            assert getattr(module, message.name).__module__ == module_name
        for service in module.DESCRIPTOR.services_by_name.values():
            assert service.full_name.startswith(f"{package}.")
        # The stubs import the messages from wire under protoc's alias (named after the file).
        stubs = importlib.import_module(module_name + "_grpc")
        # (protoc doubles each underscore of the path, then spells "/" as "_dot_").
        alias = rel.with_suffix("").as_posix().replace("_", "__").replace("/", "_dot_") + "__pb2"
        assert getattr(stubs, alias) is module


def test_a_foreign_protocol_has_its_own_descriptor_pool():
    # MLServer and tritonclient register the same `inference.*` names in the default
    # pool; the OIP client's messages load beside either of them.
    from google.protobuf import descriptor_pool

    from twinaudit.wire.oip.v2 import grpc_predict_v2_pb2 as oip

    assert oip.DESCRIPTOR.package == "inference"
    assert oip.DESCRIPTOR.pool is not descriptor_pool.Default()
