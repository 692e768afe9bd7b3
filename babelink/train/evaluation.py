"""Dev-set evaluation during training, to keep the best checkpoint (issue 4, `--eval`).

Encoding a whole KB at every checkpoint would cost more than the training between checkpoints,
so the dictionary is the dev queries' gold concepts plus `distractors` other concepts drawn
with a fixed seed — the same dictionary at every checkpoint, so scores are comparable. The
score is dense-retrieval Acc@1 of the encoder being trained.
"""

from __future__ import annotations

import random
from pathlib import Path

from babelink.errors import InvalidInputError
from babelink.eval import benchmark
from babelink.eval.benchmark import QuerySet
from babelink.eval.metrics import accuracy_at_k
from babelink.index.dense import DenseNameIndex
from babelink.index.names import NameTable
from babelink.kb.base import KnowledgeBase
from babelink.retrieve.generators import DenseGenerator
from babelink.text import normalize_name


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
        mentions = [normalize_name(query.mention) for query in self.queries.queries]
        ranked = [[c.concept_id for c in candidates] for candidates in generator.generate(mentions, top_k=1)]
        return accuracy_at_k(ranked, [query.gold_ids for query in self.queries.queries], 1)


#: The dev sets `train sap --eval` can score, by name.
DEV_SETS = {"quaero-dev": benchmark.quaero_set, "ncbi-dev": benchmark.ncbi_set, "bc5cdr-dev": benchmark.bc5cdr_set}


def dev_evaluator(name: str, data: Path, kb: KnowledgeBase, distractors: int = 5000) -> DenseDevEvaluator:
    """The evaluator of the dev set `name` (a `DEV_SETS` key) read from `data/bench/` against `kb`."""
    if name not in DEV_SETS:
        raise InvalidInputError(f"--eval must be one of {', '.join(DEV_SETS)}, got {name!r}")
    if not (data / "bench").is_dir():
        raise InvalidInputError(f"{data}: no bench/ directory with the benchmark data (--eval-data)")
    queries = DEV_SETS[name](data, kb, "dev")
    if not queries.queries:
        raise InvalidInputError(f"{name}: no dev query has a gold concept in --kb")
    return DenseDevEvaluator(kb, queries, distractors)
