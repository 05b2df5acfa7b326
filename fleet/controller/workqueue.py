"""A keyed work queue: each key is processed by one worker at a time, duplicates coalesce.

A key added while it is being processed runs once more afterwards (its state may have changed
mid-run); `add_after` schedules a key for later (a failover deadline, a retry with backoff).
`halt` stops the work at once, the runs in flight cancelled (the replica lost its lease).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        process: Callable[[K], Awaitable[None]],
        *,
        workers: int = 4,
        max_backoff: float = 60.0,
        expected: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._process = process
        #: Failures worth a line in the log, not a traceback (an unreachable member).
        self._expected = expected
        self._workers = workers
        self._max_backoff = max_backoff
        self._ready: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._failures: dict[K, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        #: The run in flight of each active key (`halt` cancels them).
        self._runs: dict[K, asyncio.Future[None]] = {}
        self.processed = 0
        #: Workers take keys only while this is set (the replica leads); keys still queue up.
        self.running = asyncio.Event()
        self.running.set()

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"reconcile-{i}") for i in range(self._workers)
        ]

    async def stop(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def halt(self) -> int:
        """Stop taking keys and cancel every run in flight, so nothing they have not sent yet
        is ever sent (this replica stopped leading). Their keys stay queued: they run again,
        from the start, once `running` is set. How many runs were cancelled."""
        self.running.clear()
        for run in self._runs.values():
            run.cancel()
        return len(self._runs)

    def __len__(self) -> int:
        return len(self._queued) + len(self._active)

    def forget(self, key: K) -> None:
        """Drop a key's pending timer and failure count (its object is gone)."""
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()
        self._failures.pop(key, None)

    def add(self, key: K) -> None:
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` in `delay` seconds (an earlier pending timer for the key wins)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        due = loop.time() + delay
        if existing is not None and existing.when() <= due:
            return
        if existing is not None:
            existing.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def _worker(self) -> None:
        while True:
            key = await self._ready.get()
            await self.running.wait()
            self._queued.discard(key)
            self._active.add(key)
            run = asyncio.ensure_future(self._process(key))
            self._runs[key] = run
            try:
                await run
                self._failures.pop(key, None)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # this worker is stopping (its run is cancelled with it)
                # `halt`: the run is cancelled, the worker is not; the key runs again later.
                self._dirty.add(key)
            except Exception as e:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                delay = min(0.5 * 2 ** (failures - 1), self._max_backoff)
                if isinstance(e, self._expected):
                    log.warning("reconciling %s: %s; retry in %.1fs", key, e, delay)
                else:
                    log.exception(
                        "reconciling %s failed (attempt %d); retry in %.1fs", key, failures, delay
                    )
                self.add_after(key, delay)
            finally:
                self._runs.pop(key, None)
                self.processed += 1
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self.add(key)
