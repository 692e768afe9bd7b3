"""Hard mini-batches for SAP: each batch holds pairs of concepts the encoder finds alike.

Online mining (003 Eq. 1) can only find the hard negatives a batch contains, and a random batch
of a few dozen concepts out of tens of thousands contains almost none: once the easy ones are
separated, the loss has little left to teach. SapBERT answers with batches of 512 names, which
a CPU cannot afford. Instead, following the hard-negative retrieval of 004 §3 ("Candidate
Retrieval": nearest neighbours under the encoder, mixed 1:1 with random negatives), the classes
are clustered by the starting encoder's vectors, and `hard_share` of every batch is filled with
pairs of classes from one cluster, the rest at random.

Within the hard part each class contributes one pair per round (its 1st pair in round 0, its
2nd in round 1, …), so a batch's hard pairs are distinct but alike classes, never many pairs of
one class. The order depends only on the seed, the epoch and the clusters: resumable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from babelink.errors import BabelinkError


def class_clusters(
    encode: Callable[[Sequence[str]], np.ndarray], class_names: Sequence[str], cluster_size: int, seed: int = 0
) -> np.ndarray:
    """Cluster id of each class, by k-means over the vectors of one name per class, with about
    `cluster_size` classes per cluster."""
    import faiss

    if cluster_size < 1:
        raise BabelinkError(f"cluster size must be at least 1, got {cluster_size}")
    vectors = np.ascontiguousarray(encode(class_names), dtype=np.float32)
    clusters = max(1, len(class_names) // cluster_size)
    if clusters == 1:
        return np.zeros(len(class_names), dtype=np.int64)
    kmeans = faiss.Kmeans(vectors.shape[1], clusters, niter=20, seed=seed, spherical=True,
                          max_points_per_centroid=max(256, cluster_size * 4))
    kmeans.train(vectors)
    return kmeans.index.search(vectors, 1)[1][:, 0].astype(np.int64)


def hard_batch_order(
    pair_classes: np.ndarray, class_cluster: np.ndarray, batch_pairs: int, hard_share: float, rng: np.random.Generator
) -> np.ndarray:
    """A permutation of the pairs in which every run of `batch_pairs` holds
    `round(hard_share · batch_pairs)` pairs of classes from one cluster and random pairs after them.

    `pair_classes[i]` is the class index of pair `i`; `class_cluster[c]` the cluster of class `c`.
    """
    if not 0.0 <= hard_share <= 1.0:
        raise BabelinkError(f"the hard share of a batch must lie in [0, 1], got {hard_share}")
    count = len(pair_classes)
    shuffled = rng.permutation(count)
    hard_per_batch = round(hard_share * batch_pairs)
    if hard_per_batch == 0:
        return shuffled
    hard_part = shuffled[rng.random(count)[shuffled] < hard_share]
    random_part = shuffled[~np.isin(shuffled, hard_part)]
    hard_part = _clustered(hard_part, pair_classes, class_cluster, rng)
    return _interleave(hard_part, random_part, hard_per_batch, batch_pairs - hard_per_batch)


def _clustered(pairs: np.ndarray, pair_classes: np.ndarray, class_cluster: np.ndarray,
               rng: np.random.Generator) -> np.ndarray:
    """`pairs` (in random order) sorted by round, then by a random order of the clusters."""
    classes = pair_classes[pairs]
    by_class = np.argsort(classes, kind="stable")
    first_of_class = np.searchsorted(classes[by_class], classes[by_class])
    rounds = np.empty(len(pairs), dtype=np.int64)
    rounds[by_class] = np.arange(len(pairs)) - first_of_class
    cluster_rank = rng.permutation(int(class_cluster.max()) + 1)[class_cluster[classes]]
    return pairs[np.lexsort((cluster_rank, rounds))]


def _interleave(hard: np.ndarray, random: np.ndarray, hard_per_batch: int, random_per_batch: int) -> np.ndarray:
    """Batches of `hard_per_batch` hard then `random_per_batch` random pairs, while both last;
    the remainder of either follows."""
    batches = min(len(hard) // hard_per_batch, len(random) // random_per_batch if random_per_batch else len(hard))
    parts = []
    for batch in range(batches):
        parts.append(hard[batch * hard_per_batch : (batch + 1) * hard_per_batch])
        parts.append(random[batch * random_per_batch : (batch + 1) * random_per_batch])
    parts += [hard[batches * hard_per_batch :], random[batches * random_per_batch :]]
    return np.concatenate(parts)
