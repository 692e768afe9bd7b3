"""Ranking metrics for normalization: per query, predicted concept ids (best first) against gold ids.

Conventions shared by every metric:
- A concept id repeated in a ranking counts at its first (best) position only, so a linker that
  returns several names of one concept is neither rewarded nor penalised for it.
- Every query needs at least one gold id: NIL mentions cannot be scored and must be dropped
  beforehand (`mentions_from_documents` does).
- accuracy@k treats the gold ids as alternatives (any one in the top k is a hit), as XL-BEL does.
  recall@k and MAP treat them as a set to retrieve: a query's average precision is
  `sum(precision@i for each rank i holding a gold id) / |gold|`. For a single gold id that is
  the reciprocal rank, so MAP equals MRR; with several *alternative* ids (XL-BEL `C1|C2`) MAP
  is lower than MRR even when the first prediction is right, so report MRR for those.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Hashable, Sequence

from babelink.errors import InvalidInputError

_Query = tuple[list[str], frozenset[str]]


def accuracy_at_k(ranked: Sequence[Sequence[str]], gold: Sequence[Collection[str]], k: int) -> float:
    """Fraction of queries with a gold id among the first `k` distinct predictions."""
    _check_k(k)
    return _mean([_hit_at(ranking, gold_ids, k) for ranking, gold_ids in _queries(ranked, gold)])


def recall_at_k(ranked: Sequence[Sequence[str]], gold: Sequence[Collection[str]], k: int) -> float:
    """Mean over queries of the share of their gold ids found in the first `k` distinct predictions."""
    _check_k(k)
    return _mean([_recall_at(ranking, gold_ids, k) for ranking, gold_ids in _queries(ranked, gold)])


def mean_reciprocal_rank(ranked: Sequence[Sequence[str]], gold: Sequence[Collection[str]]) -> float:
    """Mean of 1 / rank of the first correct prediction (0 when none is correct)."""
    return _mean([_reciprocal_rank(ranking, gold_ids) for ranking, gold_ids in _queries(ranked, gold)])


def mean_average_precision(ranked: Sequence[Sequence[str]], gold: Sequence[Collection[str]]) -> float:
    """Mean over queries of average precision over the whole gold set (see the module docstring)."""
    return _mean([_average_precision(ranking, gold_ids) for ranking, gold_ids in _queries(ranked, gold)])


def evaluate(
    ranked: Sequence[Sequence[str]],
    gold: Sequence[Collection[str]],
    ks: Sequence[int] = (1, 5),
    groups: Sequence[Hashable] | None = None,
) -> dict:
    """Every metric overall and per group (e.g. the language of each query), with query counts.

    Returns `{"overall": {"count": n, "acc@1": …, "recall@1": …, "mrr": …, "map": …},
    "groups": {group: {same keys}}}`; "groups" is empty when `groups` is None.
    """
    for k in ks:
        _check_k(k)
    scores = [_scores(ranking, gold_ids, ks) for ranking, gold_ids in _queries(ranked, gold)]
    by_group: dict[Hashable, list[dict[str, float]]] = defaultdict(list)
    if groups is not None:
        if len(groups) != len(scores):
            raise InvalidInputError(f"{len(groups)} groups for {len(scores)} queries")
        for group, query_scores in zip(groups, scores):
            by_group[group].append(query_scores)
    return {
        "overall": _summary(scores),
        "groups": {group: _summary(by_group[group]) for group in sorted(by_group, key=str)},
    }


def _queries(ranked: Sequence[Sequence[str]], gold: Sequence[Collection[str]]) -> list[_Query]:
    """Validate the inputs; rankings without repeats, gold ids as sets."""
    if len(ranked) != len(gold):
        raise InvalidInputError(f"{len(ranked)} rankings for {len(gold)} gold sets")
    if not ranked:
        raise InvalidInputError("no queries to score")
    queries = []
    for number, (ranking, gold_ids) in enumerate(zip(ranked, gold)):
        if isinstance(ranking, str) or isinstance(gold_ids, str):
            raise InvalidInputError(f"query {number}: expected collections of ids, got a string")
        if not gold_ids:
            raise InvalidInputError(f"query {number}: no gold id (drop NIL mentions before scoring)")
        queries.append((list(dict.fromkeys(ranking)), frozenset(gold_ids)))
    return queries


def _check_k(k: int) -> None:
    if k < 1:
        raise InvalidInputError(f"k must be at least 1, got {k}")


def _hit_at(ranking: list[str], gold_ids: frozenset[str], k: int) -> float:
    return float(any(concept_id in gold_ids for concept_id in ranking[:k]))


def _recall_at(ranking: list[str], gold_ids: frozenset[str], k: int) -> float:
    return sum(concept_id in gold_ids for concept_id in ranking[:k]) / len(gold_ids)


def _reciprocal_rank(ranking: list[str], gold_ids: frozenset[str]) -> float:
    return next((1 / rank for rank, concept_id in enumerate(ranking, start=1) if concept_id in gold_ids), 0.0)


def _average_precision(ranking: list[str], gold_ids: frozenset[str]) -> float:
    hits = 0
    precision_sum = 0.0
    for rank, concept_id in enumerate(ranking, start=1):
        if concept_id in gold_ids:
            hits += 1
            precision_sum += hits / rank
    return precision_sum / len(gold_ids)


def _scores(ranking: list[str], gold_ids: frozenset[str], ks: Sequence[int]) -> dict[str, float]:
    scores = {f"acc@{k}": _hit_at(ranking, gold_ids, k) for k in ks}
    scores.update({f"recall@{k}": _recall_at(ranking, gold_ids, k) for k in ks})
    scores["mrr"] = _reciprocal_rank(ranking, gold_ids)
    scores["map"] = _average_precision(ranking, gold_ids)
    return scores


def _summary(scores: list[dict[str, float]]) -> dict[str, float | int]:
    return {"count": len(scores), **{name: _mean([query[name] for query in scores]) for name in scores[0]}}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
