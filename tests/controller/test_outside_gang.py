"""What the kind's operator may add beyond the gang is said once on the fleet object: a Ray
cluster with in-tree autoscaling gets one `OutsideGang` Event per worker group the autoscaler
may grow past what fleet placed (docs/kinds.md, "Ray autoscaling")."""

from __future__ import annotations

from typing import Any

from fleet.controller.claims import REASON_OUTSIDE_GANG
from fleet.testing.workloads import gang_policy, raycluster
from tests.controller.harness import NAMESPACE, World

RAYCLUSTER = ("ray.io/v1", "RayCluster")


def _world() -> World:
    world = World()
    world.add_member("member-1", gpus=8, kinds=(RAYCLUSTER,))
    world.apply_policy(gang_policy("gang", NAMESPACE, kinds=("RayCluster",)))
    return world


def _cluster(name: str, *, autoscaling: bool, most: int = 6) -> dict[str, Any]:
    obj = raycluster(name, workers=2)
    obj["spec"]["workerGroupSpecs"][0].update(minReplicas=1, maxReplicas=most)
    if autoscaling:
        obj["spec"]["enableInTreeAutoscaling"] = True
    return obj


async def test_an_autoscaled_ray_cluster_is_told_once_its_growth_is_outside_the_gang():
    world = _world()
    key = world.submit(_cluster("rc", autoscaling=True))
    await world.reconcile(key)
    await world.reconcile(key)  # said once, not on every reconcile
    binding = world.binding(key) or {}
    assert binding["spec"]["clusters"][0]["name"] == "member-1"  # placed as before
    (event,) = world.events(REASON_OUTSIDE_GANG, key)
    assert event["type"] == "Normal"
    assert event["message"].startswith("spec.enableInTreeAutoscaling: ")
    assert "beyond the 2 pods fleet placed" in event["message"]
    assert "up to 6 pods (spec.workerGroupSpecs[0].maxReplicas)" in event["message"]


async def test_a_ray_cluster_without_autoscaling_or_room_to_grow_is_told_nothing():
    world = _world()
    still = world.submit(_cluster("still", autoscaling=False))
    full = world.submit(_cluster("full", autoscaling=True, most=2))
    for key in (still, full):
        await world.reconcile(key)
        assert world.binding(key) is not None
        assert world.events(REASON_OUTSIDE_GANG, key) == []
