"""A failed call's machine-readable error (spec §2.2): code and rule in a google.rpc.ErrorInfo."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from twinaudit.protocol.claim.scores.classifier import ScoreSpec
from twinaudit.protocol.errors import (
    ClaimBusyError,
    ClaimsChangedError,
    InputError,
    NotFoundError,
    OracleError,
    ParameterError,
    RateLimitedError,
    ReplayedRequestError,
    RootAlreadyEscrowedError,
    SignatureError,
    StateError,
    UnknownClaimError,
    UnknownRecordError,
    VersionError,
)
from twinaudit.wire.transport import (
    ERROR_DOMAIN,
    ErrorDetails,
    abort_with_error,
    error_details,
    status_for,
)

Handler = Callable[[bytes, grpc.ServicerContext], bytes]


def _c4_one_copy(_: bytes, context: grpc.ServicerContext) -> bytes:
    try:
        ScoreSpec(k=1, perturbation="dither", knowledge="C4")
    except ParameterError as exc:
        abort_with_error(context, exc)
    raise AssertionError("C4 with one copy was accepted")


def _words_only(_: bytes, context: grpc.ServicerContext) -> bytes:
    # An arbiter that refuses with the right words but no ErrorInfo.
    context.abort(
        grpc.StatusCode.INVALID_ARGUMENT,
        "[invalid-parameter] knowledge condition C4 with k = 1 scores every version alike",
    )
    raise AssertionError("unreachable")


def _other_domain(_: bytes, context: grpc.ServicerContext) -> bytes:
    info = error_details_pb2.ErrorInfo(
        reason="INVALID_PARAMETER", domain="example.com", metadata={"rule": "c4-one-copy"}
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=grpc.StatusCode.INVALID_ARGUMENT.value[0], message="no")
    status.details.append(detail)
    context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable")


def _not_found(_: bytes, context: grpc.ServicerContext) -> bytes:
    abort_with_error(context, NotFoundError("no record 7"))


def _busy(_: bytes, context: grpc.ServicerContext) -> bytes:
    abort_with_error(context, ClaimBusyError("claim 3 is running"))  # ABORTED by its family


HANDLERS: dict[str, Handler] = {
    "C4OneCopy": _c4_one_copy,
    "WordsOnly": _words_only,
    "OtherDomain": _other_domain,
    "NotFound": _not_found,
    "Busy": _busy,
}


@pytest.fixture(scope="module")
def channel() -> Iterator[grpc.Channel]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    methods = {name: grpc.unary_unary_rpc_method_handler(fn) for name, fn in HANDLERS.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", methods),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as chan:
        yield chan
    server.stop(None)


def _fail(channel: grpc.Channel, method: str) -> Any:
    with pytest.raises(grpc.RpcError) as info:
        channel.unary_unary(f"/t.T/{method}")(b"", timeout=10)
    return info.value


def test_the_c4_one_copy_refusal_carries_its_code_and_rule(channel):
    error = _fail(channel, "C4OneCopy")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith("[invalid-parameter] ")  # the message, for people
    assert error_details(error) == ErrorDetails("invalid-parameter", "c4-one-copy")


def test_a_refusal_is_recognised_by_its_rule_not_by_its_words(channel):
    error = _fail(channel, "WordsOnly")
    assert error_details(error) is None  # the right words, but no ErrorInfo
    foreign = _fail(channel, "OtherDomain")
    assert error_details(foreign) is None  # a rule of another domain is not ours


@pytest.mark.parametrize(
    ("method", "status", "details"),
    [
        ("NotFound", grpc.StatusCode.NOT_FOUND, ErrorDetails("not-found", None)),
        ("Busy", grpc.StatusCode.ABORTED, ErrorDetails("claim-busy", None)),
    ],
)
def test_every_error_names_its_code_and_no_rule_unless_it_has_one(channel, method, status, details):
    error = _fail(channel, method)
    assert error.code() == status
    assert error_details(error) == details


def test_the_domain_and_reason_spelling():
    assert ERROR_DOMAIN == "twinaudit"
    assert ParameterError("x").rule is None
    with pytest.raises(ValueError, match="unknown refusal rule"):
        ParameterError("x").with_rule("no-such-rule")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InputError("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (SignatureError("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (VersionError("x"), grpc.StatusCode.FAILED_PRECONDITION),
        (UnknownRecordError("x"), grpc.StatusCode.NOT_FOUND),
        (UnknownClaimError("x"), grpc.StatusCode.NOT_FOUND),
        (RateLimitedError("a", 1, 1.0, 1.0), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (StateError("x"), grpc.StatusCode.FAILED_PRECONDITION),
        (RootAlreadyEscrowedError(b"\x00" * 32, 1), grpc.StatusCode.FAILED_PRECONDITION),
        (ReplayedRequestError("x"), grpc.StatusCode.FAILED_PRECONDITION),
        (ClaimBusyError("x"), grpc.StatusCode.ABORTED),
        (ClaimsChangedError("x"), grpc.StatusCode.ABORTED),
        (OracleError("unreachable", "x"), grpc.StatusCode.UNAVAILABLE),
        (OracleError("deadline", "x"), grpc.StatusCode.DEADLINE_EXCEEDED),
        (OracleError("invalid-answer", "x"), grpc.StatusCode.FAILED_PRECONDITION),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else "",
)
def test_each_family_has_its_status(error, status):
    # Spec §2.2 and §10.2 step 8 (claim-busy is ABORTED: the same request may succeed later).
    assert status_for(error) == status
