"""Online hard-triplet mining and the Multi-Similarity loss of SAP (003 §2; 001 §2.1).

Both work on the cosine-similarity matrix `S` of a mini-batch's L2-normalised name vectors and
its integer class labels (a concept, or a translation pair's pseudo-class).
"""

from __future__ import annotations

import torch


def hard_pairs(similarity: torch.Tensor, labels: torch.Tensor, margin: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean (anchor, other) masks of the hard positive and hard negative pairs (003 Eq. 1).

    A triplet (a, p, n) is hard unless its positive is already more similar to the anchor than
    its negative by at least `margin` (`S_ap − S_an ≥ λ`: an easy triplet, filtered out) — the
    cosine form in which the SAP authors' released code applies Eq. 1. Every hard triplet
    contributes the positive pair (a, p) and the negative pair (a, n).
    """
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    positive, negative = same & ~eye, ~same
    # A triplet (a, p, n) is hard iff S_ap − S_an < λ. So (a, p) is in some hard triplet iff S_ap is
    # below a's most similar negative + λ, and (a, n) iff S_an is above a's least similar positive − λ:
    # O(n²) instead of the n³ triplets.
    hardest_negative = similarity.masked_fill(~negative, float("-inf")).amax(dim=1, keepdim=True)
    hardest_positive = similarity.masked_fill(~positive, float("inf")).amin(dim=1, keepdim=True)
    return positive & (similarity < hardest_negative + margin), negative & (similarity > hardest_positive - margin)


def multi_similarity_loss(
    similarity: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor,
    alpha: float = 2.0,
    beta: float = 50.0,
    epsilon: float = 1.0,
) -> torch.Tensor:
    """Multi-Similarity loss over the mined pairs (003 Eq. 2; 001 Eq. 1), averaged over anchors:

    `1/α · log(1 + Σ_p exp(−α (S_ap − ε))) + 1/β · log(1 + Σ_n exp(β (S_an − ε)))`.

    The temperatures are assigned as in Wang et al. (2019) and the SAP code (α on positives,
    β on negatives); the seeds' typeset equation swaps the two letters. Defaults: 001 Tab. 9.
    An anchor without mined pairs contributes 0 (log 1).
    """
    minus_inf = torch.finfo(similarity.dtype).min
    positive_terms = torch.where(positives, -alpha * (similarity - epsilon), minus_inf)
    negative_terms = torch.where(negatives, beta * (similarity - epsilon), minus_inf)
    zero = torch.zeros(len(similarity), 1, dtype=similarity.dtype, device=similarity.device)
    # log(1 + Σ exp(x)) = logsumexp over [0, x…], stable for large β.
    positive_loss = torch.logsumexp(torch.cat([zero, positive_terms], dim=1), dim=1) / alpha
    negative_loss = torch.logsumexp(torch.cat([zero, negative_terms], dim=1), dim=1) / beta
    return (positive_loss + negative_loss).mean()
