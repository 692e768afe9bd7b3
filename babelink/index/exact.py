"""Exact search over name vectors held in memory, on any torch device.

What a model that searches every name (the dual encoder, 004 §3.3) reads from a bundle whose
index does not search (`index.lazy`): its names encoded once through the vector store, then
searched by one matrix product per batch of queries, on a GPU where there is one. FAISS's flat
index does the same on a CPU, but a training machine may have torch and no FAISS.
"""

from __future__ import annotations

import numpy as np
import torch

from babelink.index.dense import DenseParams, NameVectors

#: Queries scored against every name per matrix product (bounds the score matrix's memory).
QUERY_BATCH = 1024


class ExactNameIndex(NameVectors):
    """Row `i` of `vectors` is the vector of name string `i` (L2-normalised, as encoders give them)."""

    def __init__(self, vectors: np.ndarray, device: str | torch.device = "cpu"):
        self.params = DenseParams(kind="flat")
        self.dimension = int(vectors.shape[1])
        self._host = np.ascontiguousarray(vectors, dtype=np.float32)
        self._device = torch.device(device)
        dtype = torch.float16 if self._device.type == "cuda" else torch.float32
        self._matrix = torch.from_numpy(self._host).to(self._device, dtype)

    def __len__(self) -> int:
        return len(self._host)

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k rows and inner products per query, best first; -1 / 0.0 pad missing hits. `allowed`
        (a mask over rows) leaves the other rows out of the search."""
        self._check_dimension(queries)
        rows = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        mask = None if allowed is None else torch.from_numpy(~np.asarray(allowed, dtype=bool)).to(self._device)
        depth = min(k, len(self) if allowed is None else int(np.count_nonzero(allowed)))
        if depth == 0:
            return rows, scores
        for start in range(0, len(queries), QUERY_BATCH):
            batch = torch.from_numpy(np.ascontiguousarray(queries[start : start + QUERY_BATCH], dtype=np.float32))
            products = batch.to(self._device, self._matrix.dtype) @ self._matrix.T
            if mask is not None:
                products = products.masked_fill(mask, float("-inf"))
            top = products.float().topk(depth, dim=1)
            rows[start : start + len(batch), :depth] = top.indices.cpu().numpy()
            scores[start : start + len(batch), :depth] = top.values.cpu().numpy()
        return rows, scores

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        return self._host[np.asarray(rows, dtype=np.int64)]

    @property
    def stores_vectors(self) -> bool:
        return True
