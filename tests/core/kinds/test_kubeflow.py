"""Kubeflow training jobs (PyTorchJob and its family): bad input, the copy per member
scheduler, the state word, pod names and the priority class."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.core.gangmarks import (
    COSCHEDULING,
    KOORDINATOR,
    KOORDINATOR_GANG_NAME_ANNOTATION,
    POD_GROUP_MIN_AVAILABLE_LABEL,
    POD_GROUP_NAME_LABEL,
    VOLCANO,
)
from fleet.core.kinds import gang_from_workload
from fleet.core.kinds.kubeflow import PYTORCHJOB, TFJOB
from fleet.core.workload import WorkloadError
from tests.core.kinds.builders import cond, fleet_meta, pod_template


def pytorchjob(workers: Any = 2) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": fleet_meta("pj"),
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod_template()},
                "Worker": {"replicas": workers, "template": pod_template()},
            }
        },
    }


WORKER = "PyTorchJob ns/pj: spec.pytorchReplicaSpecs.Worker"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda s: s["Worker"].update(replicas=-1),
            f"{WORKER}.replicas: must not be negative, got -1",
        ),
        (
            lambda s: s["Worker"].update(replicas="2"),
            f"{WORKER}.replicas: expected an integer, got '2'",
        ),
        (
            lambda s: s["Worker"].update(replicas=2.0),
            f"{WORKER}.replicas: expected an integer, got 2.0",
        ),
        (lambda s: s["Worker"].pop("template"), f"{WORKER}.template: expected an object, got None"),
        (
            lambda s: s["Worker"].update(template=[]),
            f"{WORKER}.template: expected an object, got []",
        ),
        (
            lambda s: s.update(Launcher=s["Master"]),
            "PyTorchJob ns/pj: spec.pytorchReplicaSpecs.Launcher: "
            "unknown replica type (expected one of Master, Worker)",
        ),
    ],
)
def test_bad_input_names_the_field(edit: Any, message: str) -> None:
    obj = pytorchjob()
    edit(obj["spec"]["pytorchReplicaSpecs"])
    with pytest.raises(WorkloadError) as error:
        gang_from_workload(obj)
    assert str(error.value) == message


def test_missing_replica_specs_name_the_field() -> None:
    obj = pytorchjob()
    del obj["spec"]["pytorchReplicaSpecs"]
    with pytest.raises(WorkloadError) as error:
        gang_from_workload(obj)
    assert (
        str(error.value)
        == "PyTorchJob ns/pj: spec.pytorchReplicaSpecs: expected an object, got None"
    )


def _gang_labels(out: dict[str, Any]) -> list[dict[str, str]]:
    return [
        r["template"]["metadata"].get("labels") or {}
        for r in out["spec"]["pytorchReplicaSpecs"].values()
    ]


@pytest.mark.parametrize(
    ("scheduler", "labelled"),
    [(COSCHEDULING, False), (VOLCANO, False), (KOORDINATOR, True), (None, True)],
)
def test_the_gang_goes_where_the_members_scheduler_reads_it(
    scheduler: str | None, labelled: bool
) -> None:
    out = PYTORCHJOB.member_copy(pytorchjob(), min_member=2, gang_scheduler=scheduler)
    # The training operator makes the coscheduling or Volcano PodGroup from minAvailable.
    assert out["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 2
    wanted = {POD_GROUP_NAME_LABEL: "pj", POD_GROUP_MIN_AVAILABLE_LABEL: "2"}
    assert all((wanted.items() <= labels.items()) is labelled for labels in _gang_labels(out))


def test_a_users_koordinator_gang_is_kept() -> None:
    obj = pytorchjob()
    for replica in obj["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["metadata"]["annotations"] = {KOORDINATOR_GANG_NAME_ANNOTATION: "mine"}
    out = PYTORCHJOB.member_copy(obj, min_member=3, gang_scheduler=KOORDINATOR)
    assert all(POD_GROUP_NAME_LABEL not in labels for labels in _gang_labels(out))


def test_the_copy_keeps_the_spec_and_touches_not_the_fleet_object() -> None:
    obj = pytorchjob()
    out = PYTORCHJOB.member_copy(obj, min_member=3, gang_scheduler=KOORDINATOR)
    assert "runPolicy" not in obj["spec"]
    assert out["metadata"] == {"name": "pj", "namespace": "ns", "labels": {}, "annotations": {}}


@pytest.mark.parametrize(
    ("status", "state"),
    [
        (None, "Pending"),
        ({"conditions": [cond("Created")]}, "Created"),
        ({"conditions": [cond("Created"), cond("Running")]}, "Running"),
        ({"conditions": [cond("Succeeded"), cond("Running", "False")]}, "Succeeded"),
        ({"conditions": [cond("Failed"), cond("Running")]}, "Failed"),
        ({"conditions": [cond("Running"), cond("Restarting")]}, "Restarting"),
        ({"conditions": [cond("Suspended")]}, "Suspended"),
    ],
)
def test_terminal_conditions_win_whatever_their_order(
    status: dict[str, Any] | None, state: str
) -> None:
    assert PYTORCHJOB.state(status) == state


def test_pods_are_named_by_role_and_index() -> None:
    assert PYTORCHJOB.names_pods
    assert PYTORCHJOB.pod_name("pj", "worker", 1) == "pj-worker-1"
    assert TFJOB.pod_name("tf", "ps", 0) == "tf-ps-0"


def test_priority_class_from_run_policy_else_the_templates() -> None:
    obj = pytorchjob()
    assert PYTORCHJOB.priority_class(obj) is None
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = "low"
    assert PYTORCHJOB.priority_class(obj) == "low"
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "high"}}
    assert PYTORCHJOB.priority_class(obj) == "high"


def test_the_queue_charges_every_replica() -> None:
    gang = gang_from_workload(pytorchjob(workers=3))
    assert PYTORCHJOB.charge(gang).get("cpu") == 4000
