"""Waiting lines: jobs pending on the fleet, and gangs waiting in a member.

Both are FIFO by arrival. `ShapeFifo` keeps one line per *shape key* (jobs that are
interchangeable for placement) so a retry after capacity frees costs one attempt per shape, not
one per job: if the oldest job of a shape cannot go, none of that shape can until capacity frees
again (capacity only shrinks between frees, and the engine's answer depends only on the gang and
the snapshots). That makes retries event driven and cheap without changing any outcome.

`FleetQueue` is the plug point for queue decisions (ACK's Kube Queue: quota trees, priorities,
`max-jobs`): the simulation only pushes jobs, tells the queue when capacity frees or a job ends,
and lets it drive the order of placement attempts.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from fleet.simulate.jobs import SimJob

T = TypeVar("T")


class ShapeFifo(Generic[T]):
    """FIFO by `seq` over lines of equal shape keys.

    `strict=False` (backfill): a job that cannot go does not hold back younger jobs of other
    shapes (as kube-scheduler with the coscheduling plugin: gangs are tried in creation order and
    an unschedulable one is set aside). `strict=True`: nothing passes the oldest job.
    """

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict
        self._lines: dict[Hashable, deque[tuple[int, T]]] = {}
        #: Keys whose oldest job failed since capacity last freed.
        self._blocked: set[Hashable] = set()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def items(self) -> list[T]:
        """Every waiting item, oldest first."""
        return [
            item
            for _, item in sorted(
                (entry for line in self._lines.values() for entry in line), key=lambda e: e[0]
            )
        ]

    def push(self, item: T, key: Hashable, seq: int) -> None:
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = deque()
        if not line or line[-1][0] < seq:
            line.append((seq, item))
        else:  # a job coming back (failover) keeps its place by arrival
            index = next(i for i, (s, _) in enumerate(line) if s > seq)
            line.insert(index, (seq, item))
        self._size += 1

    def remove(self, item: T, key: Hashable) -> None:
        line = self._lines[key]
        for index, (_, queued) in enumerate(line):
            if queued is item:
                del line[index]
                break
        else:
            raise KeyError(item)
        self._size -= 1
        if not line:
            del self._lines[key]
            self._blocked.discard(key)

    def reopen(self) -> None:
        """Capacity freed: every line may try again."""
        self._blocked.clear()

    def drain(self, attempt: Callable[[T], bool]) -> None:
        """Offer waiting items, oldest first, to `attempt` (True = taken: it leaves the line)."""
        if self.strict:
            self._drain_strict(attempt)
            return
        heap = [
            (line[0][0], i, key)
            for i, (key, line) in enumerate(self._lines.items())
            if key not in self._blocked
        ]
        if not heap:
            return
        heapq.heapify(heap)
        tie = len(heap)
        while heap:
            _, _, key = heapq.heappop(heap)
            line = self._lines[key]
            _, item = line[0]
            if not attempt(item):
                self._blocked.add(key)
                continue
            line.popleft()
            self._size -= 1
            if line:
                tie += 1
                heapq.heappush(heap, (line[0][0], tie, key))
            else:
                del self._lines[key]

    def _drain_strict(self, attempt: Callable[[T], bool]) -> None:
        while self._lines:
            key, line = min(self._lines.items(), key=lambda kv: kv[1][0][0])
            if key in self._blocked:
                return
            if not attempt(line[0][1]):
                self._blocked.add(key)
                return
            line.popleft()
            self._size -= 1
            if not line:
                del self._lines[key]


class FleetQueue(Protocol):
    """Which pending jobs the fleet tries to place, and in what order."""

    def __len__(self) -> int: ...

    def push(self, job: SimJob, now: float) -> None:
        """`job` waits on the fleet (new, or back after a failover)."""

    def remove(self, job: SimJob) -> None:
        """`job` leaves without being placed (gave up)."""

    def capacity_freed(self) -> None:
        """Something finished or came back: jobs that could not go may go now."""

    def drain(self, attempt: Callable[[SimJob], bool], now: float) -> None:
        """Offer jobs to `attempt` (True = placed) in the queue's order."""

    def finished(self, job: SimJob, now: float) -> None:
        """`job` completed (a quota-based queue returns its share here)."""


class FifoQueue:
    """The default fleet queue: FIFO with backfill by shape, as Karmada's scheduler retries
    every unschedulable binding when the cluster set changes (no quotas, no priorities)."""

    def __init__(self, *, strict: bool = False) -> None:
        self._fifo: ShapeFifo[SimJob] = ShapeFifo(strict=strict)

    def __len__(self) -> int:
        return len(self._fifo)

    def push(self, job: SimJob, now: float) -> None:
        self._fifo.push(job, job.queue_key, job.seq)

    def remove(self, job: SimJob) -> None:
        self._fifo.remove(job, job.queue_key)

    def capacity_freed(self) -> None:
        self._fifo.reopen()

    def drain(self, attempt: Callable[[SimJob], bool], now: float) -> None:
        self._fifo.drain(attempt)

    def finished(self, job: SimJob, now: float) -> None:
        pass

    def jobs(self) -> list[SimJob]:
        return self._fifo.items()
