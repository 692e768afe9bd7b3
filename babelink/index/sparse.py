"""Char n-gram TF-IDF index with cosine top-k search (000 §4.2 representation, §4.3 matcher).

Exact sparse cosine against every name is slow because short n-grams ("e", "in") occur in
most names. Search therefore runs in two steps: *retrieve* scores only the selective n-grams
(those in at most `max_posting_fraction` of the names) to shortlist `pool` strings per query,
then *rescore* computes the exact cosine of each shortlisted string over all n-grams. A name
sharing only common n-grams with the query cannot reach a high cosine, so the shortlist keeps
the true top-k; a query whose shortlist comes out shorter than k (say, one made only of common
n-grams) is scored exhaustively. `benchmarks/normalization.py` measures the agreement.

The name matrix and its inverted index (the transpose, one row of strings per n-gram) are both
stored as plain `.npy` arrays and memory-mapped on load: building the inverted index and reading
a compressed matrix took half a second of every CLI call.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections import Counter, OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from babelink.fsutil import column_array, read_parquet
from babelink.index.ngrams import NgramVectorizer

VOCABULARY_FILE = "tfidf_vocabulary.parquet"
PARAMS_FILE = "tfidf_params.json"
#: The CSR arrays of the name matrix and of its inverted index, `<stem>.<array>.npy`.
MATRIX_STEM, POSTINGS_STEM = "tfidf_matrix", "tfidf_postings"
_CSR_ARRAYS = ("data", "indices", "indptr")
#: Where bundles built before the arrays were stored keep the name matrix (inverted index computed on load).
LEGACY_MATRIX_FILE = "tfidf_matrix.npz"
#: Query vectors whose rescored shortlist `search_vectors` remembers: `link` searches each span
#: string twice (its recall gate, then the hybrid ranker), as a translating generator does its renderings.
REMEMBERED_SHORTLISTS = 16_384
#: Queries shortlisted together. Their candidate scores are the search's memory (about 12k names a
#: query on the embedded default's 248k), so a batch is shortlisted in chunks of at most this many,
#: two or more at a time: scipy's and numpy's kernels release the GIL. A batch of fewer than twice
#: the smaller number (a sentence's spans, one served request) is not worth a thread.
QUERIES_PER_CHUNK, MIN_QUERIES_PER_CHUNK = 512, 16
#: Threads at most: a container's CPU quota is not in the affinity mask the count is read from.
MAX_SEARCH_THREADS = 8


@dataclass(frozen=True)
class TfidfParams:
    """Vectorizer and search settings; stored in the bundle manifest.

    The defaults (word-bounded 2–4-grams, sublinear TF) scored best on the NCBI-disease and
    BC5CDR dev splits among char/char_wb × {1–3, 2–3, 3, 2–4, 1–4} × sublinear on/off
    (BENCHMARKS.md); 000 §4.2 uses char 1–3-grams, which stay one setting away.
    """

    analyzer: str = "char_wb"  # "char" crosses word boundaries, "char_wb" pads each word with spaces
    ngram_min: int = 2
    ngram_max: int = 4
    sublinear_tf: bool = True
    pool: int = 64  # strings shortlisted per query before exact rescoring
    max_posting_fraction: float = 0.02  # n-grams in more names than this are not used to shortlist…
    min_posting_limit: int = 1000  # …unless they are in fewer names than this (small KBs stay exhaustive)
    exhaustive: bool = False  # score every name with every n-gram (slow; the reference)


class TfidfNameIndex:
    """Fits a char n-gram TF-IDF on normalised name strings and finds the nearest by cosine.

    Fitting uses scikit-learn's `TfidfVectorizer`; queries are vectorised by `NgramVectorizer`,
    which reproduces it without importing scikit-learn on every load."""

    def __init__(self, params: TfidfParams, vectorizer: NgramVectorizer, matrix: sp.csr_matrix,
                 postings: sp.csr_matrix | None = None):
        self.params = params
        self.vectorizer = vectorizer
        self.matrix = matrix  # (strings × n-grams), rows L2-normalised
        self._prepare_search(self.matrix.T.tocsr() if postings is None else postings)

    @staticmethod
    def _vectorizer(params: TfidfParams, terms: list[str], idf: np.ndarray) -> NgramVectorizer:
        return NgramVectorizer(params.analyzer, params.ngram_min, params.ngram_max, params.sublinear_tf, terms, idf)

    @classmethod
    def fit(cls, strings: list[str], params: TfidfParams = TfidfParams()) -> TfidfNameIndex:
        from sklearn.feature_extraction.text import TfidfVectorizer

        if not strings:
            raise ValueError("cannot fit a TF-IDF index on zero names")
        # min_df=1 and max_df=1.0: every n-gram of every name counts, so a 10-name KB keeps its vocabulary.
        fitted = TfidfVectorizer(analyzer=params.analyzer, ngram_range=(params.ngram_min, params.ngram_max),
                                 lowercase=False, sublinear_tf=params.sublinear_tf, min_df=1, max_df=1.0,
                                 dtype=np.float32)
        matrix = fitted.fit_transform(strings).tocsr()
        matrix.sort_indices()  # canonical: the stored, read-only arrays are never sorted in place
        terms = sorted(fitted.vocabulary_, key=fitted.vocabulary_.__getitem__)
        return cls(params, cls._vectorizer(params, terms, fitted.idf_), matrix)

    def extended(self, strings: list[str]) -> TfidfNameIndex:
        """This index with rows for `strings` appended, without refitting: the n-grams it has keep
        their IDF, and those it lacks join the vocabulary with scikit-learn's smooth IDF of their
        document frequency among all strings, so an added name meets itself at cosine 1.0 and
        the earlier rows, which lack those n-grams, are unchanged."""
        counts = Counter(gram for string in strings for gram in set(self.vectorizer.analyze(string))
                         if gram not in self.vectorizer.columns)
        fresh = sorted(counts)
        strings_after = self.matrix.shape[0] + len(strings)
        idf = np.log((1 + strings_after) / (1 + np.array([counts[gram] for gram in fresh], dtype=np.float64))) + 1
        vectorizer = self._vectorizer(self.params, [*self.vectorizer.terms, *fresh],
                                      np.concatenate([self.vectorizer.idf, idf.astype(np.float32)]))
        earlier = sp.csr_matrix((self.matrix.data, self.matrix.indices, self.matrix.indptr),
                                shape=(self.matrix.shape[0], len(vectorizer.terms)))
        added = vectorizer.transform(strings)
        matrix = sp.vstack([earlier, added]).tocsr()
        matrix.sort_indices()  # canonical, as `fit` leaves it
        return TfidfNameIndex(self.params, vectorizer, matrix)

    def _prepare_search(self, postings: sp.csr_matrix) -> None:
        idf = self.vectorizer.idf
        self._unseen_idf = float(idf.max()) + float(np.log(2.0)) if len(idf) else 1.0
        limit = max(self.params.min_posting_limit, self.params.max_posting_fraction * self.matrix.shape[0])
        self._selective = sp.diags((np.diff(postings.indptr) <= limit).astype(np.float32)).tocsr()
        self._postings = postings  # n-grams × strings: an inverted index
        self._searchable = self.matrix.shape[0]  # strings a search may return (`restricted`)
        self._shortlists = _Shortlists()

    def transform(self, strings: list[str]) -> sp.csr_matrix:
        """L2-normalised query vectors over the vocabulary, whose norm also counts the query's
        n-grams no KB name has: dropping them would let "zzzz fever" score 1.0 against "fever".
        An unseen n-gram weighs as an n-gram of document frequency 0 would (smooth IDF: ln 2 above
        the rarest seen n-gram)."""
        return self.vectorizer.transform(strings, unseen_idf=self._unseen_idf)

    def restricted(self, allowed: np.ndarray) -> TfidfNameIndex:
        """This index searching only the strings `allowed` (a mask) lets through: the same
        vocabulary and matrix, inverted lists without the other strings (masked once, here)."""
        view = copy.copy(self)
        view._postings = self._postings.multiply(allowed.astype(np.float32)[np.newaxis, :]).tocsr()
        view._postings.eliminate_zeros()  # emptied, not merely zeroed: top-k must not return them
        view._searchable = int(allowed.sum())
        view._shortlists = _Shortlists()
        return view

    def clear(self) -> None:
        """Forget the remembered shortlists (a benchmark timing the search starts from here)."""
        self._shortlists = _Shortlists()

    def search(self, strings: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k string indices and cosine scores per query, best first; -1 / 0.0 pad missing hits."""
        return self.search_vectors(self.transform(strings), k)

    def search_vectors(self, queries: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
        """`search` of queries already vectorised by `transform`."""
        postings = self._postings
        if self.params.exhaustive:
            return _top_k_rows(queries @ postings, k)
        if k > self.params.pool:
            rows, scores = self._shortlisted(queries, k)
        else:  # the whole shortlist rescored, remembered per query vector: any k up to `pool` is a prefix of it
            rows, scores = self._shortlists.get(queries, lambda missing: self._shortlisted(missing, self.params.pool))
            rows, scores = rows[:, :k], scores[:, :k]
        thin = np.flatnonzero((rows[:, : min(k, self._searchable)] < 0).any(axis=1))
        if len(thin):
            rows[thin], scores[thin] = _top_k_rows(queries[thin] @ postings, k)
        return rows, scores

    def _shortlisted(self, queries: sp.csr_matrix, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Each query's `width` strings shortlisted by selective n-grams, by their exact cosine, best
        first (-1 / 0.0 past its shortlist); chunks of queries on parallel threads."""
        threads = search_threads()
        if threads < 2 or queries.shape[0] < 2 * MIN_QUERIES_PER_CHUNK:
            return self._shortlisted_chunk(queries, width)
        size = min(QUERIES_PER_CHUNK, max(MIN_QUERIES_PER_CHUNK, -(-queries.shape[0] // threads)))
        chunks = [queries[start : start + size] for start in range(0, queries.shape[0], size)]
        with ThreadPoolExecutor(min(threads, len(chunks))) as pool:
            found = list(pool.map(lambda chunk: self._shortlisted_chunk(chunk, width), chunks))
        return np.concatenate([rows for rows, _ in found]), np.concatenate([scores for _, scores in found])

    def _shortlisted_chunk(self, queries: sp.csr_matrix, width: int) -> tuple[np.ndarray, np.ndarray]:
        candidates, _ = _top_k_rows((queries @ self._selective) @ self._postings, width)
        return self._rescore(queries, candidates, width)

    def _rescore(self, queries: sp.csr_matrix, candidates: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        query_rows, slots = np.nonzero(candidates >= 0)
        exact = self.score_pairs(queries, query_rows, candidates[query_rows, slots])
        scores = np.full(candidates.shape, -np.inf, dtype=np.float32)
        scores[query_rows, slots] = exact
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        best = np.take_along_axis(candidates, order, axis=1)
        best_scores = np.take_along_axis(scores, order, axis=1)
        missing = ~np.isfinite(best_scores) | (best < 0)
        best[missing], best_scores[missing] = -1, 0.0
        return best, best_scores

    def score_pairs(self, queries: sp.csr_matrix, query_rows: np.ndarray, string_rows: np.ndarray) -> np.ndarray:
        """Exact cosine of `queries[query_rows[j]]` with string `string_rows[j]`, over all n-grams."""
        return np.asarray(self.matrix[string_rows].multiply(queries[query_rows]).sum(axis=1)).ravel()

    def save(self, directory: Path) -> list[Path]:
        paths = [directory / VOCABULARY_FILE, directory / PARAMS_FILE]
        pq.write_table(pa.table({"ngram": self.vectorizer.terms, "idf": self.vectorizer.idf}), paths[0])
        paths[1].write_text(json.dumps(asdict(self.params), indent=2))
        return [*paths, *_save_csr(self.matrix, directory, MATRIX_STEM),
                *_save_csr(self._postings, directory, POSTINGS_STEM)]

    @classmethod
    def load(cls, directory: Path) -> TfidfNameIndex:
        params = TfidfParams(**json.loads((directory / PARAMS_FILE).read_text()))
        table = read_parquet(directory / VOCABULARY_FILE)
        vectorizer = cls._vectorizer(params, table.column("ngram").to_pylist(), column_array(table, "idf"))
        if (directory / LEGACY_MATRIX_FILE).is_file():
            return cls(params, vectorizer, sp.load_npz(directory / LEGACY_MATRIX_FILE).tocsr())
        matrix = _load_csr(directory, MATRIX_STEM, columns=len(vectorizer.terms))
        postings = _load_csr(directory, POSTINGS_STEM, columns=matrix.shape[0])
        if postings.shape[0] != matrix.shape[1]:
            raise ValueError(f"{directory}: the inverted index has {postings.shape[0]} n-grams, the matrix "
                             f"{matrix.shape[1]}")
        return cls(params, vectorizer, matrix, postings)


def _save_csr(matrix: sp.csr_matrix, directory: Path, stem: str) -> list[Path]:
    paths = [directory / f"{stem}.{name}.npy" for name in _CSR_ARRAYS]
    for path, name in zip(paths, _CSR_ARRAYS, strict=True):
        np.save(path, getattr(matrix, name), allow_pickle=False)
    return paths


def _load_csr(directory: Path, stem: str, columns: int) -> sp.csr_matrix:
    """A CSR matrix over memory-mapped, read-only arrays: pages are read as searches touch them."""
    data, indices, indptr = (np.load(directory / f"{stem}.{name}.npy", mmap_mode="r") for name in _CSR_ARRAYS)
    if len(data) != len(indices) or not len(indptr) or indptr[-1] != len(data):
        raise ValueError(f"{directory}: the arrays of {stem} do not form a sparse matrix")
    return sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, columns), copy=False)


class _Shortlists:
    """Least-recently-used memory of `_shortlisted` results, keyed by each query vector's n-grams
    and weights (a row's result does not depend on the rows searched beside it)."""

    def __init__(self, max_entries: int = REMEMBERED_SHORTLISTS):
        self.max_entries = max_entries
        self._found: OrderedDict[bytes, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()  # a served bundle is searched from several threads

    def get(self, queries: sp.csr_matrix, shortlisted) -> tuple[np.ndarray, np.ndarray]:
        if not queries.shape[0]:
            return shortlisted(queries)
        keys = [queries.indices[start:end].tobytes() + queries.data[start:end].tobytes()
                for start, end in zip(queries.indptr[:-1], queries.indptr[1:])]
        with self._lock:
            known = {key: self._found[key] for key in dict.fromkeys(keys) if key in self._found}
        missing = [position for position, key in enumerate(keys) if key not in known]
        if missing:
            rows, scores = shortlisted(queries[missing])
            known.update((keys[position], (rows[row].copy(), scores[row].copy()))  # not views: kept alone
                         for row, position in enumerate(missing))
        with self._lock:
            for key in keys:
                self._found[key] = known[key]
                self._found.move_to_end(key)
            while len(self._found) > self.max_entries:
                self._found.popitem(last=False)
        return np.stack([known[key][0] for key in keys]), np.stack([known[key][1] for key in keys])


def search_threads() -> int:
    """The CPUs this process may run on, up to `MAX_SEARCH_THREADS`."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, MAX_SEARCH_THREADS)


def _top_k_rows(scores: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Column indices and values of the k largest entries of each sparse row, best first."""
    n_rows = scores.shape[0]
    indices = np.full((n_rows, k), -1, dtype=np.int64)
    values = np.zeros((n_rows, k), dtype=np.float32)
    for row in range(n_rows):
        start, end = scores.indptr[row], scores.indptr[row + 1]
        row_values, row_columns = scores.data[start:end], scores.indices[start:end]
        if len(row_values) > k:
            keep = np.argpartition(-row_values, k - 1)[:k]
            row_values, row_columns = row_values[keep], row_columns[keep]
        order = np.argsort(-row_values, kind="stable")
        indices[row, : len(order)] = row_columns[order]
        values[row, : len(order)] = row_values[order]
    return indices, values
