"""The work queue's guarantees: one run at a time per key, reruns after changes, retries."""

from __future__ import annotations

import asyncio

from fleet.controller.workqueue import WorkQueue


async def _until(predicate, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0)


def test_work_queue_runs_a_key_once_at_a_time_and_reruns_it_if_it_changed_meanwhile():
    async def scenario() -> list[str]:
        seen: list[str] = []
        running = 0
        most = 0
        started = asyncio.Event()
        gate = asyncio.Event()

        async def process(key: str) -> None:
            nonlocal running, most
            running += 1
            most = max(most, running)
            seen.append(key)
            started.set()
            if len(seen) == 1:
                await gate.wait()
            running -= 1

        queue: WorkQueue[str] = WorkQueue(process, workers=3)
        queue.start()
        queue.add("a")
        await started.wait()
        queue.add("a")  # while "a" runs: must run again afterwards, not concurrently
        queue.add("a")  # coalesces with the previous add
        gate.set()
        await _until(lambda: len(seen) == 2 and len(queue) == 0)
        assert most == 1
        queue.add_after("b", 0.02)
        queue.add_after("b", 5)  # a later timer does not postpone an earlier one
        await _until(lambda: "b" in seen)
        await queue.stop()
        return seen

    assert asyncio.run(scenario()) == ["a", "a", "b"]


def test_work_queue_retries_failures_with_backoff():
    async def scenario() -> int:
        attempts = 0
        done = asyncio.Event()

        async def process(_key: str) -> None:
            nonlocal attempts
            attempts += 1
            if attempts < 3:
                raise RuntimeError("transient")
            done.set()

        queue: WorkQueue[str] = WorkQueue(process, workers=1)
        queue.start()
        queue.add("k")
        await asyncio.wait_for(done.wait(), timeout=10)
        await queue.stop()
        return attempts

    assert asyncio.run(scenario()) == 3


def test_a_standby_queue_keeps_keys_and_runs_them_once_it_leads():
    async def scenario() -> list[str]:
        seen: list[str] = []

        async def process(key: str) -> None:
            seen.append(key)

        queue: WorkQueue[str] = WorkQueue(process, workers=2)
        queue.running.clear()  # a standby replica
        queue.start()
        queue.add("a")
        queue.add("a")
        assert len(queue) == 1  # queued once, kept for later
        queue.running.set()  # it leads now
        await _until(lambda: queue.processed == 1)
        await queue.stop()
        return seen

    assert asyncio.run(scenario()) == ["a"]


def test_halt_cancels_the_runs_in_flight_and_runs_their_keys_again_once_resumed():
    async def scenario() -> tuple[list[str], list[str], int]:
        started: list[str] = []
        finished: list[str] = []
        first = asyncio.Event()

        async def process(key: str) -> None:
            started.append(key)
            if len(started) == 1:
                first.set()
                await asyncio.Event().wait()  # waits for an answer that never comes
            finished.append(key)

        queue: WorkQueue[str] = WorkQueue(process, workers=2)
        queue.start()
        queue.add("a")
        await first.wait()

        cancelled = queue.halt()  # the replica lost its lease

        await _until(lambda: queue.processed == 1)
        assert finished == [] and len(queue) == 1  # cancelled, and kept for later
        queue.running.set()  # it leads again
        await _until(lambda: finished == ["a"])
        await queue.stop()
        return started, finished, cancelled

    assert asyncio.run(scenario()) == (["a", "a"], ["a"], 1)
