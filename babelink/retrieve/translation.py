"""Retrieval through English renderings of a mention (translation knowledge, 001 §2.2).

A mention in another language is searched as written *and* as its English renderings
(`translate.render`), all in one call to the bundle's generator (one encoder batch). The two
are fused per concept by their best score (`fuse`): a KB whose names are mostly English is often
found more reliably through a word-by-word rendering ("infarto de miocardio" → "infarction of
myocardium") than through the multilingual encoder's own cross-lingual alignment, while the
original query keeps what the rendering garbles. A mention equal to a KB name is not rendered: it
is already answered exactly; nor is one whose original search is already confident
(`CONFIDENT_SCORE`), which spares the encoder most renderings of mentions close to a KB name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from babelink.index.names import NameTable
from babelink.retrieve.candidate import Candidate, CandidateGenerator, screening_of
from babelink.translate.render import Renderer

#: A mention whose best concept scores this much as written is not rendered. The fusion keeps the
#: best score of any query, so a rendering could only overturn such an answer by scoring higher
#: still. It is the default link threshold, so that `link` never skips a rendering that would
#: lift a span over it (a higher link threshold raises it: `deciding_at`). 0.975, the lowest score
#: that cost no `normalize` Acc@1 leave-one-language-out on XL-BEL, Mantra and QUAERO dev, cost
#: Mantra fr `link` 4 mentions; 0.98 also cost no held-out language Acc@1, with 5-33% of
#: renderings left unencoded (`benchmarks/log/notes.md`).
CONFIDENT_SCORE = 0.98


class TranslatingGenerator:
    """A generator that also searches each mention's English renderings and fuses the results."""

    def __init__(self, base: CandidateGenerator, renderer: Renderer, names: NameTable,
                 confident: float = CONFIDENT_SCORE):
        self.base = base
        self.renderer = renderer
        self.names = names
        self.confident = confident

    def deciding_at(self, threshold: float) -> TranslatingGenerator:
        """This generator for a caller that keeps an answer scoring `threshold` or more (`link`):
        a rendering may lift a mention over that threshold, so none below it is skipped."""
        confident = max(CONFIDENT_SCORE, threshold)
        if confident == self.confident:
            return self
        return TranslatingGenerator(self.base, self.renderer, self.names, confident)

    def screening(self) -> TranslatingGenerator | None:
        """This generator over its base's screening search (`candidate.ScreenedGenerator`), if it has one."""
        screen = screening_of(self.base)
        return None if screen is None else TranslatingGenerator(screen, self.renderer, self.names, self.confident)

    def renderings(self, normalized: Sequence[str], langs: Sequence[str | None] | None = None) -> list[list[str]]:
        """Each mention's English renderings; none for a mention that is a KB name as written."""
        langs = langs or [None] * len(normalized)
        return [[] if self.names.lookup(text) is not None else self.renderer.render(text, lang)
                for text, lang in zip(normalized, langs)]

    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        """The mentions as written first, then (one more batch) the renderings of those not
        answered confidently."""
        originals = self.base.generate(normalized, top_k, capitals, langs)
        unsure = [position for position, found in enumerate(originals)
                  if not found or found[0].score < self.confident]
        langs = langs or [None] * len(normalized)
        found = self.renderings([normalized[position] for position in unsure], [langs[position] for position in unsure])
        renderings = {position: texts for position, texts in zip(unsure, found) if texts}
        queries = [text for texts in renderings.values() for text in texts]
        in_capitals = None if capitals is None else [
            capitals[position] for position, texts in renderings.items() for _ in texts]
        results = iter(self.base.generate(queries, top_k, in_capitals) if queries else [])
        return [fuse(original, [(text, next(results)) for text in renderings.get(position, ())])[:top_k]
                for position, original in enumerate(originals)]


def fuse(original: list[Candidate], translated: list[tuple[str, list[Candidate]]]) -> list[Candidate]:
    """Rank the concepts of both searches by their best score over the mention as written and
    its renderings (a concept keeps the cosine of the query that matched it best).

    The maximum has no parameter to tune and keeps scores on the scale of one query's cosine, so
    thresholds mean the same with or without translation. Measured leave-one-language-out against
    a discounted maximum and weighted mixes, every fold chose it (benchmarks/log/tuning.md). A
    garbled rendering can only promote a concept it matches better than the mention as written
    does. A candidate whose score came through a rendering carries it as `translated`."""
    best = {candidate.concept_id: candidate for candidate in original}
    for rendering, candidates in translated:
        for candidate in candidates:
            current = best.get(candidate.concept_id)
            if current is None or candidate.score > current.score:
                best[candidate.concept_id] = replace(candidate, translated=rendering)
    return sorted(best.values(), key=lambda candidate: -candidate.score)
