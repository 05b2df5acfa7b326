"""The policy's gangTopology reaches placement through the shell: the binding says which rack
holds the gang, or, while none does, how close each member came, in its pendingReasons facts."""

from __future__ import annotations

from typing import Any

from fleet.api import constants as c
from fleet.core.domainwait import WAITING_FOR_DOMAIN, stamp
from fleet.core.placement import INSUFFICIENT
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, PYTORCH, World, conditions

RACK = "topology.kubernetes.io/rack"


def rack_policy(mode: str = "Required", wait_seconds: int | None = None) -> dict[str, Any]:
    policy = gang_policy("gang", NAMESPACE)
    strategy = policy["spec"]["placement"]["replicaScheduling"]
    strategy["gangTopology"] = {"level": RACK, "mode": mode}
    if wait_seconds is not None:
        strategy["gangTopology"]["waitSeconds"] = wait_seconds
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


def spread_world(wait_seconds: int | None) -> tuple[World, Any]:
    """One member whose racks hold the gang (master + 2 workers, 1 GPU each) only spread."""
    world = World()
    spread = world.add_member("member-1", nodes=0)
    spread.add_node("member-1-n0", gpus=2, labels={RACK: "a0"})
    spread.add_node("member-1-n1", gpus=1, labels={RACK: "a1"})
    world.apply_policy(rack_policy("Preferred", wait_seconds))
    return world, spread


async def test_preferred_without_a_wait_goes_spread_when_no_rack_holds_it():
    world, _ = spread_world(0)
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) == "member-1"


async def test_preferred_waits_for_a_rack_then_goes_spread_when_its_wait_runs_out():
    world, spread = spread_world(600)
    key = world.submit(pytorchjob("job"))
    started = world.clock.now()

    await world.reconcile(key)

    # Waiting: no copy, the binding says for what and until when, and it is requeued then.
    assert placed_on(world, key) is None and spread.copy("job") is None
    status = status_of(world, key)
    assert status["domainWaitSince"] is not None
    (reason,) = status["pendingReasons"]
    assert reason["code"] == WAITING_FOR_DOMAIN
    until = stamp(started + 600)
    assert reason["facts"]["waitingUntil"] == until
    assert f"waiting for one rack until {until}" in reason["reason"]
    scheduled = conditions(world.binding(key))[c.CONDITION_SCHEDULED]
    assert scheduled["reason"] == c.REASON_WAITING_FOR_DOMAIN
    assert until in scheduled["message"]
    assert any(k == key and 599 <= delay <= 601 for k, delay in world.queue.later)

    # Still within the wait: still waiting, bounded from the same start.
    world.clock.advance(300)
    await world.reconcile(key)
    assert placed_on(world, key) is None
    (reason,) = status_of(world, key)["pendingReasons"]
    assert reason["facts"]["waitingUntil"] == until

    # The wait ran out: placed spread, and the start is cleared.
    world.clock.advance(300)
    await world.reconcile(key)
    assert placed_on(world, key) == "member-1"
    assert status_of(world, key).get("domainWaitSince") is None


async def test_a_waiting_preferred_gang_takes_a_rack_as_soon_as_one_holds_it():
    world, spread = spread_world(600)
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    assert placed_on(world, key) is None

    spread.add_node("member-1-n2", gpus=4, labels={RACK: "a2"})
    world.clock.advance(60)
    await world.reconcile(key)

    (target,) = (world.binding(key) or {})["spec"]["clusters"]
    assert target["domains"] == [{"level": RACK, "value": "a2", "mode": "Preferred"}]


def required_pin(template: dict[str, Any]) -> list[Any]:
    """The values of the rack expressions in a template's required node affinity."""
    affinity = ((template.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return [
        e["values"]
        for term in required.get("nodeSelectorTerms") or []
        for e in term.get("matchExpressions") or []
        if e["key"] == RACK
    ]


def pinned_racks(copy: dict[str, Any]) -> dict[str, list[Any]]:
    specs = copy["spec"]["pytorchReplicaSpecs"]
    return {role: required_pin(spec["template"]) for role, spec in specs.items()}


async def test_the_copy_is_pinned_to_the_chosen_rack_and_keeps_the_pin_across_a_restart():
    world = World()
    member = world.add_member("member-1", nodes=0)
    member.member.detected_gang_scheduler = "Coscheduling"
    member.add_node("member-1-n0", gpus=1, labels={RACK: "a0"})  # too small for the gang
    member.add_node("member-1-n1", gpus=3, labels={RACK: "a1"})
    member.add_node("member-1-n2", gpus=4, labels={RACK: "a2"})
    world.apply_policy(rack_policy())
    key = world.submit(pytorchjob("job"))  # master + 2 workers, 1 GPU each

    await world.reconcile(key)

    # Best fit: the tightest rack that holds the gang.
    (target,) = (world.binding(key) or {})["spec"]["clusters"]
    assert target["domains"] == [{"level": RACK, "value": "a1", "mode": "Required"}]
    copy = member.copy("job")
    assert copy is not None
    assert pinned_racks(copy) == {"Master": [["a1"]], "Worker": [["a1"]]}
    scheduled = conditions(world.binding(key))[c.CONDITION_SCHEDULED]
    assert "rack a1 holds the gang" in scheduled["message"]

    # A restart: nothing in memory, the copy gone from the member, and rack a1 now full (a new
    # placement would choose a2). The copy written again is pinned where the binding says.
    member.add_node("member-1-n1", gpus=0, labels={RACK: "a1"})
    member.api.remove(*PYTORCH, "job", NAMESPACE)
    await world.reconcile(key)

    again = member.copy("job")
    assert again is not None
    assert pinned_racks(again) == {"Master": [["a1"]], "Worker": [["a1"]]}
    (target,) = (world.binding(key) or {})["spec"]["clusters"]
    assert target["domains"][0]["value"] == "a1"


async def test_a_preferred_rack_found_is_preferred_not_required_on_the_copy():
    world = World()
    member = world.add_member("member-1", nodes=0)
    member.add_node("member-1-n0", gpus=3, labels={RACK: "a0"})
    member.add_node("member-1-n1", gpus=1, labels={RACK: "a1"})
    world.apply_policy(rack_policy("Preferred"))
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    (target,) = (world.binding(key) or {})["spec"]["clusters"]
    assert target["domains"] == [{"level": RACK, "value": "a0", "mode": "Preferred"}]
    copy = member.copy("job")
    assert copy is not None
    assert pinned_racks(copy) == {"Master": [], "Worker": []}
    template = copy["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    preferred = template["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert preferred[0]["preference"]["matchExpressions"][0]["values"] == ["a0"]
