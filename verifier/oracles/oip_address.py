"""Oracle addresses of models served by the Open Inference Protocol (KServe v2).

An owner names the model under audit by its oracle address (``owner claim
--oracle``); the arbiter dials it. Besides ``HOST:PORT`` (a ``twinaudit.oracle.v1``
oracle), an address may name a model on any Open Inference Protocol server:

- ``oip+http://HOST:PORT[/PREFIX]/v2/models/NAME[/versions/VERSION][?OPTIONS]`` over
  REST (``oip+https://`` over TLS), the model's own REST path;
- ``oip+grpc://HOST:PORT/NAME[/versions/VERSION][?OPTIONS]`` over gRPC
  (``inference.GRPCInferenceService``; TLS when the arbiter has an oracle CA, as for
  ``HOST:PORT`` oracles).

``OPTIONS`` say what the model's metadata cannot (``key=value`` joined by ``&``, each
key at most once; see :class:`OipOptions`). :func:`parse_oip_address` checks all of it
before anything is contacted and raises :class:`~twinaudit.protocol.errors.InputError` (or
:class:`~twinaudit.protocol.errors.ParameterError` for a value out of range) with one line.
numpy free, network free.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.oracles.base import MAX_CLASSES, MAX_ORACLE_BATCH
from twinaudit.wire.transport import parse_address

#: Address schemes of Open Inference Protocol oracles, and the transport of each.
SCHEMES: Final = {"oip+http": "rest", "oip+https": "rest", "oip+grpc": "grpc"}
#: What the model's output tensor holds (``outputs=``).
OUTPUTS: Final = ("probabilities", "logits", "labels")
#: The kinds of model an OIP oracle serves (``kind=``) and the capability of each.
KINDS: Final = {"classifier": "classify", "encoder": "embed-images"}
#: Input layouts (``layout=``): images, channels first, or flattened (H·W·C values, HWC order).
LAYOUTS: Final = ("nhwc", "nchw", "flat")
#: Default seconds one request may take (``timeout=``) and the most allowed.
DEFAULT_TIMEOUT_S: Final = 60.0
MAX_TIMEOUT_S: Final = 600.0
#: Default and largest number of retries of a request the server could not answer.
DEFAULT_RETRIES: Final = 2
MAX_RETRIES: Final = 5
#: Images per request when neither the metadata nor ``max-batch=`` fixes it.
DEFAULT_MAX_BATCH: Final = 64
#: Most bytes of tensor data in one request (``request-bytes=``): by default what a gRPC
#: server accepts in its default 4 MiB messages, with room for the rest of the request;
#: at most what the arbiter's own gRPC channels carry (64 MiB), with the same room.
DEFAULT_REQUEST_BYTES: Final = 4 * 1024 * 1024 - 64 * 1024
MAX_REQUEST_BYTES: Final = 64 * 1024 * 1024 - 64 * 1024
MIN_REQUEST_BYTES: Final = 64 * 1024
#: What a model digest given with ``digest=`` may hold.
_DIGEST: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9:._+-]{0,127}")
#: A model name or version in an address.
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_REST_PATH: Final = re.compile(
    r"(?P<prefix>(?:/[A-Za-z0-9_.~-]+)*)/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?"
)
_GRPC_PATH: Final = re.compile(r"/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?")
#: The largest address, in UTF-8 bytes (the claim map's limit, spec §10.1).
MAX_ENDPOINT_BYTES: Final = 256

_KEYS: Final = (
    "kind",
    "outputs",
    "classes",
    "input",
    "output",
    "layout",
    "shape",
    "mean",
    "std",
    "max-batch",
    "timeout",
    "retries",
    "digest",
    "request-bytes",
)


@dataclass(frozen=True)
class OipOptions:
    """What an address says beyond the model's metadata (each ``None`` when not given).

    - ``kind``: ``classifier`` (default; capability ``classify``) or ``encoder``
      (``embed-images``: the output tensor is one embedding per image);
    - ``outputs``: what a classifier's output tensor holds: ``probabilities``,
      ``logits`` (the verifier takes the softmax in binary64) or ``labels`` (the top
      class; the oracle then answers ``label``). Default: ``labels`` for an integer
      tensor, ``probabilities`` for a floating one (strictly checked: logits read as
      probabilities fail, never pass silently);
    - ``classes``: the number of classes, where the output shape does not say it
      (always for ``labels``);
    - ``input``, ``output``: the tensors to use when the model has several;
    - ``layout``: ``nhwc``, ``nchw`` or ``flat`` (default: read from the input shape
      where only one layout fits it);
    - ``shape``: the image shape ``(H, W, C)`` where the input shape leaves it open
      (always for ``flat``); images of any other shape are refused;
    - ``mean``, ``std``: per-channel normalisation ``(x − mean) / std`` of the [0, 1]
      intensities (both or neither; 1 or 3 values);
    - ``max_batch``: the most images per request (default: the input's fixed batch,
      else :data:`DEFAULT_MAX_BATCH`);
    - ``timeout_s``: the deadline of each request (default :data:`DEFAULT_TIMEOUT_S`);
    - ``retries``: how many times a request the server could not answer (gRPC
      ``UNAVAILABLE``, HTTP 5xx, a refused or reset connection) is sent again, 0..5
      (default 2); nothing else is retried;
    - ``digest``: the model digest to record (default: none can be known remotely);
    - ``request_bytes``: the most bytes of tensor data one request carries, in
      ``MIN_REQUEST_BYTES..MAX_REQUEST_BYTES`` (default :data:`DEFAULT_REQUEST_BYTES`,
      what a server accepts with its default 4 MiB message limit); a window's images
      are sent in as many requests as this needs (spec §10.2 step 5).
    """

    kind: str = "classifier"
    outputs: str | None = None
    classes: int | None = None
    input: str | None = None
    output: str | None = None
    layout: str | None = None
    shape: tuple[int, int, int] | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    max_batch: int | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    digest: str | None = None
    request_bytes: int = DEFAULT_REQUEST_BYTES


@dataclass(frozen=True)
class OipAddress:
    """A parsed OIP oracle address: where the server is, which model, and the options."""

    scheme: str
    host: str
    port: int
    model: str
    version: str
    options: OipOptions
    #: The REST path before ``/v2`` (``""`` when none, and always for gRPC).
    prefix: str = ""

    @property
    def transport(self) -> str:
        """Return ``rest`` or ``grpc``."""
        return SCHEMES[self.scheme]

    @property
    def target(self) -> str:
        """Return ``HOST:PORT`` (IPv6 hosts in brackets)."""
        return f"{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """Return the REST server's root URL (``http(s)://HOST:PORT[/PREFIX]``)."""
        web = "https" if self.scheme == "oip+https" else "http"
        return f"{web}://{self.target}{self.prefix}"


def is_oip_address(endpoint: str) -> bool:
    """Return whether ``endpoint`` names an Open Inference Protocol oracle (by its scheme)."""
    scheme, sep, _ = endpoint.partition("://")
    return bool(sep) and scheme.lower().startswith("oip+")


def _int(key: str, text: str, low: int, high: int) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise ParameterError(f"oracle address option {key}={text!r} is not an integer")
    value = int(text)
    if not low <= value <= high:
        raise ParameterError(f"oracle address option {key}={value} is outside {low}..{high}")
    return value


def _floats(key: str, text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise ParameterError(f"oracle address option {key}={text!r} is not numbers") from None
    if len(values) not in (1, 3) or not all(math.isfinite(v) for v in values):
        raise ParameterError(f"oracle address option {key} must be 1 or 3 finite numbers")
    return values


def _choice(key: str, text: str, choices: tuple[str, ...]) -> str:
    if text not in choices:
        raise ParameterError(f"oracle address option {key}={text!r} is not one of {choices}")
    return text


def _shape(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    if len(parts) != 3:
        raise ParameterError(f"oracle address option shape={text!r} is not H,W,C")
    h, w, c = (_int("shape", part, 1, 4096) for part in parts)
    if c not in (1, 3):
        raise ParameterError(f"oracle address option shape={text!r}: C must be 1 or 3")
    return h, w, c


def _options(query: str) -> OipOptions:
    """Parse the ``key=value&…`` options of an address."""
    given: dict[str, str] = {}
    for part in query.split("&") if query else []:
        key, eq, value = part.partition("=")
        if key not in _KEYS:
            raise InputError(
                f"oracle address option {key!r} is unknown (known: {', '.join(_KEYS)})"
            )
        if not eq or not value:
            raise InputError(f"oracle address option {key} has no value")
        if key in given:
            raise InputError(f"oracle address option {key} is given twice")
        given[key] = value
    fields: dict[str, object] = {}
    for key, value in given.items():
        if key == "kind":
            fields["kind"] = _choice(key, value, tuple(KINDS))
        elif key == "outputs":
            fields["outputs"] = _choice(key, value, OUTPUTS)
        elif key == "classes":
            fields["classes"] = _int(key, value, 2, MAX_CLASSES)
        elif key in ("input", "output"):
            if not _NAME.fullmatch(value):
                raise InputError(f"oracle address option {key}={value!r} is not a tensor name")
            fields[key] = value
        elif key == "layout":
            fields["layout"] = _choice(key, value, LAYOUTS)
        elif key == "shape":
            fields["shape"] = _shape(value)
        elif key in ("mean", "std"):
            fields[key] = _floats(key, value)
        elif key == "max-batch":
            fields["max_batch"] = _int(key, value, 1, MAX_ORACLE_BATCH)
        elif key == "timeout":
            seconds = _floats(key, value)
            if len(seconds) != 1 or not 0 < seconds[0] <= MAX_TIMEOUT_S:
                raise ParameterError(
                    f"oracle address option timeout must be in (0, {MAX_TIMEOUT_S:g}]"
                )
            fields["timeout_s"] = seconds[0]
        elif key == "retries":
            fields["retries"] = _int(key, value, 0, MAX_RETRIES)
        elif key == "request-bytes":
            fields["request_bytes"] = _int(key, value, MIN_REQUEST_BYTES, MAX_REQUEST_BYTES)
        else:
            if not _DIGEST.fullmatch(value):
                raise InputError(f"oracle address option digest={value!r} is not a digest")
            fields["digest"] = value
    options = OipOptions(**fields)  # type: ignore[arg-type]
    _check_options(options)
    return options


def _check_options(options: OipOptions) -> None:
    """Refuse options that contradict each other."""
    if (options.mean is None) != (options.std is None):
        raise ParameterError("oracle address options mean and std go together")
    if options.std is not None and not all(s > 0 for s in options.std):
        raise ParameterError("oracle address option std must be positive")
    if (
        options.mean is not None
        and options.std is not None
        and (len(options.mean) != len(options.std))
    ):
        raise ParameterError("oracle address options mean and std must have as many values")
    if options.kind == "encoder" and (options.outputs or options.classes):
        raise ParameterError("an encoder's address has no outputs= or classes= option")


def parse_oip_address(endpoint: str) -> OipAddress:
    """Parse and check an ``oip+http(s)://`` or ``oip+grpc://`` oracle address."""
    if len(endpoint.encode("utf-8", "replace")) > MAX_ENDPOINT_BYTES:
        raise InputError(f"the oracle address is longer than {MAX_ENDPOINT_BYTES} bytes")
    if not endpoint.isascii() or any(ch.isspace() for ch in endpoint) or "#" in endpoint:
        raise InputError(f"the oracle address {endpoint!r} has spaces, a fragment or non-ASCII")
    scheme, sep, rest = endpoint.partition("://")
    if not sep or scheme not in SCHEMES:
        raise InputError(
            f"an Open Inference Protocol oracle address starts with one of "
            f"{', '.join(s + '://' for s in SCHEMES)}; got {endpoint!r}"
        )
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    host, port = parse_address(netloc, what="the oracle address's HOST:PORT")
    pattern, example = (
        (_REST_PATH, "/v2/models/NAME[/versions/VERSION]")
        if SCHEMES[scheme] == "rest"
        else (_GRPC_PATH, "/NAME[/versions/VERSION]")
    )
    match = pattern.fullmatch(slash + path)
    if match is None:
        raise InputError(f"the path of {scheme} oracle address {endpoint!r} must be {example}")
    model, version = match["name"], match["version"] or ""
    if not _NAME.fullmatch(model) or (version and not _NAME.fullmatch(version)):
        raise InputError(
            f"model name {model!r} or version {version!r} of the oracle address is not "
            "1..128 letters, digits, '_', '.' or '-'"
        )
    prefix = match.groupdict().get("prefix") or ""
    return OipAddress(scheme, host, port, model, version, _options(query), prefix)
