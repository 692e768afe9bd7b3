"""Files: atomic replacement of files and directories (bundles, training checkpoints, linked
documents), and reading the Parquet tables a bundle holds."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

import numpy as np

from babelink.errors import BabelinkError, InvalidInputError

if TYPE_CHECKING:
    import pyarrow as pa


#: The staging and retired directories this process made: a leftover that carries this process's
#: id but is not among them was left by an earlier process of the same id (containers reuse ids).
_OWN_DIRECTORIES: set[Path] = set()
#: Makes creating and remembering a directory one step for threads that sweep leftovers meanwhile.
_OWN_LOCK = threading.Lock()


def staging_directory(target: Path) -> Path:
    """A new empty sibling of `target` to build it in (`.NAME.PID.random`), after removing the
    staging and retired directories that builds of `target` left when they were killed (their
    process is gone), which can hold a whole bundle each."""
    _remove_leftovers(target)
    return _own_sibling(target, "")


def _remove_leftovers(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{target.name}."
    with _OWN_LOCK:
        for leftover in target.parent.glob(f"{glob.escape(prefix)}*"):
            pid = leftover.name[len(prefix) :].removeprefix("old-").removeprefix("init-").split(".")[0]
            if pid.isdigit() and leftover.is_dir() and leftover not in _OWN_DIRECTORIES and (
                int(pid) == os.getpid() or not _running(int(pid))
            ):
                shutil.rmtree(leftover, ignore_errors=True)


def _own_sibling(target: Path, kind: str) -> Path:
    """A new empty directory `.NAME.KINDPID.random` beside `target`, remembered as this process's."""
    with _OWN_LOCK:
        made = Path(tempfile.mkdtemp(prefix=f".{target.name}.{kind}{os.getpid()}.", dir=target.parent))
        _OWN_DIRECTORIES.add(made)
    return made


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def replace_directory(staging: Path, out: Path) -> None:
    """Rename `staging` to `out`; an existing `out` is moved aside first and removed after, so
    readers see the old directory or the new one, never a mix."""
    os.chmod(staging, 0o755)
    if not out.exists():
        try:
            staging.rename(out)
            return
        except OSError:
            if not out.exists():
                raise
    retired = _own_sibling(out, "old-")
    with _signals_held():  # stopped between the two renames, `out` would be gone; after them, the old one left
        out.rename(retired)  # onto the empty directory just made: a name no other build holds
        staging.rename(out)
        shutil.rmtree(retired, ignore_errors=True)


class _Swap:
    """Whether a directory swap is under way, and a stop signal that came meanwhile."""

    depth = 0
    pending: int | None = None


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """A stop signal (`exit_on_signals`) that comes during the block takes effect when it ends."""
    _Swap.depth += 1
    try:
        yield
    finally:
        _Swap.depth -= 1
        if _Swap.depth == 0 and _Swap.pending is not None:
            signum, _Swap.pending = _Swap.pending, None
            _stop(signum)


def _stop(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def exit_on_signals() -> None:
    """Make SIGTERM (`kill`, a container stop) raise SystemExit as SIGINT raises KeyboardInterrupt,
    so that a command stopped either way removes its staging directory instead of leaving it until
    the next run; either one waits while a directory is being swapped in."""
    def stop(signum, frame):
        if _Swap.depth:
            _Swap.pending = signum
        else:
            _stop(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def write_directory(target: Path, write: Callable[[Path], None]) -> None:
    """Have `write` fill a temporary sibling of `target`, then swap it in (`replace_directory`)."""
    staging = staging_directory(target)
    try:
        write(staging)
        replace_directory(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@contextlib.contextmanager
def initial_directory(target: Path) -> Iterator[Path]:
    """A temporary sibling of `target` for the untrained model a training run starts from, removed
    after: `target` itself is replaced only by the trained model, so a run that fails or is killed
    leaves the model that was there before."""
    _remove_leftovers(target)
    start = _own_sibling(target, "init-")
    try:
        yield start
    finally:
        shutil.rmtree(start, ignore_errors=True)


def write_text_atomic(path: Path, text: str) -> None:
    """`write_bytes_atomic` of the UTF-8 text, newlines as given."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to a temporary sibling of `path`, then rename it onto `path`: a reader, or a
    run resumed after a kill, sees the old file or the complete new one, never a truncated one."""
    with atomic_binary(path) as stream:
        stream.write(data)


@contextlib.contextmanager
def atomic_binary(path: Path) -> Iterator[BinaryIO]:
    """A binary stream onto a temporary sibling of `path`, renamed onto it once the block completes."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def is_stream(path: str | Path) -> bool:
    """Whether `path` names something that exists and is neither a regular file nor a directory (a
    terminal, a pipe, `/dev/stdout`, a process substitution): written in place, it cannot be replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def refuse_same_file(output: str | Path, inputs: Iterable[str | Path | None], option: str = "--output") -> None:
    """Refuse an output that is one of the inputs, also through symlinks and hard links: replacing
    it would destroy the data being read."""
    for source in inputs:
        if source in (None, "-") or output == "-":
            continue
        try:
            same = os.path.samefile(source, output)
        except OSError:  # either side does not exist (yet)
            same = False
        if same:
            raise InvalidInputError(f"{option} {output} is the input {source}: write the results elsewhere")


@contextlib.contextmanager
def atomic_output(output: str) -> Iterator[TextIO]:
    """Where a command's text output goes: stdout for `-`; a pipe, device or other non-regular file
    written in place; otherwise a temporary sibling of the file (of a symlink's target) renamed onto
    it only when complete. Errors name `output` as the user gave it."""
    if output == "-":
        yield sys.stdout
        return
    if is_stream(output):
        try:
            stream = open(output, "w", encoding="utf-8")  # noqa: SIM115 (closed by the `with` below)
        except OSError as error:
            raise BabelinkError(f"{output}: cannot write: {error.strerror}") from None
        with stream:
            yield stream
        return
    target = Path(os.path.realpath(output))
    if target.is_dir():
        raise BabelinkError(f"{output}: is a directory; name a file to write")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as error:
        raise BabelinkError(f"{output}: cannot write: {error.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            yield stream
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_parquet(path: Path) -> pa.Table:
    """The table of one Parquet file, memory-mapped. `pyarrow.parquet.read_table` would import
    `pyarrow.dataset` and pandas: 0.2 s of every CLI call's start-up."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path, memory_map=True) as parquet:
        return parquet.read()


#: Arrow type names of the numeric columns bundles store, and their NumPy types.
_NUMPY_TYPES = {"uint8": "u1", "int32": "i4", "int64": "i8", "float": "f4", "double": "f8"}


def column_array(table: pa.Table, name: str) -> np.ndarray:
    """A numeric or boolean column without nulls as a NumPy array (`array_values`)."""
    try:
        return array_values(table.column(name).combine_chunks())
    except ValueError:
        raise ValueError(f"column {name!r} is not numeric without missing values") from None


def array_values(array: pa.Array) -> np.ndarray:
    """A numeric or boolean Arrow array without nulls as a NumPy array, read from its buffer:
    pyarrow's `to_numpy` imports pandas (0.15 s of start-up) to do the same."""
    import pyarrow as pa

    if array.null_count or str(array.type) not in (*_NUMPY_TYPES, "bool"):
        raise ValueError(f"a {array.type} array with {array.null_count} nulls is not numeric without missing values")
    boolean = pa.types.is_boolean(array.type)
    if boolean:
        array = array.cast(pa.uint8())
    if not len(array):
        return np.zeros(0, dtype=bool if boolean else _NUMPY_TYPES[str(array.type)])
    values = np.frombuffer(array.buffers()[1], dtype=_NUMPY_TYPES[str(array.type)])
    values = values[array.offset : array.offset + len(array)]
    return values.astype(bool) if boolean else values
