import copy
from typing import Any

import pytest

from fleet.core.kinds import gang_from_workload
from fleet.core.kinds.adapter import ANNOTATION_MIN_AVAILABLE, LABEL_MIN_AVAILABLE
from fleet.core.resources import Resources
from fleet.core.workload import Component, Gang, WorkloadError

from .seeds import pytorchjob, tfjob


def template(
    cpu: str = "1",
    gpu: int = 0,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": cpu}
    if gpu:
        limits["nvidia.com/gpu"] = gpu
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
    }


def kubeflow(
    kind: str, field: str, roles: dict[str, int], api: str = "kubeflow.org/v1", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {
            field: {
                role: {"replicas": n, "template": template(gpu=8 if role == "Worker" else 0)}
                for role, n in roles.items()
            },
            **spec,
        },
    }


def test_seed_tfjob() -> None:
    gang = gang_from_workload(tfjob())
    assert [(c.name, c.replicas) for c in gang.components] == [("ps", 1), ("worker", 4)]
    assert gang.components[0].requests == Resources(cpu=1000, pods=1)
    assert gang.components[1].requests == Resources({"nvidia.com/gpu": 2, "pods": 1})
    assert gang.min_member == 5
    assert gang.min_source.endswith(f"labels.{LABEL_MIN_AVAILABLE}")
    assert gang.minimum_requests == Resources({"cpu": 1000, "nvidia.com/gpu": 8, "pods": 5})
    assert str(gang.ref) == "TFJob tf-smoke-gpu"


def test_seed_pytorchjob() -> None:
    gang = gang_from_workload(pytorchjob())
    assert [(c.name, c.role, c.replicas) for c in gang.components] == [
        ("master", "Master", 1),
        ("worker", "Worker", 2),
    ]
    assert gang.min_member == 3 and gang.min_source == "all replicas"
    assert gang.multi_role


@pytest.mark.parametrize(
    ("kind", "field", "roles", "api", "expected"),
    [
        (
            "PyTorchJob",
            "pytorchReplicaSpecs",
            {"Worker": 3, "Master": 1},
            "kubeflow.org/v1",
            [("master", 1), ("worker", 3)],
        ),
        (
            "TFJob",
            "tfReplicaSpecs",
            {"Worker": 2, "PS": 2, "Chief": 1, "Evaluator": 1},
            "kubeflow.org/v1",
            [("chief", 1), ("ps", 2), ("worker", 2), ("evaluator", 1)],
        ),
        (
            "MPIJob",
            "mpiReplicaSpecs",
            {"Worker": 4, "Launcher": 1},
            "kubeflow.org/v1",
            [("launcher", 1), ("worker", 4)],
        ),
        (
            "XGBoostJob",
            "xgbReplicaSpecs",
            {"Master": 1, "Worker": 2},
            "kubeflow.org/v1",
            [("master", 1), ("worker", 2)],
        ),
    ],
)
def test_kubeflow_kinds_in_role_order(
    kind: str, field: str, roles: dict[str, int], api: str, expected: list[tuple[str, int]]
) -> None:
    gang = gang_from_workload(kubeflow(kind, field, roles, api))
    assert [(c.name, c.replicas) for c in gang.components] == expected
    assert gang.min_member == sum(n for _, n in expected)


def test_role_names_are_case_insensitive_and_replicas_default_to_one() -> None:
    obj = kubeflow("PyTorchJob", "pytorchReplicaSpecs", {"master": 1, "worker": 2})
    del obj["spec"]["pytorchReplicaSpecs"]["master"]["replicas"]
    gang = gang_from_workload(obj)
    assert [(c.name, c.role, c.replicas) for c in gang.components] == [
        ("master", "Master", 1),
        ("worker", "Worker", 2),
    ]


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"template": template(cpu="2"), **spec},
    }


@pytest.mark.parametrize(
    ("spec", "pods"),
    [
        ({}, 1),
        ({"parallelism": 4}, 4),
        ({"parallelism": 4, "completions": 2, "completionMode": "Indexed"}, 2),
        ({"parallelism": 3, "completions": 10, "completionMode": "Indexed"}, 3),
        ({"completions": 5}, 1),
        ({"parallelism": 0}, 0),
    ],
)
def test_batch_job_pods(spec: dict[str, Any], pods: int) -> None:
    gang = gang_from_workload(job(**spec))
    assert [(c.name, c.replicas) for c in gang.components] == [("pod", pods)]
    assert gang.min_member == pods
    assert not gang.multi_role


def test_min_member_sources_in_priority_order() -> None:
    obj = kubeflow("PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 8})
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    assert gang_from_workload(obj).min_member == 9

    worker["metadata"]["annotations"] = {ANNOTATION_MIN_AVAILABLE: "3"}
    gang = gang_from_workload(obj)
    assert (gang.min_member, gang.min_source) == (
        3,
        f"spec.pytorchReplicaSpecs.Worker.template.metadata.annotations.{ANNOTATION_MIN_AVAILABLE}",
    )

    worker["metadata"]["labels"] = {LABEL_MIN_AVAILABLE: "4"}
    assert gang_from_workload(obj).min_member == 4  # label beats annotation

    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 5}}
    gang = gang_from_workload(obj)
    assert (gang.min_member, gang.min_source) == (5, "spec.runPolicy.schedulingPolicy.minAvailable")


def test_minimum_set_fills_roles_in_declared_order() -> None:
    obj = kubeflow("TFJob", "tfReplicaSpecs", {"Worker": 4, "PS": 2, "Chief": 1})
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 5}}
    gang = gang_from_workload(obj)
    assert [(c.name, n) for c, n in gang.minimum] == [("chief", 1), ("ps", 2), ("worker", 2)]
    obj["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 2
    assert [(c.name, n) for c, n in gang_from_workload(obj).minimum] == [("chief", 1), ("ps", 1)]


def expect_error(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadError) as err:
        gang_from_workload(obj)
    assert isinstance(err.value, ValueError)
    assert str(err.value) == message, str(err.value)


def test_errors_name_object_and_field() -> None:
    base = kubeflow("PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 2})

    obj = copy.deepcopy(base)
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = -1
    expect_error(
        obj,
        "PyTorchJob ns/job: spec.pytorchReplicaSpecs.Worker.replicas: must not be negative, got -1",
    )

    obj = copy.deepcopy(base)
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "2"
    expect_error(
        obj,
        "PyTorchJob ns/job: spec.pytorchReplicaSpecs.Worker.replicas: expected an integer, got '2'",
    )

    obj = copy.deepcopy(base)
    limits = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "resources"
    ]["limits"]
    limits["nvidia.com/gpu"] = "abc"
    expect_error(
        obj,
        "PyTorchJob ns/job: spec.pytorchReplicaSpecs.Worker.template.spec."
        "containers[0].resources.limits.nvidia.com/gpu: unparsable quantity 'abc'",
    )

    obj = copy.deepcopy(base)
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 4}}
    expect_error(
        obj,
        "PyTorchJob ns/job: spec.runPolicy.schedulingPolicy.minAvailable: "
        "4 is larger than the 3 replicas of the job",
    )

    obj = copy.deepcopy(base)
    obj["spec"]["pytorchReplicaSpecs"]["Chief"] = obj["spec"]["pytorchReplicaSpecs"]["Master"]
    expect_error(
        obj,
        "PyTorchJob ns/job: spec.pytorchReplicaSpecs.Chief: "
        "unknown replica type (expected one of Master, Worker)",
    )

    obj = copy.deepcopy(base)
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"] = {
        LABEL_MIN_AVAILABLE: "two"
    }
    expect_error(
        obj,
        f"PyTorchJob ns/job: spec.pytorchReplicaSpecs.Worker.template.metadata."
        f"labels.{LABEL_MIN_AVAILABLE}: expected an integer, got 'two'",
    )

    expect_error(job(parallelism=True), "Job ns/j: spec.parallelism: expected an integer, got True")

    obj = copy.deepcopy(base)
    obj["kind"] = "RayJob"
    with pytest.raises(
        WorkloadError, match=r"^RayJob ns/job: kind: unsupported kind kubeflow.org/v1/RayJob"
    ):
        gang_from_workload(obj)

    with pytest.raises(WorkloadError, match="spec: expected an object"):
        gang_from_workload({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}})


def test_conflicting_min_available_labels_are_an_error() -> None:
    obj = kubeflow("PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 2})
    roles = obj["spec"]["pytorchReplicaSpecs"]
    roles["Master"]["template"]["metadata"]["labels"] = {LABEL_MIN_AVAILABLE: "2"}
    roles["Worker"]["template"]["metadata"]["labels"] = {LABEL_MIN_AVAILABLE: "3"}
    with pytest.raises(WorkloadError, match="disagrees with"):
        gang_from_workload(obj)


def test_constraints_are_read_per_role() -> None:
    obj = kubeflow("PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 2})
    spec = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    spec["nodeSelector"] = {"gpu": "a100"}
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    gang = gang_from_workload(obj)
    assert gang.components[1].constraints.node_selector == (("gpu", "a100"),)
    assert gang.components[0].constraints.node_selector == ()


def test_hand_built_gang() -> None:
    gang = Gang.of(
        Component("worker", 4, Resources({"nvidia.com/gpu": 8, "pods": 1})), min_member=2
    )
    assert [(c.name, n) for c, n in gang.minimum] == [("worker", 2)]
    with pytest.raises(ValueError):
        Gang.of(Component("worker", 1, Resources(pods=1)), min_member=2)
