"""FAISS inner-product index over L2-normalised name vectors (002 §4.3).

Three layouts, chosen at build time and recorded in the bundle manifest:
- `flat`: exact search, 4·dim bytes per name; the reference.
- `hnsw` (default): graph search over the same vectors, sub-linear query time, ~15% more
  memory; the default (BENCHMARKS.md has normalization runs with each).
- `ivfpq`: OPQ rotation + inverted lists + product quantisation, `pq_bytes` per name, for UMLS
  scale (15M names); its recall against `flat` is in benchmarks/log/speed.md.
Files are memory-mapped on load, so several processes serving one bundle share the pages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from babelink.errors import BabelinkError

if TYPE_CHECKING:
    from babelink.index.names import NameTable

INDEX_FILE = "faiss.index"
PARAMS_FILE = "dense_params.json"
#: lazy: `index.lazy`, no FAISS index; ivffastscan: the approximate name vectors' index
#: (`index.approximate`), not offered by `build --index`; ivfflat: theirs in bundles built before it.
KINDS = ("flat", "hnsw", "ivfpq", "lazy", "ivffastscan", "ivfflat")
#: ivffastscan: hits re-ranked on exact vectors per hit asked for (k · this many).
REFINE_FACTOR = 8
#: (query, name) pairs `score_pairs` multiplies at a time.
PAIRS_PER_SLICE = 4096
#: Product quantisers with 8-bit codes learn 256 centroids per sub-space.
_PQ_MIN_TRAINING = 256 * 39


@dataclass(frozen=True)
class DenseParams:
    kind: str = "hnsw"
    hnsw_m: int = 32  # graph neighbours per node
    ef_construction: int = 200
    ef_search: int = 128
    nlist: int = 0  # inverted lists; 0 picks 4·√n
    pq_bytes: int = 96  # PQ sub-quantisers of 8 bits = code bytes per name
    nprobe: int = 64  # inverted lists visited per query
    training_sample: int = 262_144  # vectors the OPQ/IVF/PQ stages are trained on
    approximate: bool = True  # lazy: with approximate name vectors (`index.approximate`), which need FAISS

    def __post_init__(self):
        if self.kind not in KINDS:
            raise BabelinkError(f"dense index kind must be one of {', '.join(KINDS)}, got {self.kind!r}")


def _faiss():
    try:
        import faiss
    except ImportError:
        raise BabelinkError("dense indexes need faiss-cpu: pip install faiss-cpu") from None
    return faiss


class NameVectors:
    """What generators ask of a dense index: row `i` is the vector of `NameTable.strings[i]`."""

    params: DenseParams
    dimension: int
    #: Whether `vectors` encodes names on first need (the lazy index) rather than reading them.
    encodes_on_demand: bool = False

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def attach(self, encoder) -> None:
        """Encode names with `encoder` where the index encodes any (the lazy one); FAISS indexes hold theirs."""

    def searchable(self, device: str | None = None) -> NameVectors:
        """An index whose `search` finds every name: this one, unless it searches none itself (the lazy one)."""
        return self

    def score_pairs(self, queries: np.ndarray, query_rows: np.ndarray, string_rows: np.ndarray) -> np.ndarray:
        """Inner product of `queries[query_rows[j]]` with the vector of `string_rows[j]` (as `vectors` gives it)."""
        unique, position = np.unique(string_rows, return_inverse=True)
        names = self.vectors(unique)
        scores = np.empty(len(query_rows), dtype=np.float32)
        # In slices: gathering every pair's two vectors at once costs more in fresh memory than the products.
        for start in range(0, len(query_rows), PAIRS_PER_SLICE):
            part = slice(start, start + PAIRS_PER_SLICE)
            scores[part] = np.einsum("ij,ij->i", queries[query_rows[part]], names[position[part]])
        return scores

    def _check_dimension(self, queries: np.ndarray) -> None:
        if queries.ndim != 2 or queries.shape[1] != self.dimension:
            raise BabelinkError(f"query vectors have shape {queries.shape}, the index holds {self.dimension}-d vectors")


class DenseNameIndex(NameVectors):
    """The FAISS index over the name strings' vectors."""

    def __init__(self, params: DenseParams, index):
        self.params = params
        self.index = index
        self.dimension = int(index.d)
        self._configure_search()

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @classmethod
    def build(cls, vectors: np.ndarray, params: DenseParams = DenseParams(), seed: int = 0) -> DenseNameIndex:
        faiss = _faiss()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        count, dimension = vectors.shape
        if count == 0:
            raise BabelinkError("cannot build a dense index over zero names")
        index = faiss.index_factory(
            dimension, cls.layout(params, count, dimension), faiss.METRIC_INNER_PRODUCT
        )
        if not index.is_trained:
            sample = vectors
            if count > params.training_sample:
                sample = vectors[np.random.default_rng(seed).choice(count, params.training_sample, replace=False)]
            index.train(sample)
        index.add(vectors)
        return cls(params, index)

    @staticmethod
    def layout(params: DenseParams, count: int, dimension: int) -> str:
        """The FAISS factory string of `params` for `count` vectors; `BabelinkError` when they cannot
        index that many (checked before the names are encoded, not after)."""
        return _LAYOUTS[params.kind].factory(params, count, dimension)

    def _configure_search(self) -> None:
        _LAYOUTS[self.params.kind].configure(self.index, self.params)

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k string rows and inner products per query, best first; -1 / 0.0 pad missing hits.
        `allowed` (a mask over rows) restricts the search itself, through a FAISS ID selector."""
        self._check_dimension(queries)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if allowed is None:
            scores, rows = self.index.search(queries, k)
        else:
            scores, rows = self._filtered_search(queries, k, allowed)
        scores[rows < 0] = 0.0
        return rows.astype(np.int64), scores

    def _filtered_search(self, queries: np.ndarray, k: int, allowed: np.ndarray):
        faiss = _faiss()
        bits = np.packbits(allowed.astype(bool), bitorder="little")
        selector = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bits))
        params = _LAYOUTS[self.params.kind].filtered(selector, self.params)
        result = self.index.search(queries, k, params=params)
        del bits  # the selector reads it until here
        return result

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The stored vectors of `rows` (decoded: approximate for `ivfpq`)."""
        return self.index.reconstruct_batch(np.asarray(rows, dtype=np.int64))

    @property
    def stores_vectors(self) -> bool:
        """Whether rows hold the vectors as they were added (flat, HNSW), not a lossy code (IVF-PQ)."""
        return not _LAYOUTS[self.params.kind].lossy

    def save(self, directory: Path) -> list[Path]:
        _faiss().write_index(self.index, str(directory / INDEX_FILE))
        return [directory / INDEX_FILE, save_params(self.params, directory)]

    def add(self, vectors: np.ndarray) -> None:
        """Append rows (an index `load`ed `writable`); their numbers follow the existing ones."""
        self._check_dimension(vectors)
        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    @classmethod
    def load(cls, directory: Path, *, writable: bool = False) -> DenseNameIndex:
        """The index memory-mapped read-only, or (`writable`) read into memory to `add` to."""
        faiss = _faiss()
        params = read_params(directory)
        flags = getattr(faiss, _LAYOUTS[params.kind].mmap_flag)
        try:
            index = faiss.read_index(str(directory / INDEX_FILE), 0 if writable else flags | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError as error:
            raise BabelinkError(
                f"{directory / INDEX_FILE}: unreadable FAISS index ({str(error).splitlines()[0]})"
            ) from None
        return cls(params, index)


class _Flat:
    """Exact search: every name's vector as added."""

    lossy = False
    mmap_flag = "IO_FLAG_MMAP_IFC"  # how a read-only load maps the file

    def factory(self, params: DenseParams, count: int, dimension: int) -> str:
        return "Flat"

    def configure(self, index, params: DenseParams) -> None:
        pass

    def filtered(self, selector, params: DenseParams):
        return _faiss().SearchParameters(sel=selector)


class _Hnsw(_Flat):
    """A graph over the same vectors: sub-linear search, `ef_search` candidates explored."""

    def factory(self, params: DenseParams, count: int, dimension: int) -> str:
        return f"HNSW{params.hnsw_m},Flat"

    def configure(self, index, params: DenseParams) -> None:
        graph = _faiss().downcast_index(index).hnsw
        graph.efSearch, graph.efConstruction = params.ef_search, params.ef_construction

    def filtered(self, selector, params: DenseParams):
        return _faiss().SearchParametersHNSW(sel=selector, efSearch=params.ef_search)


class _IvfPq:
    """OPQ rotation, inverted lists and product-quantised codes: `pq_bytes` per name, lossy."""

    lossy = True
    mmap_flag = "IO_FLAG_MMAP"

    def factory(self, params: DenseParams, count: int, dimension: int) -> str:
        if count < _PQ_MIN_TRAINING:
            raise BabelinkError(f"an ivfpq index needs at least {_PQ_MIN_TRAINING:,} names to train on, "
                                f"the KB has {count:,}; use --index flat or hnsw")
        if dimension % params.pq_bytes:
            raise BabelinkError(f"pq_bytes={params.pq_bytes} must divide the vector dimension {dimension}")
        return f"OPQ{params.pq_bytes},IVF{_nlist(params, count)},PQ{params.pq_bytes}"

    def configure(self, index, params: DenseParams) -> None:
        ivf = _faiss().extract_index_ivf(index)
        ivf.nprobe = params.nprobe
        ivf.make_direct_map()  # lets `score_pairs` decode any name's vector

    def filtered(self, selector, params: DenseParams):  # the OPQ rotation, then the inverted lists
        faiss = _faiss()
        return faiss.SearchParametersPreTransform(index_params=faiss.SearchParametersIVF(sel=selector,
                                                                                         nprobe=params.nprobe))


class _IvfFlat(_Flat):
    """Inverted lists over the vectors as added: `nprobe` lists scanned per query, quick to train and
    to add to, for vectors that are approximations themselves (`index.approximate`)."""

    mmap_flag = "IO_FLAG_MMAP"

    def factory(self, params: DenseParams, count: int, dimension: int) -> str:
        return f"IVF{_nlist(params, count)},Flat"

    def configure(self, index, params: DenseParams) -> None:
        ivf = _faiss().extract_index_ivf(index)
        ivf.nprobe = params.nprobe
        ivf.make_direct_map()  # lets `vectors` find any name's row

    def filtered(self, selector, params: DenseParams):
        return _faiss().SearchParametersIVF(sel=selector, nprobe=params.nprobe)


class _IvfFastScan(_Flat):
    """Inverted lists of 4-bit product-quantised codes, scanned with SIMD (FAISS fast-scan); the
    `REFINE_FACTOR` · k best are re-ranked on the exact vectors kept beside them. On open-umls's
    approximate name vectors, 256 of 1,723 lists: 0.10 ms a query where the same lists' full
    vectors took 0.57 (and an exact scan 0.31), finding 97.3% of an exact scan's top 32 against
    97.6% (notes, 2026-11-27). A read-only load maps the re-ranking vectors (`_Flat.mmap_flag`): at
    2M names, reading their 1 GB doubled the CLI's start-up."""

    def factory(self, params: DenseParams, count: int, dimension: int) -> str:
        return f"IVF{_nlist(params, count)},PQ{dimension}x4fs,Refine(Flat)"

    def configure(self, index, params: DenseParams) -> None:
        faiss = _faiss()
        faiss.downcast_index(index).k_factor = REFINE_FACTOR
        faiss.extract_index_ivf(index).nprobe = params.nprobe

    def filtered(self, selector, params: DenseParams):
        faiss = _faiss()
        return faiss.IndexRefineSearchParameters(
            k_factor=REFINE_FACTOR, base_index_params=faiss.SearchParametersIVF(sel=selector, nprobe=params.nprobe))


def _nlist(params: DenseParams, count: int) -> int:
    """Inverted lists of an IVF layout: `params.nlist`, else 4·√n, at least 39 training vectors each."""
    return params.nlist or max(1, min(int(4 * math.sqrt(count)), count // 39))


#: FAISS layout of each `DenseParams.kind` a `DenseNameIndex` builds (`lazy` builds none: `index.lazy`).
_LAYOUTS = {"flat": _Flat(), "hnsw": _Hnsw(), "ivfpq": _IvfPq(), "ivffastscan": _IvfFastScan(), "ivfflat": _IvfFlat()}


def read_params(directory: Path) -> DenseParams:
    return DenseParams(**json.loads((directory / PARAMS_FILE).read_text()))


def save_params(params: DenseParams, directory: Path) -> Path:
    path = directory / PARAMS_FILE
    path.write_text(json.dumps(asdict(params), indent=2))
    return path


class StoredNameVectors:
    """The vectors an index holds for its name strings, found by string: a query written exactly
    as a KB name (once normalised) takes the vector its name was encoded to at build instead of an
    encoder pass. Lexicon renderings and short clinical mentions are often KB names as written."""

    def __init__(self, names: NameTable, index: NameVectors):
        if not index.stores_vectors:
            raise BabelinkError(f"a {index.params.kind} index keeps lossy codes, not its names' vectors")
        self.names, self.index = names, index

    def find(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Positions in `texts` of the KB name strings among them, and their stored vectors."""
        rows = [self.names.lookup(text) for text in texts]
        found = np.array([position for position, row in enumerate(rows) if row is not None], dtype=np.int64)
        if not len(found):
            return found, np.zeros((0, self.index.dimension), dtype=np.float32)
        return found, self.index.vectors([rows[position] for position in found])


def embed_strings(
    encode: Callable[[Sequence[str]], np.ndarray],
    strings: Sequence[str],
    *,
    chunk: int = 4096,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Vectors of `strings`, encoded chunk by chunk; `progress(strings done)` follows a long build."""
    parts = []
    for start in range(0, len(strings), chunk):
        parts.append(encode(strings[start : start + chunk]))
        if progress:
            progress(min(start + chunk, len(strings)))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
