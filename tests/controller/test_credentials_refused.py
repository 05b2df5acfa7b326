"""A member that answers but refuses fleet's credentials is up, and its copies most likely run:
its gangs stay bound to it (no second copy anywhere, however long), the binding and an Event say
why and how to restore the credential, and a member that cannot be reached still fails over as
before (issue 32, path 4).
"""

from __future__ import annotations

from typing import Any

import pytest

from fleet.api import constants as c
from fleet.api import format_time
from fleet.core.taints import Taint
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, FakeMember, World, conditions
from tests.controller.test_reconciler import placed_on, status_of

TOLERATION = 30


def holding(world: World) -> list[str]:
    """Every member whose API server stores a copy of the job, reachable or not."""
    return sorted(name for name, fake in world.members.items() if fake.copy("job") is not None)


async def running_gang(world: World) -> tuple[Any, FakeMember, FakeMember]:
    """Two members, a gang running in one of them: (its key, that member, the other)."""
    world.add_member("west")
    world.add_member("south")
    world.apply_policy(gang_policy("gang", NAMESPACE, toleration_seconds=TOLERATION))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    first = world.members[placed_on(world, key) or ""]
    first.set_job_state("job", "Running")
    await world.reconcile(key)
    other = next(m for m in world.members.values() if m is not first)
    assert holding(world) == [first.name]
    return key, first, other


@pytest.mark.parametrize(
    "reason",
    [
        c.REASON_CREDENTIALS_REFUSED,  # 401/403: a token expired or revoked, RBAC removed
        c.REASON_CLUSTER_ID_MISMATCH,
        c.REASON_KUBECONFIG_SECRET_MISSING,
        c.REASON_KUBECONFIG_SECRET_UNREADABLE,
        c.REASON_KUBECONFIG_INVALID,
        c.REASON_DUPLICATE_CLUSTER,
    ],
)
async def test_a_member_refusing_fleets_credentials_keeps_its_gang_and_says_why(reason: str):
    world = World()
    key, first, _other = await running_gang(world)
    refused_at = world.clock.now()
    first.refuse(reason, since=world.clock.monotonic())

    for _ in range(3):  # far past tolerationSeconds, looked at again and again
        await world.reconcile(key)
        world.clock.advance(TOLERATION + 1)
    await world.reconcile(key)

    # No second copy anywhere, no failover, no lost-cluster clock.
    assert placed_on(world, key) == first.name
    assert holding(world) == [first.name]
    status = status_of(world, key)
    assert "clusterLostSince" not in status and not status.get("failoverCount")
    assert not world.events("FailoverTriggered", key)
    assert not world.events("FailoverPending", key)
    assert world.metrics.failovers.values == {}
    # The binding says why, naming the member, its reason, since when and the way back.
    healthy = conditions(world.binding(key))[c.CONDITION_HEALTHY]
    assert (healthy["status"], healthy["reason"]) == ("Unknown", c.REASON_CREDENTIALS_REFUSED)
    message = healthy["message"]
    assert first.name in message and reason in message
    assert f"since {format_time(refused_at)}" in message
    if reason in (c.REASON_KUBECONFIG_SECRET_UNREADABLE, c.REASON_DUPLICATE_CLUSTER):
        # Not cured by fleet join: the MemberCluster's own message says what to do.
        assert f"kubectl describe membercluster {first.name}" in message
    else:
        assert f"fleet join {first.name} " in message
    # Said once, as a Warning, with the same words, however often the gang is looked at.
    (event,) = world.events(c.REASON_CREDENTIALS_REFUSED, key)
    assert event["type"] == "Warning" and event["message"] == message


async def test_restoring_the_credential_resumes_the_gang_where_it_runs():
    world = World()
    key, first, _other = await running_gang(world)
    first.refuse(since=world.clock.monotonic())
    await world.reconcile(key)
    world.clock.advance(TOLERATION + 1)
    await world.reconcile(key)

    first.set_ready(True, since=world.clock.monotonic())  # re-joined: the member answers again
    await world.reconcile(key)
    world.clock.advance(TOLERATION + 1)
    await world.reconcile(key)

    assert placed_on(world, key) == first.name and holding(world) == [first.name]
    healthy = conditions(world.binding(key))[c.CONDITION_HEALTHY]
    assert (healthy["status"], healthy["reason"]) == ("True", c.REASON_HEALTHY)
    assert status_of(world, key)["phase"] == "Running"
    assert not world.events("FailoverTriggered", key)
    # The copy's own failure is judged again once it can be seen.
    first.set_job_state("job", "Failed")
    await world.reconcile(key)
    assert "unhealthySince" in status_of(world, key)


async def test_a_member_that_cannot_be_reached_still_fails_over():
    world = World()
    key, first, other = await running_gang(world)
    first.set_ready(False, since=world.clock.monotonic())
    await world.reconcile(key)
    assert "clusterLostSince" in status_of(world, key)
    world.clock.advance(TOLERATION + 1)
    await world.reconcile(key)

    assert placed_on(world, key) == other.name
    assert status_of(world, key)["failoverHistory"][0]["reason"] == "ClusterLost"
    assert not world.events(c.REASON_CREDENTIALS_REFUSED, key)


async def test_a_lost_clock_stops_when_the_member_turns_out_to_refuse_fleets_credentials():
    """Unreachable for a while (the clock runs), then it answers with a 401: the clock is
    dropped, and the gang stays past the deadline the loss would have had."""
    world = World()
    key, first, _other = await running_gang(world)
    first.set_ready(False, since=world.clock.monotonic())
    await world.reconcile(key)
    world.clock.advance(TOLERATION - 5)
    first.refuse(since=world.clock.monotonic())
    await world.reconcile(key)
    assert "clusterLostSince" not in status_of(world, key)
    world.clock.advance(TOLERATION)
    await world.reconcile(key)

    assert placed_on(world, key) == first.name and holding(world) == [first.name]


async def test_a_refusing_member_still_gives_its_gang_up_to_an_untolerated_noexecute_taint():
    """The operator's own ground for moving a gang holds whatever fleet can see of the member."""
    world = World()
    key, first, other = await running_gang(world)
    first.refuse(since=world.clock.monotonic())
    await world.reconcile(key)
    first.member.taints = (Taint("maintenance", "NoExecute"),)
    await world.reconcile(key)

    assert placed_on(world, key) == other.name
    assert status_of(world, key)["failoverHistory"][0]["reason"] == "TaintUntolerated"
