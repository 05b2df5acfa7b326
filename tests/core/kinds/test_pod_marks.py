"""Every kind marks its pods through its adapter (`KindAdapter.mark_pods`): the member's
schedulerName, the gang for its gang scheduler and fleet's labels reach the templates the
member's pods are made from (`pod_templates`), wherever those live: a TrainJob's in its
runtime, reached through `spec.podTemplateOverrides` as Trainer v2.1 merges them. A member
whose gang scheduler cannot run a kind as one gang says why (`gang_refusal`)."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.api import constants as c
from fleet.controller import copies
from fleet.core.gangmarks import COSCHEDULING, KOORDINATOR, VOLCANO
from fleet.core.kinds import ADAPTERS, adapter_for, gang_from_workload
from fleet.testing.workloads import (
    batch_job,
    jobset,
    mpijob,
    pytorchjob,
    raycluster,
    rayjob,
    training_runtime,
    trainjob,
)

NS = "team-a"
UID = "u-1"


def _fleet(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"] |= {"namespace": NS, "uid": UID, "resourceVersion": "7"}
    return obj


def _trainjob(*, coscheduling: bool = False, **runtime: Any) -> tuple[dict, dict]:
    job = _fleet(trainjob("tj", "torch", namespace=NS, nodes=3))
    rt = training_runtime("torch", namespace=NS, coscheduling=coscheduling, **runtime)
    return job, {("TrainingRuntime", NS, "torch"): rt}


def _every_kind() -> list[tuple[dict, dict]]:
    jobs = [pytorchjob("j"), mpijob("j"), batch_job("j"), jobset("j"), raycluster("j"), rayjob("j")]
    return [(_fleet(j), {}) for j in jobs] + [_trainjob()]


def _copy(obj: dict, needed: dict, scheduler: str | None, name: str | None = None) -> dict:
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    gang = gang_from_workload(obj, needed)
    return copies.member_copy(
        obj,
        kind,
        min_member=gang.min_member,
        binding="b",
        fleet_id="f",
        gang_scheduler=scheduler,
        scheduler_name=name,
        needed=needed,
    )


def _pods(out: dict, needed: dict) -> list[Any]:
    """The templates the member's pods are made from, as its operator will make them."""
    kind = adapter_for(out["apiVersion"], out["kind"])
    assert kind is not None
    return kind.pod_templates(out, needed)


def test_every_kind_is_covered():
    assert {(o["apiVersion"], o["kind"]) for o, _ in _every_kind()} >= {
        a.type for a in ADAPTERS if a.kind not in ("TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
    }


@pytest.mark.parametrize(("obj", "needed"), _every_kind(), ids=lambda x: x.get("kind", ""))
def test_on_koordinator_every_kinds_pods_carry_fleets_labels_and_the_seeds_gang(obj, needed):
    out = _copy(obj, needed, KOORDINATOR)
    pods = _pods(out, needed)
    assert pods
    for t in pods:
        labels = t.template["metadata"]["labels"]
        assert labels[c.FLEET_UID_LABEL] == UID
        assert labels[c.ROLE_LABEL] == t.component
        assert labels[c.POD_GROUP_NAME_LABEL] == obj["metadata"]["name"]
        assert int(labels[c.POD_GROUP_MIN_AVAILABLE_LABEL]) >= 1
        assert c.COSCHEDULING_POD_GROUP_LABEL not in labels


@pytest.mark.parametrize(("obj", "needed"), _every_kind(), ids=lambda x: x.get("kind", ""))
def test_every_kinds_pods_get_the_members_scheduler_name_or_the_member_is_refused(obj, needed):
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    refusal = kind.gang_refusal(
        obj, needed, gang_scheduler=KOORDINATOR, scheduler_name="koord-scheduler"
    )
    if obj["kind"] == "TrainJob":
        # Trainer's podTemplateOverrides cannot set schedulerName: not sent there, and said.
        assert refusal is not None and "schedulerName koord-scheduler" in refusal
        return
    assert refusal is None
    for t in _pods(_copy(obj, needed, KOORDINATOR, "koord-scheduler"), needed):
        assert t.template["spec"]["schedulerName"] == "koord-scheduler"


def test_trainjob_on_koordinator_is_marked_through_pod_template_overrides():
    job, needed = _trainjob()
    out = _copy(job, needed, KOORDINATOR)
    (entry,) = out["spec"]["podTemplateOverrides"]
    assert entry["targetJobs"] == [{"name": "node"}]
    assert entry["metadata"]["labels"] == {
        c.POD_GROUP_NAME_LABEL: "tj",
        c.POD_GROUP_MIN_AVAILABLE_LABEL: "3",
        c.FLEET_UID_LABEL: UID,
        c.ROLE_LABEL: "node",
    }
    kind = adapter_for(job["apiVersion"], job["kind"])
    assert kind is not None
    assert kind.pod_group(out, min_member=3, gang_scheduler=KOORDINATOR) is None
    # spec.labels reach the JobSet and its Jobs only (Trainer v2.1): fleet does not use them
    assert "labels" not in out["spec"]


def test_trainjob_on_coscheduling_gets_fleets_pod_group_when_its_runtime_makes_none():
    job, needed = _trainjob(coscheduling=False)
    out = _copy(job, needed, COSCHEDULING)
    (t,) = _pods(out, needed)
    labels = t.template["metadata"]["labels"]
    assert labels[c.COSCHEDULING_POD_GROUP_LABEL] == "tj"
    assert labels[c.FLEET_UID_LABEL] == UID
    assert c.POD_GROUP_NAME_LABEL not in labels
    kind = adapter_for(job["apiVersion"], job["kind"])
    assert kind is not None
    member_obj = {**out, "metadata": {**out["metadata"], "uid": "member-uid"}}
    group = kind.pod_group(member_obj, min_member=3, gang_scheduler=COSCHEDULING)
    assert group is not None and group["spec"] == {"minMember": 3}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"


def test_trainjob_on_coscheduling_leaves_the_gang_to_trainer_when_its_runtime_has_one():
    job, needed = _trainjob(coscheduling=True)
    out = _copy(job, needed, COSCHEDULING)
    (entry,) = out["spec"]["podTemplateOverrides"]
    assert entry["metadata"]["labels"] == {c.FLEET_UID_LABEL: UID, c.ROLE_LABEL: "node"}
    kind = adapter_for(job["apiVersion"], job["kind"])
    assert kind is not None
    assert kind.pod_group(out, min_member=3, gang_scheduler=COSCHEDULING) is None


def test_a_users_own_overrides_and_gang_are_kept_and_fleets_entries_come_last():
    job, needed = _trainjob()
    own = {
        "targetJobs": [{"name": "node"}],
        "metadata": {"labels": {c.POD_GROUP_NAME_LABEL: "mine", "team": "a"}},
        "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
    }
    job["spec"]["podTemplateOverrides"] = [own]
    out = _copy(job, needed, KOORDINATOR)
    first, fleets = out["spec"]["podTemplateOverrides"]
    assert first == own
    assert c.POD_GROUP_NAME_LABEL not in fleets["metadata"]["labels"]
    (t,) = _pods(out, needed)
    labels = t.template["metadata"]["labels"]
    assert labels[c.POD_GROUP_NAME_LABEL] == "mine" and labels["team"] == "a"
    assert labels[c.FLEET_UID_LABEL] == UID
    # the user's overrides reach the gang's constraints as they reach the pods
    gang = gang_from_workload(job, needed)
    assert [t.key for t in gang.components[0].constraints.tolerations] == ["gpu"]


def test_trainjob_dependencies_are_read_from_its_runtime_and_its_overrides():
    job, needed = _trainjob()
    runtime = needed[("TrainingRuntime", NS, "torch")]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["spec"]["serviceAccountName"] = "trainer-sa"
    pod["spec"]["volumes"] = [{"name": "data", "configMap": {"name": "runtime-config"}}]
    job["spec"]["podTemplateOverrides"] = [
        {
            "targetJobs": [{"name": "node"}],
            "spec": {
                "volumes": [{"name": "creds", "secret": {"secretName": "override-secret"}}],
                "containers": [{"name": "node", "env": [_secret_env("TOKEN", "override-token")]}],
            },
        }
    ]
    job["spec"]["trainer"]["env"] = [_secret_env("HF", "trainer-secret")]
    kind = adapter_for(job["apiVersion"], job["kind"])
    assert kind is not None
    assert copies.dependencies(job, kind, needed) == [
        ("ConfigMap", "runtime-config"),
        ("Secret", "override-secret"),
        ("Secret", "override-token"),
        ("Secret", "trainer-secret"),
        ("ServiceAccount", "trainer-sa"),
    ]
    assert copies.dependencies(job, kind) == []  # without its runtime, nothing to read


def _secret_env(name: str, secret: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": "k"}}}


def test_trainjob_refusals_name_what_the_member_cannot_do():
    kind = adapter_for("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert kind is not None
    job, coscheduled = _trainjob(coscheduling=True)
    _, plain = _trainjob(coscheduling=False)

    def refusal(needed: dict, scheduler: str | None, name: str | None = None) -> str | None:
        return kind.gang_refusal(job, needed, gang_scheduler=scheduler, scheduler_name=name)

    assert refusal(coscheduled, COSCHEDULING) is None
    assert refusal(plain, COSCHEDULING) is None
    assert refusal(plain, KOORDINATOR) is None
    assert refusal(plain, None) is None
    said = refusal(coscheduled, KOORDINATOR)
    assert said is not None and "podGroupPolicy makes a Coscheduling gang" in said
    said = refusal(plain, VOLCANO)
    assert said is not None and "TrainingRuntime torch has none" in said
    # a runtime whose templates name the member's scheduler can go there
    rt = plain[("TrainingRuntime", NS, "torch")]
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["spec"]["schedulerName"] = "koord-scheduler"
    assert refusal(plain, KOORDINATOR, "koord-scheduler") is None


@pytest.mark.parametrize("make", [jobset, raycluster, rayjob])
def test_kinds_whose_gang_fleet_writes_are_refused_by_volcano(make):
    obj = _fleet(make("j"))
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    said = kind.gang_refusal(obj, {}, gang_scheduler=VOLCANO, scheduler_name=None)
    assert said is not None and "Volcano" in said
    assert kind.gang_refusal(obj, {}, gang_scheduler=COSCHEDULING, scheduler_name=None) is None


def test_kubeflow_jobs_go_to_volcano_their_operator_makes_the_pod_group():
    obj = _fleet(pytorchjob("j"))
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    assert kind.gang_refusal(obj, {}, gang_scheduler=VOLCANO, scheduler_name="volcano") is None
