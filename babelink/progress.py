"""One progress display for long steps (encoding a KB's names, linking a corpus).

On a terminal: a transient rich bar. Elsewhere (a CI log, a notebook, `nohup`): a plain line on
stderr at most every `LINE_SECONDS`, with the rate and, when the total is known, the time left,
so that a five-minute first build never looks hung.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

#: Seconds between two progress lines when stderr is not a terminal.
LINE_SECONDS = 10.0


@contextlib.contextmanager
def progress_bar(first_stage: str) -> Iterator[Callable[[str, int, int | None], None]]:
    """Yields a `progress(stage, done, total)` callback (total None: unknown)."""
    if sys.stderr.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, transient=True) as progress:
            task = progress.add_task(first_stage, total=None)
            yield lambda stage, done, total: progress.update(task, description=stage, completed=done, total=total)
    else:
        yield ProgressLines()


class ProgressLines:
    """`progress(stage, done, total)` writing `stage: done/total (rate/s, about N s left)` lines."""

    def __init__(self, every: float = LINE_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.every, self.clock = every, clock
        self.done = 0
        self.origin: tuple[float, int] | None = None  # (time, count) the rate is measured from
        self.last = clock()

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        """`stage` may change at every call (a training step's loss). The rate is measured from
        the first call (what came before it, reading files, is not this work) and starts over
        when the count goes back (a new stage)."""
        now = self.clock()
        finished = total is not None and done >= total
        if self.origin is None or done < self.done:
            self.origin, self.last, self.done = (now, done), now, done
            if not finished:
                return
        self.done = done
        if now - self.last < self.every and not finished:
            return
        self.last = now
        started, first = self.origin
        line = f"babelink: {stage}: {done:,}" + (f"/{total:,}" if total else "")
        if done > first and now > started:  # a rate only where something was measured (not "0/s")
            rate = (done - first) / (now - started)
            left = f", about {(total - done) / rate:,.0f} s left" if total and not finished else ""
            line += f" ({_rate(rate)}/s{left})"
        print(line, file=sys.stderr, flush=True)


def _rate(per_second: float) -> str:
    """Three significant figures at most, so a slow step (a training step every 5 s) is not "0/s"."""
    return f"{per_second:,.0f}" if per_second >= 100 else f"{per_second:.3g}"
