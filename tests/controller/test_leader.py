"""Leader election on a Lease, against an in-memory API server, one round at a time.

Each elector runs its real loop; its injected sleep ends a round and waits for the test to allow
the next one, and its clock is a FakeClock the test moves. So "a lease duration passed" is a
clock step, not a wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from fleet.controller.leader import LEASE, LeaderElector
from tests.controller.apiserver import MemoryApi, status
from tests.controller.harness import FakeClock

NAMESPACE, NAME = "kube-system", "fleet-controller"
LEASE_SECONDS = 15.0


class Rounds:
    """The elector's sleep: each call ends one round and waits for `next()`."""

    def __init__(self) -> None:
        self.done = 0
        self._ended = asyncio.Condition()
        self._go = asyncio.Semaphore(0)

    async def __call__(self, _seconds: float) -> None:
        async with self._ended:
            self.done += 1
            self._ended.notify_all()
        await self._go.acquire()

    async def until(self, count: int) -> None:
        async with asyncio.timeout(5), self._ended:
            await self._ended.wait_for(lambda: self.done >= count)

    async def next(self) -> None:
        """Let one more round run, and wait until it has ended."""
        target = self.done + 1
        self._go.release()
        await self.until(target)


class Replica:
    """One controller replica's elector and what it was told."""

    def __init__(self, api: MemoryApi, identity: str, clock: FakeClock) -> None:
        self.rounds = Rounds()
        self.started = 0
        self.stopped = 0
        self.elector = LeaderElector(
            api.client(identity, retries=1),
            namespace=NAMESPACE,
            name=NAME,
            identity=identity,
            lease_seconds=LEASE_SECONDS,
            on_started=self._started,
            on_stopped=self._stopped,
            clock=clock,
            sleep=self.rounds,
        )

    def _started(self) -> None:
        self.started += 1

    def _stopped(self) -> None:
        self.stopped += 1

    @property
    def leading(self) -> bool:
        return self.elector.leading


@contextlib.asynccontextmanager
async def running(replica: Replica) -> AsyncIterator[Replica]:
    """Run the elector until its first round has ended; stop it (cleanly) afterwards."""
    task = asyncio.create_task(replica.elector.run())
    try:
        await replica.rounds.until(1)
        yield replica
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def lease(api: MemoryApi) -> dict[str, Any]:
    found = api.get(*LEASE, NAME, NAMESPACE)
    assert found is not None
    spec: dict[str, Any] = found["spec"]
    return spec


def held_by(api: MemoryApi, holder: str, renew_time: str = "2000-01-01T00:00:00.000000Z") -> None:
    """A lease another replica holds (its renewTime is another clock's, and is not trusted)."""
    api.put(
        {
            "apiVersion": LEASE[0],
            "kind": LEASE[1],
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": int(LEASE_SECONDS),
                "renewTime": renew_time,
                "acquireTime": renew_time,
                "leaseTransitions": 3,
            },
        }
    )


async def test_a_replica_acquires_a_missing_lease_and_renews_it():
    api, clock = MemoryApi(), FakeClock()
    async with running(Replica(api, "a", clock)) as a:
        assert a.leading and a.started == 1
        first = lease(api)
        assert first["holderIdentity"] == "a" and first["leaseTransitions"] == 0
        assert first["leaseDurationSeconds"] == int(LEASE_SECONDS)

        clock.advance(3)
        await a.rounds.next()

        renewed = lease(api)
        assert renewed["renewTime"] > first["renewTime"]
        assert renewed["acquireTime"] == first["acquireTime"]
        assert renewed["leaseTransitions"] == 0
        assert a.leading and a.started == 1 and a.stopped == 0


async def test_a_standby_does_not_take_a_lease_whose_holder_renews():
    api, clock = MemoryApi(), FakeClock()
    async with running(Replica(api, "a", clock)) as a, running(Replica(api, "b", clock)) as b:
        for _ in range(5):  # two lease durations, the holder renewing all along
            clock.advance(LEASE_SECONDS / 2.5)
            await a.rounds.next()
            await b.rounds.next()
            assert lease(api)["holderIdentity"] == "a"
        assert a.leading and not b.leading and b.started == 0


async def test_a_standby_takes_over_once_the_record_is_unchanged_for_a_lease_duration():
    api, clock = MemoryApi(), FakeClock()
    # The holder died without releasing. Its renewTime is from a clock far behind ours: an
    # elector comparing timestamps across replicas would take over at once.
    held_by(api, "dead")
    async with running(Replica(api, "b", clock)) as b:
        assert not b.leading  # first sight of the record starts b's own count
        clock.advance(LEASE_SECONDS - 1)
        await b.rounds.next()
        assert not b.leading and lease(api)["holderIdentity"] == "dead"

        clock.advance(2)
        await b.rounds.next()

        assert b.leading and b.started == 1
        taken = lease(api)
        assert taken["holderIdentity"] == "b" and taken["leaseTransitions"] == 4


async def test_a_leader_that_cannot_renew_for_a_lease_duration_steps_down():
    api, clock = MemoryApi(), FakeClock()
    async with running(Replica(api, "a", clock)) as a:
        assert a.leading
        api.reachable = False
        clock.advance(LEASE_SECONDS - 1)
        await a.rounds.next()
        assert a.leading and a.stopped == 0  # still within the lease it last renewed

        clock.advance(2)
        await a.rounds.next()

        assert not a.leading and a.stopped == 1
        api.reachable = True  # let the clean shutdown talk to the server


async def test_a_clean_shutdown_releases_the_lease_so_a_standby_takes_over_at_once():
    api, clock = MemoryApi(), FakeClock()
    a, b = Replica(api, "a", clock), Replica(api, "b", clock)
    leader = asyncio.create_task(a.elector.run())
    await a.rounds.until(1)
    async with running(b):
        assert a.leading and not b.leading

        leader.cancel()  # kopf's cleanup stops the controller
        with contextlib.suppress(asyncio.CancelledError):
            await leader

        released = lease(api)
        assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1
        await b.rounds.next()  # no lease duration waited
        assert b.leading and lease(api)["holderIdentity"] == "b"


async def test_a_conflict_on_the_lease_write_means_another_replica_won():
    api, clock = MemoryApi(), FakeClock()
    held_by(api, "dead")

    def another_replica_writes_first(request: httpx.Request) -> httpx.Response | None:
        if request.method == "PUT" and request.url.path.endswith(f"/leases/{NAME}"):
            api.interceptors.clear()
            held_by(api, "c")  # c's write lands between our read and our write
        return None

    async with running(Replica(api, "b", clock)) as b:
        clock.advance(LEASE_SECONDS + 1)
        api.interceptors.append(another_replica_writes_first)
        await b.rounds.next()

        assert api.asked("PUT")  # b did try
        assert not b.leading and b.started == 0
        assert lease(api)["holderIdentity"] == "c"


async def test_a_conflict_on_creating_the_lease_means_another_replica_won():
    api, clock = MemoryApi(), FakeClock()

    def another_replica_creates_first(request: httpx.Request) -> httpx.Response | None:
        if request.method == "POST" and request.url.path.endswith("/leases"):
            held_by(api, "c")
            return status(409, "AlreadyExists", f'leases "{NAME}" already exists')
        return None

    api.interceptors.append(another_replica_creates_first)
    async with running(Replica(api, "a", clock)) as a:
        assert not a.leading and a.started == 0
        assert lease(api)["holderIdentity"] == "c"
