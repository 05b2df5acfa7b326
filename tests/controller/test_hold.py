"""The claimant's hold in the shell (docs/queue.md, "The hold"), on in-memory API servers and a
fake clock: team A borrows the whole member, team B's job reclaims 4 GPUs of it. The room the
victim frees is reserved in the member's view for B (a gang outside the queue that would fit it
is refused it, and B gets it), recorded on B's unit and rebuilt by a restart; the hold ends on
every exit (placed, deleted, backed off, member lost) with its reservation and record removed
and a HoldReleased Event saying why. One clock: it has no bound of its own; it outlives a victim
whose pods take long to stop, and ends at the latest with B's placement timeout, counted from
when those pods are gone.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleet.api import constants as c
from fleet.controller.keys import WorkloadKey
from fleet.controller.members.health import Health
from fleet.controller.queue.holds import MEMBER_LOST_SECONDS
from fleet.controller.queue.units import key_of_job
from fleet.controller.reserving import RESERVATION
from fleet.core.admission import DEQUEUED, TIMEOUT_BACKOFF
from fleet.core.admission.hold import hold_key
from fleet.core.inventory import PodInfo
from fleet.core.resources import Resources
from fleet.core.topology import REQUIRED_ANNOTATION
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import World
from tests.controller.test_queue import phase, placed_on, work
from tests.controller.test_reclaim import (
    GPU,
    borrowed_fleet,
    job,
    pods_gone,
    reclaim_world,
    start,
)

OTHER = "outside"  # a namespace no queue governs: its gangs go straight to placement


def reserved(world: World) -> set[str]:
    return set(world.members["member-1"].member.snapshot.reservations())


def unit(world: World, key: WorkloadKey) -> dict[str, Any]:
    found = world.fleet_api.get(
        "scheduling.x-k8s.io/v1alpha1", "QueueUnit", f"pytorchjob-{key.name}", key.namespace
    )
    assert found is not None
    return found


def record(world: World, key: WorkloadKey) -> dict[str, Any] | None:
    text = (unit(world, key)["metadata"].get("annotations") or {}).get(c.HOLD_ANNOTATION)
    return json.loads(text) if text else None


def released(world: World, key: WorkloadKey) -> list[str]:
    """The HoldReleased messages on the claimant's job."""
    return [e["message"] for e in world.events("HoldReleased", key)]


async def reclaimed(world: World) -> tuple[WorkloadKey, WorkloadKey]:
    """A's second gang is evicted for B; B holds its room. (victim, claimant)"""
    _, second = await borrowed_fleet(world)
    world.clock.advance(3600)
    b = await start(world, "b1", "b")
    await world.reconcile(second)  # the victim records its eviction
    await work(world)  # B Dequeued
    return second, b


async def victim_leaves(world: World, victim: WorkloadKey) -> None:
    world.clock.advance(31)
    await world.reconcile(victim)  # its copy is deleted after the grace period
    pods_gone(world, victim)


def outsider(world: World, name: str = "x1") -> WorkloadKey:
    """A gang of 4 GPUs no queue holds back: it would fit the room the victim frees."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHER}}
    world.fleet_api.put(dict(namespace))
    world.members["member-1"].api.put(dict(namespace))
    world.apply_policy(gang_policy("outside", OTHER))
    body = pytorchjob(name, workers=1, gpus=2)
    body["metadata"]["namespace"] = OTHER
    return world.submit(body)


async def test_the_room_freed_goes_to_the_claimant_not_to_a_gang_that_would_fit_it():
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    claimant = key_of_job(b)

    # Made with the eviction: in the view, on record, told.
    assert hold_key(claimant) in reserved(world)
    held = record(world, b)
    assert held is not None and held["cluster"] == "member-1"
    assert held["victims"] == [key_of_job(victim)]
    assert sum(s["pods"] * s["requests"][GPU] for s in held["slots"]) == 4
    (event,) = world.events("RoomHeld", b)
    assert "member-1" in event["message"] and key_of_job(victim) in event["message"]
    assert "held while their pods leave, however long" in event["message"]
    assert "placement timeout (300 s) at most" in event["message"]
    assert held["freed"] is None  # its victim still there: B's clock waits

    await victim_leaves(world, victim)
    x = outsider(world)
    await world.reconcile(x)  # the victim's room is free on the member, but held for B
    assert placed_on(world, x) is None
    assert world.members["member-1"].copy("x1", namespace=OTHER) is None

    await world.reconcile(b)
    assert placed_on(world, b) == "member-1" and phase(world, b) == "Running"
    await work(world)
    assert hold_key(claimant) not in reserved(world) and record(world, b) is None
    assert released(world, b) == ["room held in member-1 released: the claimant was placed"]


async def test_without_the_hold_the_outsider_takes_the_room():
    """The check the first test relies on: the outsider does fit the freed room."""
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    await world.kube_queue.forget(key_of_job(b))  # B deleted: the hold ends (Gone)
    await work(world)
    assert hold_key(key_of_job(b)) not in reserved(world)
    assert released(world, b) == [
        "room held in member-1 released: the claimant was deleted or ended"
    ]
    await victim_leaves(world, victim)
    x = outsider(world)
    await world.reconcile(x)
    assert placed_on(world, x) == "member-1"


async def test_the_hold_ends_when_its_member_stays_not_ready():
    world = await reclaim_world()
    _, b = await reclaimed(world)
    world.members["member-1"].set_ready(False, since=world.clock.monotonic())
    world.triggers.health_changed("member-1", False)  # as the registry tells it
    await work(world)
    assert hold_key(key_of_job(b)) in reserved(world) and record(world, b) is not None
    # The pass looks again when the member has been NotReady for MEMBER_LOST_SECONDS.
    assert world.kube_queue.PASS in world.kube_queue.work._timers
    world.clock.advance(MEMBER_LOST_SECONDS)
    await world.kube_queue.run_pass()
    assert hold_key(key_of_job(b)) not in reserved(world) and record(world, b) is None
    assert released(world, b) == [
        "room held in member-1 released: the member has been NotReady for 30 s or left the fleet"
    ]


async def test_a_restarted_controller_keeps_the_hold_while_its_member_connects():
    """Right after a restart every member is Connecting, then syncing: neither is a lost
    member. The restarted queue keeps the claimant's room, and the victim is not let back in."""
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    restarted = world.new_kube_queue()
    world.kube_queue = world.shell.kube_queue = restarted
    world.triggers.member_lost = restarted.member_lost
    world.members["member-1"].member.health = Health(since=world.clock.monotonic())
    await restarted.process(restarted.RESTORE)
    await work(world)
    assert restarted.admission.hold_of(key_of_job(b)) is not None
    assert record(world, b) is not None and not released(world, b)
    world.clock.advance(MEMBER_LOST_SECONDS + 1)  # still connecting, long after: still kept
    await restarted.run_pass()
    assert restarted.admission.hold_of(key_of_job(b)) is not None
    assert restarted.admission.phase(key_of_job(victim)) == "Enqueued"


async def test_the_hold_ends_at_once_when_its_member_leaves_the_fleet():
    world = await reclaim_world()
    _, b = await reclaimed(world)
    await world.shell.members.remove("member-1")  # as a deleted MemberCluster does
    await work(world)
    assert record(world, b) is None
    assert released(world, b) == [
        "room held in member-1 released: the member has been NotReady for 30 s or left the fleet"
    ]


#: Longer than the hold's old bound of its own (360 s from the eviction decision): a victim
#: whose pods checkpoint on SIGTERM within a terminationGracePeriodSeconds of an hour.
SLOW = 3600.0


async def copy_deleted(world: World, victim: WorkloadKey) -> None:
    """The grace period is over: the victim's copy is deleted; its pods are still stopping."""
    world.clock.advance(31)
    await world.reconcile(victim)
    assert world.members["member-1"].copy(victim.name) is None
    assert evicting(world, victim)


def evicting(world: World, victim: WorkloadKey) -> bool:
    """The victim's binding still records its eviction (its copy or pods still there)."""
    binding = world.binding(victim) or {}
    return bool(binding.get("spec", {}).get("gracefulEvictionTasks"))


async def slow_pods(world: World, victim: WorkloadKey, b: WorkloadKey) -> None:
    """An hour of passes while the victim's pods stop: the hold stands all along."""
    claimant = key_of_job(b)
    await copy_deleted(world, victim)
    for _ in range(int(SLOW // 300)):
        world.clock.advance(300)
        await world.reconcile(victim)  # still deleting: its eviction stays on its binding
        await world.kube_queue.run_pass()
        await work(world)
        held = world.kube_queue.admission.hold_of(claimant)
        assert held is not None and held.freed is None
        assert hold_key(claimant) in reserved(world) and record(world, b) is not None
        assert world.kube_queue.admission.phase(claimant) == DEQUEUED
    assert not released(world, b) and evicting(world, victim)


async def room_freed(world: World, victim: WorkloadKey, b: WorkloadKey) -> float:
    """The victim's pods go; its reconcile sees them gone and the pass starts B's clock."""
    pods_gone(world, victim)
    await world.reconcile(victim)
    await work(world)
    assert not evicting(world, victim)
    freed = world.clock.now()
    held = record(world, b)
    assert held is not None and held["freed"] == freed  # on record: a restart keeps it
    return freed


async def test_the_hold_outlives_a_victim_whose_pods_take_longer_than_the_old_bound_to_stop():
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    await slow_pods(world, victim, b)
    x = outsider(world)
    pods_gone(world, victim)
    await world.reconcile(x)  # the room is free on the member, and still B's
    assert placed_on(world, x) is None
    await room_freed(world, victim, b)
    world.clock.advance(world.settings.queue_placement_timeout - 1)
    await world.kube_queue.run_pass()
    await work(world)
    assert world.kube_queue.admission.hold_of(key_of_job(b)) is not None
    await world.reconcile(b)
    assert placed_on(world, b) == "member-1" and phase(world, b) == "Running"
    await work(world)
    assert hold_key(key_of_job(b)) not in reserved(world) and record(world, b) is None
    assert released(world, b) == ["room held in member-1 released: the claimant was placed"]


async def test_after_slow_victims_the_hold_ends_with_the_timeout_counted_from_their_pods_gone():
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    claimant = key_of_job(b)
    await slow_pods(world, victim, b)
    freed = await room_freed(world, victim, b)
    block(world, b)  # a member-local pod takes a node of the room: B fits nowhere
    await world.reconcile(b)
    assert placed_on(world, b) is None
    timeout = world.settings.queue_placement_timeout
    world.clock.advance(timeout - 1)
    await world.kube_queue.run_pass()
    await work(world)
    assert world.kube_queue.admission.hold_of(claimant) is not None and not released(world, b)
    world.clock.advance(2)
    await world.kube_queue.run_pass()
    await work(world)
    assert world.clock.now() > freed + timeout
    assert world.kube_queue.admission.phase(claimant) == TIMEOUT_BACKOFF
    assert hold_key(claimant) not in reserved(world) and record(world, b) is None
    assert released(world, b) == [
        "room held in member-1 released: the claimant's placement timed out (backed off)"
    ]


async def test_a_restart_while_the_victims_pods_stop_keeps_the_hold_and_its_clock():
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    claimant = key_of_job(b)
    await copy_deleted(world, victim)
    world.clock.advance(SLOW)  # long past the old bound: its pods still stopping
    await restart(world)
    await work(world)
    await world.kube_queue.run_pass()
    held = world.kube_queue.admission.hold_of(claimant)
    assert held is not None and held.freed is None
    assert hold_key(claimant) in reserved(world) and record(world, b) is not None
    assert not released(world, b)
    freed = await room_freed(world, victim, b)
    world.clock.advance(100)
    await restart(world)  # the room was freed before this one: its moment is on record
    await work(world)
    held = world.kube_queue.admission.hold_of(claimant)
    assert held is not None and held.freed == freed
    block(world, b)
    world.clock.advance(world.settings.queue_placement_timeout - 101)
    await world.kube_queue.run_pass()
    assert world.kube_queue.admission.hold_of(claimant) is not None
    world.clock.advance(2)
    await world.kube_queue.run_pass()
    await work(world)
    assert world.kube_queue.admission.phase(claimant) == TIMEOUT_BACKOFF
    assert released(world, b) == [
        "room held in member-1 released: the claimant's placement timed out (backed off)"
    ]


async def test_a_victim_deleted_while_its_pods_stop_keeps_the_claimant_waiting_and_held():
    """Its user deletes the evicted job while its pods still stop: its unit goes at once, but
    the room is not free until those pods are gone; until then B's clock does not run."""
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    claimant = key_of_job(b)
    await copy_deleted(world, victim)
    await world.delete(victim)
    await world.reconcile(victim)  # its quota and unit released; its pods still there
    assert world.workload(victim) is not None  # fleet's finalizer waits for them
    world.clock.advance(SLOW)
    await world.kube_queue.run_pass()
    await work(world)
    held = world.kube_queue.admission.hold_of(claimant)
    assert held is not None and held.freed is None and not released(world, b)
    assert world.kube_queue.admission.phase(claimant) == DEQUEUED
    pods_gone(world, victim)
    await world.reconcile(victim)  # gone: the finalizer goes, and B's clock starts
    await work(world)
    held = world.kube_queue.admission.hold_of(claimant)
    assert held is not None and held.freed == world.clock.now()
    await world.reconcile(b)
    assert placed_on(world, b) == "member-1"


async def test_a_pass_before_the_victims_record_does_not_start_the_claimants_clock():
    """Decided, not yet on the victim's binding: its pods are there, B still waits for them."""
    world = await reclaim_world()
    _, second = await borrowed_fleet(world)
    world.clock.advance(3600)
    b = await start(world, "b1", "b")
    assert world.kube_queue.eviction_for(key_of_job(second)) is not None
    world.clock.advance(5)
    await world.kube_queue.run_pass()
    held = world.kube_queue.admission.hold_of(key_of_job(b))
    assert held is not None and held.freed is None


def block(world: World, b: WorkloadKey) -> None:
    """A member-local pod takes one node of B's held room."""
    snapshot = world.members["member-1"].member.snapshot
    held = world.kube_queue.admission.hold_of(key_of_job(b))
    assert held is not None
    node = next(slot.node for slot in held.assignment() if slot.node is not None)
    snapshot.upsert_pod(PodInfo("local", "default", "local", node, Resources({GPU: 2})))


async def test_the_hold_ends_when_the_claimant_backs_off():
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    await victim_leaves(world, victim)
    await world.reconcile(victim)  # the queue hears its copy is gone
    await work(world)  # and its pass starts the claimant's placement timeout again
    # A member-local pod takes the room on one node: B no longer fits anywhere.
    snapshot = world.members["member-1"].member.snapshot
    held = world.kube_queue.admission.hold_of(key_of_job(b))
    assert held is not None
    node = next(slot.node for slot in held.assignment() if slot.node is not None)
    snapshot.upsert_pod(PodInfo("local", "default", "local", node, Resources({GPU: 2})))
    await world.reconcile(b)
    assert placed_on(world, b) is None
    world.clock.advance(world.settings.queue_placement_timeout + 1)
    await world.kube_queue.run_pass()
    await work(world)
    assert phase(world, b) == "TimeoutBackoff"
    assert hold_key(key_of_job(b)) not in reserved(world) and record(world, b) is None
    assert released(world, b) == [
        "room held in member-1 released: the claimant's placement timed out (backed off)"
    ]


async def test_a_restart_rebuilds_the_hold_from_its_record():
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    claimant = key_of_job(b)
    before = world.kube_queue.admission.hold_of(claimant)
    assert before is not None

    restarted = world.new_kube_queue()
    world.kube_queue.holds.clear()  # the old process's views are gone with it
    assert hold_key(claimant) not in reserved(world)
    world.kube_queue = restarted
    world.shell.kube_queue = restarted
    world.triggers.member_lost = restarted.member_lost
    await restarted.process(restarted.RESTORE)
    await work(world)
    assert restarted.admission.hold_of(claimant) == before
    assert hold_key(claimant) in reserved(world)
    assert world.events("HoldReleased", b) == []

    # And it still does its work: the outsider is refused the room, B gets it.
    await victim_leaves(world, victim)
    x = outsider(world)
    await world.reconcile(x)
    assert placed_on(world, x) is None
    await world.reconcile(b)
    assert placed_on(world, b) == "member-1"
    await work(world)
    assert record(world, b) is None and hold_key(claimant) not in reserved(world)


def koordinator(world: World) -> None:
    """member-1 takes Koordinator Reservations from now on (A's gangs already run there)."""
    fake = world.members["member-1"]
    fake.member.declared_gang_scheduler = "Koordinator"
    fake.member.reservation = (600, 60.0)


def reservations(world: World) -> set[str]:
    return {o["metadata"]["name"] for o in world.members["member-1"].api.list(*RESERVATION)}


async def held_on_koordinator() -> tuple[World, WorkloadKey]:
    """B reclaims from A on member-1, which takes Koordinator Reservations; B's victim is still
    leaving (its pods are there), B not reconciled under the hold yet."""
    world = await reclaim_world()
    _, second = await borrowed_fleet(world)
    koordinator(world)
    world.clock.advance(3600)
    b = await start(world, "b1", "b")
    await world.reconcile(second)
    await work(world)
    return world, b


async def test_on_a_koordinator_member_the_held_room_is_reserved_for_the_claimant():
    world, b = await held_on_koordinator()
    await world.reconcile(b)  # its victim still leaving: its room is reserved for it already
    uid = world.workload(b)["metadata"]["uid"]  # type: ignore[index]
    made = reservations(world)
    assert made == {f"fleet-{uid}-master-0", f"fleet-{uid}-worker-0"}
    assert placed_on(world, b) is None

    # Long past the old bound (the victim's pods still there): the Reservations stay.
    world.clock.advance(SLOW)
    await world.kube_queue.run_pass()
    await work(world)
    assert world.kube_queue.admission.hold_of(key_of_job(b)) is not None
    assert reservations(world) == made
    # B is deleted: the hold ends, and the Reservations go with it.
    await world.kube_queue.forget(key_of_job(b))
    await work(world)
    assert world.kube_queue.admission.hold_of(key_of_job(b)) is None
    assert reservations(world) == set()


async def test_the_claimant_placed_on_its_koordinator_member_keeps_the_reservations_made():
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    koordinator(world)
    await world.reconcile(b)
    made = reservations(world)
    assert len(made) == 2
    await victim_leaves(world, victim)
    await world.reconcile(b)  # placed: Reserving, the same Reservations adopted
    assert placed_on(world, b) == "member-1"
    await work(world)  # the hold ends (Placed): they are the placement's now
    assert reservations(world) == made
    assert released(world, b) == ["room held in member-1 released: the claimant was placed"]


RACK = "topology.kubernetes.io/rack"


async def test_a_rack_bound_claimants_held_room_is_reserved_in_that_rack():
    """B's pods must share a rack: the Reservations made for its hold are pinned to the rack
    of the node its victim frees, so koord-scheduler cannot reserve the room in another."""
    world = await reclaim_world()
    fake = world.members["member-1"]
    for i in range(2):  # the member's two 4-GPU nodes, each a rack of its own
        fake.add_node(f"member-1-n{i}", gpus=4, labels={RACK: f"r{i}"})
    _, second = await borrowed_fleet(world)
    koordinator(world)
    world.clock.advance(3600)
    body = job("b1", "b")
    for spec in body["spec"]["pytorchReplicaSpecs"].values():
        spec["template"].setdefault("metadata", {})["annotations"] = {REQUIRED_ANNOTATION: RACK}
    b = world.submit(body)
    await world.reconcile(b)
    await work(world)
    await world.reconcile(second)  # the victim records its eviction
    await work(world)
    await world.reconcile(b)  # its victim still leaving: the room is reserved for it
    held = record(world, b)
    assert held is not None
    (node,) = {slot["node"] for slot in held["slots"]}
    rack = f"r{node.rsplit('-n', 1)[1]}"
    made = fake.api.list(*RESERVATION)
    assert len(made) == 2
    for reservation in made:
        spec = reservation["spec"]["template"]["spec"]
        required = spec["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        expression = {"key": RACK, "operator": "In", "values": [rack]}
        assert required["nodeSelectorTerms"] == [{"matchExpressions": [expression]}]


STEPS = (
    "pass",
    "restart",
    "leave",
    "settle",
    "kill",
    "place",
    "delete",
    "lose",
    "back",
    "time",
    "slow",
)


async def restart(world: World) -> None:
    """A new controller process: its views start empty, the queue is rebuilt from its objects."""
    world.kube_queue.holds.clear()
    restarted = world.new_kube_queue()
    restarted.holds.unreserve = world.kube_queue.holds.unreserve
    world.kube_queue = restarted
    world.shell.kube_queue = restarted
    world.triggers.member_lost = restarted.member_lost
    await restarted.process(restarted.RESTORE)


async def _orders(steps: list[str]) -> None:
    world = await reclaim_world()
    victim, b = await reclaimed(world)
    claimant = key_of_job(b)
    timeout = world.settings.queue_placement_timeout
    fake = world.members["member-1"]
    deleted = lost = False
    settled: float | None = None  # when the queue heard the victim's pods were gone
    for step in steps:
        if step == "restart":
            await restart(world)
        elif step == "leave" and world.workload(victim) is not None:
            world.clock.advance(31)
            await world.reconcile(victim)  # its copy deleted after the grace period
            if world.workload(victim) is not None:  # (deleted, it may be gone by now)
                pods_gone(world, victim)
        elif step == "settle":
            await world.reconcile(victim)  # sees its copy and pods gone, or not yet
        elif step == "kill" and world.workload(victim) is not None:
            await world.delete(victim)  # its user deletes it, its pods perhaps still there
            await world.reconcile(victim)
        elif step == "place":
            await world.reconcile(b)
        elif step == "delete":
            await world.delete(b)
            await world.reconcile(b)
            deleted = True
        elif step == "lose":
            fake.set_ready(False)
            world.triggers.health_changed("member-1", False)
            lost = True
        elif step == "back":
            fake.set_ready(True)
        elif step == "time":
            world.clock.advance(120)
        elif step == "slow":
            world.clock.advance(SLOW / 6)  # past the old bound of 360 s at one go
        await work(world)
        await world.kube_queue.run_pass()
        await work(world)
        if settled is None and (world.workload(victim) is None or not evicting(world, victim)):
            settled = world.clock.now()
        # The hold stands exactly where the queue says it does: in the view, on record.
        held = world.kube_queue.admission.hold_of(claimant)
        assert (hold_key(claimant) in reserved(world)) == (held is not None), step
        if world.kube_queue.units.get(claimant) is not None:
            assert (record(world, b) is not None) == (held is not None), step
        if held is not None:
            assert fake.member.ready and placed_on(world, b) is None
            assert held.freed == settled, step  # one clock: the moment the pods were gone
        # It ends by an exit only, never while B still waits for the room: the one clock is
        # B's placement timeout, which runs only from the moment its victim's pods are gone.
        phase_now = world.kube_queue.admission.phase(claimant)
        if phase_now == DEQUEUED and not (deleted or lost) and not released(world, b):
            assert held is not None, f"hold lost while B waits, after {step}"
        for message in released(world, b):
            if "backed off" in message:
                assert settled is not None and world.clock.now() >= settled + timeout, step
            elif "NotReady" in message:
                assert lost, step
            elif "deleted or ended" in message:
                assert deleted, step
            else:
                assert "the claimant was placed" in message, f"{message}, after {step}"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(st.sampled_from(STEPS), max_size=9))
@example(["slow"])  # the victim's pods take long to stop: past the old bound of 360 s
@example(["leave", "slow", "settle", "slow"])  # pods gone, then heard: the timeout from then
@example(["kill", "restart", "slow"])  # a deleted victim's pods, across a restart
@example(["kill", "leave", "settle", "restart", "time", "time", "time"])
def test_the_hold_stands_exactly_until_one_of_its_exits_whatever_the_order(steps: list[str]):
    asyncio.run(_orders(steps))


async def test_a_hold_reservation_that_expired_while_the_victims_leave_is_made_again():
    """The victim's pods take longer to leave than the Reservations' TTL (600 s here): one that
    expired in the member (phase Failed) keeps nothing, so the next look makes it again."""
    world, b = await held_on_koordinator()
    mark = len(world.queue.later)
    await world.reconcile(b)
    made = reservations(world)
    assert len(made) == 2
    # It asked to be looked at again before the TTL runs out.
    assert any(key == b and delay < 600 for key, delay in world.queue.later[mark:])

    member = world.members["member-1"]
    expired = sorted(made)[0]
    before = member.api.get(*RESERVATION, expired)
    assert before is not None
    member.api.merge(
        *RESERVATION,
        expired,
        None,
        {"status": {"phase": "Failed", "conditions": [{"type": "Ready", "reason": "Expired"}]}},
    )
    world.clock.advance(600)
    await world.reconcile(b)

    again = member.api.get(*RESERVATION, expired)
    assert again is not None
    assert again["metadata"]["uid"] != before["metadata"]["uid"]
    assert (again.get("status") or {}).get("phase") != "Failed"
    assert reservations(world) == made
