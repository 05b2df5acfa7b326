"""Reclaim in the shell, on in-memory API servers and a fake clock: team A borrows the whole
member, team B's job arrives within B's min, one of A's gangs is evicted whole (recorded on its
binding first, then its unit), B's job is released, A's copy is deleted after the grace period;
a controller that dies between the record and the rest finishes it and never evicts twice; with
reclaim off nothing is evicted.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.controller.events import EventRecorder
from fleet.controller.keys import WorkloadKey
from fleet.controller.queue.units import key_of_job
from fleet.controller.settings import Settings
from fleet.core.inventory import PodInfo
from fleet.testing.workloads import pytorchjob
from tests.controller.harness import FLEET_ID, NAMESPACE, World, conditions
from tests.controller.test_queue import TREE, phase, placed_on, queued_policy, work

GPU = "nvidia.com/gpu"
QUOTA_LABEL = "quota.scheduling.alibabacloud.com/name"


def two_teams(a_min: int = 4) -> dict[str, Any]:
    """Root: the member's 8 GPUs. Team A (the tests' namespace) and team B (by quota label)
    are guaranteed `a_min` and 4 and may each borrow up to 8."""
    return {
        "apiVersion": TREE[0],
        "kind": TREE[1],
        "metadata": {"name": "tree", "namespace": "kube-system"},
        "spec": {
            "root": {
                "name": "root",
                "min": {GPU: 8},
                "max": {GPU: 8},
                "children": [
                    {"name": "a", "min": {GPU: a_min}, "max": {GPU: 8}, "namespaces": [NAMESPACE]},
                    {"name": "b", "min": {GPU: 8 - a_min}, "max": {GPU: 8}},
                ],
            }
        },
    }


async def reclaim_world(a_min: int = 4, **settings: Any) -> World:
    world = World(settings=Settings(fleet_id=FLEET_ID, **settings))
    world.add_member("member-1", gpus=4, nodes=2)
    world.apply_policy(queued_policy())
    world.fleet_api.put(copy.deepcopy(two_teams(a_min)))
    world.kube_queue.lead()
    await work(world)
    return world


def job(name: str, team: str) -> dict[str, Any]:
    """4 GPUs: a master and a worker of 2 GPUs each."""
    body = pytorchjob(name, workers=1, gpus=2)
    if team == "b":
        body["metadata"].setdefault("labels", {})[QUOTA_LABEL] = "b"
    return body


def run_pods(world: World, key: WorkloadKey) -> None:
    """The member's scheduler binds the gang's pods where placement reserved them."""
    uid = world.workload(key)["metadata"]["uid"]  # type: ignore[index]
    snapshot = world.members["member-1"].member.snapshot
    reservation = snapshot.reservations()[uid]
    for i, (node, requests) in enumerate(list(reservation.pods)):
        snapshot.upsert_pod(
            PodInfo(f"{key.name}-{i}", NAMESPACE, f"{key.name}-{i}", node, requests, owner_key=uid)
        )


def pods_gone(world: World, key: WorkloadKey) -> None:
    """The member deleted the copy: its pods leave the nodes."""
    uid = world.workload(key)["metadata"]["uid"]  # type: ignore[index]
    snapshot = world.members["member-1"].member.snapshot
    for pod in [p for p in snapshot.pods() if p.owner_key == uid]:
        snapshot.remove_pod(pod.uid)


async def start(world: World, name: str, team: str) -> WorkloadKey:
    key = world.submit(job(name, team))
    await world.reconcile(key)
    await work(world)
    await world.reconcile(key)
    return key


async def running(world: World, key: WorkloadKey, member: str = "member-1") -> None:
    """The gang's pods run, and the member's operator says so: the status mirror dates the
    stay's `runningSince` (what a reclaim counts the work lost from)."""
    run_pods(world, key)
    world.members[member].set_job_state(key.name, "Running")
    await world.reconcile(key)


async def borrowed_fleet(world: World) -> tuple[WorkloadKey, WorkloadKey]:
    """Team A runs two gangs: the whole member, 4 GPUs beyond its min; a2 started a minute
    after a1."""
    first = await start(world, "a1", "a")
    await running(world, first)
    world.clock.advance(60)
    second = await start(world, "a2", "a")
    await running(world, second)
    assert [phase(world, k) for k in (first, second)] == ["Running", "Running"]
    return first, second


def unit_message(world: World, key: WorkloadKey) -> str:
    found = world.fleet_api.get(
        "scheduling.x-k8s.io/v1alpha1", "QueueUnit", f"pytorchjob-{key.name}", key.namespace
    )
    return str(((found or {}).get("status") or {}).get("message"))


async def test_team_b_reclaims_its_min_from_team_a_whole_and_a_runs_again_later():
    world = await reclaim_world()
    first, second = await borrowed_fleet(world)
    world.clock.advance(3600)

    b = await start(world, "b1", "b")  # waits: the root is full; the pass reclaims
    assert phase(world, b) == "Enqueued"  # nothing for B is written before A's record
    await world.reconcile(second)  # the victim (the most recent start) records its eviction

    binding = world.binding(second)
    assert binding is not None
    (task,) = binding["spec"]["gracefulEvictionTasks"]
    assert (task["fromCluster"], task["reason"]) == ("member-1", "Reclaimed")
    assert task["evictedFor"] == key_of_job(b) and task["gracePeriodSeconds"] == 30
    assert not binding["spec"].get("clusters")
    assert not (binding.get("status") or {}).get("failoverHistory")  # not a failover
    assert phase(world, second) == "Enqueued" and phase(world, first) == "Running"
    message = unit_message(world, second)
    assert f"reclaimed by {key_of_job(b)}" in message and "GPU-hours of work lost" in message
    (event,) = world.events("Reclaimed", second)
    assert "quota root/b is below its min" in event["message"]
    scheduled = conditions(world.workload(second))["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Reclaimed")

    await work(world)  # B is written Dequeued now that its room is on record
    assert phase(world, b) == "Dequeued"
    assert "reclaims 1 gang(s) (4 GPUs) in member-1" in unit_message(world, b)

    # Within the grace period the copy stays; after it, it is deleted.
    await world.reconcile(second)
    assert world.members["member-1"].copy("a2") is not None
    world.clock.advance(31)
    await world.reconcile(second)
    assert world.members["member-1"].copy("a2") is None
    pods_gone(world, second)
    await world.reconcile(b)
    assert placed_on(world, b) == "member-1" and phase(world, b) == "Running"
    run_pods(world, b)

    # A's gang waits at its original place and runs again when room returns.
    await world.reconcile(second)
    assert phase(world, second) == "Enqueued"
    world.members["member-1"].set_job_state("b1", "Succeeded")
    await world.reconcile(b)
    pods_gone(world, b)
    await work(world)
    await world.reconcile(second)
    assert phase(world, second) == "Running" and placed_on(world, second) == "member-1"


def _raise_on_reclaimed(world: World, error: BaseException) -> Any:
    """Posting a Reclaimed Event raises `error` (a kill, or a refusal); other Events are posted.
    Returns the recorder's own `record`, to put back."""
    post = world.events_recorder.record

    async def record(obj: Any, reason: str, *args: Any, **kwargs: Any) -> None:
        if reason == "Reclaimed":
            raise error
        await post(obj, reason, *args, **kwargs)

    world.events_recorder.record = record  # type: ignore[method-assign]
    return post


async def test_a_controller_killed_after_the_record_finishes_it_and_never_evicts_twice():
    # Team A has no min: both its gangs borrow, so only the record keeps the second from
    # being evicted too while B, dequeued, waits for the first victim's copy to go (a claim
    # of node capacity by a dequeued gang, which must be turned on).
    world = await reclaim_world(a_min=0, queue_reclaim_unplaced=True)
    first, second = await borrowed_fleet(world)
    b = await start(world, "b1", "b")

    # The victim's reconcile records the eviction on the binding, then the process dies
    # before its Events are posted and the queue writes the unit (the unit still says Running).
    _raise_on_reclaimed(world, SystemExit("SIGKILL"))
    with pytest.raises(SystemExit):
        await world.reconcile(second)
    world.events_recorder = world.shell.events = EventRecorder(
        world.fleet, instance="restarted", clock=world.clock
    )
    assert world.binding(second)["spec"]["gracefulEvictionTasks"]  # type: ignore[index]
    assert phase(world, second) == "Running" and phase(world, b) == "Enqueued"
    assert not world.events("Reclaimed", second)

    restarted = world.new_kube_queue()
    world.kube_queue = restarted
    world.shell.kube_queue = restarted
    await restarted.process(restarted.RESTORE)
    admission = restarted.admission
    # The record stands: the victim is back in its queue, its quota released...
    assert admission.phase(key_of_job(second)) == "Enqueued"
    assert admission.phase(key_of_job(first)) == "Running"
    # ... and B is released by the plain pass, with no second eviction.
    await work(world)
    assert admission.phase(key_of_job(b)) == "Dequeued"
    await world.reconcile(b)  # placement finds no room yet: a2's copy is still there
    assert placed_on(world, b) is None
    world.clock.advance(20)  # B waits for the copy to go, past the reclaim delay ...
    world.kube_queue.request_pass()  # ... when the pass it asked for runs
    await work(world)
    assert admission.phase(key_of_job(first)) == "Running"
    assert not world.events("Reclaimed", first)
    # The Events the killed controller owed are posted by the restarted one, once, even by a
    # third controller that finds the record again.
    await world.reconcile(second)
    assert len(world.events("Reclaimed", second)) == 1
    world.shell.events = EventRecorder(world.fleet, instance="third", clock=world.clock)
    await world.reconcile(second)
    assert len(world.events("Reclaimed", second)) == 1


async def test_a_reconcile_that_failed_after_the_record_tells_of_the_eviction_once():
    """The record is on the binding, then the Event's post fails and the reconcile is retried
    by the same controller, whose queue still holds the eviction: the retry finds the gang
    already off its cluster and tells of the eviction under the record's identity, so the
    victim has one Reclaimed Event, not one per telling."""
    world = await reclaim_world(a_min=0, queue_reclaim_unplaced=True)
    first, second = await borrowed_fleet(world)
    await start(world, "b1", "b")
    post = _raise_on_reclaimed(world, RuntimeError("the API server refused the Event"))
    victim = None
    for key in (first, second):
        try:
            await world.reconcile(key)
        except RuntimeError:
            victim = key
    assert victim is not None
    world.events_recorder.record = post  # type: ignore[method-assign]
    assert world.binding(victim)["spec"]["gracefulEvictionTasks"]  # type: ignore[index]

    await world.reconcile(victim)  # the retry
    await world.reconcile(victim)
    assert len(world.events("Reclaimed", victim)) == 1


async def test_with_reclaim_off_a_borrower_keeps_what_it_borrowed():
    world = await reclaim_world(queue_reclaim=False)
    first, second = await borrowed_fleet(world)
    b = await start(world, "b1", "b")
    world.clock.advance(60)
    await work(world)
    await world.reconcile(second)
    assert [phase(world, k) for k in (first, second, b)] == ["Running", "Running", "Enqueued"]
    assert not world.binding(second)["spec"].get("gracefulEvictionTasks")  # type: ignore[index]


async def test_a_policy_that_opts_out_is_never_reclaimed_and_never_borrows():
    world = World(settings=Settings(fleet_id=FLEET_ID))
    world.add_member("member-1", gpus=4, nodes=2)
    policy = queued_policy()
    policy["metadata"]["labels"] = {"kube-queue.fleet.dev/reclaimable": "false"}
    world.apply_policy(policy)
    world.fleet_api.put(copy.deepcopy(two_teams()))
    world.kube_queue.lead()
    await work(world)

    first = await start(world, "a1", "a")  # within team A's min of 4
    run_pods(world, first)
    second = await start(world, "a2", "a")  # would borrow: it waits instead
    assert [phase(world, k) for k in (first, second)] == ["Running", "Enqueued"]
    assert "opted out of reclaim, so it never borrows" in unit_message(world, second)
    unit = world.fleet_api.get(
        "scheduling.x-k8s.io/v1alpha1", "QueueUnit", "pytorchjob-a1", NAMESPACE
    )
    assert unit["metadata"]["labels"]["kube-queue.fleet.dev/reclaimable"] == "false"  # type: ignore[index]


@pytest.mark.parametrize("preemption", [True, False])
async def test_priority_preemption_within_a_queue_only_when_turned_on(preemption: bool):
    world = await reclaim_world(a_min=8, queue_preemption=preemption)
    world.fleet_api.put(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    first, second = await borrowed_fleet(world)
    urgent = job("urgent", "a")
    urgent["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "high"}}
    key = world.submit(urgent)
    await world.reconcile(key)
    await work(world)
    await world.reconcile(second)
    await work(world)
    if preemption:
        assert phase(world, second) == "Enqueued" and phase(world, key) == "Dequeued"
        (event,) = world.events("Preempted", second)
        assert "priority 1000 over 0" in event["message"]
        (task,) = world.binding(second)["spec"]["gracefulEvictionTasks"]  # type: ignore[index]
        assert task["reason"] == "Preempted"
    else:
        assert [phase(world, k) for k in (first, second, key)] == [
            "Running",
            "Running",
            "Enqueued",
        ]
        assert not world.events("Preempted", second)


async def test_the_gang_that_reclaimed_keeps_its_quota_while_its_victims_copy_goes():
    """Its placement does not time out while the victim's copy is still there (the grace
    period may be longer than the placement timeout); once the copy is gone it is placed."""
    world = await reclaim_world(queue_placement_timeout=10.0)
    _, second = await borrowed_fleet(world)
    b = await start(world, "b1", "b")
    await world.reconcile(second)  # the eviction is recorded; the copy goes after 30 s
    await work(world)
    assert phase(world, b) == "Dequeued"
    world.clock.advance(20)  # past b's placement timeout, within the victim's grace
    world.kube_queue.request_pass()
    await work(world)
    assert phase(world, b) == "Dequeued"
    assert world.kube_queue.admission.holds(key_of_job(b))
    world.clock.advance(11)  # the grace is over: the copy is deleted, b is placed
    await world.reconcile(second)
    assert world.members["member-1"].copy("a2") is None
    pods_gone(world, second)
    await world.reconcile(b)
    assert phase(world, b) == "Running"
