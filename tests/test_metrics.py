"""Ranking metrics against values worked out by hand."""

from __future__ import annotations

import pytest

from babelink.errors import InvalidInputError
from babelink.eval.metrics import (
    accuracy_at_k,
    evaluate,
    mean_average_precision,
    mean_reciprocal_rank,
    recall_at_k,
)

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
