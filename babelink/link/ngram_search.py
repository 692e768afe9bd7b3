"""N-gram search loop (002 §4.4.1) for a mention that links to nothing with enough confidence.

A detected span may hold several neighbouring entities ("diabetes mellitus and hypertension",
"糖尿病和高血压") or an entity plus surrounding words. When the whole span scores below the
threshold, its n-grams of tokens (`detect.tokenize`: words, or characters in scripts written
without spaces) are searched from n−1 tokens down to 1, never across punctuation; an n-gram is
linked when it reaches the threshold, and shorter n-grams that contain an already linked token
are skipped. Within one length, better-scoring n-grams claim their tokens first. N-grams that
start or end with a stop word (`stopwords`) or an elided article are not searched, as in span
enumeration (000 §4.2): "asthma and" is not a mention even when its char n-grams nearly match
"asthma".
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from babelink.detect.spans import edge_stops
from babelink.detect.stopwords import Boundaries
from babelink.detect.tokenize import joinable, tokenize
from babelink.retrieve.candidate import Candidate, CandidateGenerator
from babelink.text import holds_capitals, normalize_name


@dataclass(frozen=True)
class LinkedPart:
    """A linked piece of a mention: `mention[start:end] == text`."""

    start: int
    end: int
    text: str
    candidates: list[Candidate]

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "text": self.text,
                "candidates": [candidate.to_dict() for candidate in self.candidates]}


def ngram_search(generator: CandidateGenerator, mention: str, threshold: float, top_k: int = 5,
                 boundaries: Boundaries | None = None, lang: str | None = None,
                 whole: list[Candidate] | None = None) -> list[LinkedPart]:
    """The linked parts of `mention`, in text order: the whole mention when it reaches
    `threshold`, otherwise its best n-grams (possibly none). `lang` is the mention's language;
    `whole`, the mention's own candidates when the caller has them (it is not searched again);
    n-grams are edged as spans are (`boundaries`)."""

    def search(texts: list[str]) -> list[list[Candidate]]:
        return generator.generate([normalize_name(t) for t in texts], top_k, [holds_capitals(t) for t in texts],
                                  [lang] * len(texts))

    if whole is None:
        [whole] = search([mention])
    if whole and whole[0].score >= threshold:
        return [LinkedPart(0, len(mention), mention, whole)]
    tokens = tokenize(mention)
    no_start, no_end, _ = edge_stops(mention, tokens, boundaries or Boundaries())
    joined = [joinable(mention, left, right) for left, right in pairwise(tokens)]
    linked = [False] * len(tokens)
    parts: list[LinkedPart] = []
    for size in range(len(tokens) - 1, 0, -1):
        grams = [(first, first + size) for first in range(len(tokens) - size + 1)
                 if not any(linked[first : first + size]) and not no_start[first] and not no_end[first + size - 1]
                 and all(joined[first : first + size - 1])]
        texts = [mention[tokens[first].start : tokens[last - 1].end] for first, last in grams]
        scored = [(candidates[0].score, gram, text, candidates)
                  for gram, text, candidates in zip(grams, texts, search(texts) if texts else [])
                  if candidates and candidates[0].score >= threshold]
        for _, (first, last), text, candidates in sorted(scored, key=lambda item: -item[0]):
            if not any(linked[first:last]):
                linked[first:last] = [True] * (last - first)
                parts.append(LinkedPart(tokens[first].start, tokens[last - 1].end, text, candidates))
        if all(linked):
            break
    return sorted(parts, key=lambda part: part.start)
