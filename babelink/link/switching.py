"""Index switching (002 §6.2): search the small labeled-span index first, the KB index otherwise.

Spans annotated in training documents carry the corpus's own wording and the concept the
annotators chose for it, which a KB-wide search can miss (an abbreviation, a corpus-specific
synonym). When the best span match scores at least `threshold`, its concepts rank first and the
KB's candidates fill the remaining places; below it, the KB's candidates alone are returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from babelink.link.candidates import Candidate, CandidateGenerator


class SwitchingGenerator:
    def __init__(self, spans: CandidateGenerator, kb: CandidateGenerator, threshold: float):
        self.spans = spans
        self.kb = kb
        self.threshold = threshold

    def generate(self, mentions: Sequence[str], top_k: int) -> list[list[Candidate]]:
        span_results = self.spans.generate(mentions, top_k)
        kb_results = self.kb.generate(mentions, top_k)
        return [self._merge(spans, kb, top_k) for spans, kb in zip(span_results, kb_results)]

    def _merge(self, spans: list[Candidate], kb: list[Candidate], top_k: int) -> list[Candidate]:
        confident = [replace(candidate, index="spans") for candidate in spans if candidate.score >= self.threshold]
        seen = {candidate.concept_id for candidate in confident}
        return (confident + [candidate for candidate in kb if candidate.concept_id not in seen])[:top_k]
