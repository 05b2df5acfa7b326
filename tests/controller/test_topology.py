"""The policy's gangTopology reaches placement through the shell: the binding says which rack
holds the gang, or, while none does, how close each member came, in its pendingReasons facts."""

from __future__ import annotations

from typing import Any

from fleet.api import constants as c
from fleet.core.placement import INSUFFICIENT
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, World, conditions

RACK = "topology.kubernetes.io/rack"


def rack_policy(mode: str = "Required") -> dict[str, Any]:
    policy = gang_policy("gang", NAMESPACE)
    strategy = policy["spec"]["placement"]["replicaScheduling"]
    strategy["gangTopology"] = {"level": RACK, "mode": mode}
    return policy


def status_of(world: World, key: Any) -> dict[str, Any]:
    return (world.binding(key) or {}).get("status") or {}


def placed_on(world: World, key: Any) -> str | None:
    clusters = ((world.binding(key) or {}).get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


async def test_a_required_rack_goes_to_the_member_whose_one_rack_holds_the_gang():
    world = World()
    spread = world.add_member("member-1", nodes=0)
    for i in range(4):  # 4 GPUs, one per rack
        spread.add_node(f"member-1-n{i}", gpus=1, labels={RACK: f"a{i}"})
    whole = world.add_member("member-2", nodes=0)
    whole.add_node("member-2-n0", gpus=3, labels={RACK: "b0"})
    world.apply_policy(rack_policy())
    key = world.submit(pytorchjob("job"))  # master + 2 workers, 1 GPU each

    await world.reconcile(key)

    assert placed_on(world, key) == "member-2"
    scheduled = conditions(world.binding(key))[c.CONDITION_SCHEDULED]
    assert "rack b0 holds the gang" in scheduled["message"]


async def test_while_no_rack_holds_it_the_gang_waits_and_the_facts_name_the_largest_rack():
    world = World()
    spread = world.add_member("member-1", nodes=0)
    spread.add_node("member-1-n0", gpus=2, labels={RACK: "a0"})
    spread.add_node("member-1-n1", gpus=1, labels={RACK: "a1"})
    world.apply_policy(rack_policy())
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) is None
    (reason,) = status_of(world, key)["pendingReasons"]
    assert reason["code"] == INSUFFICIENT
    facts = reason["facts"]
    assert (facts["largestDomain"], facts["podsThatFit"], facts["pods"]) == ("a0", 2, 3)
    assert facts["topologyLevel"] == RACK
    assert spread.copy("job") is None


async def test_preferred_goes_spread_when_no_rack_holds_it():
    world = World()
    spread = world.add_member("member-1", nodes=0)
    spread.add_node("member-1-n0", gpus=2, labels={RACK: "a0"})
    spread.add_node("member-1-n1", gpus=1, labels={RACK: "a1"})
    world.apply_policy(rack_policy("Preferred"))
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) == "member-1"
