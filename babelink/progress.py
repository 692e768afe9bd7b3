"""One progress display for long steps (encoding a KB's names), shown only on a terminal."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def progress_bar(first_stage: str) -> Iterator[Callable[[str, int, int], None]]:
    """Yields a `progress(stage, done, total)` callback that drives a transient rich bar on stderr."""
    from rich.progress import Progress

    with Progress(transient=True, disable=not sys.stderr.isatty()) as progress:
        task = progress.add_task(first_stage, total=None)
        yield lambda stage, done, total: progress.update(task, description=stage, completed=done, total=total)
