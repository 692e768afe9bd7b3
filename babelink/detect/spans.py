"""Candidate mention spans: every token run of up to k words that could be a mention (000 §4.2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from babelink.detect.stopwords import Boundaries, is_acronym
from babelink.detect.tokenize import Token, joinable
from babelink.text import fold_case, written_in_capitals


@dataclass(frozen=True)
class SpanParams:
    """`max_words` bounds a span's words in spaced scripts: k = 4, where 000 App. A has 3, for the
    four-word names of common diseases ("type 2 diabetes mellitus", "chronic obstructive pulmonary
    disease"; dev strict F1 NCBI-disease 0.652 → 0.668, BC5CDR 0.734 → 0.736, notes.md); `max_chars`
    bounds its characters in scripts written without spaces (a Thai or Lao grapheme counts
    half: their words are spelled with more letters). Spans shorter than `min_chars`
    characters in spaced scripts are skipped: single letters are initials and list markers."""

    max_words: int = 4
    max_chars: int = 8
    min_chars: int = 2

    def __post_init__(self):
        if self.max_words < 1 or self.max_chars < 1:
            raise ValueError(f"max_words and max_chars must be at least 1, got {self.max_words}, {self.max_chars}")


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    text: str


def edge_stops(text: str, tokens: Sequence[Token], boundaries: Boundaries, defined: frozenset[str] = frozenset()
               ) -> tuple[list[bool], list[bool], list[bool]]:
    """Per token of `text`: whether it may not open a span, may not close one, may not be one alone
    (`boundaries`). A stop word in capitals ("ALL", "IS") is an acronym, not a stop word, unless
    the whole text is in capitals and does not define it (`defined`: the short forms it defines);
    so is a single capital at an edge where the KB's names have it (`boundaries.capital_start`,
    `capital_end`), unless the whole text is in capitals. An elided clitic edges nothing."""
    shouting = written_in_capitals(text)  # then "IS" and "AS" are the words they spell

    def acronym(word: str) -> bool:
        return is_acronym(word) and (not shouting or word in defined)

    def stop(words: frozenset[str], capitals: frozenset[str] = frozenset()) -> list[bool]:
        return [token.elided or (fold_case(token.text) in words and not acronym(token.text)
                                 and (shouting or token.text not in capitals)) for token in tokens]

    return (stop(boundaries.no_start, boundaries.capital_start), stop(boundaries.no_end, boundaries.capital_end),
            stop(boundaries.never_alone))


def enumerate_spans(text: str, tokens: Sequence[Token], boundaries: Boundaries,
                    params: SpanParams = SpanParams(), defined: frozenset[str] = frozenset()) -> list[Span]:
    """All spans within budget that cross no barrier (`joinable`), start with no word that may not
    open one and end with none that may not close one, in text order, a word that may not be one
    alone left out (`edge_stops`)."""
    no_start, no_end, alone_excluded = edge_stops(text, tokens, boundaries, defined)
    spans = []
    for first, token in enumerate(tokens):
        if no_start[first]:
            continue
        words = chars = 0.0
        for last in range(first, len(tokens)):
            if last > first and not joinable(text, tokens[last - 1], tokens[last]):
                break
            if tokens[last].unspaced:
                chars += tokens[last].weight
            else:
                words += 1
            if words > params.max_words or chars > params.max_chars:
                break
            if no_end[last] or (chars == 0 and tokens[last].end - token.start < params.min_chars):
                continue
            if last == first and alone_excluded[first]:
                continue
            spans.append(Span(token.start, tokens[last].end, text[token.start : tokens[last].end]))
    return spans
