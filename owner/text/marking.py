"""``owner mark --kind text``: make two versions of every text and store them in a vault.

The run has two stages. First every text is checked and its versions are made in
memory (texts are small): the thesaurus search of :mod:`twinaudit.owner.text.substitution`, or
a paraphraser checked against the similarity bound. Only when every text has its two
versions is the vault created, so an input with a bad text leaves nothing behind:

- an empty or over-long text (protocol limit, or longer than the embedder reads) is
  an :class:`~twinaudit.protocol.errors.InputError` naming every such text;
- a text for which no version within the bound exists (no replaceable word with a
  synonym, or a paraphrase too far from it) is *unmarkable*: the run refuses the
  input with an InputError naming them all, unless ``drop_unmarkable`` is set, in
  which case they are left out of the vault, listed in its source record
  (``dropped``) and reported, and never published;
- a paraphraser that returns identical versions is a
  :class:`~twinaudit.protocol.errors.ParaphraserError` naming the texts.

The vault is then written chunk by chunk (``batch_size`` texts each), resumably: run
again after an interruption, the marking seed comes from the unfinished vault's
secret, the texts already written are skipped (their versions are not recomputed),
and the dropped texts are taken from the vault's record.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from twinaudit.protocol.encoding import Value, encode
from twinaudit.protocol.errors import InputError, ParameterError, ParaphraserError, StateError

from ..progress import Progress
from ..vault import Vault, VaultWriter
from ..vault.journal import read_journal
from ..vault.layout import JOURNAL_FILE, MANIFEST_FILE, SECRET_BYTES
from ..vault.secret import marking_seed, read_secret
from .config import TextMarkingConfig
from .paraphrasers import (
    Paraphraser,
)
from .similarity import Embedder, load_embedder, similarities
from .sources import TextSource, listed, text_problem
from .substitution import MarkedText, SubstitutionSearch
from .thesaurus import Thesaurus, load_thesaurus
from .words import word_distance


@dataclass(frozen=True)
class TextMarkResult:
    """What a text marking run did."""

    vault: Vault
    marked_now: int
    resumed_from: int
    dropped: list[str]
    seconds: float


@dataclass(frozen=True)
class _Unmarkable:
    name: str
    reason: str


def mark_texts(
    source: TextSource,
    vault_path: Path,
    config: TextMarkingConfig,
    *,
    secret: bytes | None = None,
    thesaurus: Thesaurus | None = None,
    embedder: Embedder | None = None,
    paraphraser: Paraphraser | None = None,
    show_progress: bool = True,
) -> TextMarkResult:
    """Mark every text of ``source`` into the vault at ``vault_path`` and finish it.

    ``thesaurus`` (default: Debian's ``mythes-en-us``) serves the thesaurus marker,
    ``paraphraser`` the seq2seq and chat markers; ``embedder`` (default: the one the
    configuration names) measures the similarity bound. A finished vault made from the
    same input and configuration is opened and returned.

    Raises:
        InputError: bad or unmarkable texts (all named); nothing is written.
        ParameterError: the vault was started with another input or configuration,
            or the marker's helper (thesaurus, paraphraser) is missing.
        ParaphraserError: the paraphraser failed or returned identical versions.

    """
    started = time.monotonic()
    vault_path = Path(vault_path)
    if config.marker == "thesaurus":
        thesaurus = thesaurus if thesaurus is not None else load_thesaurus()
        config = replace(config, thesaurus_sha256=thesaurus.describe()["sha256"])
    elif paraphraser is None:
        raise ParameterError(f"the {config.marker} marker needs a paraphraser")
    description = source.describe()
    if (vault_path / MANIFEST_FILE).exists():
        return _finished(vault_path, description, config, started)
    dropped: list[str] | None = None
    completed = 0
    if (vault_path / JOURNAL_FILE).exists():
        journal = read_journal(vault_path)
        dropped = _recorded_drops(journal.parameters.source, description, vault_path)
        completed = journal.completed
        secret = read_secret(vault_path)
    elif secret is None:
        secret = os.urandom(SECRET_BYTES)
    embedder = embedder if embedder is not None else load_embedder(config.embedder)
    _check_lengths(source, embedder)
    kept = list(range(len(source))) if dropped is None else _kept(source, dropped)
    todo = kept[completed:]
    maker = _VersionMaker(config, marking_seed(secret), embedder, thesaurus, paraphraser)
    versions, unmarkable = maker.make(source, todo, show_progress)
    if unmarkable:
        if dropped is not None:
            raise StateError(
                f"vault {vault_path}: texts marked when the run started are now unmarkable "
                f"({listed([item.name for item in unmarkable])}); did the thesaurus or "
                "embedder change?"
            )
        if not config.drop_unmarkable:
            raise InputError(
                f"{source.path}: {len(unmarkable)} text(s) cannot be marked within similarity "
                f"{config.min_similarity}: "
                + listed([f"{item.name} ({item.reason})" for item in unmarkable])
                + "; rephrase or remove them, or pass --drop-unmarkable to leave them out"
            )
    if dropped is None:
        dropped = [item.name for item in unmarkable]
        lost = {item.name for item in unmarkable}
        kept = [index for index in kept if source.names[index] not in lost]
        todo = kept
    if not kept:
        raise InputError(f"{source.path}: no text can be marked, so there is nothing to vault")
    recorded: dict[str, Value] = {**description, "dropped": list[Value](dropped)}
    with VaultWriter.create_or_resume(
        vault_path,
        item_kind="text",
        source=recorded,
        config=config.to_value(),
        n_items=len(kept),
        secret=secret,
    ) as writer:
        resumed_from = writer.completed
        if resumed_from != completed:
            raise StateError(f"vault {vault_path} changed while its texts were marked")
        for lo in range(0, len(todo), config.batch_size):
            batch = todo[lo : lo + config.batch_size]
            writer.append_texts(
                [source.texts[index] for index in batch],
                [versions[index].version0 for index in batch],
                [versions[index].version1 for index in batch],
                [source.names[index] for index in batch],
            )
        vault = writer.finish()
    return TextMarkResult(vault, len(todo), resumed_from, list(dropped), time.monotonic() - started)


class _VersionMaker:
    """Makes the versions of chosen texts with the configured marker."""

    def __init__(
        self,
        config: TextMarkingConfig,
        seed: bytes,
        embedder: Embedder,
        thesaurus: Thesaurus | None,
        paraphraser: Paraphraser | None,
    ) -> None:
        self.config = config
        self.embedder = embedder
        self.paraphraser = paraphraser
        self.search = (
            SubstitutionSearch(thesaurus, embedder, config, seed) if thesaurus is not None else None
        )

    def make(
        self, source: TextSource, indices: Sequence[int], show_progress: bool
    ) -> tuple[dict[int, MarkedText], list[_Unmarkable]]:
        versions: dict[int, MarkedText] = {}
        unmarkable: list[_Unmarkable] = []
        progress = (
            Progress(f"marking texts ({self.config.marker})", len(indices))
            if show_progress and indices
            else None
        )
        size = self.config.batch_size
        for lo in range(0, len(indices), size):
            batch = list(indices[lo : lo + size])
            texts = [source.texts[index] for index in batch]
            names = [source.names[index] for index in batch]
            if self.search is not None:
                made = self._substitute(batch, texts, names, unmarkable)
            else:
                made = self._paraphrase(batch, texts, names, unmarkable)
            versions.update(made)
            if progress is not None:
                progress.update(len(batch))
        if progress is not None:
            progress.finish()
        return versions, unmarkable

    def _substitute(
        self,
        batch: list[int],
        texts: list[str],
        names: list[str],
        unmarkable: list[_Unmarkable],
    ) -> dict[int, MarkedText]:
        assert self.search is not None
        plans = self.search.plan(texts)
        chosen = []
        for index, name, plan in zip(batch, names, plans, strict=True):
            if plan.markable:
                chosen.append((index, plan))
            elif plan.words_with_synonyms == 0:
                unmarkable.append(_Unmarkable(name, "no replaceable word has a synonym"))
            else:
                unmarkable.append(
                    _Unmarkable(name, "every synonym swap falls below the similarity bound")
                )
        marked = self.search.mark([plan for _, plan in chosen], [index for index, _ in chosen])
        return {index: pair for (index, _), pair in zip(chosen, marked, strict=True)}

    def _paraphrase(
        self,
        batch: list[int],
        texts: list[str],
        names: list[str],
        unmarkable: list[_Unmarkable],
    ) -> dict[int, MarkedText]:
        assert self.paraphraser is not None
        pairs = self.paraphraser.paraphrase(texts)
        if len(pairs) != len(texts):
            raise ParaphraserError("invalid-answer", f"{len(pairs)} pairs for {len(texts)} texts")
        identical = [
            name for name, (first, second) in zip(names, pairs, strict=True) if first == second
        ]
        if identical:
            raise ParaphraserError(
                "identical-versions",
                f"{self.paraphraser.name} returned the same text twice for {listed(identical)}",
            )
        for name, pair in zip(names, pairs, strict=True):
            for version in pair:
                problem = text_problem(version)
                if problem is not None:
                    raise ParaphraserError("invalid-answer", f"{name}: a paraphrase is {problem}")
        first = similarities(self.embedder, texts, [pair[0] for pair in pairs])
        second = similarities(self.embedder, texts, [pair[1] for pair in pairs])
        made: dict[int, MarkedText] = {}
        bound = self.config.min_similarity
        for k, (index, name, pair) in enumerate(zip(batch, names, pairs, strict=True)):
            low = min(first[k], second[k])
            if low < bound:
                unmarkable.append(
                    _Unmarkable(name, f"a paraphrase has similarity {low:.3f} < {bound}")
                )
                continue
            made[index] = MarkedText(
                pair[0], pair[1], float(first[k]), float(second[k]), word_distance(*pair)
            )
        return made


def _finished(
    vault_path: Path, description: dict[str, Value], config: TextMarkingConfig, started: float
) -> TextMarkResult:
    vault = Vault.open(vault_path)
    recorded = {key: value for key, value in vault.source.items() if key != "dropped"}
    for what, old, new in (
        ("input", recorded, description),
        ("config", vault.config, config.to_value()),
    ):
        if encode(old) != encode(new):
            raise ParameterError(
                f"{vault_path} is a finished vault made with another {what}; "
                "mark into a new directory"
            )
    dropped = vault.source.get("dropped")
    names = [str(name) for name in dropped] if isinstance(dropped, list) else []
    return TextMarkResult(vault, 0, vault.n_pairs, names, time.monotonic() - started)


def _recorded_drops(
    recorded: dict[str, Value], description: dict[str, Value], vault_path: Path
) -> list[str]:
    base = {key: value for key, value in recorded.items() if key != "dropped"}
    dropped = recorded.get("dropped")
    if encode(base) != encode(description) or not isinstance(dropped, list):
        raise ParameterError(
            f"the unfinished vault {vault_path} was started with another input; "
            "resume it with the same file, or mark into a new directory"
        )
    return [str(name) for name in dropped]


def _kept(source: TextSource, dropped: Sequence[str]) -> list[int]:
    lost = set(dropped)
    return [index for index, name in enumerate(source.names) if name not in lost]


def _check_lengths(source: TextSource, embedder: Embedder) -> None:
    limit = embedder.max_tokens
    if limit is None:
        return
    long = [
        f"{name} ({count} tokens)"
        for name, text in zip(source.names, source.texts, strict=True)
        if (count := embedder.token_count(text)) > limit
    ]
    if long:
        raise InputError(
            f"{source.path}: {len(long)} text(s) are longer than the {limit} tokens "
            f"{embedder.name} reads, so their similarity cannot be measured: {listed(long)}; "
            "split them into shorter texts"
        )
