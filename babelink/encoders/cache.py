"""Memoised encoding: corpora repeat mentions, and index switching encodes each mention for two indexes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


class CachedEncoder:
    """Wraps an encoder with a least-recently-used cache of vectors, `max_entries` strings deep."""

    def __init__(self, encoder, max_entries: int = 65_536):
        self.encoder = encoder
        self.dimension = encoder.dimension
        self.max_entries = max_entries
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if text not in self._vectors]
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
