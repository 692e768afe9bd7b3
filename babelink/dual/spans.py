"""Exhaustive spans of a window and what the dual encoder computes over them (004 §3.1, §3.4).

A span is a run of 1 to L words (`detect.tokenize` words, so offsets stay exact in every
script); its sub-token extent runs from the first piece of its first word (`i`) to the last
piece of its last word (`j`). All spans of a batch are scored at once from per-position
scalars and prefix sums, O(T·L) rather than a loop over spans.
"""

from __future__ import annotations

import torch


def enumerate_spans(words: int, max_words: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(first word, last word) of every span of at most `max_words` words in `words` words,
    ordered by first word then length; the last word is inclusive."""
    first = torch.arange(words).repeat_interleave(max_words)
    last = first + torch.arange(max_words).repeat(words)
    keep = last < words
    return first[keep], last[keep]


def span_logits(hidden: torch.Tensor, weights: torch.Tensor, bias: torch.Tensor,
                starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """Mention logits of Eq. 4 (004 §3.4), `w_s·h_i + w_e·h_j + Σ_{q=i..j} w_m·h_q` plus a bias,
    for sub-token extents `starts`/`ends` (batch, spans; `ends` inclusive) of `hidden`
    (batch, tokens, dim); `weights` stacks w_s, w_e, w_m as (3, dim)."""
    projected = hidden @ weights.T  # (batch, tokens, 3)
    inside = torch.nn.functional.pad(projected[..., 2].cumsum(-1), (1, 0))
    return (projected[..., 0].gather(1, starts) + projected[..., 1].gather(1, ends)
            + inside.gather(1, ends + 1) - inside.gather(1, starts) + bias)


def mean_pooled(hidden: torch.Tensor, rows: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """The mention representation of detected spans (004 §3.4): the mean of `hidden[row, i..j]`
    for each (row, i, j), one vector per span."""
    sums = torch.nn.functional.pad(hidden.cumsum(1), (0, 0, 1, 0))
    total = sums[rows, ends + 1] - sums[rows, starts]
    return total / (ends - starts + 1).unsqueeze(-1).to(hidden.dtype)


def boundary_pooled(hidden: torch.Tensor, projection: torch.nn.Linear, rows: torch.Tensor, starts: torch.Tensor,
                    ends: torch.Tensor) -> torch.Tensor:
    """The mention representation of given spans, Eq. 1 (004 §3.1): `W[h_i; h_j] + b`."""
    return projection(torch.cat([hidden[rows, starts], hidden[rows, ends]], dim=-1))
