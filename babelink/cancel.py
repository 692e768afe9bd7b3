"""Cooperative cancellation: work its caller has abandoned (a REST request past its timeout)
stops at its next check instead of running to the end and holding a worker meanwhile.

A thread runs work `cancellable(event)`; the long loops (an encoder's batches, a linker's batches
of mentions or documents) call `check()`, which raises `Cancelled` once the event is set. Outside
`cancellable`, `check()` costs one attribute read and never raises.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from babelink.errors import BabelinkError


class Cancelled(BabelinkError):
    """The work was abandoned by its caller."""


_local = threading.local()


@contextlib.contextmanager
def cancellable(event: threading.Event) -> Iterator[None]:
    """Within the block, this thread's `check()` raises `Cancelled` once `event` is set."""
    outer = getattr(_local, "event", None)
    _local.event = event
    try:
        yield
    finally:
        _local.event = outer


def check() -> None:
    """Raise `Cancelled` if this thread's work has been abandoned."""
    event = getattr(_local, "event", None)
    if event is not None and event.is_set():
        raise Cancelled("the work was abandoned by its caller")
