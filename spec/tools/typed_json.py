"""Typed JSON notation for canonical values in test vectors (spec appendix A).

JSON cannot tell text from bytes or show a float64 exactly, so vectors write a value
as a one-key object: ``{"nil": null}``, ``{"bool": true}``, ``{"int": "-5"}`` (decimal
string), ``{"float": "0x1.8000000000000p+0"}`` (C99 hex float, exact),
``{"str": "text"}``, ``{"bin": "00ff"}`` (hex), ``{"array": [...]}`` and
``{"map": [[key, value], ...]}`` with text keys in any order.
"""

from __future__ import annotations

from typing import Any

from twinaudit.protocol.encoding import Value


def to_typed(value: Value) -> dict[str, Any]:
    """Return the typed-JSON form of a canonical value."""
    if value is None:
        return {"nil": None}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, bytes):
        return {"bin": value.hex()}
    if isinstance(value, list):
        return {"array": [to_typed(v) for v in value]}
    if isinstance(value, dict):
        return {"map": [[k, to_typed(v)] for k, v in value.items()]}
    raise TypeError(type(value))


def from_typed(doc: dict[str, Any]) -> Any:
    """Return the Python value of a typed-JSON object (maps keep the listed order)."""
    ((tag, raw),) = doc.items()
    if tag == "nil":
        return None
    if tag == "bool":
        return bool(raw)
    if tag == "int":
        return int(raw)
    if tag == "float":
        return float.fromhex(raw)
    if tag == "str":
        return str(raw)
    if tag == "bin":
        return bytes.fromhex(raw)
    if tag == "array":
        return [from_typed(v) for v in raw]
    if tag == "map":
        return {k: from_typed(v) for k, v in raw}
    raise ValueError(f"unknown typed-JSON tag {tag!r}")
