"""A staged JobSet (issue 34) dispatched to a member whose gang fleet writes: one PodGroup per
stage, each owned by the copy, next to a copy whose templates name them; placement still
holds room for the whole job."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.api import constants as c
from fleet.core.gangmarks import COSCHEDULING, KUBERNETES
from fleet.testing.workloads import gang_policy, jobset, jobset_depends_on, jobset_in_order
from tests.controller.apiserver import MEMBER_KINDS, NATIVE_GANG_KINDS, MemoryApi
from tests.controller.harness import NAMESPACE, FakeMember, World

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
POD_GROUP = {
    COSCHEDULING: ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    KUBERNETES: ("scheduling.k8s.io/v1beta1", "PodGroup"),
}


def _member(world: World, name: str, scheduler: str, gpus: int) -> FakeMember:
    kinds = [*MEMBER_KINDS, *(NATIVE_GANG_KINDS if scheduler == KUBERNETES else ())]
    api = MemoryApi(kinds, server=f"https://{name}.test")
    fake = world.add_member(name, kinds=(JOBSET,), api=api)
    fake.add_node(f"{name}-n0", gpus=gpus)  # (a member given its API server gets no node)
    fake.member.declared_gang_scheduler = scheduler
    fake.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    fake.member.namespaces.add(NAMESPACE)
    return fake


def _groups(fake: FakeMember, scheduler: str) -> dict[str, dict[str, Any]]:
    api = POD_GROUP[scheduler]
    return {
        o["metadata"]["name"]: o
        for o in fake.api.objects.values()
        if (o.get("apiVersion"), o.get("kind")) == api
    }


def _minimum(group: dict[str, Any]) -> int:
    spec = group["spec"]
    return int(
        spec["minMember"] if "minMember" in spec else spec["schedulingPolicy"]["gang"]["minCount"]
    )


@pytest.mark.parametrize("scheduler", [COSCHEDULING, KUBERNETES])
@pytest.mark.parametrize(
    ("job", "stages"),
    [
        (jobset_in_order, {"driver": 1, "workers": 4}),
        (jobset_depends_on, {"initializer": 1, "launcher": 1, "worker": 4}),
    ],
    ids=["in-order", "depends-on"],
)
async def test_a_staged_jobset_gets_one_pod_group_per_stage(job, stages, scheduler):
    world = World()
    small = _member(world, "member-1", scheduler, gpus=4)  # holds the largest stage, not all
    big = _member(world, "member-2", scheduler, gpus=8)
    world.apply_policy(gang_policy("gang", NAMESPACE, kinds=("JobSet",)))
    obj = job(namespace=NAMESPACE)
    key = world.submit(obj)
    await world.reconcile(key)

    # Placement held room for every stage: only the member that holds all of them got it.
    assert small.object(JOBSET, key.name) is None
    copy = big.object(JOBSET, key.name)
    assert copy is not None
    groups = _groups(big, scheduler)
    assert {n: _minimum(g) for n, g in groups.items()} == {
        f"{key.name}-{stage}": pods for stage, pods in stages.items()
    }
    for group in groups.values():
        (owner,) = group["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("JobSet", copy["metadata"]["uid"])
        assert (
            group["metadata"]["labels"][c.FLEET_UID_LABEL] == world.workload(key)["metadata"]["uid"]
        )
    assert _groups(small, scheduler) == {}


async def test_a_plain_jobset_keeps_one_pod_group_named_after_its_copy():
    world = World()
    fake = _member(world, "member-1", COSCHEDULING, gpus=8)
    world.apply_policy(gang_policy("gang", NAMESPACE, kinds=("JobSet",)))
    key = world.submit(jobset("js", namespace=NAMESPACE, workers=2))
    await world.reconcile(key)
    assert {n: _minimum(g) for n, g in _groups(fake, COSCHEDULING).items()} == {"js": 5}
