"""Regression test for issue #9's first defect: two overlapping resyncs of one member.

`MemberRegistry.sync` runs from the Secret watch, from MemberCluster events and from retries,
and nothing stopped two runs for one member from interleaving. With the kubeconfig Secret
edited while a sync was reading it, both runs tore down the same old connection and each
started a new one: the member kept only the last, the other one's informers ran on, untracked,
on a client one of the runs had closed, and reported their errors into the member, flipping a
Ready member to NotReady: the failover trigger. The reproduction on the code before the fix
(760ffa4's `fleet/controller/members.py`) ended with 8 member tasks alive and 4 tracked, and the
health flapping Ready -> NotReady -> Ready -> NotReady.

Here the two syncs overlap for real: the Secret reads are held by the fleet API server (each
answered, when released, with the Secret as it was when asked), the Secret is edited between the
two reads, and both are released together. With the fix, syncs of one member run one after the
other under its lock, and a superseded connection is closed (marked dead, its tasks cancelled
and awaited, its client closed) before the next one starts.

Checked against the code before the fix: the same scenario, run on 760ffa4's tree with the old
`MemberRegistry` (its client given the same in-memory servers, its TLS setup skipped), ends with
22 member tasks alive and 19 tracked (every job kind is served here; the issue's run had 8 and
4), so `member_tasks(...) == current tasks` fails, and the listener hears NotReady 60 ms after
the race, so the last assertion fails too. Removing the lock from `MemberRegistry.sync`, or the
cancelling from `MemberConnection.close`, makes the first assertion fail as well.
"""

from __future__ import annotations

import asyncio

import httpx

from fleet.controller.members import Member
from tests.controller.registry_harness import SECRET_NAMESPACE, Members, is_probe

PYTORCH = ("kubeflow.org/v1", "PyTorchJob")
A0, A1, A2 = "https://m1-a0.test", "https://m1-a1.test", "https://m1-a2.test"


def member_tasks(name: str) -> set[asyncio.Task[object]]:
    """Every task of any connection to member `name` still alive in the event loop."""
    return {
        t
        for t in asyncio.all_tasks()
        if t.get_name().startswith(f"member-{name}-") and not t.done()
    }


def reads_secret(request: httpx.Request) -> bool:
    return request.method == "GET" and request.url.path.endswith("/secrets/m1-kubeconfig")


async def test_overlapping_resyncs_leave_one_connection_and_never_flip_a_ready_member():
    members = Members()
    fleet = members.fleet_api
    for url in (A0, A1, A2):
        members.server(url)
    try:
        # Connected with the first kubeconfig, and Ready.
        members.secret("m1", A0)
        cluster = members.member_cluster("m1")
        await members.registry.sync(cluster)
        member = members.registry.get("m1")
        assert isinstance(member, Member) and member.connection is not None
        first = member.connection
        first_tasks = list(first.tasks)
        await members.until(lambda: member.ready)
        # A probe of the first connection is in flight when the race starts.
        a0 = members.servers[A0]
        a0.holds.append(is_probe)
        await members.until(lambda: bool(a0.waiting(is_probe)))

        # The Secret is edited (A1) and a sync starts reading it; it is edited again (A2) while
        # that read is still on its way, and a second sync starts.
        fleet.holds.append(reads_secret)
        members.secret("m1", A1)
        x = asyncio.create_task(members.registry.sync(cluster))
        await members.until(lambda: len(fleet.waiting(reads_secret)) == 1)
        members.secret("m1", A2)
        y = asyncio.create_task(members.registry.sync(cluster))
        for _ in range(20):  # let the second sync get as far as it can
            await asyncio.sleep(0)
        fleet.holds.clear()
        fleet.release_parked(where=reads_secret)
        await asyncio.gather(x, y)

        # Exactly one connection: the newest Secret's, and it owns every member task alive.
        current = member.connection
        assert current is not None and current.alive
        assert member_tasks("m1") == {t for t in current.tasks if not t.done()}
        assert [url for url, _ in members.connected] == [A0, A1, A2]
        assert current.client is members.connected[-1][1]
        # Every superseded connection is closed, its tasks done, its client closed, and what it
        # had in flight (its watches, A0's probe) abandoned rather than answered late.
        assert not first.alive and all(t.done() for t in first_tasks)
        assert a0.parked and all(p.cancelled for p in a0.parked)
        for url in (A0, A1):
            server = members.servers[url]
            assert all(t.closed for t in server.transports), url
            assert all(p.cancelled for p in server.parked), url
        assert not members.servers[A2].transports[0].closed

        # A late watch error or probe failure of a superseded server has no one left to reach.
        for url in (A0, A1):
            assert members.servers[url].release_parked(where=lambda _: True) == 0

        # The member is Ready on the new connection and was never reported NotReady.
        await members.until(
            lambda: member.ready and bool(members.servers[A2].asked("GET", "/version"))
        )
        assert {ready for _, ready in members.listener.health} == {True}
    finally:
        await members.stop()
    assert member_tasks("m1") == set()


async def test_a_closed_connection_reports_nothing_to_its_member():
    """What a superseded connection's watch still delivers is dropped: its reports are guarded
    by the connection being alive, not only by its tasks being cancelled."""
    members = Members()
    for url in (A0, A1):
        members.server(url)
    try:
        members.secret("m1", A0)
        cluster = members.member_cluster("m1")
        await members.registry.sync(cluster)
        member = members.registry.get("m1")
        assert member is not None and member.connection is not None
        old = member.connection
        await members.until(lambda: PYTORCH in old.jobs and old.jobs[PYTORCH].synced.is_set())
        watch = old.jobs[PYTORCH]
        copy = {"apiVersion": PYTORCH[0], "kind": PYTORCH[1], "metadata": {"name": "j"}}
        watch.on_event("ADDED", copy)  # while alive, a job event reaches the controller
        assert members.listener.jobs == [("m1", "ADDED")]

        members.secret("m1", A1)
        await members.registry.sync(cluster)
        assert member.connection is not old and not old.alive

        watch.on_event("MODIFIED", copy)
        assert members.listener.jobs == [("m1", "ADDED")]
    finally:
        await members.stop()


async def test_a_resync_queued_behind_a_removal_does_not_bring_the_member_back():
    """CI's run of 2026-11-26: the kubeconfig Secret was edited twice, then the MemberCluster
    deleted. The second edit's resync waited for the member's lock behind the first one and the
    removal, then synced the MemberCluster it had been handed, and the deleted member came back
    for good (NotReady: every pending gang named it). A resync now reads the member's last
    MemberCluster once the lock is its own, and a removal leaves none."""
    members = Members()
    fleet = members.fleet_api
    members.server(A0)
    try:
        members.secret("m1", A0)
        await members.registry.sync(members.member_cluster("m1"))
        member = members.registry.get("m1")
        assert member is not None
        await members.until(lambda: member.ready)

        def resyncs() -> list[asyncio.Task[object]]:
            return [t for t in asyncio.all_tasks() if t.get_name() == "resync-m1"]

        # An edit of the Secret, as its watch reports it: its resync holds the member's lock
        # while it reads the Secret.
        fleet.holds.append(reads_secret)
        members.registry.secrets.on_change(SECRET_NAMESPACE, "m1-kubeconfig")
        await members.until(lambda: len(fleet.waiting(reads_secret)) == 1)
        # The MemberCluster's deletion and a second edit arrive together: the removal takes
        # its place at the lock first, the second resync behind it.
        removal = asyncio.create_task(members.registry.remove("m1"))
        members.registry.secrets.on_change(SECRET_NAMESPACE, "m1-kubeconfig")
        queued = resyncs()
        assert len(queued) == 2
        for _ in range(20):
            await asyncio.sleep(0)
        fleet.holds.clear()
        fleet.release_parked(where=reads_secret)
        await asyncio.gather(removal, *queued)

        assert members.registry.get("m1") is None
        assert members.listener.health[-1] == ("m1", False)
        assert member_tasks("m1") == set()
    finally:
        await members.stop()
