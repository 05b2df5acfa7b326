"""GangBinding writes carry the resourceVersion they were decided from: a binding someone else
wrote after this replica read it (another leader, this replica's watch lagging) refuses the
write with 409, and the reconcile starts over from the binding as stored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleet.api import GangBinding, binding_name, format_time
from fleet.api import constants as c
from fleet.controller.bindings import BindingChanged, BindingStore, lifecycle_of
from fleet.controller.cache import Newest
from fleet.controller.keys import WorkloadKey
from fleet.core import lifecycle
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, World

BINDING = (c.FLEET_API_VERSION, "GangBinding")


def stored(world: World, key: WorkloadKey) -> dict[str, Any]:
    binding = world.binding(key)
    assert binding is not None
    return binding


async def another_replica_places(world: World, key: WorkloadKey, cluster: str) -> None:
    """Another replica (a leader that has not stepped down yet) reads the binding and writes
    its own placement to it, as its reconcile would."""
    other = BindingStore(world.fleet_api.client("replica-b"), Newest())
    binding = GangBinding.from_dict(stored(world, key))
    now = world.clock.now()
    life = lifecycle.scheduled(lifecycle_of(binding, now), cluster, now)
    await other.save(key, binding, life=life, components=[("master", 1), ("worker", 2)])


def lagging(world: World, key: WorkloadKey, seen: dict[str, Any]) -> None:
    """This replica's cache still shows `seen` (its watch has not delivered the newer one)."""
    world.shell.bindings.cache.drop(key)
    world.shell.bindings.cache.offer(key, seen)


def patches_sent(world: World, key: WorkloadKey) -> list[dict[str, Any]]:
    name = binding_name(key.kind, key.name)
    return [
        json.loads(r.content)
        for r in world.fleet_api.asked("PATCH", f"/gangbindings/{name}")
        if r.headers.get("content-type", "").startswith("application/merge-patch")
    ]


async def test_a_placement_decided_from_a_stale_binding_is_refused_and_the_stored_one_stands():
    world = World()
    # member-2 is the better fit for this replica; the other replica chose member-1.
    world.add_member("member-1", gpus=8).set_ready(False)
    world.add_member("member-2", gpus=4).set_ready(False)
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)  # no member Ready: the binding is written Pending
    seen = stored(world, key)
    assert seen["status"]["phase"] == "Pending"
    for member in world.members.values():
        member.set_ready(True)

    await another_replica_places(world, key, "member-1")
    theirs = stored(world, key)
    lagging(world, key, seen)
    before = len(patches_sent(world, key))

    with pytest.raises(BindingChanged):
        await world.reconcile(key)

    # This replica's decision went out with the resourceVersion it was taken from ...
    (ours,) = patches_sent(world, key)[before:]
    assert ours["metadata"]["resourceVersion"] == seen["metadata"]["resourceVersion"]
    assert ours["spec"]["clusters"][0]["name"] == "member-2"
    # ... and was refused: the stored decision stands, and nothing acted on the refused one.
    assert stored(world, key) == theirs
    assert world.members["member-2"].copy("job") is None
    assert world.events("ScheduleBindingSucceed", key) == []
    # The next reconcile starts from the stored binding.
    cached = world.shell.bindings.cache.get(key)
    assert cached is not None
    assert cached["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]

    await world.reconcile(key)

    binding = stored(world, key)
    assert binding["spec"]["clusters"][0]["name"] == "member-1"
    assert [s["cluster"] for s in binding["status"]["placementHistory"]] == ["member-1"]
    assert world.members["member-1"].copy("job") is not None
    assert world.members["member-2"].copy("job") is None
    assert world.events("ScheduleBindingSucceed", key) == []  # placed once, by the other


async def test_a_status_write_from_a_stale_binding_is_refused_too():
    world = World()
    world.add_member("member-1")
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    seen = GangBinding.from_dict(stored(world, key))
    # Someone else starts the member's lost-timer after `seen` was read ...
    lost = {"status": {"clusterLostSince": format_time(world.clock.now())}}
    world.fleet_api.merge(*BINDING, str(seen.metadata.name), NAMESPACE, lost)
    theirs = stored(world, key)

    # ... and this replica, from `seen`, its taint timer.
    tainted = {"taintedSince": format_time(world.clock.now())}
    with pytest.raises(BindingChanged):
        await world.shell.bindings.save(key, seen, status=tainted)

    assert stored(world, key) == theirs
    cached = world.shell.bindings.cache.get(key)
    assert cached is not None
    assert cached["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
