"""Candidate generators: normalised mention strings → ranked KB concepts.

Every generator searches the bundle's `NameTable` strings and aggregates hits per concept:
a concept's score is that of its best-matching name.
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import copy
from dataclasses import dataclass, replace

import numpy as np

from babelink.index.dense import DenseNameIndex
from babelink.index.names import NameTable
from babelink.index.sparse import TfidfNameIndex
from babelink.kb.base import KnowledgeBase
from babelink.retrieve.candidate import Candidate, concept_codes
from babelink.retrieve.filters import AllowedNames


class _StringHitAggregator:
    """Turns ranked string hits into ranked concepts (the best name of each concept wins)."""

    def __init__(self, kb: KnowledgeBase, names: NameTable, threshold: float = 0.0,
                 allowed: AllowedNames | None = None):
        self.names = names
        self.threshold = threshold
        self.allowed = allowed
        self._concept_ids = kb.concepts.column("concept_id").to_pylist()
        self._preferred = kb.concepts.column("preferred_name").to_pylist()
        self._xrefs = kb.concepts.column("xrefs")
        self._codes: dict[int, tuple[tuple[str, str], ...]] = {}

    def concepts(
        self,
        string_rows: Sequence[int],
        scores: Sequence[float],
        top_k: int,
        sparse_scores: Sequence[float] | None = None,
        dense_scores: Sequence[float] | None = None,
        capitals: bool = True,
    ) -> list[Candidate]:
        """`string_rows` ranked best first; `sparse_scores`/`dense_scores` (aligned) are reported as such.
        Unless the mention is written in `capitals`, strings the KB writes only in short capitals are skipped."""
        ranked: list[Candidate] = []
        seen: set[int] = set()
        for position, (string_row, score) in enumerate(zip(string_rows, scores)):
            if string_row < 0 or score < self.threshold:
                break
            if not capitals and self.names.capitals_only[string_row]:
                continue
            first_pair = self.names.offsets[string_row]
            for position_in_string, concept_row in enumerate(self.names.concepts_of(string_row)):
                if concept_row in seen or (self.allowed is not None
                                           and not self.allowed.pairs[first_pair + position_in_string]):
                    continue
                seen.add(concept_row)
                ranked.append(
                    Candidate(
                        self._concept_ids[concept_row],
                        self._preferred[concept_row],
                        self.names.surfaces[string_row],
                        float(score),
                        None if sparse_scores is None else float(sparse_scores[position]),
                        None if dense_scores is None else float(dense_scores[position]),
                        codes=self._codes_of(concept_row),
                        matched_string=self.names.strings[string_row],
                    )
                )
                if len(ranked) == top_k:
                    return ranked
        return ranked


    def _codes_of(self, concept_row: int) -> tuple[tuple[str, str], ...]:
        if concept_row not in self._codes:
            self._codes[concept_row] = concept_codes(self._concept_ids[concept_row],
                                                     self._xrefs[int(concept_row)].as_py() or ())
        return self._codes[concept_row]


class ExactMatchGenerator:
    """Dictionary baseline: concepts having a name equal to the (normalised) mention."""

    def __init__(self, kb: KnowledgeBase, names: NameTable, allowed: AllowedNames | None = None):
        self._aggregate = _StringHitAggregator(kb, names, allowed=allowed)
        self._names = names

    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        results = []
        for mention, in_capitals in zip(normalized, _capitals(capitals, normalized)):
            row = self._names.lookup(mention)
            results.append([] if row is None else self._aggregate.concepts([row], [1.0], top_k, capitals=in_capitals))
        return results


class SparseGenerator:
    """Char n-gram TF-IDF cosine top-m with a threshold (000 §4.2–4.3), aggregated per concept."""

    #: Strings searched per requested concept: several strings may name the same concept.
    STRINGS_PER_CONCEPT = 4

    def __init__(self, kb: KnowledgeBase, names: NameTable, index: TfidfNameIndex, threshold: float = 0.0,
                 allowed: AllowedNames | None = None):
        self._aggregate = _StringHitAggregator(kb, names, threshold, allowed)
        self._index = index if allowed is None else index.restricted(allowed.strings)

    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        if not normalized:
            return []
        strings, scores = self._index.search(list(normalized), top_k * self.STRINGS_PER_CONCEPT)
        scores = scores.astype(np.float64)
        return [
            self._aggregate.concepts(rows, row_scores, top_k, capitals=in_capitals)
            for rows, row_scores, in_capitals in zip(strings, scores, _capitals(capitals, normalized))
        ]


class DenseGenerator:
    """Nearest KB names by encoder cosine (003 §2 inference; 002 §4.3), aggregated per concept."""

    STRINGS_PER_CONCEPT = SparseGenerator.STRINGS_PER_CONCEPT

    def __init__(self, kb: KnowledgeBase, names: NameTable, index: DenseNameIndex, encoder, threshold: float = 0.0,
                 allowed: AllowedNames | None = None):
        self._aggregate = _StringHitAggregator(kb, names, threshold, allowed)
        self._index = index
        self._encoder = encoder
        self._strings = None if allowed is None else allowed.strings

    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        if not normalized:
            return []
        return self.search(self._encoder.encode(list(normalized)), top_k, _capitals(capitals, normalized))

    def search(self, vectors: np.ndarray, top_k: int, capitals: Sequence[bool]) -> list[list[Candidate]]:
        """Ranked concepts of query vectors already encoded (the dual encoder's mention vectors)."""
        strings, scores = self._index.search(vectors, top_k * self.STRINGS_PER_CONCEPT, self._strings)
        scores = scores.astype(np.float64)
        return [
            self._aggregate.concepts(rows, s, top_k, dense_scores=s, capitals=in_capitals)
            for rows, s, in_capitals in zip(strings, scores, capitals)
        ]


@dataclass(frozen=True)
class HybridParams:
    """Fusion rule: `score = dense_weight · dense cosine + (1 − dense_weight) · sparse cosine`,
    over the union of each retriever's `pool` best strings, both scores computed for every string
    in the union.

    The defaults are the best mean Acc@1 on NCBI-disease, BC5CDR-Disease and QUAERO (French) dev
    (benchmarks/log/tuning.md): the TF-IDF shortlist contributes candidates,
    and the encoder's cosine ranks them. Giving the sparse cosine weight helped English dev sets
    by up to 2 points and cost the French one 8, so the mean favours w = 1.

    `screening_pool` is each retriever's pool in the screening search `link` runs first where
    names are encoded on first need (`screening`): the narrowest that lost no mention of NCBI-disease
    and BC5CDR dev (8 lost 11 of 5,701), with a third fewer names encoded (benchmarks/log/notes.md).
    """

    dense_weight: float = 1.0
    pool: int = 32
    screening_pool: int = 12


class HybridGenerator:
    """Sparse TF-IDF and dense encoder candidates fused by a weighted sum of cosines."""

    def __init__(self, kb: KnowledgeBase, names: NameTable, sparse: TfidfNameIndex, dense: DenseNameIndex,
                 encoder, params: HybridParams = HybridParams(), threshold: float = 0.0,
                 allowed: AllowedNames | None = None):
        self._aggregate = _StringHitAggregator(kb, names, threshold, allowed)
        self._sparse = sparse if allowed is None else sparse.restricted(allowed.strings)
        self._dense, self._encoder = dense, encoder
        self.params = params
        self._strings = None if allowed is None else allowed.strings  # the dense search's selector

    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        if not normalized:
            return []
        return self.rank(normalized, self._encoder.encode(normalized), top_k, capitals)

    def screening(self) -> HybridGenerator | None:
        """This generator with each retriever's pool cut to its `screening_pool` best strings, for a
        caller that keeps only confident answers (`candidate.ScreenedGenerator`), where the dense
        index encodes each name on first need: it scores the best of the names this generator
        scores. None where the vectors are stored (nothing to save) or the pool is that narrow already."""
        if not self._dense.encodes_on_demand or self.params.pool <= self.params.screening_pool:
            return None
        screen = copy(self)
        screen.params = replace(self.params, pool=self.params.screening_pool)
        return screen

    def rank(self, normalized: Sequence[str], vectors: np.ndarray, top_k: int,
             capitals: Sequence[bool] | None = None) -> list[list[Candidate]]:
        """`generate` with the dense query vectors given: the dual encoder's contextual mention
        vectors fused with the TF-IDF cosine of their span texts."""
        in_capitals = _capitals(capitals, normalized)
        pool = max(self.params.pool, top_k * SparseGenerator.STRINGS_PER_CONCEPT)
        sparse_queries = self._sparse.transform(normalized)
        sparse_rows, _ = self._sparse.search_vectors(sparse_queries, pool)
        dense_rows, _ = self._dense.search(vectors, pool, self._strings)
        query_rows, string_rows = _union_per_query(np.concatenate([sparse_rows, dense_rows], axis=1))
        sparse_scores = self._sparse.score_pairs(sparse_queries, query_rows, string_rows).astype(np.float64)
        dense_scores = self._dense.score_pairs(vectors, query_rows, string_rows).astype(np.float64)
        weight = self.params.dense_weight
        fused = weight * dense_scores + (1.0 - weight) * sparse_scores
        # Best first within each query: sort by query, then by descending fused score.
        order = np.lexsort((-fused, query_rows))
        bounds = np.searchsorted(query_rows[order], np.arange(len(normalized) + 1))
        results = []
        for query in range(len(normalized)):
            hits = order[bounds[query] : bounds[query + 1]]
            results.append(self._aggregate.concepts(string_rows[hits], fused[hits], top_k,
                                                    sparse_scores[hits], dense_scores[hits], in_capitals[query]))
        return results


def _capitals(capitals: Sequence[bool] | None, normalized: Sequence[str]) -> Sequence[bool]:
    """The `capitals` argument of `generate`, with None meaning every mention was in capitals."""
    return [True] * len(normalized) if capitals is None else capitals


def _union_per_query(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (query, string) pairs of a (queries × hits) array padded with -1."""
    query_rows = np.repeat(np.arange(rows.shape[0]), rows.shape[1])
    pairs = np.stack([query_rows, rows.ravel()], axis=1)
    pairs = np.unique(pairs[pairs[:, 1] >= 0], axis=0)
    return pairs[:, 0], pairs[:, 1]
