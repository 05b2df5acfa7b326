"""An elastic PyTorchJob in the shell: placed where its minimum (the Master plus `minReplicas`
workers) fits, and the Worker replicas the member's HPA scaled are not taken back when fleet
applies the copy again."""

from __future__ import annotations

from typing import Any

from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, FakeMember, World
from tests.controller.test_queue import gpu_tree, phase, queue_world, submit_and_admit, unit, work

METRICS = [
    {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
]


def elastic_job(name: str, *, metrics: bool = True) -> dict[str, Any]:
    """A Master and 4 Workers, one GPU each; elastic from 2 to 4 workers."""
    job = pytorchjob(name, workers=4)
    job["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 4}
    if metrics:
        job["spec"]["elasticPolicy"]["metrics"] = METRICS
    return job


def workers(copy: dict[str, Any] | None) -> int:
    assert copy is not None
    return int(copy["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"])


def scale_then_edit(world: World, member: FakeMember, key: Any) -> None:
    """The member's HPA scales the copy's workers to 3; then a label is edited on the fleet
    object, so that fleet applies the copy again."""
    member.api.merge(
        "kubeflow.org/v1",
        "PyTorchJob",
        "job",
        NAMESPACE,
        {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 3}}}},
    )
    world.fleet_api.merge(
        key.api_version, key.kind, key.name, NAMESPACE, {"metadata": {"labels": {"team": "a"}}}
    )


async def test_an_elastic_job_goes_where_its_minimum_fits_and_keeps_what_the_hpa_scaled():
    world = World()
    only = world.add_member("member-1", gpus=4)  # 5 GPUs for every replica, 3 for the minimum
    world.apply_policy(gang_policy("gang", NAMESPACE, cluster_names=["member-1"]))
    key = world.submit(elastic_job("job"))

    await world.reconcile(key)

    copy = only.copy("job")
    assert copy is not None
    assert copy["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3
    assert workers(copy) == 4

    # The member's HPA scales the workers down to 3 (the kind's scale subresource); the user
    # edits the fleet object: fleet applies the copy again...
    scale_then_edit(world, only, key)
    applies = len(only.api.asked("PATCH", "/pytorchjobs/job"))
    await world.reconcile(key)

    copy = only.copy("job")
    assert copy is not None
    assert len(only.api.asked("PATCH", "/pytorchjobs/job")) == applies + 1
    assert copy["metadata"]["labels"]["team"] == "a"
    # ...with the HPA's worker count, not the fleet object's 4.
    assert workers(copy) == 3


async def test_without_metrics_fleets_worker_count_is_applied_again():
    world = World()
    only = world.add_member("member-1", gpus=8)
    world.apply_policy(gang_policy("gang", NAMESPACE, cluster_names=["member-1"]))
    key = world.submit(elastic_job("job", metrics=False))
    await world.reconcile(key)
    scale_then_edit(world, only, key)
    await world.reconcile(key)
    assert workers(only.copy("job")) == 4


async def test_a_queued_elastic_job_is_charged_the_workers_its_member_runs():
    """Queued, it asks its quota for every declared replica; running, for the workers its
    member's HPA runs: scaled from 4 to 2, it frees two GPUs of its team's quota, and another
    job of the team is admitted into them."""
    world = await queue_world(gpu_tree(5), gpus=8)
    member = world.members["member-1"]
    key = world.submit(elastic_job("job"))  # a Master and 4 Workers, a GPU each
    await world.reconcile(key)
    await work(world)
    await world.reconcile(key)
    assert phase(world, key) == "Running"
    assert unit(world, key)["spec"]["resource"]["nvidia.com/gpu"] == "5"

    other = await submit_and_admit(world, "other", workers=1, gpus=1)  # 2 GPUs
    assert phase(world, other) == "Enqueued"  # the team's 5 GPUs are all charged

    member.api.merge(
        "kubeflow.org/v1",
        "PyTorchJob",
        "job",
        NAMESPACE,
        {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}},
    )
    await world.reconcile(key)
    assert unit(world, key)["spec"]["resource"]["nvidia.com/gpu"] == "3"
    await work(world)
    await world.reconcile(other)
    assert phase(world, other) in ("Dequeued", "Running")
