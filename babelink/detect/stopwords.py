"""Boundary stop words (000 §4.2: no candidate span starts or ends with a stop word).

The lists are stopwords-iso's (58 languages, `stopwordsiso` on PyPI). General-purpose lists
hold words that begin or end many medical names ("high blood pressure", "small cell carcinoma",
"diabetes type ii"), so each bundle protects the stop words its own KB uses at name
boundaries, each edge on its own: a word that opens (closes) at least `PROTECT_MIN_NAMES` name
strings and does so in at least `PROTECT_MIN_SHARE` of its occurrences in names may open
(close) a span. "high" opens names and "ii" closes them; the letter "a" closes many ("hepatitis
A", "vitamin A") and opens almost none, so "hepatitis A" is a span and the article in "a fever"
is not. Counts are per language: only names in the text's language protect its stop words, or
a multilingual KB's Turkish "el" (hand) and "his" (feeling) would keep the Spanish article and
the English pronoun at span boundaries. "of" and "the" occur inside names far more often than
at their edges and stay stop words. Acronyms are not words here: "ALL" (acute lymphoblastic
leukaemia) in a KB protects nothing, and "ALL" in a text is never a stop word, while "all" always is.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import stopwordsiso

from babelink.detect.tokenize import Token, token_texts
from babelink.text import fold_case

PROTECT_MIN_NAMES = 2
PROTECT_MIN_SHARE = 0.3
#: Tokens read to guess a document's language from its stop words.
GUESS_TOKENS = 400


@cache
def stop_words(lang: str) -> frozenset[str]:
    """The language's list without its numerals: stopwords-iso's Spanish list holds the digits
    (its Chinese one the full-width ones, its English one "10"), which would end "diabetes
    mellitus tipo 2" before its number in Spanish text and not in English."""
    return frozenset(fold_case(word) for word in stopwordsiso.stopwords(lang) if not word.isnumeric())


def is_acronym(word: str) -> bool:
    return len(word) > 1 and word.isupper()


@dataclass(frozen=True)
class Protected:
    """Stop words a KB's names open with (`opening`) and close with (`closing`) often enough to
    stay at that edge of a span, casefolded; a single letter is counted as a capital: in running
    text a letter that names something is written so ("hepatitis A", what a KB may write
    "hepatitis a"), and a lower-case one is a word ("a", "à", "y", "и")."""

    opening: frozenset[str] = frozenset()
    closing: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Boundaries:
    """What may edge a span in one language: no span starts with a word of `no_start` or ends
    with one of `no_end`, and a word of `never_alone` (a protected stop word: "is", "as" where a
    KB writes "IS", "AS") is no span by itself."""

    no_start: frozenset[str] = frozenset()
    no_end: frozenset[str] = frozenset()
    never_alone: frozenset[str] = frozenset()
    #: Single capitals that, written so, are no stop word at that edge ("B" of "B cell lymphoma",
    #: "A" of "hepatitis A"), though their lower case is ("a", the article: `Protected`).
    capital_start: frozenset[str] = frozenset()
    capital_end: frozenset[str] = frozenset()

    @classmethod
    def of(cls, stopwords: frozenset[str]) -> Boundaries:
        """The plain list at both edges, nothing protected."""
        return cls(stopwords, stopwords)


def protected_words(names: Iterable[str], candidates: frozenset[str]) -> Protected:
    """The `candidates` (stop words, casefolded) that open, and those that close, KB names (as
    written, not normalised) often enough to never count as stop words at that edge. Only
    candidates are counted: a language's stop words are a few hundred words, its names' words
    tens of thousands."""
    opening: Counter[str] = Counter()
    closing: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    for name in names:
        words = [word.upper() if len(word) == 1 else fold_case(word) for word in token_texts(name)
                 if not is_acronym(word)]
        if not words:
            continue
        anywhere.update(word for word in words if fold_case(word) in candidates)
        opening.update(word for word in words[:1] if fold_case(word) in candidates)
        closing.update(word for word in words[-1:] if fold_case(word) in candidates)

    def protected(edge: Counter[str]) -> frozenset[str]:
        return frozenset(word for word, count in edge.items()
                         if count >= PROTECT_MIN_NAMES and count >= PROTECT_MIN_SHARE * anywhere[word])

    return Protected(protected(opening), protected(closing))


class ProtectedByLanguage(Mapping[str, Protected]):
    """Each language's `protected_words` among its stop words, from (name, ISO language) pairs
    (a name several concepts share is one name string, as in the bundle's name table). Each
    language's are counted when first asked for, so linking a Spanish text tokenises the KB's
    Spanish names only."""

    def __init__(self, names: Iterable[tuple[str, str]]):
        grouped: defaultdict[str, set[str]] = defaultdict(set)
        for name, lang in names:
            grouped[lang].add(name)
        self._names = dict(grouped)
        self._protected: dict[str, Protected] = {}

    def __getitem__(self, lang: str) -> Protected:
        if lang not in self._protected:
            self._protected[lang] = protected_words(self._names[lang], stop_words(lang.lower()))
        return self._protected[lang]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class BoundaryStopwords:
    """Each language's `Boundaries`: its stop words, minus at each edge the words the KB's names
    in that language protect there (`ProtectedByLanguage`); the language is
    `detect.language.guess_language`'s when unknown."""

    def __init__(self, protected: Mapping[str, Protected] | None = None):
        self.protected = protected or {}
        self._by_lang: dict[str, Boundaries] = {}

    def for_language(self, lang: str | None) -> Boundaries:
        if lang is None:
            return Boundaries()
        if lang not in self._by_lang:
            stopwords, protected = stop_words(lang.lower()), self.protected.get(lang, Protected())
            self._by_lang[lang] = Boundaries(stopwords - protected.opening, stopwords - protected.closing,
                                             stopwords & (protected.opening | protected.closing),
                                             protected.opening - stopwords, protected.closing - stopwords)
        return self._by_lang[lang]


def guess_from_stopwords(tokens: Sequence[Token], prefer: Collection[str] = ()) -> str | None:
    """The language whose stop-word list covers most of the first `GUESS_TOKENS` spaced-script
    tokens (None below 5% coverage): stop words are the most frequent words of running text,
    so their overlap is a robust language signal. Unspaced scripts are told apart by script.

    Related languages share their commonest words ("и", "у" are Russian and Bulgarian): a tie
    goes to a language in `prefer` (those the caller can read: its names' and lexicons'), then
    to the first in alphabetical order."""
    words = [fold_case(token.text) for token in tokens[:GUESS_TOKENS] if not token.unspaced]
    unspaced = [token.text for token in tokens[:GUESS_TOKENS] if token.unspaced]
    if len(unspaced) > len(words):
        return _guess_unspaced(unspaced)
    if not words:
        return None
    hits = {lang: sum(word in stop_words(lang) for word in words) for lang in stopwordsiso.langs()}
    most = max(hits.values())
    if most == 0 or most < 0.05 * len(words):
        return None
    tied = sorted(lang for lang, count in hits.items() if count == most)
    return next((lang for lang in tied if lang in prefer), tied[0])


def _guess_unspaced(characters: list[str]) -> str | None:
    text = "".join(characters)
    if any("\u3040" <= char <= "\u30ff" for char in text):
        return "ja"
    if any("\u0e00" <= char <= "\u0e7f" for char in text):
        return "th"
    if any("\u4e00" <= char <= "\u9fff" for char in text):
        return "zh"
    return None
