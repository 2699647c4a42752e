"""``owner inspect`` for a text vault: how close the versions stay, how far apart they are.

For the first ``pairs`` pairs (all by default) the report measures, with the
configuration's embedder, the cosine similarity of each version to its original (kept
in the vault), and the word-level edit distance between the two versions; it gives
each as a distribution (min, quartiles, max, mean) and shows a sample of ten pairs
spread evenly over the vault. Once the vault is escrowed the versions are named
*published* and *hidden*; before, *version 0* and *version 1*. The report shows hidden
versions, so it is private, like the vault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np

from twinaudit.protocol.encoding import Value
from twinaudit.protocol.errors import ParameterError

from ..inspect import ReceiptSummary, receipt_line, receipt_summary
from ..plain_data import FieldsRecord
from ..vault import Vault
from .config import TextMarkingConfig
from .similarity import Embedder, load_embedder, similarities
from .words import word_distance

#: Pairs shown in the report's sample.
SAMPLE_PAIRS: Final = 10


@dataclass(frozen=True)
class Distribution:
    """Summary of a set of measurements: count, min, quartiles, max and mean."""

    count: int
    minimum: float
    q1: float
    median: float
    q3: float
    maximum: float
    mean: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        """Summarise ``values`` (at least one); quartiles by linear interpolation."""
        array = np.asarray(values, dtype=np.float64)
        low, q1, median, q3, high = (float(v) for v in np.percentile(array, [0, 25, 50, 75, 100]))
        return cls(len(array), low, q1, median, q3, high, float(array.mean()))

    def to_value(self) -> dict[str, Value]:
        """Return the figures as plain data."""
        return {
            "count": self.count,
            "min": self.minimum,
            "q1": self.q1,
            "median": self.median,
            "q3": self.q3,
            "max": self.maximum,
            "mean": self.mean,
        }

    def to_text(self, digits: int = 3) -> str:
        """Return ``min / q1 / median / q3 / max, mean``."""
        parts = (self.minimum, self.q1, self.median, self.q3, self.maximum)
        quartiles = " / ".join(f"{v:.{digits}f}" for v in parts)
        return f"min/q1/median/q3/max {quartiles}, mean {self.mean:.{digits}f}"


@dataclass(frozen=True)
class SamplePair(FieldsRecord):
    """One pair shown in the report."""

    name: str
    original: str
    first: str
    second: str
    similarity_first: float
    similarity_second: float
    distance: int


@dataclass
class TextInspectReport:
    """Everything ``owner inspect`` found in a text vault."""

    path: Path
    n_pairs: int
    config: TextMarkingConfig
    source: dict[str, Value]
    receipt: ReceiptSummary | None
    labels: tuple[str, str]
    measured: int = 0
    similarity_first: Distribution | None = None
    similarity_second: Distribution | None = None
    distance: Distribution | None = None
    below_bound: int = 0
    samples: list[SamplePair] = field(default_factory=list)

    @property
    def dropped(self) -> list[str]:
        """The names of the texts left out as unmarkable."""
        dropped = self.source.get("dropped")
        return [str(name) for name in dropped] if isinstance(dropped, list) else []

    @property
    def holds(self) -> bool:
        """Whether every measured version is within the similarity bound."""
        return self.below_bound == 0

    def to_value(self) -> dict[str, Value]:
        """Return the report as plain data (for ``--json``)."""

        def figures(distribution: Distribution | None) -> Value:
            return None if distribution is None else distribution.to_value()

        return {
            "vault": str(self.path),
            "n_pairs": self.n_pairs,
            "item_kind": "text",
            "config": self.config.to_value(),
            "source": self.source,
            "receipt": None if self.receipt is None else self.receipt.to_value(),
            "versions": list[Value](self.labels),
            "pairs_measured": self.measured,
            "similarity": {
                self.labels[0]: figures(self.similarity_first),
                self.labels[1]: figures(self.similarity_second),
            },
            "word_distance": figures(self.distance),
            "below_bound": self.below_bound,
            "dropped": list[Value](self.dropped),
            "sample": [pair.to_value() for pair in self.samples],
        }

    def to_text(self) -> str:
        """Return the report for a person."""
        first, second = self.labels
        lines = [
            f"vault {self.path}: {self.n_pairs} text pairs",
            f"  input: {_plain(self.source.get('format'))} {_plain(self.source.get('file'))}"
            f" ({_plain(self.source.get('count'))} texts, {len(self.dropped)} left out as"
            " unmarkable)",
            f"  marking: {self.config.marker}, similarity >= {self.config.min_similarity}"
            f" ({self.config.embedder})",
        ]
        lines.append(receipt_line(self.receipt))
        if self.measured == 0:
            lines.append("  measurements: skipped")
        else:
            assert self.similarity_first is not None
            assert self.similarity_second is not None
            assert self.distance is not None
            verdict = "holds" if self.holds else f"FAILS for {self.below_bound} versions"
            lines += [
                f"  similarity to the original over {self.measured} pairs"
                f" (bound {self.config.min_similarity} {verdict}):",
                f"    {first}: {self.similarity_first.to_text()}",
                f"    {second}: {self.similarity_second.to_text()}",
                f"  word edit distance between versions: {self.distance.to_text(1)}",
            ]
        if self.samples:
            lines.append(f"  sample of {len(self.samples)} pairs (private: shows hidden versions):")
            for pair in self.samples:
                lines += [
                    f"    {pair.name} (distance {pair.distance})",
                    f"      original: {pair.original}",
                    f"      {first} ({pair.similarity_first:.3f}): {pair.first}",
                    f"      {second} ({pair.similarity_second:.3f}): {pair.second}",
                ]
        if self.dropped:
            shown = ", ".join(self.dropped[:10])
            more = f" and {len(self.dropped) - 10} more" if len(self.dropped) > 10 else ""
            lines.append(f"  left out as unmarkable (not vaulted, not published): {shown}{more}")
        return "\n".join(lines)


def _plain(value: Value) -> str:
    return value.hex() if isinstance(value, bytes) else str(value)


def inspect_text_vault(
    vault: Vault, *, pairs: int | None = None, embedder: Embedder | None = None
) -> TextInspectReport:
    """Measure the first ``pairs`` pairs of a text vault (all when None; 0 to skip)."""
    if vault.item_kind != "text":
        raise ParameterError(f"{vault.path} holds {vault.item_kind} items, not texts")
    if pairs is not None and (isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 0):
        raise ParameterError(f"pairs must be a non-negative integer, got {pairs!r}")
    config = TextMarkingConfig.from_value(vault.config)
    escrowed = vault.receipt is not None
    labels = ("published", "hidden") if escrowed else ("version 0", "version 1")
    report = TextInspectReport(
        vault.path, vault.n_pairs, config, vault.source, receipt_summary(vault), labels
    )
    wanted = vault.n_pairs if pairs is None else min(pairs, vault.n_pairs)
    if wanted == 0:
        return report
    bits = vault.publication_bits() if escrowed else [False] * vault.n_pairs
    names: list[str] = []
    originals: list[str] = []
    firsts: list[str] = []
    seconds: list[str] = []
    for start, chunk, chunk_names in vault.texts():
        for offset in range(len(chunk)):
            index = start + offset
            if index >= wanted:
                break
            swap = bits[index]
            versions = (chunk.versions0[offset], chunk.versions1[offset])
            names.append(chunk_names[offset])
            originals.append(chunk.originals[offset])
            firsts.append(versions[1] if swap else versions[0])
            seconds.append(versions[0] if swap else versions[1])
        if start + len(chunk) >= wanted:
            break
    embedder = embedder if embedder is not None else load_embedder(config.embedder)
    first_scores = similarities(embedder, originals, firsts)
    second_scores = similarities(embedder, originals, seconds)
    distances = [word_distance(a, b) for a, b in zip(firsts, seconds, strict=True)]
    bound = config.min_similarity
    report.measured = len(names)
    report.similarity_first = Distribution.of(list(first_scores))
    report.similarity_second = Distribution.of(list(second_scores))
    report.distance = Distribution.of([float(d) for d in distances])
    # A small tolerance: the bound was checked on embeddings computed in other batches.
    report.below_bound = int(
        (first_scores < bound - 1e-6).sum() + (second_scores < bound - 1e-6).sum()
    )
    count = min(SAMPLE_PAIRS, len(names))
    chosen = sorted({round(k * (len(names) - 1) / max(count - 1, 1)) for k in range(count)})
    report.samples = [
        SamplePair(
            names[k],
            originals[k],
            firsts[k],
            seconds[k],
            float(first_scores[k]),
            float(second_scores[k]),
            distances[k],
        )
        for k in chosen
    ]
    return report
