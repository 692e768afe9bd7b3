"""Overlap resolution: at most one mention per character of the text."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol, TypeVar

OVERLAP_POLICIES = ("best", "longest")


class Scored(Protocol):
    start: int
    end: int
    score: float


T = TypeVar("T", bound=Scored)


def resolve_overlaps(items: Sequence[T], prefer: str = "best") -> list[T]:
    """A non-overlapping subset of `items`, in text order, chosen greedily.

    `best`: higher score first, the longer span on a tie. `longest`: longer span first, the
    higher score on a tie; this is the n-gram search loop's order (002 §4.4.1: from n tokens
    down, skipping tokens already linked) applied to a whole document.
    """
    if prefer == "best":
        order = sorted(items, key=lambda item: (-item.score, item.start - item.end, item.start))
    elif prefer == "longest":
        order = sorted(items, key=lambda item: (item.start - item.end, -item.score, item.start))
    else:
        raise ValueError(f"overlap policy must be one of {OVERLAP_POLICIES}, got {prefer!r}")
    starts: list[int] = []
    chosen: list[T] = []
    for item in order:
        position = bisect.bisect_right(starts, item.start)
        clashes_left = position > 0 and chosen[position - 1].end > item.start
        clashes_right = position < len(chosen) and chosen[position].start < item.end
        if not (clashes_left or clashes_right):
            starts.insert(position, item.start)
            chosen.insert(position, item)
    return chosen
