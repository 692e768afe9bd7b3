"""Memoised encoding: corpora repeat mentions, index switching encodes each mention for two
indexes, and a mention written exactly as a KB name already has its vector in the bundle."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np


class StoredVectors(Protocol):
    def find(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Positions in `texts` of the texts whose vector is stored, and those vectors."""
        ...


class CachedEncoder:
    """Wraps an encoder with a least-recently-used cache of vectors, `max_entries` strings deep.
    Texts missing from the cache are looked up in `stored` (a bundle's name vectors, encoded by
    this same encoder at build) before any is encoded."""

    def __init__(self, encoder, max_entries: int = 65_536, stored: Sequence[StoredVectors] = ()):
        self.encoder = encoder
        self.dimension = encoder.dimension
        self.max_entries = max_entries
        self.stored = tuple(stored)
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if text not in self._vectors]
        for lookup in self.stored:
            if not missing:
                break
            found, vectors = lookup.find(missing)
            for position, vector in zip(found, vectors):
                self._vectors[missing[position]] = vector
            missing = [text for text in missing if text not in self._vectors]
        if missing:
            for text, vector in zip(missing, self.encoder.encode(missing)):
                self._vectors[text] = vector
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row] = self._vectors[text]
            self._vectors.move_to_end(text)
        while len(self._vectors) > self.max_entries:
            self._vectors.popitem(last=False)
        return vectors

    def clear(self) -> None:
        """Forget every vector (a benchmark timing encoding as well as search starts from here)."""
        self._vectors.clear()

    def describe(self) -> dict:
        return self.encoder.describe()
