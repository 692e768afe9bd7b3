import math

import pytest
import torch

from babelink.train.losses import hard_pairs, multi_similarity_loss

# names 0, 1 share class 0; names 2, 3 share class 1
LABELS = torch.tensor([0, 0, 1, 1])
S = torch.tensor([
    [1.0, 0.9, 0.25, 0.8],
    [0.9, 1.0, 0.2, 0.1],
    [0.25, 0.2, 1.0, 0.5],
    [0.8, 0.1, 0.5, 1.0],
])


def test_mining_keeps_triplets_not_yet_separated_by_the_margin():
    positives, negatives = hard_pairs(S, LABELS, margin=0.2)
    # anchor 0: S_01 − S_03 = 0.1 < 0.2 → (0,1) and (0,3) hard; S_01 − S_02 = 0.65 → (0,2) easy.
    # anchor 1: S_10 − S_12 = 0.7, S_10 − S_13 = 0.8 → nothing hard.
    # anchor 2: S_23 − S_20 = 0.25, S_23 − S_21 = 0.3 → nothing hard.
    # anchor 3: S_32 − S_30 = −0.3 → (3,2) and (3,0) hard; S_32 − S_31 = 0.4 → (3,1) easy.
    assert positives.nonzero().tolist() == [[0, 1], [3, 2]]
    assert negatives.nonzero().tolist() == [[0, 3], [3, 0]]
    no_margin = hard_pairs(S, LABELS, margin=0.0)
    assert no_margin[0].nonzero().tolist() == [[3, 2]]


@pytest.mark.parametrize("seed", range(5))
def test_mining_equals_the_triplet_definition_on_random_batches(seed):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 6, (40,), generator=generator)
    vectors = torch.nn.functional.normalize(torch.randn(40, 8, generator=generator), dim=1)
    similarity = vectors @ vectors.T
    same, eye = labels[:, None] == labels[None, :], torch.eye(40, dtype=torch.bool)
    hard = (similarity[:, :, None] - similarity[:, None, :]) < 0.2  # hard[a, p, n]
    hard &= (same & ~eye)[:, :, None] & ~same[:, None, :]
    positives, negatives = hard_pairs(similarity, labels, margin=0.2)
    assert torch.equal(positives, hard.any(dim=2)) and torch.equal(negatives, hard.any(dim=1))


def test_multi_similarity_loss_matches_hand_computation():
    positives, negatives = hard_pairs(S, LABELS, margin=0.2)
    alpha, beta, epsilon = 2.0, 50.0, 0.5
    anchor0 = (
        math.log(1 + math.exp(-alpha * (0.9 - epsilon))) / alpha + math.log(1 + math.exp(beta * (0.8 - epsilon))) / beta
    )
    anchor3 = (
        math.log(1 + math.exp(-alpha * (0.5 - epsilon))) / alpha + math.log(1 + math.exp(beta * (0.8 - epsilon))) / beta
    )
    expected = (anchor0 + anchor3) / 4  # anchors 1 and 2 have no mined pairs and add log(1) = 0
    loss = multi_similarity_loss(S, positives, negatives, alpha, beta, epsilon)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_loss_gradient_pulls_positives_and_pushes_negatives():
    similarity = S.clone().requires_grad_(True)
    positives, negatives = hard_pairs(similarity.detach(), LABELS, margin=0.2)
    multi_similarity_loss(similarity, positives, negatives).backward()
    assert similarity.grad[0, 1] < 0 and similarity.grad[0, 3] > 0  # raise S_01, lower S_03
    assert similarity.grad[1].abs().sum() == 0
