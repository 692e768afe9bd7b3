"""Hard mini-batches for SAP: a permutation whose hard parts hold alike, distinct classes."""

import numpy as np
import pytest

from babelink.errors import BabelinkError
from babelink.train.batches import class_clusters, hard_batch_order

# 8 clusters of 4 classes, 3 pairs per class: pair i is of class i // 3, class c of cluster c // 4.
PAIR_CLASSES = np.repeat(np.arange(32), 3)
CLASS_CLUSTER = np.arange(32) // 4


def _order(hard_share, seed=0, batch_pairs=8):
    return hard_batch_order(PAIR_CLASSES, CLASS_CLUSTER, batch_pairs, hard_share, np.random.default_rng(seed))


def test_the_order_is_a_permutation_and_random_batches_are_unchanged():
    assert sorted(_order(0.5)) == list(range(len(PAIR_CLASSES)))
    assert np.array_equal(_order(0.0), np.random.default_rng(0).permutation(len(PAIR_CLASSES)))
    assert np.array_equal(_order(0.5, seed=3), _order(0.5, seed=3))
    assert not np.array_equal(_order(0.5, seed=3), _order(0.5, seed=4))


def _clusters_per_slice(order, start, size, batch_pairs=8):
    batches = len(order) // batch_pairs
    return [len(set(CLASS_CLUSTER[PAIR_CLASSES[order[b * batch_pairs + start : b * batch_pairs + start + size]]]))
            for b in range(batches)]


def test_hard_parts_hold_distinct_classes_of_few_clusters():
    spreads_hard, spreads_random = [], []
    for seed in range(20):
        order = _order(0.5, seed)
        spreads_hard += _clusters_per_slice(order, 0, 4)[:8]
        spreads_random += _clusters_per_slice(order, 4, 4)[:8]
        first_hard = PAIR_CLASSES[order[:4]]
        assert len(set(first_hard)) == 4, "round 0: one pair per class"
    assert np.mean(spreads_hard) < 2.0 < np.mean(spreads_random)


def test_all_hard_batches_and_bad_shares():
    order = _order(1.0)
    assert sorted(order) == list(range(len(PAIR_CLASSES)))
    assert max(_clusters_per_slice(order, 0, 8)[:4]) <= 3
    with pytest.raises(BabelinkError, match=r"\[0, 1\]"):
        _order(1.5)


def test_classes_cluster_by_their_vectors():
    directions = {"fever": [1, 0, 0], "pyrexia": [0.9, 0.1, 0], "hyperthermia": [0.95, 0, 0.05],
                  "asthma": [0, 1, 0], "wheeze": [0, 0.9, 0.1], "bronchospasm": [0.05, 0.95, 0]}

    def encode(names):
        vectors = np.array([directions[name] for name in names], dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    clusters = class_clusters(encode, list(directions), cluster_size=3)
    assert len(set(clusters[:3])) == 1 and len(set(clusters[3:])) == 1 and clusters[0] != clusters[3]
    assert set(class_clusters(encode, list(directions), cluster_size=6)) == {0}
    with pytest.raises(BabelinkError, match="at least 1"):
        class_clusters(encode, list(directions), cluster_size=0)
