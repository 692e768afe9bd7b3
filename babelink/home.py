"""Where babelink keeps what it builds once and reuses: the converted encoder, the default bundle, fetched wheels."""

from __future__ import annotations

import os
from pathlib import Path


def babelink_home() -> Path:
    """`$BABELINK_HOME`, else `~/.cache/babelink`."""
    home = os.environ.get("BABELINK_HOME")
    return Path(home).expanduser() if home else Path.home() / ".cache" / "babelink"
