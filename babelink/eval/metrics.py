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

`span_scores` scores end to end instead (found mentions with one concept each against the gold
mentions of the documents), micro-averaged over mentions like the BioCreative evaluations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence

from babelink.errors import InvalidInputError
from babelink.formats.document import Document

_Query = tuple[list[str], frozenset[str]]
_Prediction = tuple[str, int, int, str]
_GoldMention = tuple[str, int, int, frozenset[str]]


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


def span_scores(
    predicted: Iterable[tuple[str, int, int, str]], gold: Iterable[tuple[str, int, int, Collection[str]]]
) -> dict:
    """Micro precision, recall and F1 of (doc_id, start, end, concept_id) predictions against gold
    (doc_id, start, end, concept_ids) mentions, under strict and partial span matching.

    A prediction is right when its concept is one of a gold mention's ids (any id of a composite
    mention will do) and its span equals (strict) or overlaps (partial) that mention's. Precision
    counts matched predictions, recall matched gold mentions, each once however often matched;
    an item repeated on either side counts once. Returns `{"strict": {"precision", "recall", "f1",
    "tp_pred", "tp_gold", "predicted", "gold"}, "partial": {same keys}}`; a ratio with nothing to
    divide by is 0.0. A gold mention needs an id: drop NIL mentions first.
    """
    predictions = {(doc_id, start, end, concept_id) for doc_id, start, end, concept_id in predicted}
    gold_mentions = list(dict.fromkeys(_gold_mention(mention) for mention in gold))
    by_concept: dict[tuple[str, str], list[int]] = defaultdict(list)
    for number, (doc_id, _, _, concept_ids) in enumerate(gold_mentions):
        for concept_id in concept_ids:
            by_concept[doc_id, concept_id].append(number)
    return {
        name: _span_match(predictions, gold_mentions, by_concept, matches)
        for name, matches in (("strict", _same_span), ("partial", _overlap))
    }


def document_span_scores(predicted_docs: Iterable[Document], gold_docs: Iterable[Document]) -> dict:
    """`span_scores` of predicted documents (an annotation's first concept id is its prediction)
    against gold documents, matched by id.

    Annotations without a concept id are left out on both sides (NIL gold, unlinked predictions);
    gold documents without predictions count as all missed, predicted documents without gold as
    all wrong.
    """
    predicted = (
        (document.id, annotation.start, annotation.end, annotation.concept_ids[0])
        for document in predicted_docs
        for annotation in document.annotations
        if annotation.concept_ids
    )
    gold = (
        (document.id, annotation.start, annotation.end, annotation.concept_ids)
        for document in gold_docs
        for annotation in document.annotations
        if annotation.concept_ids
    )
    return span_scores(predicted, gold)


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


def _gold_mention(mention: tuple[str, int, int, Collection[str]]) -> _GoldMention:
    doc_id, start, end, concept_ids = mention
    if isinstance(concept_ids, str):
        raise InvalidInputError(f"gold mention {mention}: expected a collection of ids, got a string")
    if not concept_ids:
        raise InvalidInputError(f"gold mention {mention}: no gold id (drop NIL mentions before scoring)")
    return doc_id, start, end, frozenset(concept_ids)


def _same_span(start: int, end: int, gold_start: int, gold_end: int) -> bool:
    return start == gold_start and end == gold_end


def _overlap(start: int, end: int, gold_start: int, gold_end: int) -> bool:
    return start < gold_end and gold_start < end


def _span_match(
    predictions: set[_Prediction],
    gold_mentions: list[_GoldMention],
    by_concept: dict[tuple[str, str], list[int]],
    matches: Callable[[int, int, int, int], bool],
) -> dict[str, float | int]:
    """Scores under one matching rule; `by_concept` lists the gold mentions of each (doc, concept)."""
    matched_gold: set[int] = set()
    tp_pred = 0
    for doc_id, start, end, concept_id in predictions:
        hits = [
            number
            for number in by_concept.get((doc_id, concept_id), ())
            if matches(start, end, gold_mentions[number][1], gold_mentions[number][2])
        ]
        tp_pred += bool(hits)
        matched_gold.update(hits)
    precision = _ratio(tp_pred, len(predictions))
    recall = _ratio(len(matched_gold), len(gold_mentions))
    return {
        "precision": precision,
        "recall": recall,
        "f1": _ratio(2 * precision * recall, precision + recall),
        "tp_pred": tp_pred,
        "tp_gold": len(matched_gold),
        "predicted": len(predictions),
        "gold": len(gold_mentions),
    }


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0
