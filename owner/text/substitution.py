"""Thesaurus substitution: two versions of a text, far apart, each close to the original.

Paper §6.2 asks for versions x⁰, x¹ of a text x with ``cos(e(xᵏ), e(x)) ≥ τ`` (the
utility bound, under a sentence embedding ``e``) and a large word-level edit distance
between x⁰ and x¹. With single-word synonym swaps, and each swapped word changed in
exactly one version, the distance is the number of swaps made (each is a position
where the versions differ), so the search maximises the number of swaps that both
versions can absorb within their bound:

1. **Plan** (:meth:`SubstitutionSearch.plan`). For every replaceable word (not a
   function word or a name, three letters or more; see :mod:`twinaudit.owner.text.words`), take
   its first ``max_candidates`` plain single-word synonyms (no capitalised names, no
   poetic elisions), in the original's case, and measure the
   text with only that word swapped. Synonyms below τ on their own are dropped; the
   others are ranked by that similarity. A text with none left is *unmarkable*.
2. **Assign** (:meth:`SubstitutionSearch.mark`). Visit the words cheapest first (by
   their best single-swap similarity; ties in an order drawn from the text's secret
   stream), and offer each word's best synonym to the version that is currently
   closer to the original (a fair coin from the stream when both are equal); if that
   version would fall below τ, offer it to the other version; otherwise skip it.
   Every offer is measured on the whole version, so the bound holds for the final
   texts, not only for single swaps. A text that has a word in its plan always gets at
   least one swap (the first offer is a single swap, already measured), so the two
   versions always differ.

Balancing the swaps between the two versions roughly doubles the distance that a
swap-into-one-version baseline reaches under the same bound (measured in the tests).
All texts of a batch are searched together: each round embeds one offer per text.
The randomness (tie order, coins) comes only from the secret marking seed and the
text's index, so the same secret, texts and thesaurus give the same versions.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from twinaudit.owner.marking.noise import image_stream
from twinaudit.protocol.errors import ParameterError

from .config import TextMarkingConfig
from .similarity import Embedder
from .thesaurus import Thesaurus
from .words import (
    fix_articles,
    is_plain_synonym,
    is_replaceable,
    match_case,
    split_words,
    word_distance,
)

#: Stream purpose of the substitution search's random choices (per text index).
STREAM_PURPOSE: Final = "text-substitution"
#: Variants embedded at a time while planning.
PLAN_BATCH: Final = 2048

# A search is a generator: it yields the version text it wants measured and is sent
# that text's similarity to the original; it returns its result.
_Search = Generator[str, float, "MarkedText"]


@dataclass(frozen=True)
class Slot:
    """A replaceable word: its piece index and its admissible synonyms, best first."""

    piece: int
    candidates: tuple[str, ...]
    similarities: tuple[float, ...]


@dataclass(frozen=True)
class TextPlan:
    """A text split into pieces, and the words that may be swapped in it."""

    text: str
    pieces: tuple[str, ...]
    slots: tuple[Slot, ...]
    words_with_synonyms: int

    @property
    def markable(self) -> bool:
        """Whether at least one swap keeps the text within the bound."""
        return bool(self.slots)


@dataclass(frozen=True)
class MarkedText:
    """The two versions of a text, their similarities to it, and their word distance."""

    version0: str
    version1: str
    similarity0: float
    similarity1: float
    distance: int


class SubstitutionSearch:
    """Plans and performs the synonym swaps of a batch of texts (see the module docstring)."""

    def __init__(
        self, thesaurus: Thesaurus, embedder: Embedder, config: TextMarkingConfig, seed: bytes
    ) -> None:
        """Keep the thesaurus, the embedder, the bound and the secret marking seed."""
        self.thesaurus = thesaurus
        self.embedder = embedder
        self.config = config
        self._seed = seed

    def plan(self, texts: Sequence[str]) -> list[TextPlan]:
        """Return each text's plan: its replaceable words and their admissible synonyms."""
        bound = self.config.min_similarity
        originals = self.embedder.embed(list(texts))
        variants: list[str] = []
        owners: list[tuple[int, int, str]] = []  # (text, piece, synonym) per variant
        split = [split_words(text) for text in texts]
        counted = [0] * len(texts)
        for number, pieces in enumerate(split):
            for piece in range(1, len(pieces), 2):
                word = pieces[piece]
                if not is_replaceable(pieces, piece):
                    continue
                synonyms = self._synonyms(word)
                counted[number] += bool(synonyms)
                for synonym in synonyms:
                    variants.append(_render(pieces, {piece: synonym}))
                    owners.append((number, piece, synonym))
        scores = np.empty(len(variants), dtype=np.float64)
        for lo in range(0, len(variants), PLAN_BATCH):
            block = self.embedder.embed(variants[lo : lo + PLAN_BATCH])
            rows = [owner[0] for owner in owners[lo : lo + PLAN_BATCH]]
            scores[lo : lo + len(block)] = np.einsum("ij,ij->i", block, originals[rows])
        found: list[dict[int, list[tuple[float, str]]]] = [{} for _ in texts]
        for (number, piece, synonym), score in zip(owners, scores, strict=True):
            if score >= bound:
                found[number].setdefault(piece, []).append((float(score), synonym))
        plans = []
        for number, text in enumerate(texts):
            slots = []
            for piece, options in sorted(found[number].items()):
                ranked = sorted(options, key=lambda option: -option[0])  # stable
                slots.append(
                    Slot(
                        piece,
                        tuple(word for _, word in ranked),
                        tuple(score for score, _ in ranked),
                    )
                )
            plans.append(TextPlan(text, tuple(split[number]), tuple(slots), counted[number]))
        return plans

    def mark(self, plans: Sequence[TextPlan], indices: Sequence[int]) -> list[MarkedText]:
        """Return the two versions of each planned text; ``indices`` name their streams.

        Every plan must be markable (see :attr:`TextPlan.markable`).
        """
        if len(plans) != len(indices):
            raise ParameterError(f"{len(indices)} indices for {len(plans)} plans")
        searches = [self._search(plan, index) for plan, index in zip(plans, indices, strict=True)]
        originals = self.embedder.embed([plan.text for plan in plans])
        results: list[MarkedText | None] = [None] * len(plans)
        pending: dict[int, str] = {}
        for number, search in enumerate(searches):
            self._advance(number, search, None, pending, results)
        while pending:
            numbers = sorted(pending)
            versions = [pending[number] for number in numbers]
            measured = self.embedder.embed(versions)
            scores = np.einsum("ij,ij->i", measured, originals[numbers])
            pending = {}
            for number, score in zip(numbers, scores, strict=True):
                self._advance(number, searches[number], float(score), pending, results)
        assert all(result is not None for result in results)
        return [result for result in results if result is not None]

    @staticmethod
    def _advance(
        number: int,
        search: _Search,
        score: float | None,
        pending: dict[int, str],
        results: list[MarkedText | None],
    ) -> None:
        try:
            pending[number] = next(search) if score is None else search.send(score)
        except StopIteration as stop:
            results[number] = stop.value

    def _synonyms(self, word: str) -> list[str]:
        chosen = []
        plain = [s for s in self.thesaurus.synonyms(word) if is_plain_synonym(s, word)]
        for synonym in plain[: self.config.max_candidates]:
            cased = match_case(synonym, word)
            if cased.lower() != word.lower() and cased not in chosen:
                chosen.append(cased)
        return chosen

    def _search(self, plan: TextPlan, index: int) -> _Search:
        if not plan.markable:
            raise ParameterError("an unmarkable text has no versions (see TextPlan.markable)")
        stream = image_stream(self._seed, STREAM_PURPOSE, index)
        draws = [stream.uniform() for _ in plan.slots]
        order = sorted(
            range(len(plan.slots)), key=lambda k: (-plan.slots[k].similarities[0], draws[k])
        )
        bound = self.config.min_similarity
        swaps: list[dict[int, str]] = [{}, {}]
        score = [1.0, 1.0]
        for k in order:
            slot = plan.slots[k]
            if score[0] != score[1]:
                first = 0 if score[0] > score[1] else 1
            else:
                first = 1 if stream.coin() else 0
            for version in (first, 1 - first):
                trial = {**swaps[version], slot.piece: slot.candidates[0]}
                if len(trial) == 1:
                    measured = slot.similarities[0]  # a single swap, measured by the plan
                else:
                    measured = yield _render(plan.pieces, trial)
                if measured >= bound:
                    swaps[version], score[version] = trial, measured
                    break
        version0, version1 = _render(plan.pieces, swaps[0]), _render(plan.pieces, swaps[1])
        return MarkedText(version0, version1, score[0], score[1], word_distance(version0, version1))


def _render(pieces: Sequence[str], swaps: dict[int, str]) -> str:
    """Return the text with the swapped words in place (and "a"/"an" fixed before them)."""
    result = [swaps.get(index, piece) for index, piece in enumerate(pieces)]
    fix_articles(result, swaps)
    return "".join(result)
