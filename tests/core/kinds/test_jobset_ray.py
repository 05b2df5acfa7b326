"""JobSet, RayJob and RayCluster read as gangs, bad input included, and their states."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.core.kinds import adapter_for, gang_from_workload
from fleet.core.kinds.jobset import JOBSET
from fleet.core.kinds.raycluster import RAYCLUSTER
from fleet.core.kinds.rayjob import RAYJOB
from fleet.core.resources import Resources
from fleet.core.workload import WorkloadError
from fleet.testing.workloads import jobset, raycluster, rayjob


def _named(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"] = {"name": "j", "namespace": "ns"}
    return obj


def test_jobset_gang_is_every_replicated_jobs_pods():
    gang = gang_from_workload(_named(jobset("j", leaders=1, workers=3, worker_pods=2, gpus=1)))
    assert [(c.name, c.replicas) for c in gang.components] == [("leader", 1), ("worker", 6)]
    assert gang.min_member == 7
    assert gang.min_source == "all replicas"
    assert gang.components[1].requests.get("nvidia.com/gpu") == 1


def test_jobset_pods_per_job_are_parallelism_capped_by_completions():
    obj = _named(jobset("j", workers=2, worker_pods=4))
    worker = obj["spec"]["replicatedJobs"][1]
    worker["template"]["spec"]["completions"] = 3
    del obj["spec"]["replicatedJobs"][0]["replicas"]  # defaults to 1
    gang = gang_from_workload(obj)
    assert [(c.name, c.replicas) for c in gang.components] == [("leader", 1), ("worker", 6)]


@pytest.mark.parametrize(
    ("edit", "field", "reason"),
    [
        (lambda o: o["spec"].pop("replicatedJobs"), "spec.replicatedJobs", "non-empty list"),
        (lambda o: o["spec"].update(replicatedJobs=[]), "spec.replicatedJobs", "non-empty list"),
        (
            lambda o: o["spec"]["replicatedJobs"][1].update(replicas=-1),
            "spec.replicatedJobs[1].replicas",
            "must not be negative",
        ),
        (
            lambda o: o["spec"]["replicatedJobs"][1].update(replicas="2"),
            "spec.replicatedJobs[1].replicas",
            "expected an integer",
        ),
        (
            lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism=1.5),
            "spec.replicatedJobs[0].template.spec.parallelism",
            "expected an integer",
        ),
        (
            lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"].pop("template"),
            "spec.replicatedJobs[0].template.spec.template",
            "missing",
        ),
        (
            lambda o: o["spec"]["replicatedJobs"][1].update(name="leader"),
            "spec.replicatedJobs[1].name",
            "given twice",
        ),
        (
            lambda o: o["spec"]["replicatedJobs"][0].pop("name"),
            "spec.replicatedJobs[0].name",
            "expected a name",
        ),
    ],
)
def test_bad_jobsets_name_the_field(edit, field, reason):
    obj = _named(jobset("j"))
    edit(obj)
    with pytest.raises(WorkloadError) as err:
        gang_from_workload(obj)
    assert err.value.field == field
    assert reason in err.value.reason
    assert str(err.value).startswith("JobSet ns/j: ")


def test_ray_gang_is_the_head_and_each_groups_minimum():
    obj = _named(raycluster("j", workers=4, gpus=1))
    group = obj["spec"]["workerGroupSpecs"][0]
    group.update(minReplicas=2, numOfHosts=2)
    gang = gang_from_workload(obj)
    assert [(c.name, c.replicas) for c in gang.components] == [("head", 1), ("workers", 8)]
    assert gang.min_member == 1 + 2 * 2
    assert gang.min_source == "the head and each worker group's minReplicas"
    assert gang.minimum_parts == (("head", 1), ("workers", 4))


def test_ray_workers_are_counted_with_kuberays_init_container():
    """KubeRay adds wait-gcs-ready (200m CPU, 256Mi) to every worker: a worker asking for
    100m and no memory needs 200m and 256Mi on its node."""
    obj = _named(raycluster("j", workers=1, gpus=0, cpu="100m"))
    head, worker = gang_from_workload(obj).components
    assert worker.requests.get("cpu") == Resources.parse({"cpu": "200m"}).get("cpu")
    assert worker.requests.get("memory") == Resources.parse({"memory": "256Mi"}).get("memory")
    assert head.requests.get("cpu") == Resources.parse({"cpu": "100m"}).get("cpu")
    # fleet never writes that container into the job
    assert "initContainers" not in obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]


def test_ray_replicas_are_clamped_to_min_and_max():
    obj = _named(raycluster("j", workers=9))
    obj["spec"]["workerGroupSpecs"][0].update(minReplicas=1, maxReplicas=3)
    gang = gang_from_workload(obj)
    assert [(c.name, c.replicas) for c in gang.components] == [("head", 1), ("workers", 3)]
    assert gang.min_member == 2


def _autoscaled(obj: dict[str, Any], resources: Any = "absent") -> dict[str, Any]:
    """`obj` with in-tree autoscaling on, and `autoscalerOptions.resources` unless absent."""
    cluster = obj["spec"].get("rayClusterSpec") or obj["spec"]
    cluster["enableInTreeAutoscaling"] = True
    if resources != "absent":
        cluster["autoscalerOptions"] = {"resources": resources}
    return obj


@pytest.mark.parametrize("make", [raycluster, rayjob])
@pytest.mark.parametrize(
    ("resources", "sidecar"),
    [
        # absent: KubeRay v1.5.1's default (BuildAutoscalerContainer), requests = limits
        ("absent", {"cpu": "500m", "memory": "512Mi"}),
        (None, {"cpu": "500m", "memory": "512Mi"}),
        # given: it replaces the default whole, requests first
        (
            {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
            {"cpu": "1", "memory": "1Gi"},
        ),
        # limits only: the API server makes them the requests
        ({"limits": {"cpu": "2", "memory": "2Gi"}}, {"cpu": "2", "memory": "2Gi"}),
        # per resource: a request where given, else the limit
        (
            {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}},
            {"cpu": "250m", "memory": "1Gi"},
        ),
        # given empty: the sidecar asks for nothing
        ({}, {}),
    ],
)
def test_ray_head_is_counted_with_kuberays_autoscaler_sidecar(make, resources, sidecar):
    """With enableInTreeAutoscaling KubeRay adds the `autoscaler` container to the head pod:
    its resources are autoscalerOptions.resources when given, else 500m CPU and 512Mi."""
    plain_head, plain_worker = gang_from_workload(_named(make("j", workers=2))).components
    obj = _autoscaled(_named(make("j", workers=2)), resources)
    head, worker = gang_from_workload(obj).components
    assert head.requests == plain_head.requests + Resources.parse(sidecar)
    assert worker.requests == plain_worker.requests
    # fleet never writes that container into the job
    cluster = obj["spec"].get("rayClusterSpec") or obj["spec"]
    assert len(cluster["headGroupSpec"]["template"]["spec"]["containers"]) == 1


@pytest.mark.parametrize("enabled", [None, False])
def test_ray_head_has_no_autoscaler_sidecar_without_in_tree_autoscaling(enabled):
    """autoscalerOptions alone adds nothing: KubeRay adds the sidecar only when
    enableInTreeAutoscaling is true."""
    plain_head, _ = gang_from_workload(_named(raycluster("j"))).components
    obj = _autoscaled(_named(raycluster("j")), {"requests": {"cpu": "3", "memory": "3Gi"}})
    if enabled is None:
        obj["spec"].pop("enableInTreeAutoscaling")
    else:
        obj["spec"]["enableInTreeAutoscaling"] = enabled
    head, _ = gang_from_workload(obj).components
    assert head.requests == plain_head.requests


def test_ray_autoscaled_workers_beyond_replicas_are_outside_the_gang():
    """The rule docs/kinds.md states: with autoscaling on the gang is still `replicas` workers
    (its minimum minReplicas); the autoscaler's growth toward maxReplicas is not placed."""
    obj = _autoscaled(_named(raycluster("j", workers=2)))
    obj["spec"]["workerGroupSpecs"][0].update(minReplicas=1, maxReplicas=10)
    gang = gang_from_workload(obj)
    assert [(c.name, c.replicas) for c in gang.components] == [("head", 1), ("workers", 2)]
    assert gang.min_member == 1 + 1


def test_ray_autoscaler_growth_beyond_the_gang_is_said_per_group():
    """What the OutsideGang Event says: each group the autoscaler may grow past what fleet
    placed, naming the fields; nothing without autoscaling or where maxReplicas is reached."""
    obj = _named(raycluster("j", workers=2))
    first = obj["spec"]["workerGroupSpecs"][0]
    first.update(minReplicas=1, maxReplicas=5, numOfHosts=2)
    capped = {**copy.deepcopy(first), "groupName": "capped", "maxReplicas": 2}
    unbounded = {**copy.deepcopy(first), "groupName": "open", "numOfHosts": 1}
    unbounded.pop("maxReplicas")
    obj["spec"]["workerGroupSpecs"] += [capped, unbounded]
    assert RAYCLUSTER.outside_gang(obj) == []
    said = RAYCLUSTER.outside_gang(_autoscaled(obj))
    assert len(said) == 2
    assert said[0].startswith("spec.enableInTreeAutoscaling: ")
    assert "group workers beyond the 4 pods fleet placed" in said[0]
    assert "up to 10 pods (spec.workerGroupSpecs[0].maxReplicas)" in said[0]
    assert "group open beyond the 2 pods" in said[1]
    assert "without bound" in said[1]


def test_rayjob_autoscaler_growth_names_its_cluster_spec():
    obj = _autoscaled(_named(rayjob("j", workers=2)))
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["maxReplicas"] = 3
    (said,) = RAYJOB.outside_gang(obj)
    assert said.startswith("spec.rayClusterSpec.enableInTreeAutoscaling: ")
    assert "up to 3 pods (spec.rayClusterSpec.workerGroupSpecs[0].maxReplicas)" in said


def test_rayjob_gang_is_its_clusters():
    gang = gang_from_workload(_named(rayjob("j", workers=3, gpus=2)))
    assert [(c.name, c.replicas) for c in gang.components] == [("head", 1), ("workers", 3)]
    assert gang.min_member == 4  # minReplicas == replicas in these manifests


@pytest.mark.parametrize(
    ("make", "edit", "field", "reason"),
    [
        (
            raycluster,
            lambda o: o["spec"].pop("headGroupSpec"),
            "spec.headGroupSpec",
            "missing",
        ),
        (
            raycluster,
            lambda o: o["spec"]["workerGroupSpecs"][0].update(replicas=-2),
            "spec.workerGroupSpecs[0].replicas",
            "must not be negative",
        ),
        (
            raycluster,
            lambda o: o["spec"]["workerGroupSpecs"][0].update(minReplicas="one"),
            "spec.workerGroupSpecs[0].minReplicas",
            "expected an integer",
        ),
        (
            raycluster,
            lambda o: o["spec"]["workerGroupSpecs"][0].update(minReplicas=3, maxReplicas=2),
            "spec.workerGroupSpecs[0].maxReplicas",
            "smaller than minReplicas",
        ),
        (
            raycluster,
            lambda o: o["spec"]["workerGroupSpecs"][0].pop("template"),
            "spec.workerGroupSpecs[0].template",
            "missing",
        ),
        (
            raycluster,
            lambda o: o["spec"]["workerGroupSpecs"][0].update(groupName="head"),
            "spec.workerGroupSpecs[0].groupName",
            "given twice",
        ),
        (
            raycluster,
            lambda o: _autoscaled(o, {"requests": "lots"}),
            "spec.autoscalerOptions.resources.requests",
            "expected a map of resource quantities",
        ),
        (
            raycluster,
            lambda o: (_autoscaled(o), o["spec"].update(autoscalerOptions="big")),
            "spec.autoscalerOptions",
            "expected an object",
        ),
        (
            rayjob,
            lambda o: _autoscaled(o, ["500m"]),
            "spec.rayClusterSpec.autoscalerOptions.resources",
            "expected an object",
        ),
        (
            rayjob,
            lambda o: o["spec"].pop("rayClusterSpec"),
            "spec.rayClusterSpec",
            "missing",
        ),
        (
            rayjob,
            lambda o: (
                o["spec"].pop("rayClusterSpec"),
                o["spec"].update(clusterSelector={"ray.io/cluster": "c"}),
            ),
            "spec.clusterSelector",
            "existing RayCluster",
        ),
    ],
)
def test_bad_ray_objects_name_the_field(make, edit, field, reason):
    obj = _named(make("j"))
    edit(obj)
    with pytest.raises(WorkloadError) as err:
        gang_from_workload(obj)
    assert err.value.field == field
    assert reason in err.value.reason


def test_pod_templates_are_the_objects_own_dicts():
    for obj in (_named(jobset("j")), _named(rayjob("j")), _named(raycluster("j"))):
        adapter = adapter_for(obj["apiVersion"], obj["kind"])
        assert adapter is not None
        held = copy.deepcopy(obj)
        for t in adapter.templates(held):
            t.template.setdefault("metadata", {})["labels"] = {"x": "y"}
        assert held != obj
        assert all(t.template["metadata"]["labels"] == {"x": "y"} for t in adapter.templates(held))


def _cond(kind: str, status: str = "True") -> dict[str, str]:
    return {"type": kind, "status": status}


def test_jobset_state():
    assert JOBSET.state(None) == "Pending"
    assert JOBSET.state({"replicatedJobsStatus": [{"name": "w", "active": 2}]}) == "Running"
    assert JOBSET.state({"conditions": [_cond("Completed")]}) == "Succeeded"
    assert JOBSET.state({"terminalState": "Failed"}) == "Failed"
    assert JOBSET.state({"conditions": [_cond("Failed"), _cond("Suspended")]}) == "Failed"
    assert JOBSET.state({"conditions": [_cond("Suspended")]}) == "Suspended"


def test_ray_states():
    assert RAYJOB.state({"jobDeploymentStatus": "Initializing"}) == "Created"
    assert RAYJOB.state({"jobDeploymentStatus": "Running"}) == "Running"
    assert RAYJOB.state({"jobDeploymentStatus": "Complete"}) == "Succeeded"
    assert RAYJOB.state({"jobDeploymentStatus": "Failed"}) == "Failed"
    assert RAYJOB.state({}) == "Pending"
    assert RAYCLUSTER.state({"state": "ready"}) == "Running"
    assert RAYCLUSTER.state({"state": "suspended"}) == "Suspended"
    assert RAYCLUSTER.state(None) == "Pending"
