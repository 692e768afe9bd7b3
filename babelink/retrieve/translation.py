"""Retrieval through English renderings of a mention (translation knowledge, 001 §2.2).

A mention in another language is searched as written *and* as its English renderings
(`translate.render`), all in one call to the bundle's generator (one encoder batch). The two
are fused per concept by their best score (`fuse`): a KB whose names are mostly English is often
found more reliably through a word-by-word rendering ("infarto de miocardio" → "infarction of
myocardium") than through the multilingual encoder's own cross-lingual alignment, while the
original query keeps what the rendering garbles. A mention equal to a KB name is not rendered: it
is already answered exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from babelink.index.names import NameTable
from babelink.retrieve.candidate import Candidate, CandidateGenerator
from babelink.translate.render import Renderer


class TranslatingGenerator:
    """A generator that also searches each mention's English renderings and fuses the results."""

    def __init__(self, base: CandidateGenerator, renderer: Renderer, names: NameTable):
        self.base = base
        self.renderer = renderer
        self.names = names

    def renderings(self, normalized: Sequence[str], langs: Sequence[str | None] | None = None) -> list[list[str]]:
        """Each mention's English renderings; none for a mention that is a KB name as written."""
        langs = langs or [None] * len(normalized)
        return [[] if self.names.lookup(text) is not None else self.renderer.render(text, lang)
                for text, lang in zip(normalized, langs)]

    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        renderings = self.renderings(normalized, langs)
        queries = list(normalized) + [text for found in renderings for text in found]
        in_capitals = None if capitals is None else list(capitals) + [
            flag for flag, found in zip(capitals, renderings) for _ in found]
        results = self.base.generate(queries, top_k, in_capitals)
        fused, position = [], len(normalized)
        for original, found in zip(results, renderings):
            translated = list(zip(found, results[position : position + len(found)]))
            position += len(found)
            fused.append(fuse(original, translated)[:top_k])
        return fused


def fuse(original: list[Candidate], translated: list[tuple[str, list[Candidate]]]) -> list[Candidate]:
    """Rank the concepts of both searches by their best score over the mention as written and
    its renderings (a concept keeps the cosine of the query that matched it best).

    The maximum has no parameter to tune and keeps scores on the scale of one query's cosine, so
    thresholds mean the same with or without translation. Measured leave-one-language-out against
    a discounted maximum and weighted mixes, every fold chose it (`benchmarks/tune_translation.py`,
    BENCHMARKS.md). A garbled rendering can only promote a concept it matches better than the
    mention as written does. A candidate whose score came through a rendering carries it as
    `translated`."""
    best = {candidate.concept_id: candidate for candidate in original}
    for rendering, candidates in translated:
        for candidate in candidates:
            current = best.get(candidate.concept_id)
            if current is None or candidate.score > current.score:
                best[candidate.concept_id] = replace(candidate, translated=rendering)
    return sorted(best.values(), key=lambda candidate: -candidate.score)
