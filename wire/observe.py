"""What a running server tells its operator: one log line per RPC, and metrics.

Every server made by :func:`twinaudit.wire.transport.make_server` runs
:class:`ObserveRpcs`, which logs one event per RPC on the ``twinaudit.rpc`` logger —
the method, the peer, the status code, the duration and the claim or record id the
handler named with :func:`annotate` — and logs every exception a handler let escape
with its traceback (the peer is answered ``INTERNAL``, without the details).
:func:`configure_logging` writes these events, and those of every other logger, to
stderr as text or as one JSON object per line.

:class:`Metrics` is what services report to; it does nothing. :class:`PrometheusMetrics`
(``prometheus-client``, the ``ops`` extra) keeps the counters and histograms in a
registry of its own, which
:func:`twinaudit.cli.serve_options.serve_metrics` exposes over HTTP. Label values come
from small fixed sets (method, status code, decision, store operation), never ids.

Logs never carry a salt, a key, a hidden version or vault content: handlers name ids
only, and only once they are validated.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, Final, NoReturn

import grpc

#: Logger of the per-RPC events.
RPC_LOGGER: Final = "twinaudit.rpc"
#: What ``--log-format`` may name.
LOG_FORMATS: Final = ("text", "json")
#: What ``--log-level`` may name, quietest last.
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
#: Longest status message copied into an RPC's log event.
MAX_LOGGED_DETAILS: Final = 240
#: How long a stream whose request stream ended before its handler returned waits to see
#: whether that end was the client's cancel, which gRPC reports as an end of the requests
#: a moment before the call itself ends. Only a client that half-closes first waits it.
CANCEL_SETTLE_S: Final = 0.5
#: Methods logged at DEBUG, not INFO: probes that load balancers send every few seconds.
QUIET_PREFIXES: Final = ("/grpc.health.v1.Health/",)
#: Status codes that mean the server failed, not the caller: logged at WARNING.
SERVER_FAULTS: Final = frozenset(
    {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS}
)
#: Histogram buckets, in seconds, of RPCs, oracle queries and store operations.
DURATION_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    1800.0,
)

_log = logging.getLogger(RPC_LOGGER)
#: The fields of the RPC the current thread is serving (None outside an RPC).
_fields: ContextVar[dict[str, object] | None] = ContextVar("twinaudit_rpc_fields", default=None)


def annotate(**fields: object) -> None:
    """Add ``fields`` (e.g. ``claim=…``, ``record=…``) to the log event of the current RPC.

    Outside an RPC served through :class:`ObserveRpcs` it does nothing. Name only
    validated ids and public figures: the event is written as given.
    """
    current = _fields.get()
    if current is not None:
        current.update(fields)


# --- Metrics -------------------------------------------------------------------------------


class Metrics:
    """What the servers report; this base records nothing (metrics are off)."""

    def rpc(self, method: str, code: str, seconds: float) -> None:
        """Count one finished RPC of ``method`` with status ``code``."""

    def claim_started(self) -> None:
        """Count a claim stream that began on this process."""

    def claim_ended(self) -> None:
        """Count a claim stream that ended on this process, however it ended."""

    def claim_finished(self, decision: str) -> None:
        """Count a claim that ended ``detected``, ``not-detected`` or ``failed`` (unsigned)."""

    def escrow_commit(self, result: str) -> None:
        """Count an escrow commit that was ``committed`` or ``refused``."""

    def oracle_query(self, seconds: float, outcome: str) -> None:
        """Observe a window's oracle queries: ``seconds``, ended ``ok`` or ``error``."""

    def store_operation(self, operation: str, seconds: float) -> None:
        """Observe an escrow-store operation that took ``seconds``."""


class PrometheusMetrics(Metrics):
    """Metrics in a Prometheus registry of their own (one per server process or test)."""

    def __init__(self) -> None:
        """Create the registry and every metric (``prometheus-client`` must be installed)."""
        from prometheus_client import (  # noqa: PLC0415 - the optional ops extra
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
        )

        self.registry = CollectorRegistry()
        buckets = DURATION_BUCKETS
        self._rpcs = Counter(
            "twinaudit_rpcs",
            "RPCs finished, by method and gRPC status code",
            ["method", "code"],
            registry=self.registry,
        )
        self._rpc_seconds = Histogram(
            "twinaudit_rpc_duration_seconds",
            "RPC duration (a claim stream: from its first message to its last)",
            ["method"],
            buckets=buckets,
            registry=self.registry,
        )
        self._claims_open = Gauge(
            "twinaudit_claims_open",
            "claim streams this process is running now (an interrupted claim stays open "
            "in the store, resumable, and is not counted)",
            registry=self.registry,
        )
        self._claims_finished = Counter(
            "twinaudit_claims_finished",
            "claims ended, by decision: detected, not-detected (both signed) or failed",
            ["decision"],
            registry=self.registry,
        )
        self._escrow_commits = Counter(
            "twinaudit_escrow_commits",
            "escrow commits, by result: committed or refused",
            ["result"],
            registry=self.registry,
        )
        self._oracle_seconds = Histogram(
            "twinaudit_oracle_query_seconds",
            "time the model's oracle took to answer one window of a claim, by outcome",
            ["outcome"],
            buckets=buckets,
            registry=self.registry,
        )
        self._store_seconds = Histogram(
            "twinaudit_store_operation_seconds",
            "escrow-store operation time, by operation",
            ["operation"],
            buckets=buckets,
            registry=self.registry,
        )

    def rpc(self, method: str, code: str, seconds: float) -> None:
        """Count one finished RPC and observe its duration."""
        self._rpcs.labels(method, code).inc()
        self._rpc_seconds.labels(method).observe(seconds)

    def claim_started(self) -> None:
        """Count a claim stream in."""
        self._claims_open.inc()

    def claim_ended(self) -> None:
        """Count a claim stream out."""
        self._claims_open.dec()

    def claim_finished(self, decision: str) -> None:
        """Count a claim's end by decision."""
        self._claims_finished.labels(decision).inc()

    def escrow_commit(self, result: str) -> None:
        """Count an escrow commit by result."""
        self._escrow_commits.labels(result).inc()

    def oracle_query(self, seconds: float, outcome: str) -> None:
        """Observe one window's oracle time."""
        self._oracle_seconds.labels(outcome).observe(seconds)

    def store_operation(self, operation: str, seconds: float) -> None:
        """Observe one store operation's time."""
        self._store_seconds.labels(operation).observe(seconds)


#: Metrics that record nothing: the default of every service.
NO_METRICS: Final = Metrics()


# --- Logs ----------------------------------------------------------------------------------


def _utc(created: float) -> str:
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _event_fields(record: logging.LogRecord) -> dict[str, object]:
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the event's fields, traceback."""

    def format(self, record: logging.LogRecord) -> str:
        """Return ``record`` as one line of JSON."""
        event: dict[str, object] = {
            "time": _utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event.update(_event_fields(record))
        if record.exc_info:
            event["traceback"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(event, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER: MESSAGE key=value …``, then any traceback on the lines after."""

    def format(self, record: logging.LogRecord) -> str:
        """Return ``record`` as a line of text (and its traceback, if any)."""
        parts = [_utc(record.created), record.levelname, f"{record.name}:", record.getMessage()]
        parts += [f"{key}={_text_value(value)}" for key, value in _event_fields(record).items()]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        return line


def _text_value(value: object) -> str:
    text = str(value)
    if not text or any(c.isspace() or c in "\"'=\\" or not c.isprintable() for c in text):
        return json.dumps(text, ensure_ascii=True)
    return text


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that writes to whatever ``sys.stderr`` is when an event comes."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> IO[str]:
        """The current ``sys.stderr``."""
        return sys.stderr

    @stream.setter
    def stream(self, value: IO[str]) -> None:
        """Ignore a stream set by the base class: stderr is looked up at each event."""


def configure_logging(
    level: str = "info", fmt: str = "text", stream: IO[str] | None = None
) -> Callable[[], None]:
    """Send every logger's events at ``level`` or above to ``stream`` (stderr) as ``fmt``.

    ``fmt`` is ``text`` or ``json`` (one object per line). Returns the call that
    undoes it (removes the handler, restores the root logger's level), so a server
    run in-process leaves the logging of its caller as it found it.
    """
    if level not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {LOG_LEVELS}, got {level!r}")
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, got {fmt!r}")
    root = logging.getLogger()
    handler: logging.Handler = _StderrHandler() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    previous = root.level
    root.addHandler(handler)
    root.setLevel(level.upper())

    def restore() -> None:
        root.removeHandler(handler)
        root.setLevel(previous)

    return restore


# --- The interceptor -----------------------------------------------------------------------


class ObserveRpcs(grpc.ServerInterceptor):  # type: ignore[misc]
    """Log and count every RPC; log and answer ``INTERNAL`` for an escaped exception.

    One event per RPC on the ``twinaudit.rpc`` logger (message ``rpc``) with ``method``,
    ``peer``, ``code``, ``duration_ms``, the fields of :func:`annotate` and, for a
    status other than OK, the status message (at most :data:`MAX_LOGGED_DETAILS`
    characters). Health probes are logged at DEBUG, server faults at WARNING,
    everything else at INFO. A claim stream's duration runs to its last message.
    """

    def __init__(self, metrics: Metrics = NO_METRICS, max_receive_bytes: int | None = None) -> None:
        """Count RPCs in ``metrics`` as well; ``max_receive_bytes`` is the server's cap."""
        self._metrics = metrics
        self._max_receive_bytes = max_receive_bytes

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        """Return the method's handler wrapped to observe each call."""
        handler = continuation(details)
        if handler is None:
            return None
        method = str(details.method)
        options = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.response_streaming:
            many = handler.stream_stream if handler.request_streaming else handler.unary_stream

            def stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                return self._stream(method, many, request, context)

            if handler.request_streaming:
                return grpc.stream_stream_rpc_method_handler(stream, **options)
            return grpc.unary_stream_rpc_method_handler(stream, **options)
        one = handler.stream_unary if handler.request_streaming else handler.unary_unary

        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            return self._unary(method, one, request, context)

        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(unary, **options)
        return grpc.unary_unary_rpc_method_handler(unary, **options)

    def _unary(self, method: str, behavior: Callable[..., Any], request: Any, context: Any) -> Any:
        fields: dict[str, object] = {}
        _fields.set(fields)
        start = _Start.of(context)
        try:
            response = behavior(request, context)
        except Exception as exc:
            self._failed(method, context, start, fields, exc)
        if not context.is_active():  # the client went away: the reply reached no one
            self._client_ended(method, context, start, fields)
        else:
            self._finish(method, context, start, fields)
        return response

    def _stream(
        self, method: str, behavior: Callable[..., Any], request: Any, context: Any
    ) -> Iterator[Any]:
        fields: dict[str, object] = {}
        _fields.set(fields)
        start = _Start.of(context)
        requests = _Requests(request) if isinstance(request, Iterator) else None
        try:
            yield from behavior(requests if requests is not None else request, context)
        except GeneratorExit:
            # gRPC dropped the stream: the client went away or the server is stopping.
            self._client_ended(method, context, start, fields)
            raise
        except Exception as exc:
            self._failed(method, context, start, fields, exc)
        else:
            ended = requests is not None and requests.ended
            if context.code() is None and (
                not context.is_active() or (ended and _terminates(context, CANCEL_SETTLE_S))
            ):
                # The request stream ended because the call did: the client's side ended it.
                self._client_ended(method, context, start, fields)
            else:
                self._finish(method, context, start, fields)

    def _failed(
        self, method: str, context: Any, start: _Start, fields: dict[str, object], exc: Exception
    ) -> NoReturn:
        """Log the call's end after ``exc``; re-raise it, or answer INTERNAL for a bug."""
        code = context.code()
        if code is not None:  # the handler aborted with a status: not a fault here
            self._finish(method, context, start, fields, code=code)
            raise exc
        if isinstance(exc, grpc.RpcError) or not context.is_active():
            # The request stream broke under the handler: the client's side ended the call.
            self._client_ended(method, context, start, fields)
            raise exc
        _log.error(
            "handler exception",
            exc_info=exc,
            extra={"fields": {"method": method, "peer": start.peer, **fields}},
        )
        self._finish(
            method, context, start, fields, code=grpc.StatusCode.INTERNAL, details="internal error"
        )
        context.abort(grpc.StatusCode.INTERNAL, "internal error in the server; it is logged")
        raise AssertionError("unreachable: abort raises")

    def _client_ended(
        self, method: str, context: Any, start: _Start, fields: dict[str, object]
    ) -> None:
        """Log a call the client's side ended, with what the server knows of why.

        Its deadline passed (DEADLINE_EXCEEDED: the deadline it set, the time taken),
        or it ended the call before its deadline (CANCELLED): the client cancelled it,
        or sent a message over this server's cap, which gRPC refuses before the
        handler sees it and reports to the handler as the end of the request stream.
        """
        seconds = time.monotonic() - start.at
        remaining = context.time_remaining()
        if start.budget_s is not None and remaining is not None and remaining <= 0:
            code = grpc.StatusCode.DEADLINE_EXCEEDED
            reason = (
                f"the client's deadline of {start.budget_s:.3g} s passed after "
                f"{seconds:.3g} s; no reply reached it"
            )
        else:
            code = grpc.StatusCode.CANCELLED
            cap = self._max_receive_bytes
            over = (
                f"sent a message over this server's limit of {cap} bytes"
                if cap
                else ("sent a message over this server's limit")
            )
            reason = f"the client ended the call after {seconds:.3g} s: it cancelled, or {over}"
        self._finish(method, context, start, fields, code=code, reason=reason)

    def _finish(
        self,
        method: str,
        context: Any,
        start: _Start,
        fields: dict[str, object],
        *,
        code: grpc.StatusCode | None = None,
        details: str | None = None,
        reason: str | None = None,
    ) -> None:
        seconds = time.monotonic() - start.at
        code = code or context.code() or grpc.StatusCode.OK
        event: dict[str, object] = {
            "method": method,
            "peer": start.peer,
            "code": code.name,
            "duration_ms": round(seconds * 1000, 3),
            **fields,
        }
        if reason is not None:
            event["reason"] = reason
        if code != grpc.StatusCode.OK:
            text = details if details is not None else _details(context)
            if text:
                event["details"] = text[:MAX_LOGGED_DETAILS]
        if code in SERVER_FAULTS:
            level = logging.WARNING
        elif method.startswith(QUIET_PREFIXES):
            level = logging.DEBUG
        else:
            level = logging.INFO
        _log.log(level, "rpc", extra={"fields": event})
        self._metrics.rpc(method, code.name, seconds)


class _Requests(Iterator[Any]):
    """A call's request stream that remembers whether it reached its end."""

    def __init__(self, requests: Iterator[Any]) -> None:
        self._requests = requests
        self.ended = False

    def __next__(self) -> Any:
        try:
            return next(self._requests)
        except StopIteration:
            self.ended = True
            raise


def _terminates(context: Any, seconds: float) -> bool:
    """Whether the call ends within ``seconds`` before this server has answered it.

    A call whose handler has returned is still open until the server sends its status,
    so it can only end before that because the client's side ended it.
    """
    ended = threading.Event()
    if not context.add_callback(ended.set):
        return True  # already over
    return ended.wait(seconds)


@dataclass(frozen=True)
class _Start:
    """What the server knows of a call when it starts: time, the client's deadline, peer."""

    at: float
    #: Seconds the client's deadline left when the call started (None: no deadline).
    budget_s: float | None
    peer: str

    @classmethod
    def of(cls, context: Any) -> _Start:
        """Return the start of the call served with ``context``, now."""
        budget = context.time_remaining()
        return cls(time.monotonic(), budget, str(context.peer()))


def _details(context: Any) -> str:
    try:
        raw = context.details()
    except Exception:  # an older gRPC, or a context that keeps none
        return ""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return str(raw or "")
