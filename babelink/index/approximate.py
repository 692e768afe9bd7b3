"""Approximate name vectors: how a lazy index reaches names that share no n-gram with a mention.

A lazy index (`index.lazy`) ranks the TF-IDF shortlist, so a name written in other characters than
the mention ("infarto" → "heart attack", 心肌梗死 → "myocardial infarction") is out of its reach;
encoding every name for a FAISS index costs the half hour the lazy index exists to avoid. A KB's
names use far fewer distinct tokens than there are names (open-umls: 23.5k tokens for 186k
strings), so each token is encoded once, alone (with the encoder's prefix and special tokens,
pooled as any text), and a name's approximate vector is the IDF-weighted mean of its tokens'
vectors, the way static embeddings are distilled from a transformer (model2vec). A token alone is
not what the encoder sees in a name, least of all one trained on whole names (SAP), so the token
vectors are then fitted: `FIT_NAMES` names are encoded whole and the token vectors regressed so
that those names' means meet their real vectors, each pulled toward its lone vector (ridge) so that
tokens the sample lacks stay as they were. A PCA basis fitted on the means keeps `DIMENSIONS`
components. The query's real vector, projected onto that basis,
searches them exactly; the names found join the TF-IDF shortlist, and both are ranked by true
cosines (`retrieve.HybridGenerator`), names encoded on first need as before. The vectors live in
FAISS inverted lists of 4-bit codes re-ranked on the vectors (`DenseParams(kind="ivffastscan")`): an
exact scan of 186k vectors took 0.3 ms a query alone and several times that beside the encoder's
threads, more than the encoder at 2M names. The measurements that chose this design are in
benchmarks/log/notes.md (2026-11-27, approximate name vectors; the search's cost; 2026-11-29,
token vectors fitted to whole names).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from babelink.errors import BundleError
from babelink.index.dense import DenseNameIndex, DenseParams, embed_strings

#: PCA components kept: on XL-BEL as good as all 384 of e5-small, a third of the memory and search.
DIMENSIONS = 128
#: Approximate vectors the PCA basis is fitted on.
PCA_SAMPLE = 50_000
#: Names encoded whole at build as the targets the token vectors are fitted to: on held-out Greek
#: names, 10k gave the bundled encoder 0.195 → 0.283 Acc@1 and 30k 0.308 (notes, 2026-11-29); 10k
#: cost 23 s here, about 70 s on an AVX2-only CPU, within a first run's budget.
FIT_NAMES = 10_000
#: The pull of a fitted token vector toward its lone vector: a name's weights sum to 1, so a token
#: met in one sampled name at weight w is fitted from w² of evidence against this.
FIT_RIDGE = 0.1
#: Names turned into vectors at once (bounds the float32 intermediate: rows × encoder dimension).
CHUNK = 65_536
#: Where a lazy index's `dense/` keeps them: a FAISS index directory, and the basis beside it.
DIRECTORY = "approximate"
BASIS_FILE = "basis.npz"
#: Names from which the vectors go into inverted lists (trained on at least 39 per list); fewer are scanned whole.
IVF_MIN_NAMES = 39 * 256
#: Lists scanned per query: on open-umls (1,723 lists) 256 find 97.3% of an exact scan's top 32 for
#: XL-BEL, Mantra and QUAERO queries; 64 lists over the full vectors found 87.6% of XL-BEL's and
#: cost 0.9 points of Acc@1 in Japanese (notes, 2026-11-27).
NPROBE = 256


class TokenEncoder(Protocol):
    """What building approximate vectors asks of an encoder (`TransformerEncoder` has it)."""

    dimension: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]: ...

    def encode_tokens(self, ids: Sequence[int]) -> np.ndarray: ...


class ApproximateNames:
    """Row `i` of `index` is name string `i`'s approximate vector in the basis (`mean`, `components`
    rows), L2-normalised; `token_ids` (sorted), `idf` and `token_vectors` (float16, fitted; None in
    bundles built before the fit: lone vectors then) are what it was built from."""

    def __init__(self, index: DenseNameIndex, token_ids: np.ndarray, idf: np.ndarray, mean: np.ndarray,
                 components: np.ndarray, token_vectors: np.ndarray | None = None):
        self.index, self.token_ids, self.idf, self.token_vectors = index, token_ids, idf, token_vectors
        self.mean, self.components = mean, components

    def __len__(self) -> int:
        return len(self.index)

    @classmethod
    def build(cls, encoder: TokenEncoder, strings: Sequence[str],
              progress: Callable[[str, int, int], None] | None = None,
              encode_names: Callable[[Sequence[str]], np.ndarray] | None = None) -> ApproximateNames:
        """`encode_names` (default `encoder.encode`) encodes the names the token vectors are fitted
        to: a lazy index passes its vector store's, so they are not encoded again on first need."""
        token_ids, occurrences = _occurrences(encoder, strings)
        names_with = np.bincount(occurrences.indices, minlength=len(token_ids))
        idf = (np.log((1 + occurrences.shape[0]) / (1 + names_with)) + 1).astype(np.float32)
        weights = _weights(occurrences, idf)
        count = occurrences.shape[0]
        token_vectors = _token_vectors(encoder, token_ids, progress)  # each token alone, then fitted
        fitted = np.sort(np.random.default_rng(1).choice(count, min(FIT_NAMES, count), replace=False))
        if len(fitted):
            tick = (lambda done: progress("encoding names to fit the token vectors to", done, len(fitted))
                    ) if progress else None
            targets = embed_strings(encode_names or encoder.encode, [strings[row] for row in fitted], progress=tick)
            token_vectors = _fitted(weights[fitted], targets, token_vectors)
        saved = token_vectors.astype(np.float16)
        tokens = saved.astype(np.float32)  # the build's vectors are those `vectors_of` reads back
        sample = np.random.default_rng(0).choice(count, min(PCA_SAMPLE, count), replace=False)
        mean, components = _basis(_normalized(weights[np.sort(sample)] @ tokens))
        vectors = _project_chunks(weights, tokens, mean, components)
        layout = DenseParams(kind="ivffastscan" if len(vectors) >= IVF_MIN_NAMES else "flat", nprobe=NPROBE)
        return cls(DenseNameIndex.build(vectors, layout), token_ids, idf, mean, components, saved)

    def vectors_of(self, encoder: TokenEncoder, strings: Sequence[str]) -> np.ndarray:
        """The approximate vectors of `strings` in this basis: the build's token vectors where it
        had them, lone vectors for the others; tokens the build never saw weigh as its rarest."""
        used, occurrences = _occurrences(encoder, strings)
        positions = np.minimum(np.searchsorted(self.token_ids, used), len(self.token_ids) - 1)
        known = self.token_ids[positions] == used
        idf = np.where(known, self.idf[positions], self.idf.max(initial=1.0))
        stored = known if self.token_vectors is not None else np.zeros_like(known)
        tokens = np.zeros((len(used), len(self.mean)), np.float32)
        if stored.any():
            tokens[stored] = self.token_vectors[positions[stored]]
        tokens[~stored] = _token_vectors(encoder, used[~stored], None)
        return _project_chunks(_weights(occurrences, idf.astype(np.float32)), tokens, self.mean, self.components)

    def add(self, encoder: TokenEncoder, strings: Sequence[str]) -> None:
        """Append rows for `strings` (an index `load`ed `writable`), in the same basis."""
        self.index.add(self.vectors_of(encoder, strings))

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k rows and approximate cosines per query (real, encoder-space vectors), best first;
        -1 / 0.0 pad missing hits. `allowed` (a mask over rows) leaves the others out."""
        projected = _normalized((np.asarray(queries, np.float32) - self.mean) @ self.components.T)
        return self.index.search(projected, k, allowed)

    def save(self, directory: Path) -> list[Path]:
        """Write `directory/approximate/`: the FAISS index and the basis."""
        (directory / DIRECTORY).mkdir(exist_ok=True)
        with open(directory / DIRECTORY / BASIS_FILE, "wb") as stream:
            fitted = {} if self.token_vectors is None else {"token_vectors": self.token_vectors}
            np.savez(stream, token_ids=self.token_ids, idf=self.idf, mean=self.mean, components=self.components,
                     **fitted)
        return [*self.index.save(directory / DIRECTORY), directory / DIRECTORY / BASIS_FILE]

    @classmethod
    def load(cls, directory: Path, *, writable: bool = False) -> ApproximateNames | None:
        """The approximate vectors saved under `directory`, None where it has none (a bundle whose
        encoder cannot encode tokens alone)."""
        if not (directory / DIRECTORY).is_dir():
            return None
        try:
            with np.load(directory / DIRECTORY / BASIS_FILE) as basis:
                parts = {key: basis[key] for key in ("token_ids", "idf", "mean", "components")}
                parts["token_vectors"] = basis.get("token_vectors")
        except (OSError, ValueError, KeyError) as error:
            raise BundleError(f"{directory / DIRECTORY / BASIS_FILE}: unreadable basis of the approximate name "
                              f"vectors ({error}); rebuild the bundle") from None
        index = DenseNameIndex.load(directory / DIRECTORY, writable=writable)
        if index.dimension != len(parts["components"]):
            raise BundleError(f"{directory / DIRECTORY}: {index.dimension}-d approximate vectors for a basis of "
                              f"{len(parts['components'])} components; rebuild the bundle")
        tokens = parts["token_vectors"]
        if tokens is not None and tokens.shape != (len(parts["token_ids"]), len(parts["mean"])):
            raise BundleError(f"{directory / DIRECTORY / BASIS_FILE}: {tokens.shape} token vectors for "
                              f"{len(parts['token_ids'])} tokens of {len(parts['mean'])} dimensions; "
                              "rebuild the bundle")
        return cls(index, **parts)


def supports_tokens(encoder: object) -> bool:
    """Whether `encoder` can encode tokens alone (the torch runtime; ONNX exports take whole texts)."""
    return callable(getattr(encoder, "token_ids", None)) and callable(getattr(encoder, "encode_tokens", None))


def _token_vectors(encoder: TokenEncoder, token_ids: np.ndarray, progress) -> np.ndarray:
    vectors = np.zeros((len(token_ids), encoder.dimension), np.float32)
    step = 8192
    for start in range(0, len(token_ids), step):
        vectors[start : start + step] = encoder.encode_tokens(token_ids[start : start + step].tolist())
        if progress:
            progress("encoding name tokens", min(start + step, len(token_ids)), len(token_ids))
    return vectors


def _occurrences(encoder: TokenEncoder, strings: Sequence[str]) -> tuple[np.ndarray, sp.csr_matrix]:
    """The distinct token ids (sorted) of `strings`, and the (strings × those tokens) counts of each
    in each. Tokenised `CHUNK` strings at a time: a tokenizer's output for millions of names at
    once (ids, offsets, token strings as Python objects) outweighs everything else the build holds."""
    lengths, flats = [], []
    for start in range(0, len(strings), CHUNK):
        ids = encoder.token_ids(strings[start : start + CHUNK])
        lengths.append(np.fromiter((len(row) for row in ids), np.int64, len(ids)))
        flats.append(np.fromiter((token for row in ids for token in row), np.int64))
    lengths = np.concatenate(lengths or [np.zeros(0, np.int64)])
    flat = np.concatenate(flats or [np.zeros(0, np.int64)])
    token_ids, columns = np.unique(flat, return_inverse=True)
    rows = np.repeat(np.arange(len(strings)), lengths)
    matrix = sp.csr_matrix((np.ones(len(columns), np.float32), (rows, columns.ravel())),
                           shape=(len(strings), len(token_ids)))
    return token_ids, matrix


def _fitted(weights: sp.csr_matrix, targets: np.ndarray, lone: np.ndarray, tolerance: float = 1e-4,
            iterations: int = 500) -> np.ndarray:
    """Token vectors X minimising ‖weights·X − targets‖² + FIT_RIDGE·‖X − lone‖²: the normal
    equations (WᵀW + λI) X = WᵀY + λ·lone, solved for all dimensions at once by conjugate gradients
    with a diagonal preconditioner (WᵀW is tokens × tokens, sparse; a sparse LU of it took a minute)."""
    transposed = weights.T.tocsr()

    def apply(x: np.ndarray) -> np.ndarray:
        return transposed @ (weights @ x) + FIT_RIDGE * x

    right = transposed @ targets + FIT_RIDGE * lone
    inverse_diagonal = (1.0 / (np.asarray(weights.multiply(weights).sum(axis=0)).ravel() + FIT_RIDGE))[:, None]
    solution = lone.astype(np.float32)
    residual = right - apply(solution)
    preconditioned = inverse_diagonal * residual
    direction, aligned = preconditioned.copy(), (residual * preconditioned).sum(axis=0)
    scale = np.linalg.norm(right, axis=0) + 1e-12
    for _ in range(iterations):
        if (np.linalg.norm(residual, axis=0) / scale).max() < tolerance:
            break
        moved = apply(direction)
        step = aligned / np.maximum((direction * moved).sum(axis=0), 1e-30)
        solution += step * direction
        residual -= step * moved
        preconditioned = inverse_diagonal * residual
        aligned, previous = (residual * preconditioned).sum(axis=0), aligned
        direction = preconditioned + aligned / np.maximum(previous, 1e-30) * direction
    return solution.astype(np.float32)


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
    out = np.zeros((weights.shape[0], len(components)), np.float32)
    for start in range(0, weights.shape[0], CHUNK):
        vectors = _normalized(weights[start : start + CHUNK] @ tokens)
        out[start : start + CHUNK] = _normalized((vectors - mean) @ components.T)
    return out


def _normalized(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)
