"""A linear-chain conditional random field over per-word emission scores (002 §4.2).

A linear classifier alone scores each word's label independently and can emit illegal
sequences ("O I-Disease"); the CRF adds learned label-to-label transition scores and trains on
the log-likelihood of whole label sequences (forward algorithm). Viterbi decoding forbids the
BIO transitions no gold sequence contains: I-X only after B-X or I-X, never first. Sequences in
a batch are right-padded: `mask[b, t]` is True for the real positions, a prefix of each row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: Score of a forbidden transition at decoding (finite, so a row never becomes all -inf).
_FORBIDDEN = -1e4


def bio_constraints(labels: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """(allowed first labels, allowed[previous, next]) for labels "O", "B-X", "I-X"."""
    inside = [label[2:] if label.startswith("I-") else None for label in labels]
    allowed_start = torch.tensor([kind is None for kind in inside])
    allowed = torch.tensor([[kind is None or previous in (f"B-{kind}", f"I-{kind}") for kind in inside]
                            for previous in labels])
    return allowed_start, allowed


class CRF(torch.nn.Module):
    def __init__(self, num_tags: int, allowed_start: torch.Tensor | None = None, allowed: torch.Tensor | None = None):
        super().__init__()
        self.start = torch.nn.Parameter(torch.zeros(num_tags))
        self.end = torch.nn.Parameter(torch.zeros(num_tags))
        self.transitions = torch.nn.Parameter(torch.zeros(num_tags, num_tags))
        ones = torch.ones(num_tags, dtype=torch.bool)
        self.register_buffer("allowed_start", ones if allowed_start is None else allowed_start, persistent=False)
        self.register_buffer("allowed", ones.outer(ones) if allowed is None else allowed, persistent=False)

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log p(tags | emissions) per sequence: emissions (B, T, K), tags and mask (B, T)."""
        return self.sequence_score(emissions, tags, mask) - self.log_partition(emissions, mask)

    def sequence_score(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weights = mask.to(emissions.dtype)
        emitted = emissions.gather(2, tags.unsqueeze(-1)).squeeze(-1)
        moved = self.transitions[tags[:, :-1], tags[:, 1:]]
        last = tags.gather(1, (mask.sum(1) - 1).unsqueeze(1)).squeeze(1)
        return (self.start[tags[:, 0]] + (emitted * weights).sum(1) + (moved * weights[:, 1:]).sum(1)
                + self.end[last])

    def log_partition(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log Σ over all label sequences of exp(score), by the forward algorithm."""
        alpha = self.start + emissions[:, 0]
        for t in range(1, emissions.shape[1]):
            step = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, t].unsqueeze(1), step, alpha)
        return torch.logsumexp(alpha + self.end, dim=1)

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
        """The best allowed label sequence of each row (Viterbi), as many labels as mask positions."""
        start = self.start.masked_fill(~self.allowed_start, _FORBIDDEN)
        transitions = self.transitions.masked_fill(~self.allowed, _FORBIDDEN)
        score = start + emissions[:, 0]
        backpointers = []
        for t in range(1, emissions.shape[1]):
            best, previous = (score.unsqueeze(2) + transitions + emissions[:, t].unsqueeze(1)).max(dim=1)
            score = torch.where(mask[:, t].unsqueeze(1), best, score)
            backpointers.append(previous)
        last = (score + self.end).argmax(dim=1).tolist()
        history = torch.stack(backpointers).tolist() if backpointers else []
        paths = []
        for row, length in enumerate(mask.sum(1).tolist()):
            path = [last[row]]
            for t in range(length - 2, -1, -1):
                path.append(history[t][row][path[-1]])
            paths.append(path[::-1])
        return paths
