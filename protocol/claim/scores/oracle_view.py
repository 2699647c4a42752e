"""What a claim's score needs to know of the oracle's Describe answer (spec §10.1).

The Describe map itself is parsed by :class:`twinaudit.protocol.oracles.base.OracleInfo`;
the score specs only ask whether a capability is offered and what ``Classify``
answers, through this structural type, so that they check a claim against any
description of that shape. (The image-classifier score reads the oracle's answers
themselves, ``ClassifyAnswer`` of the same module.)
"""

from __future__ import annotations

from typing import Protocol


class OracleDescription(Protocol):
    """An oracle's self-description, as far as a score spec reads it."""

    @property
    def classify_output(self) -> str:
        """What ``Classify`` answers: ``probabilities``, ``label``, or "" without it."""
        ...

    def check_offers(self, capability: str) -> None:
        """Raise ``ParameterError`` unless the oracle offers ``capability``."""
        ...
