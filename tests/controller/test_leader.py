"""Leader election on a Lease, against an in-memory API server, one round at a time.

Each elector runs its real loop; its injected sleep ends a round and waits for the test to allow
the next one, its clock is a FakeClock the test moves, and its renew deadline passes when the
test fires it (`Deadlines`). So "a lease duration passed" is a clock step, not a wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet.cli import build_parser
from fleet.controller.leader import LEASE, LeaderElector, renew_deadline_of
from fleet.controller.operator import Controller
from fleet.controller.settings import Settings
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.apiserver import MemoryApi, status
from tests.controller.harness import NAMESPACE as JOBS_NAMESPACE
from tests.controller.harness import FakeClock, World

NAMESPACE, NAME = "kube-system", "fleet-controller"
LEASE_SECONDS = 15.0
RENEW_DEADLINE = 10.0  # client-go's defaults: 10 s of a 15 s lease
REPO = Path(__file__).resolve().parents[2]


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
        self.allow()
        await self.until(target)

    def allow(self) -> None:
        """Let one more round start (without waiting for its end)."""
        self._go.release()


class Deadlines:
    """The elector's `wait_until`: an instant passes once the clock is there and the test fires."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self._waiting: list[tuple[float, asyncio.Future[None]]] = []

    async def __call__(self, at: float) -> None:
        if self.clock.monotonic() >= at:
            return
        due = (at, asyncio.get_running_loop().create_future())
        self._waiting.append(due)
        try:
            await due[1]
        finally:
            self._waiting.remove(due)

    def fire(self) -> None:
        for at, future in self._waiting:
            if at <= self.clock.monotonic() and not future.done():
                future.set_result(None)


async def until(condition: Callable[[], object]) -> None:
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(0.001)


class Replica:
    """One controller replica's elector and what it was told."""

    def __init__(self, api: MemoryApi, identity: str, clock: FakeClock) -> None:
        self.rounds = Rounds()
        self.deadlines = Deadlines(clock)
        self.started = 0
        self.stopped = 0
        self.elector = LeaderElector(
            api.client(identity, retries=1),
            namespace=NAMESPACE,
            name=NAME,
            identity=identity,
            lease_seconds=LEASE_SECONDS,
            renew_deadline=RENEW_DEADLINE,
            on_started=self._started,
            on_stopped=self._stopped,
            clock=clock,
            sleep=self.rounds,
            wait_until=self.deadlines,
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


def refuse_renewals_of(identity: str) -> Callable[[httpx.Request], httpx.Response | None]:
    """The API server refuses `identity`'s writes of the lease (etcd timing out), and only its:
    another replica can still read the lease, and write it."""

    def intercept(request: httpx.Request) -> httpx.Response | None:
        if (
            request.method == "PUT"
            and request.url.path.endswith(f"/leases/{NAME}")
            and json.loads(request.content)["spec"]["holderIdentity"] == identity
        ):
            return status(500, "InternalError", "etcdserver: request timed out")
        return None

    return intercept


async def test_a_leader_whose_renewals_fail_stops_at_its_renew_deadline_before_a_standby_can_lead():
    api, clock = MemoryApi(), FakeClock()
    async with running(Replica(api, "a", clock)) as a, running(Replica(api, "b", clock)) as b:
        assert a.leading and not b.leading  # b saw a's renewal as it started: its count runs
        api.interceptors.append(refuse_renewals_of("a"))

        clock.advance(RENEW_DEADLINE - 1)
        await a.rounds.next()
        assert a.leading and a.stopped == 0  # still within its renew deadline

        clock.advance(1)  # the renew deadline since a's last renewal
        await a.rounds.next()
        await b.rounds.next()

        assert not a.leading and a.stopped == 1
        # The lease still names a, and b must wait a whole lease duration from the same
        # renewal: a stopped before anyone could take over.
        assert lease(api)["holderIdentity"] == "a" and not b.leading

        clock.advance(LEASE_SECONDS - RENEW_DEADLINE + 1)
        await a.rounds.next()
        await b.rounds.next()

        assert b.leading and lease(api)["holderIdentity"] == "b"
        assert not a.leading and a.started == 1


async def test_a_leader_whose_renewal_hangs_stops_at_its_renew_deadline_and_cancels_its_work():
    """The renewal gets no answer at all: the deadline still ends the leadership on time, and
    the controller's reconciles in flight are cancelled with it."""
    world = World()
    world.apply_policy(gang_policy("gang", JOBS_NAMESPACE))
    key = world.submit(pytorchjob("job"))
    api = world.fleet_api
    settings = dataclasses.replace(
        world.settings, lease_seconds=LEASE_SECONDS, renew_deadline=RENEW_DEADLINE
    )
    replica = Controller(settings, api.client("replica-a"), "replica-a", clock=world.clock)
    replica.members.listed = True  # (its members' list is not what this test is about)
    rounds, deadlines = Rounds(), Deadlines(world.clock)
    replica.elector.sleep, replica.elector.wait_until = rounds, deadlines
    replica.queue.running.clear()
    replica.queue.start()
    election = asyncio.create_task(replica.elector.run())
    try:
        await rounds.until(1)
        await until(replica.queue.running.is_set)  # leading: the workers run
        assert replica.leading.is_set() and replica.metrics.leader.value == 1

        # A reconcile is in flight: its read of the job waits for the API server.
        def reads_the_job(r: httpx.Request) -> bool:
            return r.method == "GET" and r.url.path.endswith("/pytorchjobs/job")

        def renews(r: httpx.Request) -> bool:
            return f"/leases/{NAME}" in r.url.path

        api.holds.extend([reads_the_job, renews])
        replica.queue.add(key)
        await until(lambda: api.waiting(reads_the_job))
        # The next renewal gets no answer.
        world.clock.advance(LEASE_SECONDS / 5)
        rounds.allow()
        await until(lambda: api.waiting(renews))
        assert replica.elector.leading

        world.clock.advance(RENEW_DEADLINE - LEASE_SECONDS / 5)
        deadlines.fire()
        await rounds.until(2)

        assert not replica.elector.leading
        assert not replica.leading.is_set() and replica.metrics.leader.value == 0
        # The renewal and the reconcile were cancelled where they waited: nothing after the
        # read is sent, and the job is queued for whoever leads next.
        assert [p.cancelled for p in api.parked if renews(p.request)] == [True]
        assert [p.cancelled for p in api.parked if reads_the_job(p.request)] == [True]
        assert len(replica.queue) == 1 and not replica.queue.running.is_set()
        assert world.binding(key) is None
        # All that before the lease, still naming it, could run out for anyone else.
        assert lease(api)["holderIdentity"] == "replica-a"
    finally:
        api.holds.clear()
        election.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await election
        await replica.queue.stop()


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


def test_the_renew_deadline_is_two_thirds_of_the_lease_unless_set_and_shorter_than_the_lease():
    assert renew_deadline_of(15, None) == 10  # client-go's defaults
    assert renew_deadline_of(6, None) == 4
    assert renew_deadline_of(15, 12) == 12
    with pytest.raises(ValueError, match="shorter than the lease"):
        renew_deadline_of(15, 15)
    with pytest.raises(ValueError, match="longer than its retry period"):
        renew_deadline_of(15, 2)  # one try per deadline: a single failure would lose the lease
    args = build_parser().parse_args(["controller"])
    assert args.renew_deadline == Settings().renew_deadline == 0  # 0: two thirds of the lease
    deployment = (REPO / "helm/fleet/templates/deployment.yaml").read_text()
    assert "--renew-deadline={{ .Values.renewDeadlineSeconds }}" in deployment
