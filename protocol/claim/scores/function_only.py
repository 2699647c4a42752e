"""The claim parameters of the scores named by their function alone (spec §10.5, §10.6).

``language-model`` (§10.5: the mean token log-probability of the text) and
``image-text`` (§10.6: the cosine of the image's and the caption's embeddings) take no
parameter: one query per version, no perturbation, and the claim's score map is
exactly ``{"function": <name>}``. :class:`FunctionOnlySpec` holds what such a spec
does — validate and encode the map, parse it strictly, check the oracle's capability;
a subclass names the function, the capability and the item kind, and checks the
item's type. The scores themselves are the verifier's (``twinaudit.verifier.scoring``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final, Self

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import ParameterError
from twinaudit.protocol.items import CaptionedImageItem, TextItem

from .oracle_view import OracleDescription

#: The language-model score's claim name and the oracle capability it needs.
LANGUAGE_FUNCTION: Final = "language-model"
LANGUAGE_CAPABILITY: Final = "token-logprobs"
#: The image-text score's claim name and the oracle capability it needs.
IMAGE_TEXT_FUNCTION: Final = "image-text"
IMAGE_TEXT_CAPABILITY: Final = "embed-image-text"


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

    @property
    def tie_margin(self) -> float:
        """The tie margin of spec §7.1: 0, only equal scores tie."""
        return 0.0

    def to_value(self) -> dict[str, Value]:
        """Return the canonical claim map (spec §10.1)."""
        return {"function": self.function}

    def to_fields(self) -> dict[str, int | str | float]:
        """Return the fields of the claim's ``ScoreSpec`` message (the name alone)."""
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

    def check_oracle(self, info: OracleDescription) -> None:
        """Check the oracle offers :attr:`CAPABILITY`."""
        info.check_offers(self.CAPABILITY)


@dataclass(frozen=True, kw_only=True)
class LanguageSpec(FunctionOnlySpec):
    """The score part of a claim: ``{"function": "language-model"}`` (spec §10.5)."""

    FUNCTION: ClassVar[str] = LANGUAGE_FUNCTION
    CAPABILITY: ClassVar[str] = LANGUAGE_CAPABILITY
    item_kind: ClassVar[str] = "text"

    function: str = LANGUAGE_FUNCTION

    def check_item(self, item: object) -> TextItem:
        """Return ``item`` if it is a text item, else raise ``ParameterError``."""
        if not isinstance(item, TextItem):
            raise ParameterError("the language-model score scores text items")
        return item


@dataclass(frozen=True, kw_only=True)
class ImageTextSpec(FunctionOnlySpec):
    """The score part of a claim: ``{"function": "image-text"}`` (spec §10.6).

    One query per version: its image; the pair's caption is asked once.
    """

    FUNCTION: ClassVar[str] = IMAGE_TEXT_FUNCTION
    CAPABILITY: ClassVar[str] = IMAGE_TEXT_CAPABILITY
    item_kind: ClassVar[str] = "captioned-image"

    function: str = IMAGE_TEXT_FUNCTION

    def check_item(self, item: object) -> CaptionedImageItem:
        """Return ``item`` if it is a captioned-image item, else raise ``ParameterError``."""
        if not isinstance(item, CaptionedImageItem):
            raise ParameterError("the image-text score scores captioned-image items")
        return item
