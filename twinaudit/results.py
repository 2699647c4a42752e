"""``--json``: the one JSON object a command prints on stdout instead of its text result.

With ``--json`` a command writes exactly one JSON object on stdout (sorted keys, one
line) and its progress lines, notes and errors on stderr, so a script can read
stdout whole. Byte strings are written as hex. :func:`verdict_figures` is what
``owner claim``, ``verifier check`` and ``verifier replay`` report about a verdict.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, Final

#: Exit status of ``owner claim --exit-code`` for a verdict of NOT-DETECTED.
EXIT_NOT_DETECTED: Final = 3


def _plain(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def print_json(value: Mapping[str, Any]) -> None:
    """Write ``value`` as one JSON object on one line of stdout."""
    sys.stdout.write(json.dumps(dict(value), sort_keys=True, default=_plain) + "\n")
    sys.stdout.flush()


def verdict_figures(verdict: Any) -> dict[str, Any]:
    """Return a checked verdict's decision and figures (no opening, no transcript)."""
    final = verdict["final"]
    claim = verdict["claim"]
    return {
        "claim_id": verdict["claim_id"],
        "decision": verdict["decision"],
        "detected": verdict["decision"] == "detected",
        "stop": verdict["stop"],
        "record": claim["record"]["index"],
        "n_pairs": claim["record"]["n_pairs"],
        "pairs_opened": len(verdict["opened"]),
        "draws": final["draws"],
        "successes": final["successes"],
        "interval": final["interval"],
        "log_statistic": final["log_statistic"],
        "queries": verdict["queries"],
        "test": claim["test"]["name"],
        "test_params": claim["test"]["params"],
        "score": claim["score"],
        "earlier_claims": verdict["earlier_claims"],
        "model": claim["model"]["name"],
        "oracle": claim["model"]["oracle"],
        "arbiter": verdict["arbiter"],
        "time": verdict["time"],
    }
