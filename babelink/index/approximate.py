"""Approximate name vectors: how a lazy index reaches names that share no n-gram with a mention.

A lazy index (`index.lazy`) ranks the TF-IDF shortlist, so a name written in other characters than
the mention ("infarto" → "heart attack", 心肌梗死 → "myocardial infarction") is out of its reach;
encoding every name for a FAISS index costs the half hour the lazy index exists to avoid. A KB's
names use far fewer distinct tokens than there are names (open-umls: 23.5k tokens for 186k
strings), so each token is encoded once, alone (with the encoder's prefix and special tokens,
pooled as any text), and a name's approximate vector is the IDF-weighted mean of its tokens'
vectors, the way static embeddings are distilled from a transformer (model2vec). A PCA basis fitted
on them keeps `DIMENSIONS` components. The query's real vector, projected onto that basis,
searches them exactly; the names found join the TF-IDF shortlist, and both are ranked by true
cosines (`retrieve.HybridGenerator`), names encoded on first need as before. The measurement that
chose this design is in benchmarks/log/notes.md (2026-11-27, approximate name vectors).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from babelink.errors import BundleError
from babelink.index.dense import DenseNameIndex, DenseParams

#: PCA components kept: on XL-BEL as good as all 384 of e5-small, a third of the memory and search.
DIMENSIONS = 128
#: Approximate vectors the PCA basis is fitted on.
PCA_SAMPLE = 50_000
#: Names turned into vectors at once (bounds the float32 intermediate: rows × encoder dimension).
CHUNK = 65_536
VECTORS_FILE = "approximate.npy"
BASIS_FILE = "approximate_basis.npz"


class TokenEncoder(Protocol):
    """What building approximate vectors asks of an encoder (`TransformerEncoder` has it)."""

    dimension: int

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]: ...

    def encode_tokens(self, ids: Sequence[int]) -> np.ndarray: ...


class ApproximateNames:
    """Row `i` is name string `i`'s approximate vector in the basis (L2-normalised, float16)."""

    def __init__(self, vectors: np.ndarray, token_ids: np.ndarray, idf: np.ndarray, mean: np.ndarray,
                 components: np.ndarray):
        self.vectors, self.token_ids, self.idf = vectors, token_ids, idf
        self.mean, self.components = mean, components
        self._index: DenseNameIndex | None = None

    def __len__(self) -> int:
        return len(self.vectors)

    @classmethod
    def build(cls, encoder: TokenEncoder, strings: Sequence[str],
              progress: Callable[[str, int, int], None] | None = None) -> ApproximateNames:
        names = encoder.token_ids(strings)
        token_ids = _distinct(names)
        occurrences = _occurrences(names, token_ids)
        names_with = np.bincount(occurrences.indices, minlength=len(token_ids))
        idf = (np.log((1 + len(names)) / (1 + names_with)) + 1).astype(np.float32)
        tokens = _token_vectors(encoder, token_ids, progress)
        weights = _weights(occurrences, idf)
        sample = np.random.default_rng(0).choice(len(names), min(PCA_SAMPLE, len(names)), replace=False)
        mean, components = _basis(_normalized(weights[np.sort(sample)] @ tokens))
        vectors = _project_chunks(weights, tokens, mean, components)
        return cls(vectors, token_ids, idf, mean, components)

    def extended(self, encoder: TokenEncoder, strings: Sequence[str]) -> ApproximateNames:
        """With rows for `strings` after the existing ones, in the same basis; tokens the build never
        saw weigh as its rarest."""
        names = encoder.token_ids(strings)
        used = _distinct(names)
        new = np.setdiff1d(used, self.token_ids)
        token_ids = np.concatenate([self.token_ids, new])
        idf = np.concatenate([self.idf, np.full(len(new), self.idf.max(initial=1.0), np.float32)])
        order = np.argsort(token_ids)
        token_ids, idf = token_ids[order], idf[order]
        tokens = np.zeros((len(token_ids), encoder.dimension), np.float32)
        tokens[np.searchsorted(token_ids, used)] = _token_vectors(encoder, used, None)
        rows = _project_chunks(_weights(_occurrences(names, token_ids), idf), tokens, self.mean, self.components)
        return ApproximateNames(np.concatenate([self.vectors, rows]), token_ids, idf, self.mean, self.components)

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k rows and approximate cosines per query (real, encoder-space vectors), best first;
        -1 / 0.0 pad missing hits. `allowed` (a mask over rows) leaves the others out."""
        if self._index is None:  # FAISS's exact search: its top-k is ten times numpy's argpartition
            self._index = DenseNameIndex.build(self.vectors, DenseParams(kind="flat"))
        projected = _normalized((np.asarray(queries, np.float32) - self.mean) @ self.components.T)
        return self._index.search(projected, k, allowed)

    def save(self, directory: Path) -> list[Path]:
        np.save(directory / VECTORS_FILE, self.vectors)
        with open(directory / BASIS_FILE, "wb") as stream:
            np.savez(stream, token_ids=self.token_ids, idf=self.idf, mean=self.mean, components=self.components)
        return [directory / VECTORS_FILE, directory / BASIS_FILE]

    @classmethod
    def load(cls, directory: Path) -> ApproximateNames | None:
        """The approximate vectors saved in `directory`, None where it has none (a bundle whose
        encoder cannot encode tokens alone)."""
        if not (directory / VECTORS_FILE).is_file():
            return None
        try:
            vectors = np.load(directory / VECTORS_FILE, mmap_mode="r")
            with np.load(directory / BASIS_FILE) as basis:
                parts = {key: basis[key] for key in ("token_ids", "idf", "mean", "components")}
        except (OSError, ValueError, KeyError) as error:
            raise BundleError(f"{directory}: unreadable approximate name vectors ({error}); "
                              "rebuild the bundle") from None
        if vectors.ndim != 2 or vectors.shape[1] != parts["components"].shape[0]:
            raise BundleError(f"{directory / VECTORS_FILE}: vectors of shape {vectors.shape} for a basis of "
                              f"{parts['components'].shape[0]} components; rebuild the bundle")
        return cls(vectors, **parts)


def supports_tokens(encoder: object) -> bool:
    """Whether `encoder` can encode tokens alone (the torch runtime; ONNX exports take whole texts)."""
    return callable(getattr(encoder, "token_ids", None)) and callable(getattr(encoder, "encode_tokens", None))


def _distinct(names: list[list[int]]) -> np.ndarray:
    return np.unique(np.concatenate([np.asarray(ids, np.int64) for ids in names] or [np.zeros(0, np.int64)]))


def _token_vectors(encoder: TokenEncoder, token_ids: np.ndarray, progress) -> np.ndarray:
    vectors = np.zeros((len(token_ids), encoder.dimension), np.float32)
    step = 8192
    for start in range(0, len(token_ids), step):
        vectors[start : start + step] = encoder.encode_tokens(token_ids[start : start + step].tolist())
        if progress:
            progress("encoding name tokens", min(start + step, len(token_ids)), len(token_ids))
    return vectors


def _occurrences(names: list[list[int]], token_ids: np.ndarray) -> sp.csr_matrix:
    """(names × tokens) counts of each token in each name; `token_ids` sorted, holding every token."""
    lengths = np.fromiter((len(ids) for ids in names), np.int64, len(names))
    columns = np.searchsorted(token_ids, np.concatenate([np.asarray(ids, np.int64) for ids in names] or [[]]))
    rows = np.repeat(np.arange(len(names)), lengths)
    return sp.csr_matrix((np.ones(len(columns), np.float32), (rows, columns)), shape=(len(names), len(token_ids)))


def _weights(occurrences: sp.csr_matrix, idf: np.ndarray) -> sp.csr_matrix:
    """Each occurrence weighted by its token's IDF, each row summing to 1: the mean an approximate vector is."""
    matrix = occurrences.multiply(idf[None, :]).tocsr().astype(np.float32)
    sums = np.asarray(matrix.sum(axis=1)).ravel()
    return sp.diags(np.divide(1.0, sums, out=np.zeros_like(sums), where=sums > 0)).astype(np.float32) @ matrix


def _basis(sample: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and the top `DIMENSIONS` principal axes (rows) of `sample`."""
    mean = sample.mean(axis=0)
    _, _, axes = np.linalg.svd(sample - mean, full_matrices=False)
    return mean.astype(np.float32), np.ascontiguousarray(axes[:DIMENSIONS], dtype=np.float32)


def _project_chunks(weights: sp.csr_matrix, tokens: np.ndarray, mean: np.ndarray,
                    components: np.ndarray) -> np.ndarray:
    out = np.zeros((weights.shape[0], len(components)), np.float16)
    for start in range(0, weights.shape[0], CHUNK):
        vectors = _normalized(weights[start : start + CHUNK] @ tokens)
        out[start : start + CHUNK] = _normalized((vectors - mean) @ components.T)
    return out


def _normalized(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)
