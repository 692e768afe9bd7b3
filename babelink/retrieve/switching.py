"""Index switching (002 §6.2): search the small labeled-span index first, the KB index otherwise.

Spans annotated in training documents carry the corpus's own wording and the concept the
annotators chose for it, which a KB-wide search can miss (an abbreviation, a corpus-specific
synonym). The span index answers when its best match scores at least `threshold` *and* at
least the KB's best match: a near-miss span ("type I von Willebrand disease" for "type IID …",
"spinal cerebellar ataxia" for "cerebellar ataxia") must not outrank a KB name that matches
better. Its concepts then rank first and the KB's fill the remaining places; otherwise the KB's
candidates alone are returned. The comparison raised Acc@1 on NCBI-disease and BC5CDR-Disease
dev (benchmarks/log/tuning.md): both indexes score with the same encoder and fusion, so
their scores compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from babelink.retrieve.candidate import Candidate, CandidateGenerator

#: Scores this close count as a tie, which the span index wins: a string in both indexes scores
#: 1.0 in each only up to rounding (index vectors from torch in bf16, queries from ONNX in fp32).
TIE = 1e-4


class SwitchingGenerator:
    def __init__(self, spans: CandidateGenerator, kb: CandidateGenerator, threshold: float):
        self.spans = spans
        self.kb = kb
        self.threshold = threshold

    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        span_results = self.spans.generate(normalized, top_k, capitals, langs)
        kb_results = self.kb.generate(normalized, top_k, capitals, langs)
        return [self._merge(spans, kb, top_k) for spans, kb in zip(span_results, kb_results)]

    def _merge(self, spans: list[Candidate], kb: list[Candidate], top_k: int) -> list[Candidate]:
        floor = max(self.threshold, kb[0].score - TIE) if kb else self.threshold
        confident = [replace(candidate, index="spans") for candidate in spans if candidate.score >= floor]
        seen = {candidate.concept_id for candidate in confident}
        return (confident + [candidate for candidate in kb if candidate.concept_id not in seen])[:top_k]
