"""Reservation-backed dispatch to a Koordinator member: reserve, wait, dispatch or fall back,
clean up (the shell over the in-memory API servers, the clock moved by hand)."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.api import constants as c
from fleet.api import format_time
from fleet.controller.reserving import CONDITION_RESERVED, RECHECK_SECONDS, RESERVATION, wanted
from fleet.core.kinds import ADAPTERS
from fleet.core.reservation import DEFAULT_RETRY_AFTER_SECONDS
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, FakeMember, World, conditions
from tests.controller.test_topology import RACK, rack_policy

WAIT = 60.0


def koordinator_member(world: World, name: str, *, gpus: int = 4) -> FakeMember:
    fake = world.add_member(name, gpus=gpus)
    fake.member.declared_gang_scheduler = "Koordinator"
    fake.member.reservation = (600, WAIT)
    return fake


def reservations(member: FakeMember) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in member.api.list(*RESERVATION)}


def set_phase(member: FakeMember, name: str, phase: str, **status: Any) -> None:
    member.api.merge(*RESERVATION, name, None, {"status": {"phase": phase, **status}})


def binding_status(world: World, key: Any) -> dict[str, Any]:
    return (world.binding(key) or {}).get("status") or {}


def placed_on(world: World, key: Any) -> str | None:
    clusters = ((world.binding(key) or {}).get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


def preferring(first: str, then: str) -> dict[str, Any]:
    policy = gang_policy("gang", NAMESPACE)
    policy["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "koordinator", "clusterNames": [first]},
        {"affinityName": "other", "clusterNames": [then]},
    ]
    return policy


async def test_reserves_one_reservation_per_pod_before_dispatching_then_dispatches():
    world = World()
    member = koordinator_member(world, "member-k")
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))
    uid = world.workload(key)["metadata"]["uid"]

    await world.reconcile(key)

    made = reservations(member)
    assert sorted(made) == [
        f"fleet-{uid}-master-0",
        f"fleet-{uid}-worker-0",
        f"fleet-{uid}-worker-1",
    ]
    worker = made[f"fleet-{uid}-worker-0"]
    assert worker["spec"]["owners"] == [
        {"labelSelector": {"matchLabels": {c.FLEET_UID_LABEL: uid, c.ROLE_LABEL: "worker"}}}
    ]
    assert worker["spec"]["ttl"] == "600s" and worker["spec"]["allocateOnce"] is True
    # No gang annotations: koord-scheduler retries a gang of unschedulable Reservations in a
    # tight loop (fleet.core.reservation); fleet itself waits for all of them.
    annotations = worker["metadata"]["annotations"]
    assert not {a for a in annotations if a.startswith("gang.scheduling.koordinator.sh/")}
    assert worker["metadata"]["labels"][c.MANAGED_BY_LABEL] == world.settings.fleet_id
    requests = worker["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests["nvidia.com/gpu"] == 1  # the limit, as the pod writes it
    # Nothing is dispatched yet: the binding says it is reserving, and it looks again soon.
    assert member.copy("job") is None
    assert binding_status(world, key)["phase"] == "Reserving"
    reserved = conditions(world.binding(key))[CONDITION_RESERVED]
    assert (reserved["status"], reserved["reason"]) == ("False", "Reserving")
    assert (key, RECHECK_SECONDS) in world.queue.later
    assert world.metrics.reservation_attempts.values == {"member-k": 1}

    for name in made:
        set_phase(member, name, "Available", nodeName="member-k-n0")
    world.clock.advance(2)
    await world.reconcile(key)

    assert member.copy("job") is not None
    assert binding_status(world, key)["phase"] == "Dispatched"
    assert conditions(world.binding(key))[CONDITION_RESERVED]["status"] == "True"
    assert world.events("Reserved", key)
    assert world.metrics.reservation_seconds.sum == 2


async def test_a_restarted_controller_adopts_the_reservations_it_made():
    world = World()
    member = koordinator_member(world, "member-k")
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    before = {n: o["metadata"]["uid"] for n, o in reservations(member).items()}

    world.clock.advance(5)
    await world.reconcile(key)  # as a restarted controller would: same names, nothing new

    assert {n: o["metadata"]["uid"] for n, o in reservations(member).items()} == before
    assert world.metrics.reservation_attempts.values == {"member-k": 1}
    assert binding_status(world, key)["phase"] == "Reserving"


async def test_a_wait_that_runs_out_deletes_them_all_and_places_the_gang_elsewhere():
    world = World()
    koord = koordinator_member(world, "member-k")
    other = world.add_member("member-2")
    world.apply_policy(preferring("member-k", "member-2"))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    assert placed_on(world, key) == "member-k" and reservations(koord)

    world.clock.advance(WAIT + 1)
    await world.reconcile(key)

    assert reservations(koord) == {}
    status = binding_status(world, key)
    assert status["phase"] == "Pending"
    failed = conditions(world.binding(key))[CONDITION_RESERVED]
    assert failed["reason"] == "ReservationFailed" and "within 60s" in failed["message"]
    assert world.events("ReservationFailed", key)[0]["type"] == "Warning"
    assert world.metrics.reservation_failures.values == {"Timeout": 1}
    assert key in world.queue.added

    await world.reconcile(key)

    assert placed_on(world, key) == "member-2"
    assert other.copy("job") is not None and koord.copy("job") is None
    excluded = binding_status(world, key)["excludedClusters"]
    assert [e["name"] for e in excluded] == ["member-k"]
    assert excluded[0]["until"] == format_time(world.clock.now() + DEFAULT_RETRY_AFTER_SECONDS)
    assert excluded[0]["reason"].startswith("ReservationFailed")


async def test_a_failed_reservation_falls_back_at_once():
    world = World()
    koord = koordinator_member(world, "member-k")
    world.add_member("member-2")
    world.apply_policy(preferring("member-k", "member-2"))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    first = sorted(reservations(koord))[0]
    set_phase(
        koord,
        first,
        "Failed",
        conditions=[{"type": "Ready", "status": "False", "reason": "Expired", "message": "ttl"}],
    )

    world.clock.advance(1)
    await world.reconcile(key)

    assert reservations(koord) == {}
    message = conditions(world.binding(key))[CONDITION_RESERVED]["message"]
    assert f"Reservation {first} is Failed" in message and "Expired" in message
    assert world.metrics.reservation_failures.values == {"Failed": 1}
    await world.reconcile(key)
    assert placed_on(world, key) == "member-2"


async def test_deleting_a_reserving_job_deletes_its_reservations():
    world = World()
    koord = koordinator_member(world, "member-k")
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    assert reservations(koord)

    await world.delete(key)
    await world.reconcile(key)

    assert reservations(koord) == {}
    assert world.workload(key) is None


async def test_reservations_are_deleted_once_the_job_runs():
    world = World()
    koord = koordinator_member(world, "member-k")
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    for name in reservations(koord):
        set_phase(koord, name, "Available", nodeName="member-k-n0")
    await world.reconcile(key)
    assert koord.copy("job") is not None and reservations(koord)

    koord.set_job_state("job", "Running")
    await world.reconcile(key)

    assert reservations(koord) == {}
    released = conditions(world.binding(key))[CONDITION_RESERVED]
    assert (released["status"], released["reason"]) == ("False", "Released")


async def test_members_without_reservation_dispatch_at_once():
    world = World()
    plain = world.add_member("member-1")
    plain.member.declared_gang_scheduler = "Koordinator"  # but spec.reservation is off
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert plain.copy("job") is not None and reservations(plain) == {}
    assert CONDITION_RESERVED not in conditions(world.binding(key))


@pytest.mark.parametrize(
    ("member_enables", "policy_says", "reserves"),
    [
        (False, "Enabled", True),
        (True, "Disabled", False),
        (True, None, True),
        (False, None, False),
    ],
)
async def test_the_policy_chooses_reservations_over_the_members_default(
    member_enables, policy_says, reserves
):
    world = World()
    member = koordinator_member(world, "member-k")
    if not member_enables:
        member.member.reservation = None
    policy = gang_policy("gang", NAMESPACE)
    if policy_says is not None:
        strategy = policy["spec"]["placement"]["replicaScheduling"]
        strategy["gangReservation"] = policy_says
    world.apply_policy(policy)
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) == "member-k"
    assert (binding_status(world, key)["phase"] == "Reserving") is reserves
    assert bool(reservations(member)) is reserves
    assert (member.copy("job") is not None) is not reserves  # without reservations: dispatched


async def test_a_policy_cannot_reserve_where_the_scheduler_has_no_reservations():
    world = World()
    member = world.add_member("member-c", gpus=4)  # coscheduling: no Reservation kind
    policy = gang_policy("gang", NAMESPACE)
    policy["spec"]["placement"]["replicaScheduling"]["gangReservation"] = "Enabled"
    world.apply_policy(policy)
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert binding_status(world, key)["phase"] != "Reserving"
    assert member.copy("job") is not None


async def test_a_failover_deletes_what_was_reserved_for_the_failed_copy():
    """Reservations not yet consumed when the job fails go with the copy the failover purges."""
    world = World()
    koord = koordinator_member(world, "member-k")
    world.add_member("member-2", gpus=4)
    policy = preferring("member-k", "member-2")
    policy["spec"]["failover"]["application"]["decisionConditions"]["tolerationSeconds"] = 0
    world.apply_policy(policy)
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    for name in reservations(koord):
        set_phase(koord, name, "Available", nodeName="member-k-n0")
    await world.reconcile(key)
    assert koord.copy("job") is not None and reservations(koord)

    koord.set_job_state("job", "Failed")
    await world.reconcile(key)
    await world.reconcile(key)

    assert placed_on(world, key) == "member-2"
    assert koord.copy("job") is None
    assert reservations(koord) == {}


def test_a_kind_whose_pods_cannot_consume_reservations_is_never_reserved_for():
    world = World()
    member = koordinator_member(world, "member-k").member
    assert wanted(member, None)
    assert not wanted(member, None, reservable=False)
    assert not wanted(member, "Enabled", reservable=False)  # not even when the policy asks
    # A TrainJob's templates are its runtime's: its pods never carry fleet's labels.
    assert [a.kind for a in ADAPTERS if not a.reservable] == ["TrainJob"]


async def test_a_rack_bound_gangs_reservations_keep_to_the_rack_its_placement_chose():
    """As its pods are pinned to the rack (the member copy), so are its Reservations: else
    koord-scheduler may reserve the room in another rack, where the pinned pods cannot use it."""
    world = World()
    member = world.add_member("member-k", nodes=0)
    member.member.declared_gang_scheduler = "Koordinator"
    member.member.reservation = (600, WAIT)
    member.add_node("member-k-n0", gpus=1, labels={RACK: "a0"})
    member.add_node("member-k-n1", gpus=3, labels={RACK: "a1"})
    world.apply_policy(rack_policy())
    key = world.submit(pytorchjob("job"))  # master + 2 workers, 1 GPU each: rack a1 alone
    uid = world.workload(key)["metadata"]["uid"]  # type: ignore[index]
    # One made earlier in rack a0 (a hold's, for a room in another rack): not adopted as is.
    elsewhere = f"fleet-{uid}-master-0"
    member.api.put(
        {
            "apiVersion": RESERVATION[0],
            "kind": RESERVATION[1],
            "metadata": {"name": elsewhere, "labels": {c.FLEET_UID_LABEL: uid}},
            "spec": {"template": {"spec": {"affinity": {"nodeAffinity": {}}}}},
        }
    )

    await world.reconcile(key)

    made = reservations(member)
    assert elsewhere not in made and len(made) == 2  # deleted; made again once gone
    world.clock.advance(RECHECK_SECONDS)
    await world.reconcile(key)
    made = reservations(member)
    assert len(made) == 3
    expression = {"key": RACK, "operator": "In", "values": ["a1"]}
    for reservation in made.values():
        affinity = reservation["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        required = affinity["requiredDuringSchedulingIgnoredDuringExecution"]
        assert required["nodeSelectorTerms"] == [{"matchExpressions": [expression]}]
