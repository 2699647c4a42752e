"""How each score function turns a window of opened pairs into oracle queries and scores.

A claim processes pairs a window at a time (spec §10.2). For each score function a
:class:`~twinaudit.verifier.windows.base.WindowScorer` builds the window's queries (every
version's copies, drawn from the spec PRG, shuffled across the whole window with
``shuffle/<j>``), asks the oracle, puts the answers back in order, scores every
version in binary64 and returns the function's part of each pair's transcript
record; and, for replay, recomputes a pair's scores from its record alone.

- :mod:`.copies` — what the two K-copies functions share;
- :mod:`.classifier` — ``image-classifier`` (spec §10.3);
- :mod:`.encoder` — ``image-encoder`` (spec §10.4);
- :mod:`.language` — ``language-model`` (spec §10.5);
- :mod:`.image_text` — ``image-text`` (spec §10.6);
- :mod:`.standalone` — the same windows run on pairs outside a claim (the owner's
  estimate).
"""

from .base import AgreedScores, AnyWindowScorer, PairScores, QueryBatch, WindowScorer
from .registry import scorer_for
from .standalone import score_pairs

__all__ = [
    "AgreedScores",
    "AnyWindowScorer",
    "PairScores",
    "QueryBatch",
    "WindowScorer",
    "score_pairs",
    "scorer_for",
]
