"""A gang whose pods the member's scheduler refuses: not Healthy past its gang schedule timeout,
with the member's word on the binding, the fleet job and an Event; failed over
tolerationSeconds later. A gang that starts in time is left alone."""

from __future__ import annotations

from typing import Any

from fleet.api import constants as c
from fleet.api import format_time
from fleet.controller.triggers import STATUS_COALESCE_SECONDS
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, FakeMember, World, conditions

REFUSAL = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."


def placed_on(world: World, key: Any) -> str | None:
    clusters = ((world.binding(key) or {}).get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


def status_of(world: World, key: Any) -> dict[str, Any]:
    return (world.binding(key) or {}).get("status") or {}


def pod(world: World, key: Any, name: str, *, node: str | None = None, refused: bool = True):
    """A pod of the job's copy as the member's operator makes it (fleet's UID label), Pending
    and refused by the member's scheduler, or bound to `node`."""
    uid = world.workload(key)["metadata"]["uid"]
    status: dict[str, Any] = {"phase": "Pending" if node is None else "Running"}
    if node is None and refused:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": REFUSAL,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"pod-{name}",
            "labels": {c.FLEET_UID_LABEL: uid},
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
            **({"nodeName": node} if node else {}),
        },
        "status": status,
    }


async def dispatched(world: World, key: Any) -> FakeMember:
    await world.reconcile(key)
    member = world.members[placed_on(world, key) or ""]
    member.set_job_state("job", "Created")
    await world.reconcile(key)
    return member


async def dispatched_job(
    *, members: int, toleration: int, timeout: int
) -> tuple[World, Any, FakeMember]:
    """A job dispatched under a Gang policy with `tolerationSeconds` and a gang schedule
    timeout, among `members` members: the world, its key and the member it went to."""
    world = World()
    for i in range(members):
        world.add_member(f"member-{i + 1}")
    world.apply_policy(
        gang_policy(
            "gang",
            NAMESPACE,
            toleration_seconds=toleration,
            gang_schedule_timeout_seconds=timeout,
        )
    )
    key = world.submit(pytorchjob("job"))
    return world, key, await dispatched(world, key)


async def test_a_gang_refused_past_its_timeout_is_not_healthy_then_fails_over():
    world, key, first = await dispatched_job(members=2, toleration=30, timeout=60)
    other = next(m for m in world.members.values() if m is not first)

    # The member's scheduler refuses the gang's pods: the job is looked at again, the clock
    # starts (persisted), and nothing is said yet.
    later = len(world.queue.later)
    for i in range(3):
        world.pod_event(first, "ADDED", pod(world, key, f"job-worker-{i}"))
    assert world.queue.later[later:] == [(key, STATUS_COALESCE_SECONDS)]  # the first refusal
    await world.reconcile(key)
    refused_at = world.clock.now()
    assert status_of(world, key)["gangUnschedulableSince"] == format_time(refused_at)
    assert conditions(world.binding(key))["Healthy"]["status"] == "True"
    assert [d for k, d in world.queue.later if k == key and 60 <= d <= 61]

    # Past the timeout: Healthy=False with the member's word, the job's Scheduled too, one
    # Warning Event, and the failover is tolerationSeconds away.
    world.clock.advance(60)
    await world.reconcile(key)
    healthy = conditions(world.binding(key))["Healthy"]
    assert (healthy["status"], healthy["reason"]) == ("False", "GangUnschedulable")
    assert REFUSAL in healthy["message"] and first.name in healthy["message"]
    scheduled = conditions(world.workload(key))["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "GangUnschedulable")
    assert REFUSAL in scheduled["message"]
    (event,) = world.events("GangUnschedulable", key)
    assert event["type"] == "Warning" and REFUSAL in event["message"]
    assert placed_on(world, key) == first.name
    await world.reconcile(key)
    assert len(world.events("GangUnschedulable", key)) == 1  # said once

    # tolerationSeconds later: failed over, counted, elsewhere.
    world.clock.advance(30)
    await world.reconcile(key)
    status = status_of(world, key)
    assert [(f["fromCluster"], f["reason"]) for f in status["failoverHistory"]] == [
        (first.name, "GangUnschedulable")
    ]
    assert status["failoverCount"] == 1
    assert "gangUnschedulableSince" not in status
    assert placed_on(world, key) == other.name
    assert other.copy("job") is not None and first.copy("job") is None
    assert world.metrics.failovers.values == {"GangUnschedulable": 1}
    assert conditions(world.binding(key))["Healthy"]["status"] == "True"


async def test_a_gang_that_starts_within_its_timeout_is_left_alone():
    world, key, first = await dispatched_job(members=2, toleration=0, timeout=60)

    # Pods merely created (not tried yet) start no clock.
    world.pod_event(first, "ADDED", pod(world, key, "job-worker-0", refused=False))
    await world.reconcile(key)
    assert "gangUnschedulableSince" not in status_of(world, key)

    # Refused for a while, then bound within the timeout: the clock clears.
    world.pod_event(first, "MODIFIED", pod(world, key, "job-worker-0"))
    await world.reconcile(key)
    assert "gangUnschedulableSince" in status_of(world, key)
    world.clock.advance(50)
    node = f"{first.name}-n0"
    world.pod_event(first, "MODIFIED", pod(world, key, "job-worker-0", node=node))
    await world.reconcile(key)
    assert "gangUnschedulableSince" not in status_of(world, key)

    world.clock.advance(3600)
    await world.reconcile(key)
    assert placed_on(world, key) == first.name
    assert conditions(world.binding(key))["Healthy"]["status"] == "True"
    assert conditions(world.workload(key))["Scheduled"]["status"] == "True"
    assert not world.events("GangUnschedulable", key)
    assert "failoverHistory" not in status_of(world, key)


async def test_a_running_job_with_a_pod_refused_is_not_stuck():
    world, key, first = await dispatched_job(members=1, toleration=0, timeout=10)
    first.set_job_state("job", "Running")
    world.pod_event(first, "ADDED", pod(world, key, "job-worker-1"))
    await world.reconcile(key)
    world.clock.advance(600)
    await world.reconcile(key)
    assert placed_on(world, key) == first.name
    assert conditions(world.binding(key))["Healthy"]["reason"] == "Healthy"
    assert not world.events("GangUnschedulable", key)
