"""Arbiter-held models (issue #23 item 5): a stored artefact, run by the verifier, re-executed.

The arbiter stores a tiny TorchScript classifier under its SHA-256 (``verifier model
add``); a claim names it ``held:sha256:<hex>`` and the verifier runs it in a child
``oracle serve`` process. The verdict records the artefact's SHA-256 as the model
digest, and ``verifier reexecute`` recomputes every recorded answer from the
transcript, the openings and the file: equal bit for bit; a file with one weight
changed is a different artefact (its digest is refused); and with the digest check
bypassed, the changed model's answers are found to differ. The CPU-determinism
conditions (one thread, deterministic algorithms, the same batches) are what the
child runs under and what its framework text reports.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
import torch

from demo.seeded import SeededEntropy, fixed_salts
from tests.support.claims import claim_params
from tests.support.cli_processes import cli
from tests.support.data import synthetic_pairs
from tests.support.format_models import tiny_cnn
from tests.support.keys import KEY
from tests.support.pairset import PairSet
from twinaudit.owner.claim_client import run_claim
from twinaudit.protocol.claim.claim_map import ClaimMap
from twinaudit.protocol.claim.openings import OpenedPair, decode_openings, encode_openings
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import InputError, NotFoundError, OracleError, VerificationError
from twinaudit.protocol.items import encode_item
from twinaudit.protocol.keys import public_key_pem
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.oracles.dial import dial_oracle
from twinaudit.verifier.oracles.held import (
    ArtefactStore,
    ServeOptions,
    held_address,
    parse_held_address,
    start_held,
)
from twinaudit.verifier.reexecute import recompute_answers, reexecute
from twinaudit.verifier.replay import replay
from twinaudit.verifier.server import serve_arbiter
from twinaudit.wire.transport import make_channel
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as pb_grpc

pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="held models run in bubblewrap, not installed"
    ),
    # Every test shares the module's held model, which takes seconds to start in its sandbox.
    pytest.mark.slow,
]

N_PAIRS = 24
OPTIONS = ServeOptions(name="tiny.ts", input_shape=(28, 28, 1), n_classes=10, max_batch=8)


def _script(model: torch.nn.Module, path):
    torch.jit.script(model).save(str(path))
    return path


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """A held artefact, a claim against it over gRPC, its verdict, transcript and openings."""
    tmp = tmp_path_factory.mktemp("held")
    model = _script(tiny_cnn(seed=5), tmp / "tiny.ts")
    artefact, info = ArtefactStore(tmp / "models").add(model, OPTIONS)

    key = KEY
    entropy = SeededEntropy(b"held arbiter")
    store = SqliteEscrowStore(tmp / "escrow.db", key, entropy=entropy)
    arbiter, port = serve_arbiter(
        store, key, "127.0.0.1:0", entropy=entropy, held_models=tmp / "models"
    )
    channel = make_channel(f"127.0.0.1:{port}")
    pairs = synthetic_pairs(N_PAIRS, seed=21, epsilon=24)
    versions = [tuple(encode_item(item) for item in pairs.items(i)) for i in range(N_PAIRS)]
    owner_set = PairSet("image", versions, fixed_salts(N_PAIRS))
    receipt = owner_set.escrow(channel, key.public_key(), "held owner")
    request = claim_params(
        receipt.entry.index,
        owner_set.root,
        artefact.address,
        "court exhibit 7",
        k=2,
        perturbation="pad-shift-flip-dither",
        knowledge="C1",
        max_pairs=12,
        window=4,
    )
    outcome = run_claim(
        channel, request, owner_set.opening, claim_key=owner_set.claim_key, timeout_s=300
    )
    stored = pb_grpc.VerifierStub(channel).GetVerdict(
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=10
    )
    verdict = check_verdict(outcome.verdict, key.public_key())
    opened = [
        OpenedPair(i, owner_set.pair_opening(i), owner_set.opening(i).proof) for i in verdict.opened
    ]
    files = {
        "verdict": tmp / "verdict.json",
        "transcript": tmp / "transcript.bin",
        "openings": tmp / "openings.bin",
        "pubkey": tmp / "arbiter.key.pub",
    }
    files["verdict"].write_bytes(outcome.verdict)
    files["transcript"].write_bytes(stored.transcript)
    files["openings"].write_bytes(encode_openings(owner_set.root, opened))
    files["pubkey"].write_bytes(public_key_pem(key.public_key()))
    yield {
        "tmp": tmp,
        "model": model,
        "artefact": artefact,
        "info": info,
        "verdict": verdict,
        "transcript": stored.transcript,
        "openings": files["openings"].read_bytes(),
        "files": files,
    }
    arbiter.stop(None)
    channel.close()
    store.close()


def _changed_weight(tmp):
    """The same model with one weight changed (the first filter's centre, by 1e-3)."""
    model = tiny_cnn(seed=5)
    with torch.no_grad():
        model.conv1.weight[0, 0, 1, 1] += 1e-3
    return _script(model, tmp / "tiny-changed.ts")


def test_model_add_stores_the_artefact_by_its_sha256(held):
    artefact, info = held["artefact"], held["info"]
    digest = hashlib.sha256(held["model"].read_bytes()).hexdigest()
    assert artefact.digest == digest and artefact.address == f"held:sha256:{digest}"
    assert artefact.path.read_bytes() == held["model"].read_bytes()
    assert info.model_digest == digest and info.model_format == "torchscript"
    assert info.input_shape == (28, 28, 1) and info.n_classes == 10
    # The child runs under the determinism conditions and says so.
    assert "; deterministic, 1 thread, cpu " in info.framework
    assert [a.address for a in ArtefactStore(held["tmp"] / "models").list()] == [artefact.address]


def test_the_verdict_binds_the_artefact_digest_and_replays(held):
    verdict = held["verdict"]
    claim = verdict.claim
    assert claim.endpoint == held["artefact"].address
    assert claim.oracle_info.model_digest == held["artefact"].digest
    assert claim.oracle_info.model_format == "torchscript"
    assert claim.oracle_info.framework == held["info"].framework
    assert replay(verdict, held["transcript"]).pairs == len(verdict.opened) == 12


def test_reexecute_recomputes_every_answer_bit_for_bit(held):
    result = reexecute(held["verdict"], held["transcript"], held["openings"], held["model"])
    assert result.pairs == 12 and result.windows == 2  # requests of 4, then 8
    assert result.answers == held["verdict"].queries == 12 * 4
    assert result.framework_here == result.framework_recorded


def test_reexecute_command_json_and_exit_codes(held):
    files = held["files"]
    args = (
        "verifier",
        "reexecute",
        str(files["verdict"]),
        "--transcript",
        str(files["transcript"]),
        "--openings",
        str(files["openings"]),
        "--pubkey",
        str(files["pubkey"]),
    )
    done = cli(*args, "--model", str(held["model"]), "--json")
    report = json.loads(done.stdout)
    assert report["identical"] is True and report["answers"] == 48
    assert report["model_digest"] == held["artefact"].digest

    changed = _changed_weight(held["tmp"])
    failed = cli(*args, "--model", str(changed), check=False)
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("twinaudit: error: [verification-failed] REEXECUTE FAILED: ")
    assert "is not the model digest the verdict records" in lines[0]

    missing = cli(*args, "--model", str(held["tmp"] / "absent.ts"), check=False)
    assert missing.returncode == 2


def test_one_changed_weight_is_another_artefact(held):
    changed = _changed_weight(held["tmp"])
    with pytest.raises(VerificationError, match="a different artefact"):
        reexecute(held["verdict"], held["transcript"], held["openings"], changed)


def test_changed_answers_are_found_with_the_digest_check_bypassed(held):
    """The changed model, presented under the original digest: its answers differ."""
    changed = _changed_weight(held["tmp"])
    oracle = start_held(changed, OPTIONS, digest=held["artefact"].digest)
    try:
        with pytest.raises(VerificationError, match="answers differ from the recorded ones"):
            recompute_answers(held["verdict"], held["transcript"], held["openings"], oracle)
    finally:
        oracle.close()


def test_openings_must_be_the_transcripts_items(held):
    root, pairs = decode_openings(held["openings"])
    first = held["verdict"].opened[0]
    swapped = dict(pairs)
    other = next(i for i in pairs if i != first)
    swapped[first] = OpenedPair(first, pairs[other].opening, pairs[first].proof)
    with pytest.raises(VerificationError, match="not under the verdict's root"):
        reexecute(
            held["verdict"],
            held["transcript"],
            encode_openings(root, list(swapped.values())),
            held["model"],
        )
    fewer = [p for i, p in pairs.items() if i != first]
    with pytest.raises(VerificationError, match=f"no opening of pair {first}"):
        reexecute(held["verdict"], held["transcript"], encode_openings(root, fewer), held["model"])


@pytest.mark.slow
def test_determinism_two_children_answer_bit_identically(held):
    """Two fresh children (one thread, deterministic) answer one batch with equal bits."""
    images = np.random.default_rng(0).random((11, 28, 28, 1)).astype(np.float32)
    answers = []
    for _ in range(2):
        oracle = start_held(held["model"], OPTIONS, digest=held["artefact"].digest)
        try:
            probabilities = oracle.classify(images).probabilities
            assert probabilities is not None
            answers.append(probabilities.tobytes())
        finally:
            oracle.close()
    assert answers[0] == answers[1]


def test_a_claim_map_with_a_held_endpoint_names_its_digest(held):
    claim = dict(held["verdict"].payload["claim"])
    model = dict(claim["model"])
    model["endpoint"] = held_address("0" * 64)
    claim["model"] = model
    with pytest.raises(InputError, match="model_digest must be the SHA-256"):
        ClaimMap.from_value(claim)
    model["endpoint"] = "held:sha256:ABC"
    with pytest.raises(InputError, match="held:sha256:<64 lowercase hex>"):
        ClaimMap.from_value(claim)


def test_held_addresses_are_checked_before_anything_runs(held, tmp_path):
    with pytest.raises(InputError, match="held:sha256:<64 lowercase hex digits>"):
        parse_held_address("held:sha256:1234")
    with pytest.raises(NotFoundError, match="holds no model artefacts"):
        dial_oracle(held["artefact"].address, timeout_s=5)
    with pytest.raises(NotFoundError, match="holds no model artefact sha256:"):
        dial_oracle(held_address("f" * 64), timeout_s=5, held_models=held["tmp"] / "models")


def test_model_add_refuses_what_does_not_start_and_stores_nothing(held, tmp_path):
    store = ArtefactStore(tmp_path / "models")
    unprobed = ServeOptions(name="tiny.ts", n_classes=10)
    with pytest.raises(InputError, match="give --input-shape"):
        store.add(held["model"], unprobed)
    wrong = ServeOptions(name="tiny.ts", input_shape=(28, 28, 1), n_classes=7)
    with pytest.raises(OracleError, match="class-count"):
        store.add(held["model"], wrong)
    assert store.list() == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda v: v.update(type="transcript"), "not an openings file"),
        (lambda v: v.update(root=bytes(31)), "root must be 32 bytes"),
        (lambda v: v["pairs"].append(dict(v["pairs"][0])), "malformed \\(or given twice\\)"),
        (lambda v: v["pairs"][0].update(proof=[b"x"]), "malformed"),
        (lambda v: v["pairs"][0].pop("salt"), "an opened pair is a map"),
        (lambda v: v.update(extra=1), "a map with the keys"),
    ],
)
def test_an_openings_file_is_read_strictly(held, change, message):
    from twinaudit.protocol.encoding import decode, encode

    value = decode(held["openings"])
    change(value)
    with pytest.raises(InputError, match=message):
        decode_openings(encode(value))
