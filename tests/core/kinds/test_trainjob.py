"""TrainJob read as a gang through the runtime it names, bad input included, and its state."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.core.kinds import gang_from_workload
from fleet.core.kinds.trainjob import ANCESTOR_LABEL, TRAINJOB
from fleet.core.resources import Resources
from fleet.core.workload import WorkloadError
from fleet.testing.workloads import training_runtime, trainjob


def _job(nodes: int | None = 3, cluster: bool = False) -> dict[str, Any]:
    job = trainjob("tj", "torch", namespace="ns", nodes=nodes or 1, cluster_runtime=cluster)
    if nodes is None:
        del job["spec"]["trainer"]
    return job


def _needed(runtime: dict[str, Any] | None, cluster: bool = False) -> dict:
    kind = "ClusterTrainingRuntime" if cluster else "TrainingRuntime"
    return {(kind, "" if cluster else "ns", "torch"): runtime}


def test_gang_is_the_runtimes_jobs_with_one_pod_per_trainer_node():
    runtime = training_runtime("torch", namespace="ns", gpus=2)
    gang = gang_from_workload(_job(3), _needed(runtime))
    assert [(c.name, c.replicas) for c in gang.components] == [("node", 3)]
    assert gang.min_member == 3
    assert gang.components[0].requests.get("nvidia.com/gpu") == 2


def test_cluster_runtime_and_the_runtimes_own_node_count():
    runtime = training_runtime("torch", cluster=True)
    runtime["spec"]["mlPolicy"]["numNodes"] = 4
    gang = gang_from_workload(_job(None, cluster=True), _needed(runtime, cluster=True))
    assert gang.total_replicas == 4
    assert TRAINJOB.needs(_job(None, cluster=True)) == [
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "", "torch")
    ]


def test_resources_per_node_replace_the_trainer_containers():
    job = _job(2)
    job["spec"]["trainer"]["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": 8, "cpu": "4"}}
    gang = gang_from_workload(job, _needed(training_runtime("torch", namespace="ns", gpus=1)))
    assert gang.components[0].requests.get("nvidia.com/gpu") == 8
    assert gang.components[0].requests.get("cpu") == Resources.parse({"cpu": "4"}).get("cpu")


def test_initializer_jobs_are_part_of_the_gang():
    runtime = training_runtime("torch", namespace="ns")
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    init = {
        "name": "dataset-initializer",
        "template": {
            "metadata": {"labels": {ANCESTOR_LABEL: "dataset-initializer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer"}]}}},
        },
    }
    runtime["spec"]["template"]["spec"]["replicatedJobs"] = [init, node]
    gang = gang_from_workload(_job(2), _needed(runtime))
    assert [(c.name, c.replicas) for c in gang.components] == [
        ("dataset-initializer", 1),
        ("node", 2),
    ]


def test_a_runtime_that_does_not_exist_names_the_field():
    with pytest.raises(WorkloadError) as err:
        gang_from_workload(_job(2), _needed(None))
    assert err.value.field == "spec.runtimeRef.name"
    assert "TrainingRuntime torch does not exist in namespace ns" in str(err.value)
    # and without the shell having looked for it at all
    with pytest.raises(WorkloadError, match="does not exist"):
        gang_from_workload(_job(2))


@pytest.mark.parametrize(
    ("edit", "field", "reason"),
    [
        (
            lambda j, r: j["spec"]["trainer"].update(numNodes=-1),
            "spec.trainer.numNodes",
            "negative",
        ),
        (
            lambda j, r: j["spec"]["trainer"].update(numNodes=0),
            "spec.trainer.numNodes",
            "at least 1",
        ),
        (
            lambda j, r: j["spec"]["trainer"].update(numNodes="2"),
            "spec.trainer.numNodes",
            "integer",
        ),
        (lambda j, r: j["spec"]["runtimeRef"].pop("name"), "spec.runtimeRef.name", "a name"),
        (
            lambda j, r: j["spec"]["runtimeRef"].update(kind="Deployment"),
            "spec.runtimeRef.kind",
            "expected ClusterTrainingRuntime or TrainingRuntime",
        ),
        (
            lambda j, r: r["spec"]["template"]["spec"].update(replicatedJobs=[]),
            "TrainingRuntime torch spec.template.spec.replicatedJobs",
            "non-empty list",
        ),
        (
            lambda j, r: r["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"].pop(
                "template"
            ),
            "TrainingRuntime torch spec.template.spec.replicatedJobs[0].template.spec.template",
            "missing",
        ),
    ],
)
def test_bad_trainjobs_and_runtimes_name_the_field(edit, field, reason):
    job, runtime = _job(2), training_runtime("torch", namespace="ns")
    edit(job, runtime)
    with pytest.raises(WorkloadError) as err:
        gang_from_workload(job, _needed(runtime))
    assert err.value.field == field
    assert reason in err.value.reason


def test_no_templates_of_its_own_to_label():
    assert TRAINJOB.templates(_job(2)) == []
    assert TRAINJOB.priority_class(_job(2)) is None


def test_state():
    cond = lambda t: {"type": t, "status": "True"}  # noqa: E731
    assert TRAINJOB.state(None) == "Pending"
    assert TRAINJOB.state({"jobsStatus": [{"name": "node", "active": 2}]}) == "Running"
    assert TRAINJOB.state({"conditions": [cond("Complete")]}) == "Succeeded"
    assert TRAINJOB.state({"conditions": [cond("Failed"), cond("Suspended")]}) == "Failed"


def test_the_priority_class_is_read_from_the_runtimes_templates():
    runtime = training_runtime("torch", namespace="ns")
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    job["template"]["spec"]["template"]["spec"]["priorityClassName"] = "high"
    assert TRAINJOB.priority_class(_job(2), _needed(runtime)) == "high"
    assert TRAINJOB.priority_class(_job(2)) is None  # without its runtime: nothing to read
