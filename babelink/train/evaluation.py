"""Dev-set evaluation during training, to keep the best checkpoint (issue 4, `--eval`).

Encoding a whole KB at every checkpoint would cost more than the training between checkpoints,
so the dictionary is the dev queries' gold concepts plus `distractors` other concepts drawn
with a fixed seed — the same dictionary at every checkpoint, so scores are comparable. The
score is dense-retrieval Acc@1 of the encoder being trained.
"""

from __future__ import annotations

import random

from babelink.eval.benchmark import QuerySet
from babelink.eval.metrics import accuracy_at_k
from babelink.index.dense import DenseNameIndex
from babelink.index.names import NameTable
from babelink.kb.base import KnowledgeBase
from babelink.link.candidates import DenseGenerator


class DenseDevEvaluator:
    def __init__(self, kb: KnowledgeBase, queries: QuerySet, distractors: int = 5000, seed: int = 0):
        gold = {concept for query in queries.queries for concept in query.gold_ids}
        others = sorted(set(kb.concepts.column("concept_id").to_pylist()) - gold)
        chosen = gold | set(random.Random(seed).sample(others, min(distractors, len(others))))
        self.kb = kb.select_concepts(chosen)
        self.names = NameTable.from_kb(self.kb)
        self.queries = queries

    def __call__(self, encoder) -> float:
        index = DenseNameIndex.build(encoder.encode(self.names.strings))
        generator = DenseGenerator(self.kb, self.names, index, encoder)
        mentions = [query.mention for query in self.queries.queries]
        ranked = [[c.concept_id for c in candidates] for candidates in generator.generate(mentions, top_k=1)]
        return accuracy_at_k(ranked, [query.gold_ids for query in self.queries.queries], 1)
