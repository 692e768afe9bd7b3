"""`batched` for Python 3.11 (itertools.batched arrived in 3.12), yielding lists."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice


def batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch
