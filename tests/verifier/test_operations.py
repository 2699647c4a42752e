"""What a running arbiter tells its operator (issue #22 item 5): logs, metrics, health.

Real in-process servers on 127.0.0.1 (the arbiter on SQLite, a model oracle): one
log event per RPC with method, peer, status, duration and the claim or record id;
every exception a handler lets escape logged with its traceback, the peer answered
INTERNAL without the details; a Prometheus scrape over HTTP after a real escrow and
a real claim; health NOT_SERVING once the store stops answering; reflection only
when asked. Then ``verifier serve`` itself with ``--log-format json`` and
``--metrics-listen``.
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from demo.seeded import SeededEntropy
from tests.support.claims import claim_params, make_pairset
from tests.support.cli_processes import ROOT, cli, stop
from tests.support.fake_oracle import LinearOracle
from twinaudit.cli.serve_options import serve_metrics
from twinaudit.owner.claim_client import run_claim
from twinaudit.practitioner.grpc_server import serve_oracle
from twinaudit.protocol.claim.verdict import check_verdict
from twinaudit.protocol.errors import InputError
from twinaudit.verifier.escrow.metered_store import MeteredStore
from twinaudit.verifier.escrow.service import SERVICE_NAME as ESCROW_SERVICE
from twinaudit.verifier.escrow.sqlite_store import SqliteEscrowStore
from twinaudit.verifier.server import serve_arbiter
from twinaudit.verifier.service import SERVICE_NAME as VERIFIER_SERVICE
from twinaudit.wire.escrow.v1 import escrow_pb2, escrow_pb2_grpc
from twinaudit.wire.observe import (
    RPC_LOGGER,
    JsonFormatter,
    PrometheusMetrics,
    TextFormatter,
    configure_logging,
)
from twinaudit.wire.transport import make_channel, make_server
from twinaudit.wire.verifier.v1 import verifier_pb2 as vpb
from twinaudit.wire.verifier.v1 import verifier_pb2_grpc as vpb_grpc

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
PAIRS = make_pairset(16, seed=5)
TIMEOUT_S = 10.0
COMMIT = "/twinaudit.escrow.v1.Escrow/Commit"
FILE_CLAIM = "/twinaudit.verifier.v1.Verifier/FileClaim"


def _events(caplog: pytest.LogCaptureFixture, method: str | None = None) -> list[dict[str, Any]]:
    """Return the fields of the captured per-RPC events (of ``method``, if given)."""
    found = []
    for record in caplog.records:
        if record.name == RPC_LOGGER and record.getMessage() == "rpc":
            fields = dict(record.fields)  # type: ignore[attr-defined]
            if method is None or fields["method"] == method:
                found.append(fields)
    return found


def _scrape(port: int) -> dict[str, float]:
    """GET /metrics over HTTP; return every sample (``name{labels}``) with its value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=TIMEOUT_S) as answer:
        assert answer.status == 200
        text = answer.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def _claim(
    channel: grpc.Channel, oracle_endpoint: str, record: int, open_pair: Any = PAIRS.opening
) -> Any:
    request = claim_params(
        record,
        PAIRS.root,
        oracle_endpoint,
        "linear",
        k=1,
        perturbation="none",
        knowledge="C1",
    )
    return run_claim(channel, request, open_pair, claim_key=PAIRS.claim_key, timeout_s=120)


@pytest.fixture(scope="module")
def dispute(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An arbiter with metrics on HTTP, an oracle, one record escrowed, one claim run.

    The escrow and the claim run under a log capture of their own; their events and
    the verdict are in the dict.
    """
    directory = tmp_path_factory.mktemp("arbiter")
    store = SqliteEscrowStore(directory / "escrow.db", KEY, entropy=SeededEntropy(b"rho"))
    metrics = PrometheusMetrics()
    server, port = serve_arbiter(
        store, KEY, "127.0.0.1:0", entropy=SeededEntropy(b"c"), metrics=metrics, reflection=True
    )
    http, metrics_port = serve_metrics("127.0.0.1:0", metrics)
    oracle, oracle_port = serve_oracle(LinearOracle(), "127.0.0.1:0")
    channel = make_channel(f"127.0.0.1:{port}")
    records: list[logging.LogRecord] = []
    handler = _Collect(records)
    rpc_logger = logging.getLogger(RPC_LOGGER)
    rpc_logger.addHandler(handler)
    previous = rpc_logger.level
    rpc_logger.setLevel(logging.INFO)
    try:
        receipt = PAIRS.escrow(channel, KEY.public_key(), "operations test")
        outcome = _claim(channel, f"127.0.0.1:{oracle_port}", receipt.entry.index)
    finally:
        rpc_logger.removeHandler(handler)
        rpc_logger.setLevel(previous)
    try:
        yield {
            "channel": channel,
            "store": store,
            "metrics port": metrics_port,
            "oracle": f"127.0.0.1:{oracle_port}",
            "records": records,
            "receipt": receipt,
            "outcome": outcome,
            "verdict": check_verdict(outcome.verdict, KEY.public_key()),
        }
    finally:
        channel.close()
        server.stop(None)
        oracle.stop(None)
        http.shutdown()
        http.server_close()
        store.close()


class _Collect(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _fields_of(records: list[logging.LogRecord], method: str) -> list[dict[str, Any]]:
    return [
        dict(r.fields)  # type: ignore[attr-defined]
        for r in records
        if r.getMessage() == "rpc" and r.fields["method"] == method  # type: ignore[attr-defined]
    ]


# --- logs --------------------------------------------------------------------------------


def test_one_log_event_per_rpc_with_peer_status_duration_and_ids(dispute):
    records = dispute["records"]
    methods = [r.fields["method"] for r in records if r.getMessage() == "rpc"]  # type: ignore[attr-defined]
    # The owner's escrow: the checkpoint (key check), the commit, the inclusion proof;
    # then the claim's stream, one event for the whole stream.
    assert methods.count(COMMIT) == 1 and methods.count(FILE_CLAIM) == 1
    (commit,) = _fields_of(records, COMMIT)
    assert commit["code"] == "OK" and commit["record"] == dispute["receipt"].entry.index
    assert re.fullmatch(r"ipv[46]:.*127\.0\.0\.1.*:\d+|ipv6:\[::1\]:\d+", commit["peer"])
    assert isinstance(commit["duration_ms"], float) and commit["duration_ms"] >= 0
    (claim,) = _fields_of(records, FILE_CLAIM)
    verdict = dispute["verdict"]
    assert claim["code"] == "OK" and claim["claim"] == verdict.claim_id
    assert claim["record"] == verdict.claim.record_index
    assert claim["decision"] == verdict.decision
    # Nothing secret: no salt, no version bytes, no rho in any event.
    rho = dispute["receipt"].rho.hex()
    text = "\n".join(TextFormatter().format(r) for r in records)
    assert rho not in text and PAIRS.salts[0].hex() not in text


def test_a_refused_rpc_is_logged_with_its_status_and_never_an_unchecked_id(dispute, caplog):
    stub = vpb_grpc.VerifierStub(dispute["channel"])
    caplog.set_level(logging.INFO, logger=RPC_LOGGER)
    for claim_id, code in (("' OR 1=1 --", "INVALID_ARGUMENT"), ("no-such-claim", "NOT_FOUND")):
        with pytest.raises(grpc.RpcError) as refused:
            stub.GetVerdict(vpb.GetVerdictRequest(claim_id=claim_id), timeout=TIMEOUT_S)
        assert refused.value.code().name == code
    first, second = _events(caplog, "/twinaudit.verifier.v1.Verifier/GetVerdict")
    assert first["code"] == "INVALID_ARGUMENT" and "claim" not in first and first["details"]
    assert second["code"] == "NOT_FOUND" and second["claim"] == "no-such-claim"


def test_json_log_lines_parse_one_object_per_line(dispute):
    stream = io.StringIO()
    restore = configure_logging("info", "json", stream)
    try:
        stub = escrow_pb2_grpc.EscrowStub(dispute["channel"])
        stub.GetRecord(escrow_pb2.GetRecordRequest(index=0), timeout=TIMEOUT_S)
        with pytest.raises(grpc.RpcError):
            stub.GetRecord(escrow_pb2.GetRecordRequest(index=99), timeout=TIMEOUT_S)
    finally:
        restore()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    events = [e for e in lines if e["message"] == "rpc" and e["method"].endswith("/GetRecord")]
    assert [(e["code"], e["record"]) for e in events] == [("OK", 0), ("NOT_FOUND", 99)]
    assert all(e["level"] == "INFO" and e["logger"] == RPC_LOGGER for e in events)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", e["time"]) for e in events)


class _FailingStore(MeteredStore):
    """A store whose entries cannot be read: a bug or a broken disk, not a protocol error."""

    def entry(self, index: int) -> Any:
        raise RuntimeError("the disk is on fire")


def test_a_handler_exception_is_logged_with_its_traceback_and_answered_internal(tmp_path, caplog):
    store = SqliteEscrowStore(tmp_path / "escrow.db", KEY)
    failing = _FailingStore(store, PrometheusMetrics())
    server, port = serve_arbiter(failing, KEY, "127.0.0.1:0")
    channel = make_channel(f"127.0.0.1:{port}")
    caplog.set_level(logging.INFO)
    try:
        PAIRS.escrow(channel, KEY.public_key(), "o")
        # FileClaim lets the store's exception escape: the interceptor logs it.
        with pytest.raises(grpc.RpcError) as refused:
            _claim(channel, "127.0.0.1:9", 0)
        # The escrow service catches it itself, logs it and answers INTERNAL.
        with pytest.raises(grpc.RpcError) as escrow_refused:
            escrow_pb2_grpc.EscrowStub(channel).GetRecord(
                escrow_pb2.GetRecordRequest(index=0), timeout=TIMEOUT_S
            )
    finally:
        channel.close()
        server.stop(None)
        store.close()
    assert refused.value.code() == grpc.StatusCode.INTERNAL
    assert "disk" not in refused.value.details()  # the details stay in the log
    assert escrow_refused.value.code() == grpc.StatusCode.INTERNAL
    failures = [r for r in caplog.records if r.exc_info is not None]
    assert len(failures) == 2
    for record in failures:
        assert record.levelno == logging.ERROR
        for formatter in (TextFormatter(), JsonFormatter()):
            line = formatter.format(record)
            assert "Traceback (most recent call last)" in line
            assert "RuntimeError: the disk is on fire" in line
            assert "in entry" in line  # the frame that raised
    handled = next(r for r in failures if r.name == RPC_LOGGER)
    assert handled.fields["method"] == FILE_CLAIM  # type: ignore[attr-defined]
    claim_event = _events(caplog, FILE_CLAIM)[0]
    assert claim_event["code"] == "INTERNAL"
    escrow_event = _events(caplog, "/twinaudit.escrow.v1.Escrow/GetRecord")[0]
    assert escrow_event["code"] == "INTERNAL" and escrow_event["record"] == 0
    assert JsonFormatter().format(handled).count("\n") == 0  # one JSON object, one line


# --- metrics -----------------------------------------------------------------------------


def test_metrics_scrape_after_a_real_escrow_and_claim(dispute):
    samples = _scrape(dispute["metrics port"])
    decision = dispute["verdict"].decision
    assert samples['twinaudit_escrow_commits_total{result="committed"}'] == 1
    assert samples[f'twinaudit_claims_finished_total{{decision="{decision}"}}'] == 1
    assert samples["twinaudit_claims_open"] == 0
    assert samples[f'twinaudit_rpcs_total{{code="OK",method="{COMMIT}"}}'] == 1
    assert samples[f'twinaudit_rpcs_total{{code="OK",method="{FILE_CLAIM}"}}'] == 1
    # Every call is timed once, whatever its code; other tests of this module share the
    # arbiter and may have made failing FileClaim calls first (the order is not fixed).
    claim_calls = sum(
        value
        for name, value in samples.items()
        if name.startswith("twinaudit_rpcs_total{") and f'method="{FILE_CLAIM}"' in name
    )
    assert samples[f'twinaudit_rpc_duration_seconds_count{{method="{FILE_CLAIM}"}}'] == claim_calls
    windows = samples['twinaudit_oracle_query_seconds_count{outcome="ok"}']
    assert windows >= 1 and samples['twinaudit_oracle_query_seconds_sum{outcome="ok"}'] > 0
    for operation in ("commit", "entry", "save_claim", "finish_claim"):
        assert samples[f'twinaudit_store_operation_seconds_count{{operation="{operation}"}}'] >= 1
    # Labels come from fixed sets: no claim id, record index or peer in any sample.
    claim_id = dispute["verdict"].claim_id
    assert not any(claim_id in name or "127.0.0.1" in name for name in samples)


def test_a_refused_commit_is_counted_as_refused(dispute):
    before = _scrape(dispute["metrics port"])
    stub = escrow_pb2_grpc.EscrowStub(dispute["channel"])
    with pytest.raises(grpc.RpcError) as refused:  # the root is already escrowed (spec 9.1)
        stub.Commit(
            escrow_pb2.CommitRequest(
                spec_version="0.2",
                root=PAIRS.root,
                n_pairs=len(PAIRS),
                item_kind="image",
                claim_key=PAIRS.claim_public_key(),
            ),
            timeout=TIMEOUT_S,
        )
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    after = _scrape(dispute["metrics port"])
    key = 'twinaudit_escrow_commits_total{result="refused"}'
    assert after[key] == before.get(key, 0) + 1
    failed = f'twinaudit_rpcs_total{{code="FAILED_PRECONDITION",method="{COMMIT}"}}'
    assert after[failed] == before.get(failed, 0) + 1


def _ended_claims(samples: dict[str, float]) -> float:
    """Return how many claim streams ended with a status other than OK."""
    prefix = "twinaudit_rpcs_total{code="
    return sum(
        v
        for k, v in samples.items()
        if k.startswith(prefix) and FILE_CLAIM in k and 'code="OK"' not in k
    )


def test_an_interrupted_claim_is_logged_and_leaves_the_open_gauge(dispute, caplog):
    caplog.set_level(logging.INFO, logger=RPC_LOGGER)
    before = _scrape(dispute["metrics port"])

    def owner_goes_away(index: int) -> Any:
        raise ConnectionError("the owner's laptop closed")

    with pytest.raises(ConnectionError):
        _claim(dispute["channel"], dispute["oracle"], 0, open_pair=owner_goes_away)
    deadline = time.monotonic() + 5
    while _ended_claims(after := _scrape(dispute["metrics port"])) == _ended_claims(before):
        assert time.monotonic() < deadline, "the interrupted claim was never counted"
        time.sleep(0.1)
    assert after["twinaudit_claims_open"] == 0
    # It stays open in the store, resumable: no decision is counted for it.
    finished = [k for k in after if k.startswith("twinaudit_claims_finished_total")]
    assert {k: after[k] for k in finished} == {k: before[k] for k in finished}
    (event,) = _events(caplog, FILE_CLAIM)
    # The owner's side either half-closes its stream (the arbiter answers ABORTED with
    # the claim to resume) or cancels it first (CANCELLED): both name the claim.
    assert event["code"] in ("ABORTED", "CANCELLED") and event["record"] == 0
    stored = dispute["store"].load_claim(event["claim"])
    assert stored is not None and stored.status == "open"


def test_metrics_on_a_port_in_use_is_one_line(dispute):
    with pytest.raises(InputError, match="already in use"):
        serve_metrics(f"127.0.0.1:{dispute['metrics port']}", PrometheusMetrics())


# --- health and reflection ----------------------------------------------------------------


def _health(channel: grpc.Channel, service: str = "") -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest(service=service)
    return int(stub.Check(request, timeout=TIMEOUT_S).status)


def test_health_is_not_serving_once_the_store_is_unreachable(tmp_path):
    store = SqliteEscrowStore(tmp_path / "escrow.db", KEY)
    server, port = serve_arbiter(store, KEY, "127.0.0.1:0")
    channel = make_channel(f"127.0.0.1:{port}")
    serving, not_serving = (
        health_pb2.HealthCheckResponse.SERVING,
        health_pb2.HealthCheckResponse.NOT_SERVING,
    )
    try:
        for name in ("", ESCROW_SERVICE, VERIFIER_SERVICE):
            assert _health(channel, name) == serving
        store.close()  # the store stops answering (as a database that went away would)
        deadline = time.monotonic() + 5
        while _health(channel) != not_serving:  # probed at most once a second
            assert time.monotonic() < deadline, "health still SERVING with the store closed"
            time.sleep(0.2)
        for name in (ESCROW_SERVICE, VERIFIER_SERVICE):
            assert _health(channel, name) == not_serving
    finally:
        channel.close()
        server.stop(None)


def test_health_follows_its_probe_both_ways():
    answers = {"up": False}

    def probe() -> None:
        if not answers["up"]:
            raise ConnectionError("database unreachable")

    server, port = make_server(
        "127.0.0.1:0", lambda s: None, service_names=("x.Y",), health_probe=probe
    )
    channel = make_channel(f"127.0.0.1:{port}")
    try:
        assert _health(channel, "x.Y") == health_pb2.HealthCheckResponse.NOT_SERVING
        answers["up"] = True
        deadline = time.monotonic() + 5
        while _health(channel, "x.Y") != health_pb2.HealthCheckResponse.SERVING:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        channel.close()
        server.stop(None)


def _reflected_services(channel: grpc.Channel) -> list[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (answer,) = list(stub.ServerReflectionInfo(iter([request]), timeout=TIMEOUT_S))
    return sorted(s.name for s in answer.list_services_response.service)


def test_reflection_only_when_asked(dispute):
    services = _reflected_services(dispute["channel"])
    assert ESCROW_SERVICE in services and VERIFIER_SERVICE in services
    assert "grpc.health.v1.Health" in services
    oracle = make_channel(dispute["oracle"])  # served without reflection
    try:
        with pytest.raises(grpc.RpcError) as refused:
            _reflected_services(oracle)
    finally:
        oracle.close()
    assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


# --- verifier serve, as an operator runs it -----------------------------------------------


@pytest.mark.slow
def test_verifier_serve_logs_json_and_serves_metrics(tmp_path):
    cli("verifier", "keygen", "--key", str(tmp_path / "arbiter.key"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "twinaudit",
            *("verifier", "serve", "--listen", "127.0.0.1:0"),
            *("--db", str(tmp_path / "escrow.db"), "--key", str(tmp_path / "arbiter.key")),
            *("--log-format", "json", "--metrics-listen", "127.0.0.1:0", "--reflection"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        address = process.stdout.readline().split()[-1]
        metrics = process.stdout.readline().split()[-1]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", metrics), metrics
        channel = make_channel(address)
        try:
            escrow_pb2_grpc.EscrowStub(channel).GetCheckpoint(
                escrow_pb2.GetCheckpointRequest(), timeout=TIMEOUT_S
            )
            assert ESCROW_SERVICE in _reflected_services(channel)
        finally:
            channel.close()
        port = int(metrics.rsplit(":", 1)[1].split("/")[0])
        samples = _scrape(port)
        checkpoint = '{code="OK",method="/twinaudit.escrow.v1.Escrow/GetCheckpoint"}'
        assert samples[f"twinaudit_rpcs_total{checkpoint}"] == 1
    finally:
        stop(process)
    assert process.stderr is not None
    lines = process.stderr.read().splitlines()
    # Only gRPC's own C core writes anything else (its lines do not start with a brace).
    events = [json.loads(line) for line in lines if line.startswith("{")]
    rpcs = [e for e in events if e.get("message") == "rpc"]
    assert [e["method"] for e in rpcs if e["method"].startswith("/twinaudit")] == [
        "/twinaudit.escrow.v1.Escrow/GetCheckpoint"
    ]
    assert rpcs[0]["code"] == "OK" and rpcs[0]["peer"].startswith("ipv")


def test_serve_options_have_help_and_refuse_a_bad_metrics_address(tmp_path, capsys):
    from twinaudit.cli.main import main

    for command in (["verifier", "serve"], ["oracle", "serve"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        for flag in ("--log-level", "--log-format", "--metrics-listen", "--reflection"):
            assert flag in out, (command, flag)
        assert "exit status:" in out
    main(["verifier", "keygen", "--key", str(tmp_path / "k")])
    code = main(
        [
            *("verifier", "serve", "--listen", "127.0.0.1:0", "--db", str(tmp_path / "e.db")),
            *("--key", str(tmp_path / "k"), "--metrics-listen", ":9100"),
        ]
    )
    assert code == 2 and "--metrics-listen" in capsys.readouterr().err
    assert not (tmp_path / "e.db").exists()  # refused before the store was created
