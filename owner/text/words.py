"""Words of a text: splitting it losslessly, which words may be replaced, word edit distance.

A text is split into *pieces* that join back to exactly the text: words (letters,
with inner apostrophes or hyphens: ``don't``, ``well-made``) and the runs of anything
else between them. Only words are ever replaced, so spacing and punctuation survive.

The distance between two versions is the word-level Levenshtein distance (insertions,
deletions and substitutions of whole tokens, each costing 1) between their token
sequences, where a token is a word as above or one non-space, non-word character; the
comparison is case-sensitive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

_WORD: Final = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
_TOKEN: Final = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*|\d+|[^\w\s]|_")

_SENTENCE_END: Final = re.compile(r"([.!?:;][\"'’”)\]]*\s+|\n\s*)\Z")

#: Shortest word (in characters) that may be replaced.
MIN_WORD_CHARS: Final = 3

#: Function words never replaced: the thesaurus lists senses of them ("a" as the
#: vitamin, "will" as a legal document) that would change the meaning.
STOPWORDS: Final = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "cannot",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "either",
        "else",
        "ever",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "however",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "least",
        "less",
        "let",
        "like",
        "may",
        "me",
        "might",
        "mine",
        "more",
        "most",
        "much",
        "must",
        "my",
        "myself",
        "neither",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "one",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "per",
        "quite",
        "rather",
        "same",
        "shall",
        "she",
        "should",
        "since",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "though",
        "through",
        "thus",
        "to",
        "too",
        "under",
        "until",
        "up",
        "upon",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "whether",
        "which",
        "while",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "within",
        "without",
        "would",
        "yet",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "get",
        "got",
        "make",
        "made",
        "go",
        "goes",
        "went",
        "gone",
        "come",
        "came",
        "take",
        "took",
        "say",
        "said",
        "see",
        "saw",
        "seen",
        "way",
        "thing",
        "things",
        "well",
        "even",
        "still",
        "back",
    ]
)


def split_words(text: str) -> list[str]:
    """Return the pieces of ``text``: even indices separators, odd indices words.

    ``"".join(pieces) == text``; the list always has an odd length (it starts and
    ends with a possibly empty separator).
    """
    pieces: list[str] = []
    position = 0
    for match in _WORD.finditer(text):
        pieces.append(text[position : match.start()])
        pieces.append(match.group())
        position = match.end()
    pieces.append(text[position:])
    return pieces


def is_replaceable(pieces: Sequence[str], index: int) -> bool:
    """Tell whether the word ``pieces[index]`` may be replaced.

    Not a function word, at least :data:`MIN_WORD_CHARS` letters, and not a name: a
    capitalised word is replaced only where a sentence starts, and an all-capitals
    word (an acronym) never.
    """
    word = pieces[index]
    if len(word) < MIN_WORD_CHARS or word.lower() in STOPWORDS or word.isupper():
        return False
    return not word[:1].isupper() or index == 1 or bool(_SENTENCE_END.search(pieces[index - 1]))


def fix_articles(pieces: list[str], changed: Iterable[int]) -> None:
    """Make "a"/"an" before each changed word agree with its first letter, in place.

    Only the article directly before the word (separated by spaces) is adjusted; the
    rule is by first letter (a vowel takes "an"), so it errs on words like "hour".
    """
    for index in changed:
        if index < 3 or pieces[index - 1] != " ":
            continue
        article = pieces[index - 2]
        if article.lower() not in ("a", "an"):
            continue
        wanted = "an" if pieces[index][:1].lower() in "aeiou" else "a"
        if article.lower() != wanted:
            pieces[index - 2] = match_case(wanted, article)


def is_plain_synonym(synonym: str, word: str) -> bool:
    """Tell whether ``synonym`` may stand in for ``word``.

    Refused: a synonym the thesaurus spells with a capital (a name or an ethnonym:
    "black" → "African-American"), and a poetic elision ("ne'er", "o'er") where the
    word has no apostrophe.
    """
    if any(letter.isupper() for letter in synonym):
        return False
    return not any(mark in synonym for mark in "'’") or any(mark in word for mark in "'’")


def match_case(replacement: str, original: str) -> str:
    """Return ``replacement`` in the case pattern of ``original`` (lower, Title or UPPER)."""
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def tokens(text: str) -> list[str]:
    """Return the tokens the word distance compares."""
    return _TOKEN.findall(text)


def word_distance(first: str, second: str) -> int:
    """Return the word-level Levenshtein distance between two texts."""
    a, b = tokens(first), tokens(second)
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, token_a in enumerate(a, start=1):
        current = [i]
        for j, token_b in enumerate(b, start=1):
            current.append(
                min(
                    previous[j] + 1,
                    current[j - 1] + 1,
                    previous[j - 1] + (token_a != token_b),
                )
            )
        previous = current
    return previous[-1]
