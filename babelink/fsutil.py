"""Atomic replacement of files and directories (bundles, training checkpoints, linked documents)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO


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
    retired = out.with_name(f".{out.name}.old-{os.getpid()}")
    out.rename(retired)
    staging.rename(out)
    shutil.rmtree(retired, ignore_errors=True)


def write_directory(target: Path, write: Callable[[Path], None]) -> None:
    """Have `write` fill a temporary sibling of `target`, then swap it in (`replace_directory`)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        write(staging)
        replace_directory(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary sibling of `path`, then rename it onto `path`: a reader, or a
    run resumed after a kill, sees the old file or the complete new one, never a truncated one."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_output(output: str) -> Iterator[TextIO]:
    """stdout for `-`; otherwise a temporary sibling file renamed onto `output` only when complete."""
    if output == "-":
        yield sys.stdout
        return
    target = Path(output)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            yield stream
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
