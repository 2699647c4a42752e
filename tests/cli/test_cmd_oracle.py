"""``twinaudit oracle serve`` as a real process: load weights, serve, answer, stop on SIGTERM."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tests.support.cli_processes import stop_served  # noqa: E402
from tests.support.models import TinyCNN  # noqa: E402
from twinaudit.cli.main import main as cli_main  # noqa: E402
from twinaudit.practitioner.torch_oracle import TorchClassifierOracle  # noqa: E402
from twinaudit.verifier.oracles.grpc_client import GrpcClassifierOracle  # noqa: E402
from twinaudit.wire.transport import make_channel  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _model():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        return TinyCNN()


def _serve(*args):
    """Start ``oracle serve`` on port 0; return the process and the address it printed."""
    command = [
        sys.executable,
        "-X",
        "faulthandler",  # a hung server's stacks, should stop_served need them
        "-m",
        "twinaudit",
        "oracle",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "1",
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        process.kill()
        raise AssertionError(f"no address: {line!r} {process.stderr.read()}")
    return process, line.split()[-1]


def _stop(process):
    stop_served(process)


@pytest.mark.slow
def test_serve_a_state_dict(tmp_path):
    model = _model()
    path = tmp_path / "tiny.pt"
    torch.save(model.state_dict(), path)
    process, address = _serve(
        "--model",
        str(path),
        "--arch",
        "tests.support.models:TinyCNN",
        "--n-classes",
        "10",
        "--max-batch",
        "16",
        "--name",
        "tiny",
    )
    try:
        local = TorchClassifierOracle(model, n_classes=10, model_name="tiny", max_batch=16)
        channel = make_channel(address)
        remote = GrpcClassifierOracle(channel, timeout_s=20)
        assert remote.describe() == {
            **local.describe(),
            "framework": f"torch {torch.__version__}",
            "model_format": "state-dict",
        }
        images = np.random.default_rng(0).random((20, 28, 28, 1)).astype(np.float32)
        np.testing.assert_allclose(
            remote.classify(images).probabilities,
            local.classify(images).probabilities,
            rtol=0,
            atol=1e-12,
        )
        channel.close()
    finally:
        _stop(process)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.*` is deprecated:DeprecationWarning")
def test_serve_torchscript_label_only(tmp_path):
    model = _model()
    path = tmp_path / "tiny.ts"
    torch.jit.script(model).save(str(path))
    process, address = _serve(
        "--model",
        str(path),
        "--label-only",
        "--input-shape",
        "28,28,1",
        "--mean",
        "0.5",
        "--std",
        "0.25",
    )
    try:
        local = TorchClassifierOracle(model, n_classes=10, label_only=True, mean=[0.5], std=[0.25])
        channel = make_channel(address)
        remote = GrpcClassifierOracle(channel, timeout_s=20)
        assert remote.info.classify_output == "label"
        assert remote.info.n_classes == 10
        assert remote.info.model_name == "tiny.ts"
        assert remote.info.model_digest == local.info.model_digest
        images = np.random.default_rng(1).random((5, 28, 28, 1)).astype(np.float32)
        assert np.array_equal(remote.classify(images).labels, local.classify(images).labels)
        channel.close()
    finally:
        _stop(process)


@pytest.mark.slow
def test_serve_a_torch_export_archive(tmp_path):
    model = _model().eval()
    path = tmp_path / "tiny.pt2"
    batch = torch.export.Dim("batch")
    program = torch.export.export(model, (torch.zeros(2, 1, 28, 28),), dynamic_shapes=({0: batch},))
    torch.export.save(program, path)
    process, address = _serve("--model", str(path), "--n-classes", "10")
    try:
        local = TorchClassifierOracle(model, n_classes=10)
        channel = make_channel(address)
        remote = GrpcClassifierOracle(channel, timeout_s=20)
        images = np.random.default_rng(2).random((6, 28, 28, 1)).astype(np.float32)
        np.testing.assert_allclose(
            remote.classify(images).probabilities,
            local.classify(images).probabilities,
            rtol=0,
            atol=1e-12,
        )
        channel.close()
    finally:
        _stop(process)


def _run(capsys, *args):
    status = cli_main(["oracle", "serve", "--listen", "127.0.0.1:0", *args])
    return status, capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:`torch.jit.*` is deprecated:DeprecationWarning")
def test_usage_errors(tmp_path, capsys):
    weights = tmp_path / "w.pt"
    torch.save(_model().state_dict(), weights)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a model")
    garbage_archive = tmp_path / "garbage.pt2"
    garbage_archive.write_bytes(b"not an archive")
    wrong = tmp_path / "wrong.pt"
    torch.save({"conv1.weight": torch.zeros(1)}, wrong)
    arch = "tests.support.models:TinyCNN"
    cases = [
        (("--model", str(tmp_path / "missing.pt"), "--n-classes", "10"), "does not exist"),
        (("--model", str(weights)), "--n-classes"),
        (("--model", str(weights), "--n-classes", "10"), "holds a state dict: give --arch"),
        (("--model", str(garbage), "--n-classes", "10"), "not TorchScript"),
        (("--model", str(garbage_archive), "--n-classes", "10"), "torch.export archive"),
        (("--model", str(garbage), "--arch", arch, "--n-classes", "10"), "cannot read"),
        (("--model", str(wrong), "--arch", arch, "--n-classes", "10"), "does not fit"),
        (
            ("--model", str(weights), "--arch", "tests.support.models", "--n-classes", "10"),
            "MODULE:CALLABLE",
        ),
        (
            ("--model", str(weights), "--arch", "no_such_module:f", "--n-classes", "10"),
            "cannot import",
        ),
        (
            ("--model", str(weights), "--arch", "tests.support.models:Nope", "--n-classes", "10"),
            "no attribute",
        ),
        (
            (
                "--model",
                str(weights),
                "--arch",
                "tests.support.models:N_CLASSES",
                "--n-classes",
                "10",
            ),
            "not callable",
        ),
        (
            ("--model", str(weights), "--arch", arch, "--n-classes", "10", "--mean", "0.5"),
            "mean and std",
        ),
        (
            ("--model", str(weights), "--arch", arch, "--n-classes", "10", "--tls-cert", "x.pem"),
            "--tls-key",
        ),
        (
            ("--model", str(weights), "--arch", arch, "--n-classes", "10", "--max-batch", "0"),
            "max_batch",
        ),
    ]
    for args, message in cases:
        status, err = _run(capsys, *args)
        assert status == 2, (args, err)
        assert message in err, (args, err)


def test_help_does_not_import_torch():
    code = (
        "import sys; from twinaudit.cli.main import build_parser; build_parser(); "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_keygen_writes_an_answer_key_once(tmp_path, capsys):
    key = tmp_path / "answers.key"
    assert cli_main(["oracle", "keygen", "--key", str(key)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert cli_main(["oracle", "keygen", "--key", str(key)]) != 0  # never overwritten


@pytest.mark.slow
def test_serve_with_an_answer_key_signs_every_answer(tmp_path):
    from twinaudit.protocol.keys import load_public_key, raw_public_key

    key = tmp_path / "answers.key"
    assert cli_main(["oracle", "keygen", "--key", str(key)]) == 0
    path = tmp_path / "tiny.ts"
    torch.jit.script(_model()).save(str(path))
    process, address = _serve(
        "--model", str(path), "--input-shape", "28,28,1", "--answer-key", str(key)
    )
    try:
        channel = make_channel(address)
        remote = GrpcClassifierOracle(channel, timeout_s=20)
        public = raw_public_key(load_public_key(Path(f"{key}.pub")))
        assert remote.info.answer_key == public
        images = np.random.default_rng(1).random((3, 28, 28, 1)).astype(np.float32)
        with remote.signed_batches(bytes(32)) as batches:
            answer = remote.classify(images)
        assert len(batches) == 1 and len(batches[0].image_digests) == 3
        assert list(batches[0].answers) == answer.to_value()
        channel.close()
    finally:
        _stop(process)
