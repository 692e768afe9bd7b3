import asyncio
import threading
import time

import pytest

from babelink.cancel import Cancelled, cancellable, check
from babelink.serve.pool import TimedOut, WorkerPool


def test_retry_after_is_the_work_in_progress_at_the_recent_call_duration():
    pool = WorkerPool(workers=1, capacity=3, timeout=10)
    release = threading.Event()

    async def scenario() -> tuple[int, int]:
        idle = pool.retry_after()
        await pool.run(time.sleep, 0.6)
        await pool.run(time.sleep, 0.6)
        held = [asyncio.ensure_future(pool.run(release.wait, 10)) for _ in range(2)]
        while pool.admitted < 2:
            await asyncio.sleep(0.01)
        busy = pool.retry_after()
        release.set()
        await asyncio.gather(*held)
        return idle, busy

    idle, busy = asyncio.run(scenario())
    pool.shutdown()
    assert idle == 1 and busy == 2  # two calls in flight at ~0.6 s each, on one worker


def test_retry_after_counts_a_long_running_call_and_stops_at_the_timeout():
    pool = WorkerPool(workers=1, capacity=2, timeout=5)
    release = threading.Event()

    async def scenario() -> tuple[int, int]:
        held = asyncio.ensure_future(pool.run(release.wait, 10))
        await asyncio.sleep(1.2)  # no call has finished: only the running one says how long calls take
        early = pool.retry_after()
        pool.timeout = 1
        capped = pool.retry_after()
        release.set()
        await held
        return early, capped

    early, capped = asyncio.run(scenario())
    pool.shutdown()
    assert early == 2 and capped == 1


def test_a_timed_out_call_stops_at_its_next_cancellation_check():
    pool = WorkerPool(workers=1, capacity=1, timeout=0.2)
    checks: list[float] = []

    def work():
        while True:
            checks.append(time.monotonic())
            check()
            time.sleep(0.01)

    async def scenario() -> None:
        with pytest.raises(TimedOut):
            await pool.run(work)
        deadline = time.monotonic() + 5
        while pool.admitted and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    pool.shutdown()
    assert pool.admitted == 0  # the slot is free: the loop raised at its first check after the timeout
    count = len(checks)
    time.sleep(0.1)
    assert len(checks) == count


def test_check_outside_cancellable_work_never_raises_and_inside_raises_once_abandoned():
    check()
    abandoned = threading.Event()
    with cancellable(abandoned):
        check()
        abandoned.set()
        with pytest.raises(Cancelled):
            check()
    check()
