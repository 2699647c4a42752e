"""Between the owner's dataclasses and plain data (the canonical encoding's value model).

Reading: :func:`check_field_names`, :func:`typed_field` and :func:`optional_field`
rebuild a recorded configuration strictly (exactly its fields, each of exactly its
encoded type, ``bool`` never an ``int``), with errors that name the configuration;
:func:`check_int` checks a field's integer domain. Writing: :func:`fields_value`
returns a flat dataclass's fields as a map, and :class:`FieldsRecord` makes that a
dataclass's ``to_value``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import fields
from typing import Any, TypeVar

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import InputError, ParameterError

_T = TypeVar("_T")


def check_field_names(record: dict[str, Value], names: Collection[str], what: str) -> None:
    """Raise ``InputError`` unless ``record`` has exactly the keys ``names``."""
    if set(record) != set(names):
        missing, extra = sorted(set(names) - set(record)), sorted(set(record) - set(names))
        raise InputError(f"{what} fields: missing {missing}, unexpected {extra}")


def typed_field(record: dict[str, Value], name: str, kind: type[_T], what: str) -> _T:
    """Return ``record[name]`` if it has exactly the encoded type ``kind`` (bool is no int)."""
    value = record[name]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InputError(
            f"{what} field {name!r} must be {kind.__name__}, got {type(value).__name__}"
        )
    return value


def optional_field(record: dict[str, Value], name: str, kind: type[_T], what: str) -> _T | None:
    """Return ``record[name]``: None, or a value of exactly the encoded type ``kind``."""
    return None if record[name] is None else typed_field(record, name, kind, what)


def check_int(name: str, value: object, low: int, high: int) -> None:
    """Raise ``ParameterError`` unless ``value`` is an integer (not bool) in ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"{name} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise ParameterError(f"{name} must be in {low}..{high}, got {value}")


def fields_value(instance: Any) -> dict[str, Value]:
    """Return a dataclass instance's fields, by name, as a map (its values plain data)."""
    return {f.name: getattr(instance, f.name) for f in fields(instance)}


class FieldsRecord:
    """A mixin for a flat dataclass of plain values: ``to_value`` is its fields by name."""

    def to_value(self) -> dict[str, Value]:
        """Return the fields as plain data."""
        return fields_value(self)
