"""Atomic replacement of directories (bundles, training checkpoints)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


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
