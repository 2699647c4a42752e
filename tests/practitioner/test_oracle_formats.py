"""``oracle serve`` loads every format people save, probes it, and says what it serves.

Issue #23 items 3 and 6. One seeded TinyCNN saved as TorchScript, ``torch.export``
archives (dynamic and fixed batch), a state dict, safetensors, a pickled module and
ONNX (built with the onnx helper API from the same weights; dynamic and fixed batch)
is served by ``twinaudit oracle serve`` as a real process; through the gRPC client,
Describe reports its framework, format and input shape, and Classify answers what the
torch model computes. A claim through a real arbiter against the ONNX model records
them in the verdict's model section, and the verdict checks and replays. Every model
that does not fit is refused at ``serve`` time with one typed line, before anything
is served.

Issue #44: a file written by ``torch.onnx.export`` (torch 2.13's default exporter, which
needs onnxscript) is served with neither ``--input-shape`` nor ``--n-classes`` and
answers a claim; one whose height and width are dynamic is refused in a line that
says so until ``--input-shape`` gives its size.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("safetensors")

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from demo.seeded import fixed_salts  # noqa: E402
from tests.cli.test_cmd_oracle import _serve  # noqa: E402
from tests.support import format_models as fm  # noqa: E402
from tests.support.arbiter import sqlite_arbiter  # noqa: E402
from tests.support.claims import claim_params  # noqa: E402
from tests.support.cli_processes import stop_served  # noqa: E402
from tests.support.data import synthetic_pairs  # noqa: E402
from tests.support.pairset import PairSet  # noqa: E402
from twinaudit.cli import cmd_oracle  # noqa: E402
from twinaudit.cli.error_shape import hint_for  # noqa: E402
from twinaudit.cli.main import build_parser  # noqa: E402
from twinaudit.cli.main import main as cli_main  # noqa: E402
from twinaudit.cli.results import verdict_figures  # noqa: E402
from twinaudit.owner.claim_client import run_claim  # noqa: E402
from twinaudit.practitioner import formats  # noqa: E402
from twinaudit.practitioner.grpc_server import serve_oracle  # noqa: E402
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle, state_dict_digest  # noqa: E402
from twinaudit.protocol.claim.verdict import check_verdict  # noqa: E402
from twinaudit.protocol.errors import OracleError  # noqa: E402
from twinaudit.protocol.items import encode_item  # noqa: E402
from twinaudit.protocol.oracles.base import OracleInfo  # noqa: E402
from twinaudit.verifier.oracles.grpc_client import GrpcClassifierOracle  # noqa: E402
from twinaudit.verifier.replay import replay  # noqa: E402
from twinaudit.wire.transport import make_channel  # noqa: E402
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb  # noqa: E402
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.*` is deprecated:DeprecationWarning")

TORCH = f"torch {torch.__version__}"
ARCH = "tests.support.models:TinyCNN"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The TinyCNN, its files in every format, and its answers to five images."""
    torch.set_num_threads(1)
    model = fm.tiny_cnn()
    paths = fm.write_formats(tmp_path_factory.mktemp("formats"), model)
    images = np.random.default_rng(5).random((5, 28, 28, 1)).astype(np.float32)
    local = TorchClassifierOracle(model, n_classes=10)
    return {
        "model": model,
        "paths": paths,
        "images": images,
        "probabilities": local.classify(images).probabilities,
        "digest": state_dict_digest(model),
    }


def _stop(process: Any) -> str:
    return stop_served(process)


#: (file, extra arguments, format reported, onnx?)
SERVED = [
    ("onnx", (), "onnx", True),
    ("onnx fixed batch", ("--n-classes", "10"), "onnx", True),
    ("torch-export", (), "torch-export", False),
    ("torch-export fixed batch", (), "torch-export", False),
    ("safetensors", ("--arch", ARCH, "--input-shape", fm.SHAPE), "safetensors", False),
    ("torchscript", ("--input-shape", fm.SHAPE), "torchscript", False),
    ("pickle", ("--trust-pickle", "--input-shape", fm.SHAPE), "pickle", False),
    ("state-dict", ("--arch", ARCH, "--input-shape", fm.SHAPE), "state-dict", False),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "extra", "model_format", "onnx"), SERVED, ids=[s[0] for s in SERVED]
)
def test_serve_every_format(files, name, extra, model_format, onnx):
    path = files["paths"][name]
    process, address = _serve("--model", str(path), "--max-batch", "4", *extra)
    try:
        model_line = process.stdout.readline()
        channel = make_channel(address)
        remote = GrpcClassifierOracle(channel, timeout_s=20)
        info = remote.info
        framework = f"onnxruntime {formats_version('onnxruntime')}" if onnx else TORCH
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if onnx else files["digest"]
        assert info == OracleInfo(
            model_name=path.name,
            model_digest=digest,
            capabilities=("classify",),
            classify_output="probabilities",
            n_classes=10,
            max_batch=4,
            framework=framework,
            model_format=model_format,
            input_shape=(28, 28, 1),
        )
        assert f" format {model_format} " in model_line and model_line.endswith("input 28,28,1\n")
        # Five images: requests of 4 and 1; a fixed batch of 1 answers them one by one.
        np.testing.assert_allclose(
            remote.classify(files["images"]).probabilities,
            files["probabilities"],
            rtol=0,
            atol=1e-5 if onnx else 1e-6,
        )
        channel.close()
    finally:
        err = _stop(process)
    warned = "warning: --trust-pickle" in err
    assert warned == (name == "pickle"), err


def formats_version(package: str) -> str:
    """Return an installed package's version."""
    from importlib import metadata

    return metadata.version(package)


def test_fixed_batch_larger_than_a_request_is_padded(files, tmp_path):
    """An ONNX model fixed at 4 images answers 5 (4, then 1 padded with zeros) and 3."""
    path = fm.tiny_cnn_onnx(files["model"], tmp_path / "four.onnx", batch=4)
    loaded = formats.load_model(path)
    assert (loaded.fixed_batch, loaded.input_shape) == (4, (28, 28, 1))
    oracle = TorchClassifierOracle(loaded, n_classes=10, max_batch=16)
    np.testing.assert_allclose(
        oracle.classify(files["images"]).probabilities, files["probabilities"], rtol=0, atol=1e-5
    )
    np.testing.assert_allclose(
        oracle.classify(files["images"][:3]).probabilities,
        files["probabilities"][:3],
        rtol=0,
        atol=1e-5,
    )


def test_every_torch_file_of_the_same_weights_has_one_digest(files):
    paths = files["paths"]
    digests = {
        name: TorchClassifierOracle(
            formats.load_model(
                paths[name],
                arch=ARCH if name in ("state-dict", "safetensors") else None,
                trust_pickle=name == "pickle",
            ),
            n_classes=10,
        ).info.model_digest
        for name in ("state-dict", "safetensors", "pickle", "torchscript", "torch-export")
    }
    assert set(digests.values()) == {files["digest"]}


def test_formats_are_detected(files, tmp_path):
    paths = files["paths"]
    assert formats.detect_format(paths["torchscript"], None) == "torchscript"
    assert formats.detect_format(paths["pickle"], None) == "pickle"
    assert formats.detect_format(paths["onnx"], None) == "onnx"
    assert formats.detect_format(paths["torch-export"], None) == "torch-export"
    assert formats.detect_format(paths["state-dict"], ARCH) == "state-dict"
    # safetensors by its header, whatever the file is called
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(paths["safetensors"].read_bytes())
    assert formats.detect_format(renamed, ARCH) == "safetensors"
    assert cmd_oracle.MODEL_FORMATS == formats.FORMATS


#: The formats a whole claim runs against: the exchange format, a ``torch.export``
#: program and weights with their architecture.
CLAIMED = [s for s in SERVED if s[0] in ("onnx", "torch-export", "safetensors")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "extra", "reported", "onnx"), CLAIMED, ids=[c[0] for c in CLAIMED]
)
def test_a_claim_against_a_saved_model_records_what_it_is(
    files, tmp_path, name, extra, reported, onnx
):
    """A claim through a real arbiter: the verdict's model section carries the description."""
    path = files["paths"][name]
    args = build_parser().parse_args(
        ["oracle", "serve", "--listen", "127.0.0.1:0", "--model", str(path), "--name", "m", *extra]
    )
    server, port = serve_oracle(cmd_oracle.make_oracle(args), "127.0.0.1:0")
    try:
        verdict, transcript = _claim(f"127.0.0.1:{port}", "m", tmp_path)
    finally:
        server.stop(None)
    oracle = verdict.claim.oracle
    framework = f"onnxruntime {formats_version('onnxruntime')}" if onnx else TORCH
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if onnx else files["digest"]
    assert oracle["framework"] == framework and oracle["model_format"] == reported
    assert oracle["input_shape"] == [28, 28, 1]
    assert oracle["n_classes"] == 10 and oracle["classify_output"] == "probabilities"
    assert oracle["model_digest"] == digest
    assert verdict_figures(verdict)["oracle"] == oracle
    # Replay reads the description from the transcript's claim map, checked strictly.
    assert replay(verdict, transcript).decision == verdict.decision


def _claim(oracle: str, model_name: str, tmp_path: Path) -> tuple[dict[str, Any], bytes]:
    """Run a claim of 16 pairs (C2, dither, 8 opened at most) against ``oracle``.

    Through a real arbiter; return the verdict, checked, and its transcript.
    """
    n_pairs = 16
    pairs = synthetic_pairs(n_pairs, seed=21, epsilon=16)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(n_pairs)]
    owner = PairSet("image", versions, fixed_salts(n_pairs))
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    with sqlite_arbiter(tmp_path, key) as address:
        channel = make_channel(address)
        receipt = owner.escrow(channel, key.public_key(), "formats owner")
        request = claim_params(
            receipt.entry.index,
            owner.root,
            oracle,
            model_name,
            perturbation="dither",
            knowledge="C2",
            max_pairs=8,
        )
        outcome = run_claim(
            channel, request, owner.opening, claim_key=owner.claim_key, timeout_s=120
        )
        stored = pb_grpc.VerifierStub(channel).GetVerdict(
            pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=10
        )
        channel.close()
    return check_verdict(outcome.verdict, key.public_key()), stored.transcript


# --- a file written by torch.onnx.export (issue #44) ---------------------------------------


@pytest.fixture(scope="module")
def exported(files, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The TinyCNN written by torch.onnx.export with a dynamic batch, and :class:`fm.AnySize`
    with dynamic height and width too (torch 2.13's default exporter needs onnxscript)."""
    folder = tmp_path_factory.mktemp("exported")
    return {
        "model": fm.onnx_export(files["model"], folder / "model.onnx"),
        "any size": fm.onnx_export(fm.AnySize(), folder / "any-size.onnx", dynamic=(0, 2, 3)),
    }


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_oracle_serve_runs_a_file_torch_onnx_export_wrote(files, exported, tmp_path):
    """No --input-shape, no --n-classes: the file says both; a claim through it is replayed."""
    path = exported["model"]
    process, address = _serve("--model", str(path), "--max-batch", "4", "--name", "m")
    try:
        framework = f"onnxruntime-{formats_version('onnxruntime')}"
        line = process.stdout.readline()
        assert line.endswith(f" format onnx framework {framework} input 28,28,1\n"), line
        channel = make_channel(address)
        remote = GrpcClassifierOracle(channel, timeout_s=20)
        info = remote.info
        assert (info.n_classes, info.input_shape, info.model_format) == (10, (28, 28, 1), "onnx")
        assert info.model_digest == hashlib.sha256(path.read_bytes()).hexdigest()
        probabilities = remote.classify(files["images"]).probabilities  # requests of 4 and 1
        np.testing.assert_allclose(probabilities, files["probabilities"], rtol=0, atol=1e-5)
        channel.close()
        verdict, transcript = _claim(address, "m", tmp_path)
    finally:
        _stop(process)
    assert verdict.claim.oracle == info.to_value()
    assert replay(verdict, transcript).decision == verdict.decision


@pytest.mark.slow  # the exports take about 5 s
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_dynamic_image_size_needs_input_shape_and_says_so(exported, capsys, monkeypatch):
    """A file that leaves height and width dynamic is refused in one line naming them and the
    option; with --input-shape it is probed at that size, which Describe reports."""
    monkeypatch.setattr("twinaudit.practitioner.grpc_server.serve_oracle", _no_serving)
    path = str(exported["any size"])
    assert cli_main(["oracle", "serve", "--listen", "127.0.0.1:0", "--model", path]) == 2
    assert capsys.readouterr().err == (
        "twinaudit: error: [invalid-input] the ONNX model declares its input (N, C, H, W) as "
        f"(?, 1, ?, ?), its height and width dynamic: {cmd_oracle.NEEDS_SHAPE}; "
        f"{hint_for('invalid-input', 'twinaudit oracle serve')}\n"
    )
    serve = ["oracle", "serve", "--listen", "127.0.0.1:0", "--model", path, "--input-shape"]
    oracle = cmd_oracle.make_oracle(build_parser().parse_args([*serve, "32,24,1"]))
    assert (oracle.info.input_shape, oracle.info.n_classes) == ((32, 24, 1), 10)
    # the channels the file fixes are checked against the shape given
    assert cli_main([*serve, "32,24,3"]) == 2
    assert capsys.readouterr().err == (
        "twinaudit: error: [model-mismatch] input-shape: the input shape given is 32,24,3 "
        "(H,W,C) but the onnx file declares ?,?,1; "
        f"{hint_for('model-mismatch', 'twinaudit oracle serve')}\n"
    )


def test_a_file_declaring_no_shape_needs_input_shape_and_says_so(files, capsys, monkeypatch):
    monkeypatch.setattr("twinaudit.practitioner.grpc_server.serve_oracle", _no_serving)
    torchscript = str(files["paths"]["torchscript"])
    assert cli_main(["oracle", "serve", "--listen", "127.0.0.1:0", "--model", torchscript]) == 2
    assert capsys.readouterr().err == (
        "twinaudit: error: [invalid-input] only ONNX and torch.export files declare their input "
        f"shape: {cmd_oracle.NEEDS_SHAPE}; {hint_for('invalid-input', 'twinaudit oracle serve')}\n"
    )
    loaded = formats.load_model(files["paths"]["torchscript"])
    assert formats.undeclared_shape(loaded) == "a TorchScript file does not declare its input shape"


def _no_serving(*_: Any, **__: Any) -> Any:
    raise AssertionError("the model was served; it should have been refused")


def _arch_file(directory: Path, cls: type) -> str:
    path = directory / f"{cls.__name__}.pt"
    torch.save(cls().state_dict(), path)
    return str(path)


def test_every_mismatch_is_refused_at_serve_time(files, tmp_path, capsys, monkeypatch):
    """One row per mismatch: exit 2, one line on stderr naming it, nothing served."""
    monkeypatch.setattr("twinaudit.practitioner.grpc_server.serve_oracle", _no_serving)
    paths = files["paths"]

    def arch(cls: type, *extra: str) -> tuple[str, ...]:
        module = f"tests.support.format_models:{cls.__name__}"
        return ("--model", _arch_file(tmp_path, cls), "--arch", module, *extra)

    exported = tmp_path / "float64.pt2"
    torch.export.save(
        torch.export.export(fm.Float64Input(), (torch.zeros(2, 1, 28, 28, dtype=torch.float64),)),
        exported,
    )
    shape = ("--input-shape", fm.SHAPE)
    cases: list[tuple[tuple[str, ...], str]] = [
        (("--model", str(paths["torchscript"]), *shape, "--n-classes", "7"), "class-count"),
        (("--model", str(paths["onnx"]), "--n-classes", "7"), "class-count"),
        (arch(fm.OneClass, *shape), "class-count"),
        (("--model", str(paths["onnx"]), "--input-shape", "32,32,1"), "input-shape"),
        (("--model", str(paths["torch-export"]), "--input-shape", "28,28,3"), "input-shape"),
        (("--model", str(paths["torchscript"]), "--input-shape", "28,28,3"), "input"),
        (arch(fm.ReturnsTuple, *shape), "output-shape"),
        (arch(fm.ReturnsMaps, *shape), "output-shape"),
        (arch(fm.OneAtATime, *shape), "fixed-batch"),
        (arch(fm.ReturnsLabels, *shape), "dtype"),
        (arch(fm.HalfPrecision, *shape), "dtype"),
        (arch(fm.ReturnsNan, *shape), "non-finite"),
        (("--model", str(fm.onnx_linear(tmp_path / "f64.onnx", input_type="double"))), "dtype"),
        (
            ("--model", str(fm.onnx_linear(tmp_path / "int.onnx", output_type="int64"))),
            "dtype",
        ),
        (("--model", str(fm.onnx_linear(tmp_path / "two.onnx", inputs=2))), "input"),
        (("--model", str(exported)), "dtype"),
        (("--kind", "encoder", *arch(fm.ReturnsTuple, *shape)), "output-shape"),
    ]
    for args, mismatch in cases:
        status = cli_main(["oracle", "serve", "--listen", "127.0.0.1:0", *args])
        err = capsys.readouterr().err
        assert status == 2, (args, err)
        assert err.count("\n") == 1, (args, err)
        assert err.startswith(f"twinaudit: error: [model-mismatch] {mismatch}: "), (args, err)


def test_files_that_cannot_be_loaded_are_refused_in_one_line(files, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("twinaudit.practitioner.grpc_server.serve_oracle", _no_serving)
    paths = files["paths"]
    garbage_onnx = tmp_path / "garbage.onnx"
    garbage_onnx.write_bytes(b"not a model")
    garbage_safetensors = tmp_path / "garbage.safetensors"
    garbage_safetensors.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    shape = ("--input-shape", fm.SHAPE)
    cases = [
        (("--model", str(paths["pickle"]), *shape), "--trust-pickle"),
        (("--model", str(paths["pickle"]), "--arch", ARCH, *shape), "--trust-pickle"),
        (("--model", str(paths["pickle"]), "--format", "pickle", *shape), "--trust-pickle"),
        (("--model", str(paths["state-dict"]), *shape), "holds a state dict: give --arch"),
        (("--model", str(paths["safetensors"]), *shape), "weights only: give --arch"),
        (("--model", str(paths["torchscript"]), "--arch", ARCH, *shape), "TorchScript archive"),
        (
            ("--model", str(paths["onnx"]), "--arch", ARCH),
            "--arch is for state dicts and safetensors",
        ),
        (("--model", str(garbage_onnx)), "cannot load the ONNX model"),
        (("--model", str(garbage_safetensors), "--arch", ARCH, *shape), "cannot read safetensors"),
        (
            (
                "--model",
                str(paths["safetensors"]),
                "--arch",
                "tests.support.models:tiny_cnn_16",
                *shape,
            ),
            "does not fit",
        ),
        (("--kind", "lm", "--model", str(paths["onnx"]), "--tokenizer", "bytes"), "not ONNX"),
        (("--kind", "lm", "--hf", "x", "--trust-pickle"), "--trust-pickle goes with --model"),
    ]
    for args, message in cases:
        status = cli_main(["oracle", "serve", "--listen", "127.0.0.1:0", *args])
        err = capsys.readouterr().err
        assert status == 2, (args, err)
        assert err.count("\n") == 1 and message in err, (args, err)


# --- the Describe map's model fields (spec §10.1) -------------------------------------


def _info(**fields: Any) -> OracleInfo:
    base: dict[str, Any] = {
        "model_name": "m",
        "model_digest": "d",
        "capabilities": ("classify",),
        "classify_output": "label",
        "n_classes": 10,
        "max_batch": 8,
    }
    return OracleInfo(**{**base, **fields})


def test_describe_map_carries_the_model_fields_only_when_reported():
    plain = _info()
    assert set(plain.to_value()) == {
        "model_name",
        "model_digest",
        "capabilities",
        "classify_output",
        "n_classes",
        "max_batch",
    }
    full = _info(framework="onnxruntime 1.31.1", model_format="onnx", input_shape=(32, 24, 3))
    value = full.to_value()
    assert value["framework"] == "onnxruntime 1.31.1"
    assert value["model_format"] == "onnx"
    assert value["input_shape"] == [32, 24, 3]
    assert OracleInfo.from_value(value) == full
    assert OracleInfo.from_value(plain.to_value()) == plain
    only_format = _info(model_format="torchscript")
    assert set(only_format.to_value()) - set(plain.to_value()) == {"model_format"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"framework": ""}, "present but empty"),
        ({"model_format": ""}, "present but empty"),
        ({"input_shape": []}, "present but empty"),
        ({"input_shape": [28, 28]}, "input_shape"),
        ({"input_shape": [28, 28, 2]}, "input_shape"),
        ({"input_shape": [0, 28, 1]}, "input_shape"),
        ({"input_shape": [4097, 28, 1]}, "input_shape"),
        ({"input_shape": [28, 28, True]}, "input_shape"),
        ({"input_shape": "28,28,1"}, "input_shape"),
        ({"model_format": "ONNX"}, "lower-case"),
        ({"framework": "x" * 257}, "framework"),
        ({"framework": 3}, "framework"),
        ({"hardware": "cpu"}, "exactly the keys"),
    ],
)
def test_a_broken_model_field_is_an_invalid_description(change, message):
    value = {**_info().to_value(), **change}
    with pytest.raises(OracleError, match=message) as refused:
        OracleInfo.from_value(value)
    assert refused.value.reason == "invalid-answer"
