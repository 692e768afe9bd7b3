import asyncio
import threading
import time

from babelink.serve.pool import WorkerPool


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
