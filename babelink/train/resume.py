"""What resumable trainers share: every RNG's state, and writing a checkpoint's files beside a
`resume/` directory without disturbing it (SAP, the dual encoder)."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from babelink.fsutil import staging_directory


def rng_states() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_states(states: dict) -> None:
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if states["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def copy_files(source: Path, target: Path) -> None:
    for entry in source.iterdir():
        shutil.copy2(entry, target / entry.name)


def write_files(target: Path, write: Callable[[Path], None]) -> None:
    """Write into a temporary sibling, then move each file into `target` (each rename atomic;
    the `resume/` directory beside them is left alone)."""
    staging = staging_directory(target)
    try:
        write(staging)
        for entry in staging.iterdir():
            os.replace(entry, target / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
