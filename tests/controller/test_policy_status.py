"""A policy whose customSchedulingType fleet does not know is told so, on the policy itself: a
Warning Event and status condition Recognized=False naming the accepted value, Gang. Fixing it
clears the condition; a policy fleet knows costs no status write."""

from __future__ import annotations

import copy

from fleet.api import constants as c
from fleet.controller.policies import explain_policy
from fleet.kube import Obj
from fleet.testing.workloads import gang_policy
from tests.controller.harness import NAMESPACE, World, conditions

POLICY = (c.POLICY_API_VERSION, "PropagationPolicy")
CLUSTER_POLICY = (c.POLICY_API_VERSION, "ClusterPropagationPolicy")


async def observe(world: World, stored: Obj) -> Obj:
    """What the controller does when the policy's watch event arrives (and it leads)."""
    report = world.policies.upsert(stored)
    await explain_policy(
        stored,
        report,
        fleet=world.fleet,
        events=world.events_recorder,
        now=world.clock.now(),
    )
    meta = stored["metadata"]
    found = world.fleet_api.get(*POLICY, meta["name"], meta.get("namespace"))
    if found is None:
        found = world.fleet_api.get(*CLUSTER_POLICY, meta["name"])
    assert found is not None
    return found


def with_type(policy: Obj, value: str | None) -> Obj:
    policy = copy.deepcopy(policy)
    rs = policy["spec"]["placement"]["replicaScheduling"]
    if value is None:
        rs.pop("customSchedulingType")
    else:
        rs["customSchedulingType"] = value
    return policy


async def test_a_lower_case_gang_gets_an_event_and_a_condition_naming_gang() -> None:
    world = World()
    stored = world.apply_policy(with_type(gang_policy("typo", NAMESPACE), "gang"))
    seen = await observe(world, stored)
    recognized = conditions(seen)[c.CONDITION_RECOGNIZED]
    assert recognized["status"] == "False"
    assert recognized["reason"] == c.REASON_UNKNOWN_SCHEDULING_TYPE
    assert recognized["observedGeneration"] == 1
    assert recognized["message"] == (
        "spec.placement.replicaScheduling.customSchedulingType: 'gang' is not a value fleet "
        "knows (values are case-sensitive); the accepted value is 'Gang'. fleet does not act "
        "on the workloads this policy selects"
    )
    (event,) = world.fleet_api.events(c.REASON_UNKNOWN_SCHEDULING_TYPE, about="typo")
    assert event["type"] == "Warning" and event["message"] == recognized["message"]
    assert event["involvedObject"]["kind"] == "PropagationPolicy"

    # Fixed: the condition turns True, and the policy is fleet's again.
    fixed = world.apply_policy({**with_type(seen, "Gang"), "status": seen.get("status")})
    seen = await observe(world, fixed)
    recognized = conditions(seen)[c.CONDITION_RECOGNIZED]
    assert (recognized["status"], recognized["reason"]) == ("True", c.REASON_GANG)
    assert recognized["observedGeneration"] == 2


async def test_any_unknown_value_on_a_cluster_policy_is_told_too() -> None:
    world = World()
    policy = with_type(gang_policy("other", NAMESPACE), "Coscheduling")
    policy["kind"] = "ClusterPropagationPolicy"
    del policy["metadata"]["namespace"]
    seen = await observe(world, world.apply_policy(policy))
    recognized = conditions(seen)[c.CONDITION_RECOGNIZED]
    assert recognized["status"] == "False"
    assert (
        "'Coscheduling' is not a value fleet knows; the accepted value is 'Gang'"
        in (recognized["message"])
    )
    assert world.fleet_api.events(c.REASON_UNKNOWN_SCHEDULING_TYPE, about="other")


async def test_policies_fleet_knows_get_no_status_write() -> None:
    world = World()
    for policy in (
        gang_policy("gang", NAMESPACE),
        with_type(gang_policy("plain", NAMESPACE), None),
    ):
        seen = await observe(world, world.apply_policy(policy))
        assert not seen.get("status")
    assert not world.fleet_api.asked("PATCH", "/status")
    assert not world.fleet_api.events(c.REASON_UNKNOWN_SCHEDULING_TYPE)
