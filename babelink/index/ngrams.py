"""Char n-gram TF-IDF vectors over a fixed vocabulary, computed as scikit-learn's `TfidfVectorizer` does.

The vocabulary and IDF are fitted once, at build, by scikit-learn (`index.sparse`). Queries only
need the analyzer, a vocabulary lookup and the weighting, and importing scikit-learn for that
cost about a second of every CLI call (BENCHMARKS.md, start-up); this module reproduces its
`char` and `char_wb` analyzers and sublinear/linear TF × IDF with L2 norm exactly
(`tests/index/test_ngrams.py` checks it against scikit-learn).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

_WHITE_SPACES = re.compile(r"\s\s+")  # scikit-learn's: runs of two or more collapse to one space


def char_ngrams(text: str, ngram_min: int, ngram_max: int) -> list[str]:
    """scikit-learn's `analyzer="char"`: n-grams across word boundaries."""
    text = _WHITE_SPACES.sub(" ", text)
    grams = list(text) if ngram_min == 1 else []
    for n in range(max(ngram_min, 2), min(ngram_max + 1, len(text) + 1)):
        grams.extend(text[i : i + n] for i in range(len(text) - n + 1))
    return grams


def char_wb_ngrams(text: str, ngram_min: int, ngram_max: int) -> list[str]:
    """scikit-learn's `analyzer="char_wb"`: n-grams inside each space-padded word; a word
    shorter than n contributes itself once."""
    grams = []
    for word in _WHITE_SPACES.sub(" ", text).split():
        word = f" {word} "
        for n in range(ngram_min, ngram_max + 1):
            if len(word) <= n:
                grams.append(word)
                break
            grams.extend(word[i : i + n] for i in range(len(word) - n + 1))
    return grams


_ANALYZERS = {"char": char_ngrams, "char_wb": char_wb_ngrams}


class NgramVectorizer:
    """TF-IDF rows over `terms` (the vocabulary in column order) weighted by `idf`.

    `transform(strings)` gives scikit-learn's rows: L2-normalised over the vocabulary's n-grams.
    `transform(strings, unseen_idf=w)` also counts n-grams outside the vocabulary in the norm,
    each weighing as an n-gram of IDF `w` would, and drops them from the row.
    """

    def __init__(self, analyzer: str, ngram_min: int, ngram_max: int, sublinear_tf: bool,
                 terms: Sequence[str], idf: np.ndarray):
        if analyzer not in _ANALYZERS:
            raise ValueError(f"analyzer must be one of {', '.join(_ANALYZERS)}, got {analyzer!r}")
        self._analyzer = _ANALYZERS[analyzer]
        self._range = (ngram_min, ngram_max)
        self.sublinear_tf = sublinear_tf
        self.terms = list(terms)
        self.columns = {term: column for column, term in enumerate(self.terms)}
        self.idf = np.asarray(idf, dtype=np.float32)

    def analyze(self, text: str) -> list[str]:
        return self._analyzer(text, *self._range)

    def _tf(self, counts: np.ndarray) -> np.ndarray:
        return 1.0 + np.log(counts) if self.sublinear_tf else counts

    def transform(self, strings: Sequence[str], unseen_idf: float | None = None) -> sp.csr_matrix:
        indptr, indices, counts = [0], [], []
        unseen_sq = np.zeros(len(strings), dtype=np.float64)
        for row, string in enumerate(strings):
            unseen = []
            for gram, count in Counter(self.analyze(string)).items():
                column = self.columns.get(gram)
                if column is None:
                    unseen.append(count)
                else:
                    indices.append(column)
                    counts.append(count)
            if unseen and unseen_idf is not None:
                unseen_sq[row] = np.square(self._tf(np.asarray(unseen, dtype=np.float64)) * unseen_idf).sum()
            indptr.append(len(indices))
        data = self._tf(np.asarray(counts, dtype=np.float32)) * self.idf[np.asarray(indices, dtype=np.int64)]
        rows = sp.csr_matrix((data.astype(np.float32), indices, indptr), shape=(len(strings), len(self.terms)))
        rows.sort_indices()
        norms = np.sqrt(np.asarray(rows.multiply(rows).sum(axis=1), dtype=np.float64).ravel() + unseen_sq)
        return sp.diags((1.0 / np.where(norms > 0, norms, 1.0)).astype(np.float32)).dot(rows).tocsr()
