"""Dense index kind `lazy`: name vectors encoded on first need, never all at build.

A FAISS index needs every name encoded before the first query: half an hour for the embedded
default's 248k names on a two-core AVX2 CPU, 2M names in hours. A lazy index encodes nothing at
build. The TF-IDF shortlist of each mention (000 §4.2) is its candidate set, with the names whose
approximate vectors (`index.approximate`, built from each token encoded once) lie nearest the
mention's vector: names sharing no character n-gram with it, which only a dense search finds. The
encoder ranks both by true cosine (`retrieve.HybridGenerator`): it runs on the mention and on the
candidate names not encoded before, whose vectors the `VectorStore` keeps for every later run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from babelink.encoders import Encoder
from babelink.encoders.vector_store import VectorStore, encode_through, store_directory, string_keys
from babelink.errors import BundleError
from babelink.index.approximate import ApproximateNames, supports_tokens
from babelink.index.dense import DenseParams, NameVectors, save_params

#: What must match between the encoder a bundle names and one that encodes its names into the store.
IDENTITY = ("fingerprint", "dimension", "pooling", "prefix", "max_length", "precision")


class LazyNameIndex(NameVectors):
    """Row `i` is the vector of `strings[i]`, taken from `store` or encoded by the bundle's encoder
    (`attach`ed by the bundle, else loaded by `load_encoder` on first need), the one its manifest
    `encoder_entry` describes. `approximate` (None: no search of its own) finds the rows `search` gives."""

    encodes_on_demand = True

    def __init__(self, params: DenseParams, strings: Sequence[str], encoder_entry: dict, store: VectorStore,
                 load_encoder: Callable[[], Encoder], approximate: ApproximateNames | None = None):
        if approximate is not None and len(approximate) != len(strings):
            raise BundleError(f"{len(approximate)} approximate name vectors for {len(strings)} name strings; "
                              "rebuild the bundle")
        self.params, self.strings, self.store, self.approximate = params, strings, store, approximate
        self.encoder_entry, self.dimension = encoder_entry, int(encoder_entry["dimension"])
        self._load_encoder = load_encoder
        self._encoder: Encoder | None = None
        self._searchable: dict[str, NameVectors] = {}

    def __len__(self) -> int:
        return len(self.strings)

    def attach(self, encoder: Encoder) -> None:
        """Encode names with `encoder` (the one queries use: one vector space, one model in memory)."""
        if encoder.dimension != self.dimension:
            raise BundleError(f"the encoder gives {encoder.dimension}-d vectors, the bundle's names are "
                              f"{self.dimension}-d")
        found = encoder.describe()
        if differs := [key for key in IDENTITY if found.get(key) != self.encoder_entry.get(key)]:
            raise BundleError(f"the bundle's names are encoded by {self.encoder_entry.get('name')!r}; the encoder "
                              f"given differs in {', '.join(differs)}, and its vectors would be kept as that one's")
        self._encoder = encoder

    def search(self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The rows whose approximate vectors lie nearest, with approximate cosines (the generator
        scores them again, truly: `score_pairs`); no hits without approximate vectors."""
        self._check_dimension(queries)
        if self.approximate is not None:
            return self.approximate.search(queries, k, allowed)
        return np.full((len(queries), k), -1, dtype=np.int64), np.zeros((len(queries), k), dtype=np.float32)

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        if self._encoder is None:
            self.attach(self._load_encoder())
        return encode_through(self.store, self._encoder.encode, [self.strings[int(row)] for row in rows])

    def searchable(self, device: str | None = None) -> NameVectors:
        """Every name encoded (those the store lacks, once) and searched exactly (`index.exact`);
        built once per device, however many linkers ask."""
        from babelink.index.exact import ExactNameIndex

        device = device or "cpu"
        if device not in self._searchable:
            missing = len(self) - self.encoded()
            if missing:
                print(f"encoding the {missing:,} of {len(self):,} names the vector store lacks, for a search of "
                      "them all", file=sys.stderr, flush=True)
            self._searchable[device] = ExactNameIndex(self.vectors(np.arange(len(self))), device)
        return self._searchable[device]

    @property
    def stores_vectors(self) -> bool:
        return True

    def encoded(self) -> int:
        """How many of the names are in the store already (`babelink info`)."""
        return int(self.store.lookup(string_keys(self.strings))[0].sum()) if len(self.strings) else 0


def write_lazy_index(params: DenseParams, encoder: Encoder, strings: Sequence[str], directory: Path,
                     progress: Callable[[str, int, int], None] | None = None) -> list[Path]:
    """Write a lazy index of `strings` in `directory`: its parameters, and approximate vectors where
    `params` asks for them and `encoder` can encode tokens alone (the ONNX runtime of an int8
    encoder cannot: TF-IDF alone then)."""
    files = [save_params(params, directory)]
    if params.approximate and supports_tokens(encoder):
        store = VectorStore(store_directory(encoder.describe()), encoder.dimension)
        approximate = ApproximateNames.build(encoder, strings, progress,
                                             lambda names: encode_through(store, encoder.encode, names))
        store.save()
        files += approximate.save(directory)
    return files
