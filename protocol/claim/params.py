"""The owner's claim parameters (spec §10.1): one typed form from the CLI to the claim map.

The owner's tools build a :class:`ClaimParams` (``twinaudit owner claim``), the wire
layer carries it as a ``ClaimStart`` message (``twinaudit.wire.claim_start``), the verifier reads
it back into a :class:`ClaimParams` and starts the claim from it; the claim map that
transcripts and verdicts carry (:mod:`.claim_map`) holds these parameters with the
knowledge condition resolved, the record and the oracle's description.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinaudit.protocol import limits
from twinaudit.protocol.errors import InputError, ParameterError
from twinaudit.protocol.stats.base import TiePolicy

from .functions import ScoreRequest
from .schedule import DEFAULT_WINDOW, MAX_WINDOW, default_window_max

#: Longest endpoint and model name a claim may carry (UTF-8 bytes).
MAX_NAME_BYTES = 256


@dataclass(frozen=True)
class ClaimParams:
    """The owner's claim parameters (spec §10.1), validated on construction.

    ``score`` is the score the owner asks for: an image-classifier score may name its
    knowledge condition by a word (``labelled``, ``unlabelled``), which the claim
    resolves from the oracle's description when it starts (§10.2 step 1). ``alpha``
    None is the test's default; ``window_max`` 0 is :func:`default_window_max`.
    ``fresh_pairs`` asks the verifier to exclude every pair that earlier claims on the
    record opened (the claim map's ``excluded``, §10.1). ``prior`` names the mixture
    tests' prior (§7.3.2, ``TestSpec.prior`` on the wire); None is the default prior
    (§7.3.1).
    """

    record_index: int
    record_root: bytes
    endpoint: str
    model_name: str
    score: ScoreRequest
    test_name: str
    p: float
    alpha: float | None = None
    tie_rule: TiePolicy = TiePolicy.SKIP
    max_pairs: int = 0
    query_budget: int = 0
    window: int = DEFAULT_WINDOW
    #: The cap on a request's size; 0 means :func:`~.schedule.default_window_max`.
    window_max: int = 0
    #: Open only pairs that no earlier claim on the record opened (spec §10.2 step 2).
    fresh_pairs: bool = False
    #: The mixture tests' registered prior (spec §7.3.2); None: the default (§7.3.1).
    prior: str | None = None

    def __post_init__(self) -> None:
        """Check ranges and sizes."""
        if len(self.record_root) != limits.HASH_BYTES:
            raise InputError("record root must be 32 bytes")
        for name in ("endpoint", "model_name"):
            if len(getattr(self, name).encode("utf-8")) > MAX_NAME_BYTES:
                raise InputError(f"{name} is longer than {MAX_NAME_BYTES} bytes")
        if not 0 <= self.max_pairs <= limits.MAX_PAIRS:
            raise ParameterError(f"max_pairs must be in 0..{limits.MAX_PAIRS}")
        if not 0 <= self.query_budget < (1 << 63):
            raise ParameterError("query_budget must be a non-negative 63-bit integer")
        if not 1 <= self.window <= MAX_WINDOW:
            raise ParameterError(f"window must be in 1..{MAX_WINDOW}")
        if self.window_max == 0:
            object.__setattr__(self, "window_max", default_window_max(self.window))
        if not self.window <= self.window_max <= MAX_WINDOW:
            raise ParameterError(f"window_max must be in window..{MAX_WINDOW}")
