"""The owner names her claim's mixture prior over the wire (``TestSpec.prior``, spec §10.7).

Real servers on 127.0.0.1: an arbiter on SQLite and a model oracle. Before, a claim
started over the wire always got the arbiter's default prior; now a start may name a
registered prior, which the claim map records and the verdict's filing binds, while a
start that names none has the start map (and the signed request) it had before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from tests.support.arbiter_world import keyed_record_world
from tests.support.claims import linear_claim
from tests.support.keys import KEY
from twinaudit.owner.claim_client import run_claim
from twinaudit.protocol.claim.filing import check_filing
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import VerificationError
from twinaudit.verifier.replay import replay
from twinaudit.wire.claim_start import params_from_claim_start, start_map, to_claim_start
from twinaudit.wire.transport import error_details
from twinaudit.wire.verifier.v1 import verifier_pb2 as pb
from twinaudit.wire.verifier.v1.verifier_pb2_grpc import VerifierStub


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An arbiter, an oracle, one record keyed with the owner's claim key."""
    with keyed_record_world(
        tmp_path_factory.mktemp("arbiter"), seed=12, salt_seed=b"prior"
    ) as world:
        yield world


def _claim(world: dict[str, Any], endpoint: str = "", **fields: Any) -> Any:
    params = linear_claim(
        world["record"], world["pairs"].root, endpoint or world["oracle"], **fields
    )
    return run_claim(
        world["channel"], params, world["pairs"].opening, claim_key=world["pairs"].claim_key
    )


def test_a_start_without_a_prior_has_the_start_map_it_had_before():
    params = linear_claim(0, bytes(32), "oracle.example:7500", test_name="mixture-e")
    start = to_claim_start(params)
    assert start.test.prior == ""
    assert set(start_map(start)["test"]) == {"name", "p", "alpha"}
    assert params_from_claim_start(start).prior is None
    named = to_claim_start(dataclasses.replace(params, prior="grid15-v1"))
    assert start_map(named)["test"]["prior"] == "grid15-v1"
    assert params_from_claim_start(named).prior == "grid15-v1"


@pytest.mark.parametrize("test", ["mixture-e", "mixture-graded"])
def test_the_named_prior_is_the_claim_s_and_the_filing_binds_it(world, test):
    outcome = _claim(world, test_name=test, prior="grid15-v1")
    verdict = check_verdict(outcome.verdict, KEY.public_key())
    assert verdict.claim.test_params["prior"] == "grid15-v1"
    assert verdict.filing is not None
    assert verdict.filing.request.start["test"]["prior"] == "grid15-v1"
    stored = VerifierStub(world["channel"]).GetVerdict(
        pb.GetVerdictRequest(claim_id=outcome.claim_id), timeout=30
    )
    replay(verdict, stored.transcript)  # raises if it does not replay
    # The filing asked for grid15-v1: a claim map with another prior is not its claim.
    claim = verdict.claim
    other = dataclasses.replace(claim, test_params={**claim.test_params, "prior": "grid16-v1"})
    with pytest.raises(VerificationError, match="prior"):
        check_filing(verdict.filing, other, verdict.arbiter)


def test_a_start_without_a_prior_gets_the_default(world):
    outcome = _claim(world, test_name="mixture-e")
    verdict = check_verdict(outcome.verdict, KEY.public_key())
    assert verdict.claim.test_params["prior"] == "grid16-v1"
    assert "prior" not in verdict.filing.request.start["test"]


@pytest.mark.parametrize(
    ("test", "prior"), [("pprm-chernoff", "grid16-v1"), ("mixture-e", "grid99-v1")]
)
def test_a_prior_the_test_cannot_take_is_refused_before_the_model_is_dialled(world, test, prior):
    # The oracle's address refuses connections: a claim that got as far as dialling it
    # would fail with `unavailable`, not with the parameter's error.
    with pytest.raises(grpc.RpcError) as refused:
        _claim(world, endpoint="127.0.0.1:9", test_name=test, prior=prior)
    details = error_details(refused.value)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
    assert details is not None and details.code == "invalid-parameter"
    assert details.counted is False


def test_owner_claim_refuses_a_prior_for_the_paper_s_test(tmp_path, capsys):
    from twinaudit.cli.main import main

    args = ["owner", "claim", str(tmp_path / "vault"), "--oracle", "127.0.0.1:9"]
    args += ["--arbiter", "127.0.0.1:1", "--arbiter-key", str(tmp_path / "key.pub")]
    args += ["--out", str(tmp_path / "out"), "--test", "pprm-chernoff", "--prior", "grid16-v1"]
    assert main(args) == 2
    assert "[invalid-parameter] --prior names a mixture test's prior" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
