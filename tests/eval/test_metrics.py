"""Ranking and end-to-end span metrics against values worked out by hand."""

from __future__ import annotations

import pytest

from babelink.errors import InvalidInputError
from babelink.eval.metrics import (
    accuracy_at_k,
    document_span_scores,
    evaluate,
    mean_average_precision,
    mean_reciprocal_rank,
    recall_at_k,
    span_scores,
)
from babelink.formats.document import Annotation, Document

# q0: right at rank 1. q1: two gold ids at ranks 2 and 3. q2: right at rank 3.
# q3: right at rank 2, with a repeated id that must not count twice.
RANKED = [["A", "B", "C"], ["X", "A", "B"], ["X", "Y", "Z"], ["B", "A", "A"]]
GOLD = [{"A"}, {"A", "B"}, {"Z"}, {"A"}]


@pytest.mark.parametrize(("k", "expected"), [(1, 1 / 4), (2, 3 / 4), (3, 1.0), (5, 1.0)])
def test_accuracy_at_k(k, expected):
    assert accuracy_at_k(RANKED, GOLD, k) == pytest.approx(expected)


@pytest.mark.parametrize(("k", "expected"), [(1, 1 / 4), (2, (1 + 1 / 2 + 0 + 1) / 4), (3, 1.0)])
def test_recall_at_k_counts_the_share_of_gold_ids_found(k, expected):
    assert recall_at_k(RANKED, GOLD, k) == pytest.approx(expected)


def test_mean_reciprocal_rank():
    assert mean_reciprocal_rank(RANKED, GOLD) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 2) / 4)


def test_mean_average_precision_divides_by_the_gold_set_size():
    # q1: precision 1/2 at rank 2 and 2/3 at rank 3, over 2 gold ids; q3 counts "A" once.
    expected = (1 + (1 / 2 + 2 / 3) / 2 + 1 / 3 + 1 / 2) / 4
    assert mean_average_precision(RANKED, GOLD) == pytest.approx(expected)


def test_map_equals_mrr_for_single_gold_queries_and_is_lower_for_alternatives():
    single = [{"A"}, {"B"}, {"Z"}]
    assert mean_average_precision(RANKED[:3], single) == pytest.approx(mean_reciprocal_rank(RANKED[:3], single))
    alternatives = [{"A", "Q"}]
    assert mean_reciprocal_rank([["A"]], alternatives) == 1.0
    assert mean_average_precision([["A"]], alternatives) == 0.5


def test_a_query_with_no_correct_prediction_scores_zero():
    assert accuracy_at_k([[]], [{"A"}], 1) == 0.0
    assert mean_reciprocal_rank([["B"]], [{"A"}]) == 0.0
    assert mean_average_precision([["B"]], [{"A"}]) == 0.0


def test_evaluate_reports_overall_and_per_group_numbers_with_counts():
    result = evaluate(RANKED, GOLD, ks=(1, 5), groups=["es", "en", "es", "en"])
    overall = result["overall"]
    assert overall["count"] == 4
    assert overall["acc@1"] == pytest.approx(1 / 4)
    assert overall["acc@5"] == pytest.approx(1.0)
    assert overall["recall@5"] == pytest.approx(1.0)
    assert overall["mrr"] == pytest.approx(mean_reciprocal_rank(RANKED, GOLD))
    assert overall["map"] == pytest.approx(mean_average_precision(RANKED, GOLD))
    assert list(result["groups"]) == ["en", "es"]
    spanish = result["groups"]["es"]
    assert spanish["count"] == 2
    assert spanish["acc@1"] == pytest.approx(1 / 2)
    assert spanish["mrr"] == pytest.approx((1 + 1 / 3) / 2)
    english = result["groups"]["en"]
    assert english["acc@1"] == 0.0
    assert english["map"] == pytest.approx(((1 / 2 + 2 / 3) / 2 + 1 / 2) / 2)


def test_evaluate_without_groups_has_no_group_entries():
    assert evaluate(RANKED, GOLD)["groups"] == {}


@pytest.mark.parametrize(
    ("ranked", "gold"),
    [
        ([["A"]], [{"A"}, {"B"}]),  # lengths differ
        ([], []),  # nothing to score
        ([["A"]], [set()]),  # NIL query
        (["A"], [{"A"}]),  # a string where a ranking belongs
    ],
)
def test_unusable_inputs_raise(ranked, gold):
    with pytest.raises(InvalidInputError):
        mean_reciprocal_rank(ranked, gold)


def test_k_below_one_and_mismatched_groups_raise():
    with pytest.raises(InvalidInputError):
        accuracy_at_k(RANKED, GOLD, 0)
    with pytest.raises(InvalidInputError):
        evaluate(RANKED, GOLD, groups=["es"])


# --- end-to-end span scores ------------------------------------------------------------------

# g0 exact hit; g1 a composite mention hit by one of its ids on an overlapping span; g2 hit on
# its span with the wrong concept; g3 touched by a span that ends where it starts (no overlap).
SPAN_GOLD = [
    ("d1", 0, 10, {"A"}),
    ("d1", 20, 30, ("B", "C")),
    ("d1", 40, 50, ["D"]),
    ("d2", 0, 5, {"A"}),
]
SPAN_PREDICTED = [
    ("d1", 0, 10, "A"),
    ("d1", 0, 10, "A"),  # a duplicate counts once
    ("d1", 22, 30, "C"),
    ("d1", 40, 50, "E"),
    ("d2", 5, 9, "A"),
    ("d3", 0, 10, "A"),  # a document without gold: a wrong prediction
]


def scores(precision, recall, f1, tp_pred, tp_gold, predicted, gold):
    return {"precision": pytest.approx(precision), "recall": pytest.approx(recall), "f1": pytest.approx(f1),
            "tp_pred": tp_pred, "tp_gold": tp_gold, "predicted": predicted, "gold": gold}


def test_span_scores_strict_needs_the_exact_span_partial_an_overlap():
    result = span_scores(SPAN_PREDICTED, SPAN_GOLD)
    # strict: 1 of 5 distinct predictions, 1 of 4 gold; F1 = 2 * 1/5 * 1/4 / (1/5 + 1/4) = 2/9
    assert result["strict"] == scores(1 / 5, 1 / 4, 2 / 9, 1, 1, 5, 4)
    # partial: 2 of 5, 2 of 4; F1 = 2 * 2/5 * 1/2 / (2/5 + 1/2) = 4/9
    assert result["partial"] == scores(2 / 5, 1 / 2, 4 / 9, 2, 2, 5, 4)


def test_span_scores_composite_gold_is_matched_by_any_of_its_ids():
    gold = [("d1", 20, 30, {"B", "C"})]
    for concept_id in ("B", "C"):
        assert span_scores([("d1", 20, 30, concept_id)], gold)["strict"] == scores(1, 1, 1, 1, 1, 1, 1)
    assert span_scores([("d1", 20, 30, "BC")], gold)["strict"] == scores(0, 0, 0, 0, 0, 1, 1)


def test_span_scores_count_a_gold_mention_once_however_often_it_is_matched():
    predicted = [("d1", 0, 5, "A"), ("d1", 5, 10, "A"), ("d1", 0, 10, "A")]
    result = span_scores(predicted, [("d1", 0, 10, {"A"}), ("d1", 0, 10, {"A"})])
    assert result["strict"] == scores(1 / 3, 1, 1 / 2, 1, 1, 3, 1)
    assert result["partial"] == scores(1, 1, 1, 3, 1, 3, 1)


def test_span_scores_of_empty_inputs_are_zero():
    empty = scores(0, 0, 0, 0, 0, 0, 0)
    assert span_scores([], []) == {"strict": empty, "partial": empty}
    assert span_scores([], SPAN_GOLD)["partial"] == scores(0, 0, 0, 0, 0, 0, 4)
    assert span_scores(SPAN_PREDICTED, [])["strict"] == scores(0, 0, 0, 0, 0, 5, 0)


@pytest.mark.parametrize("gold_ids", [set(), "A"])
def test_span_scores_refuse_gold_without_ids_or_with_a_string(gold_ids):
    with pytest.raises(InvalidInputError):
        span_scores([], [("d1", 0, 1, gold_ids)])


def test_document_span_scores_take_the_first_predicted_id_and_skip_unlinked_mentions():
    text = "Copper toxicosis in dogs"
    gold = [
        Document("d1", text, (Annotation(0, 16, "Copper toxicosis", ("D1", "D2")), Annotation(20, 24, "dogs", ()))),
        Document("d2", text, (Annotation(0, 6, "Copper", ("D3",)),)),  # not predicted: all missed
    ]
    predicted = [
        Document("d1", text, (Annotation(0, 16, "Copper toxicosis", ("D2", "D9")), Annotation(0, 6, "Copper", ()))),
        Document("d1b", text, (Annotation(7, 16, "toxicosis", ("D1",)),)),
    ]
    result = document_span_scores(predicted, gold)
    assert result["strict"] == scores(1 / 2, 1 / 2, 1 / 2, 1, 1, 2, 2)
    assert result == span_scores([("d1", 0, 16, "D2"), ("d1b", 7, 16, "D1")],
                                 [("d1", 0, 16, ("D1", "D2")), ("d2", 0, 6, ("D3",))])
