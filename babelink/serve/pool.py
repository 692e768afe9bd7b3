"""Bounded worker pool: model work runs off the event loop, and admission is capped so load
degrades into immediate 429s and 503s instead of a growing backlog."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from babelink.cancel import cancellable

T = TypeVar("T")


class Overloaded(Exception):
    """`capacity` requests are already admitted."""


class TimedOut(Exception):
    """The work did not finish within the timeout (queueing included)."""


#: Weight of the newest call in the running mean of call durations (`WorkerPool.retry_after`).
_DURATION_WEIGHT = 0.2


class WorkerPool:
    """Runs calls in `workers` threads, admitting at most `capacity` at once. A timed-out call is
    abandoned: one not started never starts, one running stops at its next cancellation check
    (`babelink.cancel`: between encoder batches and linker batches). It keeps its slot until its
    thread actually finishes, so abandoned work still counts against the cap."""

    def __init__(self, workers: int, capacity: int, timeout: float):
        if workers < 1 or capacity < 1 or timeout <= 0:
            raise ValueError("workers and capacity must be at least 1, timeout positive")
        self.capacity = capacity
        self.timeout = timeout
        self._workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="babelink-worker")
        self._lock = threading.Lock()
        self._admitted = 0
        self._mean_seconds = 0.0  # of the calls run so far, recent ones weighing most
        self._started: dict[int, float] = {}  # the running calls' start times, by thread

    def retry_after(self) -> int:
        """Whole seconds until the calls admitted now are likely done, what a client told 429 or
        503 should wait: each takes the recent mean call time, or as long as the longest running
        one has run already (abandoned work past its timeout); at least 1, at most the timeout."""
        with self._lock:
            now = time.monotonic()
            per_call = max([self._mean_seconds, *(now - started for started in self._started.values())])
            estimate = math.ceil(per_call * self._admitted / self._workers)
        return min(max(1, estimate), math.ceil(self.timeout))

    @property
    def admitted(self) -> int:
        return self._admitted

    async def run(self, function: Callable[..., T], *args) -> T:
        with self._lock:
            if self._admitted >= self.capacity:
                raise Overloaded(f"{self.capacity} requests already in progress")
            self._admitted += 1
        abandoned = threading.Event()
        future = self._executor.submit(self._timed, abandoned, function, *args)
        future.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        except TimeoutError:
            abandoned.set()
            future.cancel()
            raise TimedOut(f"no answer within {self.timeout:g} s") from None

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _timed(self, abandoned: threading.Event, function: Callable[..., T], *args) -> T:
        started = time.monotonic()
        with self._lock:
            self._started[threading.get_ident()] = started
        try:
            with cancellable(abandoned):
                return function(*args)
        finally:
            seconds = time.monotonic() - started
            with self._lock:
                del self._started[threading.get_ident()]
                weight = _DURATION_WEIGHT if self._mean_seconds else 1.0  # the first call is the mean
                self._mean_seconds += weight * (seconds - self._mean_seconds)

    def _release(self, _: Future) -> None:
        with self._lock:
            self._admitted -= 1
