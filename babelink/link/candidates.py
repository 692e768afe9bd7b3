"""Candidate generators: mention strings → ranked KB concepts.

Every generator searches the bundle's `NameTable` strings and aggregates hits per concept:
a concept's score is that of its best-matching name (ARCHITECTURE.md, "Index").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from babelink.index.names import NameTable
from babelink.index.sparse import TfidfNameIndex
from babelink.kb.base import KnowledgeBase
from babelink.text import normalize_name


@dataclass(frozen=True, slots=True)
class Candidate:
    concept_id: str
    name: str  # the concept's preferred name
    matched_name: str  # the KB name that matched the mention
    score: float

    def to_dict(self) -> dict:
        return {"id": self.concept_id, "name": self.name, "matched_name": self.matched_name, "score": round(self.score, 6)}


class CandidateGenerator(Protocol):
    def generate(self, mentions: Sequence[str], top_k: int) -> list[list[Candidate]]:
        """For each mention, at most `top_k` concepts, best first."""
        ...


class _StringHitAggregator:
    """Turns ranked string hits into ranked concepts (the best name of each concept wins)."""

    def __init__(self, kb: KnowledgeBase, names: NameTable, threshold: float = 0.0):
        self.names = names
        self.threshold = threshold
        self._concept_ids = kb.concepts.column("concept_id").to_pylist()
        self._preferred = kb.concepts.column("preferred_name").to_pylist()

    def concepts(self, string_rows: Sequence[int], scores: Sequence[float], top_k: int) -> list[Candidate]:
        ranked: list[Candidate] = []
        seen: set[int] = set()
        for string_row, score in zip(string_rows, scores):
            if string_row < 0 or score < self.threshold:
                break
            for concept_row in self.names.concepts_of(string_row):
                if concept_row in seen:
                    continue
                seen.add(concept_row)
                ranked.append(
                    Candidate(
                        self._concept_ids[concept_row],
                        self._preferred[concept_row],
                        self.names.surfaces[string_row],
                        float(score),
                    )
                )
                if len(ranked) == top_k:
                    return ranked
        return ranked


class ExactMatchGenerator:
    """Dictionary baseline: concepts having a name equal to the mention after normalisation."""

    def __init__(self, kb: KnowledgeBase, names: NameTable):
        self._aggregate = _StringHitAggregator(kb, names)
        self._names = names

    def generate(self, mentions: Sequence[str], top_k: int) -> list[list[Candidate]]:
        results = []
        for mention in mentions:
            row = self._names.lookup(normalize_name(mention))
            results.append([] if row is None else self._aggregate.concepts([row], [1.0], top_k))
        return results


class SparseGenerator:
    """Char n-gram TF-IDF cosine top-m with a threshold (000 §4.2–4.3), aggregated per concept."""

    #: Strings searched per requested concept: several strings may name the same concept.
    STRINGS_PER_CONCEPT = 4

    def __init__(self, kb: KnowledgeBase, names: NameTable, index: TfidfNameIndex, threshold: float = 0.0):
        self._aggregate = _StringHitAggregator(kb, names, threshold)
        self._index = index

    def generate(self, mentions: Sequence[str], top_k: int) -> list[list[Candidate]]:
        if not mentions:
            return []
        strings, scores = self._index.search([normalize_name(m) for m in mentions], top_k * self.STRINGS_PER_CONCEPT)
        return [self._aggregate.concepts(rows, row_scores, top_k) for rows, row_scores in zip(strings, scores.astype(np.float64))]
