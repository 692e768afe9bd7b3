"""Atomic replacement of directories (bundles, training checkpoints)."""

from __future__ import annotations

import os
import shutil
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
