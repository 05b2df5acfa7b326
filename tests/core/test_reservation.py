"""Reservation-backed placement: the plan for a gang and the verdict on what the member says."""

from __future__ import annotations

from fleet.core import lifecycle
from fleet.core.reservation import (
    FallBack,
    KeepWaiting,
    Reserved,
    SeenReservation,
    judge_reservations,
    plan_reservations,
    reservation_name,
)
from fleet.core.resources import Resources
from fleet.core.workload import Component, Gang, WorkloadRef

UID = "0b1c2d3e-aaaa-bbbb-cccc-000000000001"
TFJOB = Gang(
    WorkloadRef("kubeflow.org/v1", "TFJob", "default", "tf-smoke-gpu"),
    (
        Component("ps", 1, Resources({"cpu": 1000})),
        Component("worker", 4, Resources({"nvidia.com/gpu": 2})),
    ),
    min_member=5,
)


def test_one_reservation_per_pod_of_the_minimum_set_named_for_the_gang() -> None:
    plan = plan_reservations(TFJOB, UID, ttl_seconds=300)
    assert [(r.role, r.index) for r in plan.reservations] == [
        ("ps", 0),
        ("worker", 0),
        ("worker", 1),
        ("worker", 2),
        ("worker", 3),
    ]
    assert plan.names[0] == f"fleet-{UID}-ps-0" == reservation_name(UID, "PS", 0)
    assert plan.prefix == f"fleet-{UID}" and plan.ttl_seconds == 300
    assert plan_reservations(TFJOB, UID) == plan_reservations(TFJOB, UID)  # deterministic


def test_a_smaller_minimum_reserves_only_what_must_start_together() -> None:
    gang = Gang(TFJOB.ref, TFJOB.components, min_member=3)
    assert [(r.role, r.index) for r in plan_reservations(gang, UID).reservations] == [
        ("ps", 0),
        ("worker", 0),
        ("worker", 1),
    ]


def _seen(*phases: str | None) -> dict[str, SeenReservation]:
    plan = plan_reservations(TFJOB, UID)
    return {n: SeenReservation(p) for n, p in zip(plan.names, phases, strict=False) if p}  # type: ignore[arg-type]


def test_dispatch_when_all_are_available() -> None:
    plan = plan_reservations(TFJOB, UID)
    assert judge_reservations(plan, _seen(*["Available"] * 5), since=0, now=5) == Reserved()


def test_wait_while_some_are_pending_then_fall_back_when_the_wait_runs_out() -> None:
    plan = plan_reservations(TFJOB, UID)
    seen = _seen("Available", "Available", "Pending")
    waiting = judge_reservations(plan, seen, since=100, now=110, wait_seconds=60)
    assert waiting == KeepWaiting(available=2, total=5, recheck_at=160)
    assert waiting.progress == "2 of 5 Reservations Available"
    late = judge_reservations(plan, seen, since=100, now=160, wait_seconds=60)
    assert isinstance(late, FallBack) and "only 2 of 5" in late.reason


def test_a_failed_or_consumed_reservation_falls_back_at_once() -> None:
    plan = plan_reservations(TFJOB, UID)
    failed = dict(_seen("Available"))
    failed[plan.names[3]] = SeenReservation("Failed", message="no node fits")
    verdict = judge_reservations(plan, failed, since=0, now=1)
    assert verdict == FallBack(f"Reservation {plan.names[3]} is Failed: no node fits")
    taken = {plan.names[0]: SeenReservation("Succeeded")}
    assert isinstance(judge_reservations(plan, taken, since=0, now=1), FallBack)


def test_the_lifecycle_reserves_then_dispatches_or_falls_back_without_a_failover() -> None:
    b = lifecycle.reserving(lifecycle.Binding(), "m1", 10, group="g")
    assert (b.phase, b.cluster, b.reserving_since, b.affinity_group) == ("Reserving", "m1", 10, "g")
    assert (
        lifecycle.reserved(b).phase == "Scheduled" and lifecycle.reserved(b).reserving_since is None
    )
    back = lifecycle.reservation_failed(b, "timed out", 70, retry_after=120)
    assert (back.phase, back.cluster, back.reserving_since) == ("Pending", None, None)
    assert back.failover_count == 0  # nothing ran: not a failover
    assert back.excluded(100) == {"m1": "ReservationFailed: timed out"}
    assert back.excluded(190) == {}
    assert back.stays == (lifecycle.Stay("m1", 10, 70, "ReservationFailed"),)


def test_who_decides_whether_a_gang_is_reserved():
    from fleet.core.reservation import reserves

    for member_enabled in (True, False):
        for policy in ("Enabled", "Disabled", None):
            assert not reserves(supported=False, member_enabled=member_enabled, policy=policy)
    assert reserves(supported=True, member_enabled=False, policy="Enabled")
    assert not reserves(supported=True, member_enabled=True, policy="Disabled")
    assert reserves(supported=True, member_enabled=True, policy=None)
    assert not reserves(supported=True, member_enabled=False, policy=None)
