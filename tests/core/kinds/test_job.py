"""batch/v1 Job: gang reading, the copy a member accepts, and the state word."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.core.gangmarks import (
    COSCHEDULING,
    COSCHEDULING_POD_GROUP_LABEL,
    KOORDINATOR,
    POD_GROUP_MIN_AVAILABLE_LABEL,
    POD_GROUP_NAME_LABEL,
)
from fleet.core.kinds import gang_from_workload
from fleet.core.kinds.job import GENERATED_LABELS, JOB
from fleet.core.workload import WorkloadError
from tests.core.kinds.builders import cond, fleet_meta, pod_template

FLEET_UID = "0a1b2c3d-fleet-uid"


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": fleet_meta(),
        "spec": {"template": pod_template(cpu="2"), **spec},
    }


def as_the_fleet_stored_it(obj: dict[str, Any]) -> dict[str, Any]:
    """What the fleet's API server makes of a Job without a selector: the selector and the
    template labels generated from the fleet object's UID and name."""
    out = copy.deepcopy(obj)
    generated = {
        "controller-uid": FLEET_UID,
        "batch.kubernetes.io/controller-uid": FLEET_UID,
        "job-name": "j",
        "batch.kubernetes.io/job-name": "j",
    }
    out["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": FLEET_UID}}
    out["spec"]["template"]["metadata"]["labels"] = {"app": "train", **generated}
    return out


# -- gang --------------------------------------------------------------------------------------


def test_the_gang_is_the_pods_the_job_runs_at_once() -> None:
    gang = gang_from_workload(job(parallelism=4, completions=8))
    assert [(c.name, c.replicas) for c in gang.components] == [("pod", 4)]
    assert gang.min_member == 4 and not gang.multi_role


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"template": None}, "Job ns/j: spec.template: expected a pod template, got None"),
        ({"parallelism": -1}, "Job ns/j: spec.parallelism: must not be negative, got -1"),
        ({"parallelism": "4"}, "Job ns/j: spec.parallelism: expected an integer, got '4'"),
        ({"completions": 1.5}, "Job ns/j: spec.completions: expected an integer, got 1.5"),
        ({"parallelism": True}, "Job ns/j: spec.parallelism: expected an integer, got True"),
    ],
)
def test_bad_input_names_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadError) as error:
        gang_from_workload(job(**spec))
    assert str(error.value) == message


def test_a_missing_template_names_the_field() -> None:
    obj = job()
    del obj["spec"]["template"]
    with pytest.raises(WorkloadError, match=r"^Job ns/j: spec.template: "):
        gang_from_workload(obj)


# -- the copy ----------------------------------------------------------------------------------


def test_the_copy_drops_what_the_fleets_api_server_generated() -> None:
    stored = as_the_fleet_stored_it(job(parallelism=2))
    out = JOB.member_copy(stored, min_member=2, gang_scheduler=KOORDINATOR)
    assert "selector" not in out["spec"]
    labels = out["spec"]["template"]["metadata"]["labels"]
    assert not set(GENERATED_LABELS) & set(labels)
    assert labels["app"] == "train"  # the user's own labels stay
    assert stored["spec"]["selector"]  # the fleet object is not modified


def test_a_users_own_selector_is_kept_with_manual_selector() -> None:
    obj = job(manualSelector=True, selector={"matchLabels": {"app": "train"}})
    obj["spec"]["template"]["metadata"]["labels"] = {"app": "train", "job-name": "j"}
    out = JOB.member_copy(obj, min_member=1, gang_scheduler=KOORDINATOR)
    assert out["spec"]["selector"] == {"matchLabels": {"app": "train"}}
    assert out["spec"]["template"]["metadata"]["labels"]["job-name"] == "j"


def test_other_selector_terms_are_kept() -> None:
    stored = as_the_fleet_stored_it(job())
    stored["spec"]["selector"]["matchExpressions"] = [
        {"key": "app", "operator": "In", "values": ["train"]}
    ]
    out = JOB.member_copy(stored, min_member=1, gang_scheduler=None)
    assert out["spec"]["selector"] == {
        "matchExpressions": stored["spec"]["selector"]["matchExpressions"]
    }


@pytest.mark.parametrize(
    ("scheduler", "labelled"), [(KOORDINATOR, True), (None, True), (COSCHEDULING, False)]
)
def test_the_gang_labels_go_on_the_template_for_koordinator_or_an_unknown_scheduler(
    scheduler: str | None, labelled: bool
) -> None:
    out = JOB.member_copy(job(parallelism=3), min_member=3, gang_scheduler=scheduler)
    labels = out["spec"]["template"]["metadata"].get("labels") or {}
    wanted = {POD_GROUP_NAME_LABEL: "j", POD_GROUP_MIN_AVAILABLE_LABEL: "3"}
    assert (wanted.items() <= labels.items()) is labelled
    assert "runPolicy" not in out["spec"]
    # a coscheduling member gets the gang as scheduler-plugins' label and fleet's PodGroup
    assert (labels.get(COSCHEDULING_POD_GROUP_LABEL) == "j") is (scheduler == COSCHEDULING)
    member_obj = {**out, "metadata": {**out["metadata"], "uid": "member-uid"}}
    group = JOB.pod_group(member_obj, min_member=3, gang_scheduler=scheduler)
    assert (group is not None and group["spec"] == {"minMember": 3}) is (scheduler == COSCHEDULING)


# -- state -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "state"),
    [
        (None, "Pending"),
        ({"active": 2}, "Running"),
        ({"active": 2, "conditions": [cond("FailureTarget")]}, "Failed"),
        ({"conditions": [cond("FailureTarget"), cond("Failed")]}, "Failed"),
        ({"active": 1, "conditions": [cond("SuccessCriteriaMet")]}, "Succeeded"),
        ({"conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}, "Succeeded"),
        ({"conditions": [cond("Complete"), cond("Failed", "False")]}, "Succeeded"),
        ({"conditions": [cond("Suspended")]}, "Suspended"),
        ({"active": 0, "failed": 1}, "Pending"),  # a failed pod is replaced until backoffLimit
    ],
)
def test_state(status: dict[str, Any] | None, state: str) -> None:
    assert JOB.state(status) == state


def test_the_mirror_copies_the_jobs_counts() -> None:
    assert {"active", "succeeded", "failed", "ready"} <= set(JOB.status_fields)


def test_pods_are_found_by_owner_not_by_name() -> None:
    assert not JOB.names_pods


def test_priority_class_is_the_templates() -> None:
    obj = job()
    obj["spec"]["template"]["spec"]["priorityClassName"] = "high"
    assert JOB.priority_class(obj) == "high"


# -- the status mirror: what the fleet's API server accepts on a Job ---------------------------


def test_the_mirror_keeps_the_first_start_and_the_largest_counts_across_failovers() -> None:
    fleet = {"startTime": "T1", "failed": 1, "succeeded": 2, "active": 0}
    member = {"startTime": "T2", "failed": 0, "active": 3, "ready": 3}
    out = JOB.fleet_status(member, fleet, fails_over=True)
    assert out["startTime"] == "T1"  # a set startTime may not change
    assert (out["failed"], out["succeeded"]) == (1, 2)  # counters may not go down
    assert (out["active"], out["ready"]) == (3, 3)


def test_a_failed_copy_that_fails_over_leaves_the_fleet_job_non_terminal() -> None:
    member = {
        "startTime": "T1",
        "failed": 1,
        "completionTime": None,
        "conditions": [cond("FailureTarget"), cond("Failed")],
    }
    out = JOB.fleet_status(member, {}, fails_over=True)
    assert out["conditions"] == []  # a terminal condition could never be taken back
    assert out["failed"] == 1
    final = JOB.fleet_status(member, {}, fails_over=False)
    assert [x["type"] for x in final["conditions"]] == ["FailureTarget", "Failed"]


def test_a_complete_copy_is_mirrored_as_it_is() -> None:
    member = {
        "startTime": "T1",
        "completionTime": "T9",
        "succeeded": 3,
        "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
    }
    out = JOB.fleet_status(member, {"startTime": "T1"}, fails_over=True)
    assert out["completionTime"] == "T9"
    assert [x["type"] for x in out["conditions"]] == ["SuccessCriteriaMet", "Complete"]


def test_failed_for_good_on_the_fleet_is_failure_target_then_failed() -> None:
    assert JOB.failed_conditions == ("FailureTarget", "Failed")
