"""Score functions whose claim map is their name alone (spec §10.5, §10.6).

``language-model`` and ``image-text`` take no parameter: one query per version, no
perturbation, and the claim's score map is exactly ``{"function": <name>}``.
:class:`FunctionOnlySpec` holds what such a spec does — validate and encode the map,
parse it strictly, check the oracle's capability; a subclass names the function, the
capability and the item kind, and checks the item's type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from protocol.encoding import Value
from protocol.errors import ParameterError
from verifier.oracles.base import OracleInfo


@dataclass(frozen=True, kw_only=True)
class FunctionOnlySpec:
    """The score part of a claim for a function without parameters: ``{"function"}``.

    Subclasses set :attr:`FUNCTION`, :attr:`CAPABILITY` and :attr:`item_kind`, and
    redeclare ``function`` with :attr:`FUNCTION` as its default.
    """

    #: The score function's claim name.
    FUNCTION: ClassVar[str]
    #: The oracle capability it needs.
    CAPABILITY: ClassVar[str]
    #: The item kind this score reads.
    item_kind: ClassVar[str]

    function: str

    def __post_init__(self) -> None:
        """Validate the name."""
        if self.function != self.FUNCTION:
            raise ParameterError(f"score function {self.function!r} is not {self.FUNCTION!r}")

    @property
    def queries_per_version(self) -> int:
        """Oracle queries per version (1)."""
        return 1

    def to_value(self) -> dict[str, Value]:
        """Return the canonical claim map (spec §10.1)."""
        return {"function": self.function}

    @classmethod
    def from_value(cls, value: object) -> Self:
        """Parse the claim map strictly (exactly the key ``function``)."""
        if not isinstance(value, dict) or set(value) != {"function"}:
            article = "an" if cls.FUNCTION[0] in "aeiou" else "a"
            raise ParameterError(
                f"{article} {cls.FUNCTION} score map has exactly the key 'function'"
            )
        return cls(function=value["function"])

    def check_oracle(self, info: OracleInfo) -> None:
        """Check the oracle offers :attr:`CAPABILITY`."""
        info.check_offers(self.CAPABILITY)
