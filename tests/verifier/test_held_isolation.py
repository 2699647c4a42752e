"""Untrusted model code isolated (issue #40 part 3, findings N4 and N5).

N5: a held model added with ``--trust-pickle`` read the arbiter's signing key during a
claim, through the parent's ``/proc/<pid>/cmdline``. Reproduced with a real spying
pickle (:func:`~tests.support.hostile_models.write_spying_pickle`) held by a real
``verifier serve`` process started with ``--key``: the claim fails with the pickle's
own report, which must show that it reached no key file, no arbiter command line or
environment, none of the server's environment and no network.

N4: a zip-bomb ``.pt`` drove ``verifier model add`` to 2.4 GB and a tiny ONNX file
declaring a 65536² input stalled it for 307 s. Reproduced with a real zip bomb (1 MB
inflating to 1 GiB) and a real 97-byte ONNX file: both are refused from their
structure before anything loads them, and a bomb that does reach a child runs out of
the child's memory limit, not the arbiter's.

The signer process: the server holds only a public key; the signer signs the three
kinds of payload the arbiter signs, well-formed and naming its key, and nothing else.
"""

from __future__ import annotations

import ast
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import grpc
import pytest

from demo.seeded import fixed_salts
from tests.support.claims import claim_params
from tests.support.cli_processes import cli, serve, stop
from tests.support.data import synthetic_pairs
from tests.support.format_models import tiny_cnn
from tests.support.hostile_models import (
    spy_report,
    write_oversized_onnx,
    write_spying_pickle,
    write_zip_bomb_pt,
)
from tests.support.pairset import PairSet
from twinaudit.owner.claim_client import run_claim
from twinaudit.protocol.encoding import encode
from twinaudit.protocol.errors import InputError, LimitExceededError, OracleError, StateError
from twinaudit.protocol.escrow_messages import CHECKPOINT_KIND, Checkpoint, verify_checkpoint
from twinaudit.protocol.items import encode_item
from twinaudit.protocol.keys import key_id, load_public_key
from twinaudit.verifier.oracles.held import ArtefactStore, ServeOptions, file_sha256, start_held
from twinaudit.verifier.oracles.sandbox import GIB, ChildLimits, SandboxPolicy
from twinaudit.wire.transport import make_channel

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"
)

OPTIONS = ServeOptions(name="m", input_shape=(28, 28, 1), n_classes=10, max_batch=8)


@pytest.fixture
def listener():
    """A TCP listener on 127.0.0.1 that a model's code may try to reach."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.2)
    yield sock
    sock.close()


def _received(sock: socket.socket) -> bool:
    try:
        connection, _ = sock.accept()
    except TimeoutError:
        return False
    connection.close()
    return True


def _hold(models: Path, file: Path, options: ServeOptions) -> str:
    """Put ``file`` into the store as ``model add`` leaves it (without starting it)."""
    digest = file_sha256(file)
    folder = models / digest
    folder.mkdir(parents=True)
    shutil.copyfile(file, folder / f"artefact{file.suffix}")
    (folder / "serve.json").write_text(options.to_json(), encoding="utf-8")
    return f"held:sha256:{digest}"


@pytest.mark.slow
def test_n5_a_spying_pickle_reaches_nothing_during_a_claim(tmp_path, listener, monkeypatch):
    """N5 as written: a pickle held by `verifier serve --key` looks for the key in a claim."""
    cli("verifier", "keygen", "--key", str(tmp_path / "arbiter.key"))
    spy = write_spying_pickle(
        tmp_path / "spy.pt", tmp_path / "arbiter.key", listener.getsockname()[1]
    )
    address = _hold(
        tmp_path / "models",
        spy,
        ServeOptions(name="spy", trust_pickle=True, input_shape=(28, 28, 1)),
    )
    monkeypatch.setenv("TWINAUDIT_TEST_SECRET", "the arbiter's environment")
    process, arbiter = serve(
        "verifier",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--db",
        str(tmp_path / "escrow.db"),
        "--key",
        str(tmp_path / "arbiter.key"),
        "--models",
        str(tmp_path / "models"),
        ready="serving on",
    )
    channel = make_channel(arbiter)
    try:
        public = load_public_key(tmp_path / "arbiter.key.pub")
        pairs = synthetic_pairs(8, seed=3, epsilon=24)
        versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(8)]
        owner_set = PairSet("image", versions, fixed_salts(8))
        receipt = owner_set.escrow(channel, public, "n5 owner")
        request = claim_params(receipt.entry.index, owner_set.root, address, "spy", max_pairs=4)
        with pytest.raises((grpc.RpcError, OracleError)) as failed:
            run_claim(
                channel, request, owner_set.opening, claim_key=owner_set.claim_key, timeout_s=120
            )
    finally:
        channel.close()
        stop(process)
    message = str(
        failed.value.details() if isinstance(failed.value, grpc.RpcError) else failed.value
    )
    found = spy_report(message)  # the pickle ran, in the claim's child, and says what it saw
    assert found["keys"].startswith("denied"), found["keys"]
    assert found["key_paths"] == repr([str(tmp_path / "arbiter.key")])  # no --key in /proc
    assert "--key" not in found["parent_cmdline"] and "arbiter.key" not in found["parent_cmdline"]
    assert "--ro-bind" not in found["parent_cmdline"]  # bubblewrap's options came by a pipe
    assert "TWINAUDIT_TEST_SECRET" not in found["parent_environ"]
    assert "TWINAUDIT_TEST_SECRET" not in found["environ"]
    assert found["socket"].startswith("denied"), found["socket"]
    assert not _received(listener)


@pytest.mark.slow
def test_n5_a_spying_pickle_at_model_add_reaches_nothing(tmp_path, listener, monkeypatch):
    """The same pickle given to `model add --trust-pickle`: refused, having reached nothing."""
    key = tmp_path / "arbiter.key"
    cli("verifier", "keygen", "--key", str(key))
    spy = write_spying_pickle(tmp_path / "spy.pt", key, listener.getsockname()[1])
    monkeypatch.setenv("TWINAUDIT_TEST_SECRET", "x")
    done = cli(
        "verifier",
        "model",
        "add",
        str(spy),
        "--models",
        str(tmp_path / "models"),
        "--trust-pickle",
        "--input-shape",
        "28,28,1",
        check=False,
    )
    assert done.returncode == 2, done.stderr
    found = spy_report(done.stderr)
    assert found["keys"].startswith("denied"), found["keys"]
    assert "TWINAUDIT_TEST_SECRET" not in found["environ"]
    assert found["socket"].startswith("denied") and not _received(listener)
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


def test_n4_a_zip_bomb_is_refused_before_it_loads(tmp_path):
    bomb = write_zip_bomb_pt(tmp_path / "bomb.pt", gib=1)
    assert bomb.stat().st_size < 2 << 20  # about 1 MB on disk, 1 GiB inflated
    started = time.monotonic()
    store = ArtefactStore(tmp_path / "models")
    with pytest.raises(LimitExceededError, match="zip archive decompression ratio"):
        store.add(bomb, ServeOptions(name="bomb", input_shape=(28, 28, 1)))
    assert time.monotonic() - started < 5  # refused from the zip's directory, not loaded
    assert store.list() == []


@pytest.mark.slow
def test_n4_a_zip_bomb_that_reaches_a_child_hits_the_childs_memory_limit(tmp_path):
    """Past the caps (started directly), the bomb inflates in the child, under its limit."""
    bomb = write_zip_bomb_pt(tmp_path / "bomb.pt", gib=2)
    policy = SandboxPolicy(limits=ChildLimits(memory_bytes=GIB + GIB // 2, start_s=120))
    with pytest.raises(OracleError, match="did not start") as failed:
        start_held(bomb, OPTIONS, digest=file_sha256(bomb), policy=policy)
    # torch's allocator is refused the 2 GiB by the child's address-space limit.
    assert "can't allocate memory" in str(failed.value)


def test_n4_an_oversized_onnx_input_is_refused_before_it_loads(tmp_path):
    onnx_file = write_oversized_onnx(tmp_path / "big.onnx", side=65536)
    assert onnx_file.stat().st_size < 256
    started = time.monotonic()
    store = ArtefactStore(tmp_path / "models")
    with pytest.raises(LimitExceededError, match="ONNX input 'x' dimension"):
        store.add(onnx_file, ServeOptions(name="big"))
    assert time.monotonic() - started < 5
    assert store.list() == []
    with pytest.raises(LimitExceededError, match="--input-shape dimension"):
        ServeOptions(name="big", input_shape=(65536, 65536, 1))


def test_the_model_add_command_names_the_cap(tmp_path):
    bomb = write_zip_bomb_pt(tmp_path / "bomb.pt", gib=1)
    done = cli("verifier", "model", "add", str(bomb), "--models", str(tmp_path / "m"), check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("twinaudit: error: [limit-exceeded]")
    assert "decompression ratio" in done.stderr


@pytest.mark.slow
def test_without_bubblewrap_held_models_are_refused_unless_weaker_isolation_is_accepted(
    tmp_path,
):
    model = tmp_path / "tiny.ts"
    import torch

    torch.jit.script(tiny_cnn(seed=1)).save(str(model))
    limits = ChildLimits(start_s=60)
    missing = SandboxPolicy(limits, bwrap=str(tmp_path / "no-bwrap"))
    left = set(Path(tempfile.gettempdir()).glob("twinaudit-held-*"))
    with pytest.raises(OracleError, match="--allow-weak-isolation"):
        start_held(model, OPTIONS, digest=file_sha256(model), policy=missing)
    assert set(Path(tempfile.gettempdir()).glob("twinaudit-held-*")) == left  # nothing left
    weak = SandboxPolicy(limits, bwrap=str(tmp_path / "no-bwrap"), allow_weak=True)
    oracle = start_held(model, OPTIONS, digest=file_sha256(model), policy=weak)
    try:
        assert oracle.isolation == "weak" and oracle.info.n_classes == 10
    finally:
        oracle.close()


def test_the_signer_process_signs_only_the_arbiters_payloads(tmp_path):
    from twinaudit.verifier.signer_process import ProcessSigner

    key = tmp_path / "arbiter.key"
    cli("verifier", "keygen", "--key", str(key))
    signer = ProcessSigner.start(key)
    try:
        public = load_public_key(tmp_path / "arbiter.key.pub")
        assert signer.key_id == key_id(public)
        # Its command line and environment do not name the key file.
        pid = signer._process.pid
        assert str(key).encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert str(key).encode() not in Path(f"/proc/{pid}/environ").read_bytes()
        checkpoint = Checkpoint(signer.key_id, 1, bytes(32), "2026-01-02T03:04:05Z")
        envelope = signer.sign(checkpoint.encode(), CHECKPOINT_KIND)
        assert verify_checkpoint(envelope.to_json(), public) == checkpoint
        with pytest.raises(InputError, match="does not sign 'attestation'"):
            signer.sign(checkpoint.encode(), "attestation")
        with pytest.raises(InputError):
            signer.sign(encode({"any": "thing"}), "verdict")
        with pytest.raises(InputError):
            signer.sign(checkpoint.encode(), "escrow-receipt")  # a checkpoint is no receipt
        other = Checkpoint("0" * 64, 1, bytes(32), "2026-01-02T03:04:05Z")
        with pytest.raises(InputError, match="not this signer's key"):
            signer.sign(other.encode(), CHECKPOINT_KIND)
        # Still answering after the refusals.
        assert signer.sign(checkpoint.encode(), CHECKPOINT_KIND).payload == checkpoint.encode()
    finally:
        signer.close()
    with pytest.raises(InputError, match="cannot read key file"):
        ProcessSigner.start(tmp_path / "absent.key")


def test_verifier_serve_refuses_an_unreadable_key_in_one_line(tmp_path):
    done = cli(
        "verifier",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--db",
        str(tmp_path / "e.db"),
        "--key",
        str(tmp_path / "absent.key"),
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        line for line in done.stderr.strip().splitlines() if line.startswith("twinaudit:")
    ]
    assert "absent.key" in done.stderr and not os.path.exists(tmp_path / "e.db")


def test_a_hidden_file_inside_a_bound_folder_is_masked(tmp_path, monkeypatch):
    """`verifier serve` hides its key and database even in a folder the sandbox binds."""
    import subprocess

    from twinaudit.verifier.oracles.sandbox import child_command

    bound = tmp_path / "on-pythonpath"
    bound.mkdir()
    key = bound / "arbiter.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    other = bound / "other.txt"
    other.write_text("visible")
    monkeypatch.setenv("PYTHONPATH", f"{os.environ.get('PYTHONPATH', '')}{os.pathsep}{bound}")
    artefact = tmp_path / "artefact.ts"
    artefact.write_bytes(b"x")
    code = (
        "try:\n"
        f"    print(repr(open({str(key)!r}).read()))\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
        f"print(open({str(other)!r}).read())"
    )
    command = child_command(
        ["-c", code],
        artefact=artefact,
        socket_dir=tmp_path,
        threads=1,
        policy=SandboxPolicy(hidden=(key,)),
    )
    child = command.spawn(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.split() == ["PermissionError", "visible"]  # the key masked; its folder bound


def test_the_child_sees_the_package_but_not_the_rest_of_the_checkout(tmp_path, monkeypatch):
    """Only twinaudit/ and the folders its links name are bound, not runs, vaults or .git."""
    import subprocess

    from twinaudit.verifier.oracles.sandbox import child_command, package_roots

    monkeypatch.delenv("PYTHONPATH", raising=False)
    (root,) = package_roots()
    artefact = tmp_path / "artefact.ts"
    artefact.write_bytes(b"x")
    code = (
        "import os, twinaudit.protocol.errors as e\n"
        "print(e.__file__)\n"
        f"print(sorted(os.listdir({str(root)!r})))"
    )
    command = child_command(
        ["-c", code], artefact=artefact, socket_dir=tmp_path, threads=1, policy=SandboxPolicy()
    )
    child = command.spawn(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    module, listed = out.splitlines()
    assert module == str(root / "twinaudit" / "protocol" / "errors.py")
    seen = set(ast.literal_eval(listed))
    if command.isolation == "bubblewrap":
        links = {e.name for e in (root / "twinaudit").iterdir() if e.is_symlink()}
        assert links <= seen and "twinaudit" in seen
        assert not seen & {"README.md", ".git", "runs", "spec", "tests", "docs"}, seen


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    import torch

    path = tmp_path_factory.mktemp("tiny") / "tiny.ts"
    torch.jit.script(tiny_cnn(seed=2)).save(str(path))
    return path


def test_a_child_over_its_cpu_limit_is_ended_and_said_so(tiny_model):
    policy = SandboxPolicy(ChildLimits(cpu_seconds=1))  # less than importing torch takes
    with pytest.raises(OracleError, match=r"killed by SIGXCPU \(its CPU-time limit\)"):
        start_held(tiny_model, OPTIONS, digest=file_sha256(tiny_model), policy=policy)


def test_a_child_over_its_start_time_is_killed_at_once(tiny_model):
    policy = SandboxPolicy(ChildLimits(start_s=0.5, lifetime_s=0.5))
    started = time.monotonic()
    with pytest.raises(OracleError, match=r"did not start within 0\.5 s"):
        start_held(tiny_model, OPTIONS, digest=file_sha256(tiny_model), policy=policy)
    assert time.monotonic() - started < 5  # killed, not waited for


@pytest.mark.slow
def test_an_oversized_onnx_input_that_reaches_a_child_is_refused_before_its_probe(tmp_path):
    """Past the caps of `model add` (started directly), the child refuses it, typed."""
    onnx_file = write_oversized_onnx(tmp_path / "big.onnx", side=65536)
    with pytest.raises(OracleError, match=r"\[limit-exceeded\] the ONNX model's input dimension"):
        start_held(onnx_file, ServeOptions(name="big"), digest=file_sha256(onnx_file))


def test_an_arbiter_whose_signer_process_died_is_not_serving(tmp_path):
    """Nothing can be signed once the signer process is gone: health says NOT_SERVING."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
    from twinaudit.verifier.server import serve_arbiter
    from twinaudit.verifier.signer_process import ProcessSigner
    from twinaudit.wire.transport import make_channel

    key = tmp_path / "arbiter.key"
    cli("verifier", "keygen", "--key", str(key))
    signer = ProcessSigner.start(key)
    store = SqliteEscrowStore(tmp_path / "escrow.db", signer)
    server, port = serve_arbiter(store, signer, "127.0.0.1:0")
    try:
        with make_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            serving = health_pb2.HealthCheckResponse.SERVING
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == serving
            signer.check_alive()
            signer._process.kill()
            signer._process.wait(10)
            with pytest.raises(StateError, match="signer process ended"):
                signer.check_alive()
            deadline = time.monotonic() + 10  # the probe runs at most once a second or so
            status = serving
            while status == serving and time.monotonic() < deadline:
                time.sleep(0.2)
                status = health.Check(health_pb2.HealthCheckRequest(), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        server.stop(None)
        store.close()
        signer.close()


def test_the_signer_process_never_imports_a_package_planted_in_the_working_folder(
    tmp_path, monkeypatch
):
    """A `twinaudit/` in the folder the arbiter starts in is not what holds the key."""
    from twinaudit.verifier.signer_process import ProcessSigner

    key = tmp_path / "arbiter.key"
    cli("verifier", "keygen", "--key", str(key))
    planted = tmp_path / "start" / "twinaudit"
    planted.mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(planted.parent)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    signer = ProcessSigner.start(key)
    try:
        checkpoint = Checkpoint(signer.key_id, 1, bytes(32), "2026-01-02T03:04:05Z")
        signer.sign(checkpoint.encode(), CHECKPOINT_KIND)
    finally:
        signer.close()
    assert not marker.exists()
