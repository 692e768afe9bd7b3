"""An encoder's vectors of strings, kept on disk across runs and processes.

A bundle built with `--index lazy` encodes no name at build: the names its TF-IDF shortlists are
encoded on first need (`index.lazy`), and their vectors kept here so that no name is encoded twice
by any process using the same encoder. One store per encoder identity (checkpoint fingerprint and
settings) under `$BABELINK_HOME/name-vectors/`, shared by every bundle built with that encoder:
a rebuilt or updated bundle finds the vectors of its unchanged names.

File layout (`vectors.bin`): a 24-byte header (magic, count, dimension as little-endian uint64),
`count` sorted uint64 keys (the first 8 bytes of each string's BLAKE2b digest), then `count` rows
of `dimension` float32. The file is memory-mapped, replaced whole (merged with what another
process saved since) under an advisory lock, so readers see the old file or the new one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from babelink.fsutil import atomic_binary

FILE = "vectors.bin"
_MAGIC = b"BLVEC001"
_HEADER = 24
#: Unsaved vectors that trigger a save (the rest are saved when the process exits).
SAVE_EVERY = 8192


def store_directory(encoder_entry: dict) -> Path:
    """The store of the encoder a bundle manifest's `encoder_entry` identifies: its fingerprint and
    settings, not its path (the same checkpoint moved is the same encoder)."""
    from babelink.home import babelink_home

    identity = {key: value for key, value in encoder_entry.items() if key not in ("name", "path")}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return babelink_home() / "name-vectors" / digest


def string_keys(texts: Sequence[str]) -> np.ndarray:
    return np.array([int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                    "little") for text in texts], dtype=np.uint64)


class VectorStore:
    """Vectors by string for one encoder: `lookup` finds saved and pending ones, `add` keeps new
    ones, `save` writes them (also at exit: nothing encoded is lost to a normal end)."""

    def __init__(self, directory: Path, dimension: int):
        self.directory, self.dimension = Path(directory), dimension
        self._lock = threading.Lock()
        self._pending: dict[int, np.ndarray] = {}
        self._saved = _read(self.directory / FILE, dimension)  # (keys, vectors): swapped whole by `save`
        self._finalizer = weakref.finalize(self, _save, self.directory, dimension, self._pending, self._lock)

    def __len__(self) -> int:
        return len(self._saved[0]) + len(self._pending)

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which of `keys` are stored (a mask), and their vectors (zeros where not)."""
        found = np.zeros(len(keys), dtype=bool)
        vectors = np.zeros((len(keys), self.dimension), dtype=np.float32)
        saved_keys, saved_vectors = self._saved
        if len(saved_keys):
            at = np.minimum(np.searchsorted(saved_keys, keys), len(saved_keys) - 1)
            found = saved_keys[at] == keys
            vectors[found] = saved_vectors[at[found]]
        with self._lock:
            for position in np.flatnonzero(~found) if self._pending else ():
                vector = self._pending.get(int(keys[position]))
                if vector is not None:
                    vectors[position], found[position] = vector, True
        return found, vectors

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        with self._lock:
            self._pending.update(zip(keys.tolist(), np.asarray(vectors, dtype=np.float32)))
            due = len(self._pending) >= SAVE_EVERY
        if due:
            self.save()

    def save(self) -> None:
        """Merge the pending vectors into the file (with any another process saved since)."""
        if _save(self.directory, self.dimension, self._pending, self._lock):
            self._saved = _read(self.directory / FILE, self.dimension)


def encode_through(store: VectorStore, encode: Callable[[Sequence[str]], np.ndarray],
                   texts: Sequence[str]) -> np.ndarray:
    """Vectors of `texts`: stored ones as stored, the others encoded (once each) and stored."""
    keys = string_keys(texts)
    found, vectors = store.lookup(keys)
    if not found.all():
        missing = np.flatnonzero(~found)
        unique, first, inverse = np.unique(keys[missing], return_index=True, return_inverse=True)
        fresh = encode([texts[position] for position in missing[first]])
        vectors[missing] = fresh[inverse]
        store.add(unique, fresh)
    return vectors


def _read(path: Path, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """The saved keys and vectors, memory-mapped; none where the file is absent or unusable
    (another encoder's dimension, truncated: it is a cache, rewritten whole at the next save)."""
    empty = np.zeros(0, dtype=np.uint64), np.zeros((0, dimension), dtype=np.float32)
    try:
        with open(path, "rb") as stream:
            header = stream.read(_HEADER)
        size = path.stat().st_size
    except OSError:
        return empty
    if len(header) < _HEADER or header[:8] != _MAGIC:
        print(f"babelink: ignoring {path}: not a vector store", file=sys.stderr)
        return empty
    count, found_dimension = np.frombuffer(header[8:], dtype="<u8").tolist()
    if found_dimension != dimension or size != _HEADER + count * (8 + 4 * dimension):
        print(f"babelink: ignoring {path}: {count} vectors of {found_dimension} dimensions do not fill "
              f"its {size} bytes or are not {dimension}-d", file=sys.stderr)
        return empty
    if not count:
        return empty
    keys = np.memmap(path, dtype="<u8", mode="r", offset=_HEADER, shape=(count,))
    if not np.all(keys[1:] > keys[:-1]):  # searched by bisection: unsorted keys would find wrong vectors
        print(f"babelink: ignoring {path}: its keys are not sorted", file=sys.stderr)
        return empty
    vectors = np.memmap(path, dtype="<f4", mode="r", offset=_HEADER + 8 * count, shape=(count, dimension))
    return keys, vectors


def _save(directory: Path, dimension: int, pending: dict[int, np.ndarray], lock: threading.Lock) -> bool:
    """Write `pending` merged into the saved file; True when anything was written."""
    with lock:
        if not pending:
            return False
        added = dict(pending)
        pending.clear()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _file_lock(directory):
            keys, vectors = _read(directory / FILE, dimension)
            new_keys = np.fromiter(added, dtype=np.uint64, count=len(added))
            merged_keys = np.concatenate([keys, new_keys])
            merged_keys, first = np.unique(merged_keys, return_index=True)  # a saved vector wins
            merged = np.concatenate([vectors, np.stack(list(added.values()))])[first]
            with atomic_binary(directory / FILE) as stream:
                stream.write(_MAGIC + np.array([len(merged_keys), dimension], dtype="<u8").tobytes())
                stream.write(merged_keys.astype("<u8").tobytes())
                stream.write(np.ascontiguousarray(merged, dtype="<f4").tobytes())
    except OSError as error:  # a cache that cannot be written costs time, not answers
        print(f"babelink: cannot save encoded names to {directory}: {error.strerror}", file=sys.stderr)
    return True


@contextlib.contextmanager
def _file_lock(directory: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # no advisory locks (Windows): a concurrent save may drop the other's vectors
        yield
        return
    with open(directory / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
