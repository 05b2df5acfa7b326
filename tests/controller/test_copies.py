"""The member copy of a fleet workload, and the dependencies propagateDeps takes along."""

from __future__ import annotations

import copy

from fleet.api import constants as c
from fleet.controller import copies
from fleet.core.assignment import Domain
from fleet.core.kinds import adapter_for
from fleet.testing.workloads import batch_job, pytorchjob

PYTORCH = adapter_for("kubeflow.org/v1", "PyTorchJob")


def _fleet_job() -> dict:
    job = pytorchjob("pytorch-test", namespace="team-a", workers=2, gpus=1)
    job["metadata"] |= {
        "uid": "0b1c-uid",
        "resourceVersion": "42",
        "labels": {"team": "a"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "note": "x"},
    }
    return job


def test_member_copy_carries_ownership_and_every_gang_dialect():
    out = copies.member_copy(
        _fleet_job(), PYTORCH, min_member=3, binding="team-a/pj", fleet_id="fleet-test"
    )
    meta = out["metadata"]
    assert meta["name"] == "pytorch-test" and meta["namespace"] == "team-a"
    assert meta["labels"] == {
        "team": "a",
        c.MANAGED_BY_LABEL: "fleet-test",
        c.FLEET_UID_LABEL: "0b1c-uid",
    }
    assert "kubectl.kubernetes.io/last-applied-configuration" not in meta["annotations"]
    assert meta["annotations"]["note"] == "x"
    assert meta["annotations"][c.BINDING_ANNOTATION] == "team-a/pj"
    assert "resourceVersion" not in meta and "uid" not in meta
    assert out["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3
    for replica in out["spec"]["pytorchReplicaSpecs"].values():
        labels = replica["template"]["metadata"]["labels"]
        assert labels[c.POD_GROUP_NAME_LABEL] == "pytorch-test"
        assert labels[c.POD_GROUP_MIN_AVAILABLE_LABEL] == "3"
        assert labels[c.FLEET_UID_LABEL] == "0b1c-uid"


def test_carried_labels_go_on_the_copy_and_its_pods_and_fleets_own_labels_win():
    job = _fleet_job()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].setdefault("metadata", {})[
        "labels"
    ] = {"ckpt/step": "from-the-template"}
    out = copies.member_copy(
        job,
        PYTORCH,
        min_member=3,
        binding="team-a/pj",
        fleet_id="fleet-test",
        carried={"ckpt/step": "1200", "team": "b", c.FLEET_UID_LABEL: "forged"},
    )
    labels = out["metadata"]["labels"]
    # The carried value wins over the user's label of the same key; fleet's own labels win.
    assert labels["ckpt/step"] == "1200" and labels["team"] == "b"
    assert labels[c.FLEET_UID_LABEL] == "0b1c-uid"
    for spec in out["spec"]["pytorchReplicaSpecs"].values():
        pod = spec["template"]["metadata"]["labels"]
        assert pod["ckpt/step"] == "1200" and pod[c.FLEET_UID_LABEL] == "0b1c-uid"
    plain = copies.member_copy(
        _fleet_job(), PYTORCH, min_member=3, binding="team-a/pj", fleet_id="fleet-test"
    )
    assert not copies.is_current(plain, out)  # a carried label changes what is applied


def test_the_fleet_object_is_not_modified():
    job = _fleet_job()
    before = copy.deepcopy(job)
    copies.member_copy(job, PYTORCH, min_member=3, binding="b", fleet_id="f")
    assert job == before


def test_the_applied_digest_notices_any_change_including_removals():
    job = _fleet_job()
    first = copies.member_copy(job, PYTORCH, min_member=3, binding="b", fleet_id="f")
    assert copies.is_current(
        first, copies.member_copy(job, PYTORCH, min_member=3, binding="b", fleet_id="f")
    )
    del job["metadata"]["labels"]["team"]
    changed = copies.member_copy(job, PYTORCH, min_member=3, binding="b", fleet_id="f")
    assert not copies.is_current(first, changed)
    assert not copies.is_current({"metadata": {}}, changed)


def test_ours_is_decided_by_the_fleet_uid_not_the_name():
    member_obj = {"metadata": {"labels": {c.FLEET_UID_LABEL: "0b1c-uid"}}}
    assert copies.is_ours(member_obj, "0b1c-uid")
    assert not copies.is_ours(member_obj, "a-recreated-object")
    assert not copies.is_ours({"metadata": {}}, "0b1c-uid")


def test_dependencies_found_in_every_place_a_pod_can_reference_them():
    job = _fleet_job()
    spec = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    spec |= {
        "serviceAccountName": "trainer",
        "imagePullSecrets": [{"name": "registry"}],
        "volumes": [
            {"name": "a", "configMap": {"name": "cfg"}},
            {"name": "b", "secret": {"secretName": "creds"}},
            {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "d", "projected": {"sources": [{"configMap": {"name": "proj"}}]}},
        ],
    }
    spec["containers"][0] |= {
        "envFrom": [{"secretRef": {"name": "env-secret"}}],
        "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}}],
    }
    assert copies.dependencies(job, PYTORCH) == [
        ("ConfigMap", "cfg"),
        ("ConfigMap", "env-cm"),
        ("ConfigMap", "proj"),
        ("PersistentVolumeClaim", "data"),
        ("Secret", "creds"),
        ("Secret", "env-secret"),
        ("Secret", "registry"),
        ("ServiceAccount", "trainer"),
    ]


def test_dependency_copies_drop_server_state_and_bindings():
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data",
            "namespace": "team-a",
            "uid": "u",
            "resourceVersion": "1",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {"volumeName": "pv-on-the-fleet", "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"},
    }
    out = copies.dependency_copy(pvc, "fleet-test")
    assert "status" not in out and "uid" not in out["metadata"]
    assert "volumeName" not in out["spec"]
    assert out["metadata"]["labels"][c.MANAGED_BY_LABEL] == "fleet-test"


def _templates(out: dict) -> list[dict]:
    return [r["template"] for r in out["spec"]["pytorchReplicaSpecs"].values()]


def test_each_gang_scheduler_gets_the_gang_in_what_it_understands():
    job = _fleet_job()
    koord = copies.member_copy(
        job, PYTORCH, min_member=3, binding="b", fleet_id="f", gang_scheduler="Koordinator"
    )
    cosched = copies.member_copy(
        job, PYTORCH, min_member=3, binding="b", fleet_id="f", gang_scheduler="Coscheduling"
    )
    for out in (koord, cosched):
        assert out["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3
        roles = {t["metadata"]["labels"][c.ROLE_LABEL] for t in _templates(out)}
        assert roles == {"master", "worker"}
    for template in _templates(koord):  # Koordinator makes the PodGroup from the seeds' labels
        assert template["metadata"]["labels"][c.POD_GROUP_NAME_LABEL] == "pytorch-test"
        assert template["metadata"]["labels"][c.POD_GROUP_MIN_AVAILABLE_LABEL] == "3"
    for template in _templates(cosched):  # the training operator makes coscheduling's PodGroup
        assert c.POD_GROUP_NAME_LABEL not in template["metadata"]["labels"]


def test_a_users_own_gang_and_scheduler_name_are_kept():
    job = _fleet_job()
    master, worker = job["spec"]["pytorchReplicaSpecs"].values()
    master["template"]["metadata"] = {
        "labels": {c.POD_GROUP_NAME_LABEL: "mine", c.POD_GROUP_MIN_AVAILABLE_LABEL: "2"}
    }
    worker["template"]["metadata"] = {
        "annotations": {
            c.KOORDINATOR_GANG_NAME_ANNOTATION: "gang-a",
            c.KOORDINATOR_GANG_GROUPS_ANNOTATION: '["team-a/gang-a","team-a/gang-b"]',
        }
    }
    worker["template"]["spec"]["schedulerName"] = "my-scheduler"
    out = copies.member_copy(
        job,
        PYTORCH,
        min_member=3,
        binding="b",
        fleet_id="f",
        gang_scheduler="Koordinator",
        scheduler_name="koord-scheduler",
    )
    m, w = _templates(out)
    assert m["metadata"]["labels"][c.POD_GROUP_NAME_LABEL] == "mine"
    assert m["metadata"]["labels"][c.POD_GROUP_MIN_AVAILABLE_LABEL] == "2"
    assert m["spec"]["schedulerName"] == "koord-scheduler"
    # The worker speaks Koordinator's annotations (a GangGroup): no labels are added beside them.
    assert c.POD_GROUP_NAME_LABEL not in w["metadata"].get("labels", {})
    assert w["metadata"]["annotations"][c.KOORDINATOR_GANG_GROUPS_ANNOTATION].startswith("[")
    assert w["spec"]["schedulerName"] == "my-scheduler"


def test_a_batch_job_copy_drops_the_fleets_generated_selector_and_carries_fleets_marks():
    job = batch_job("train", namespace="team-a", pods=2)
    job["metadata"] |= {"uid": "fleet-uid", "resourceVersion": "9"}
    # What the fleet's API server stored: the selector and labels from the fleet object's UID.
    job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": "fleet-uid"}}
    job["spec"]["template"]["metadata"] = {
        "labels": {
            "controller-uid": "fleet-uid",
            "batch.kubernetes.io/controller-uid": "fleet-uid",
            "job-name": "train",
            "batch.kubernetes.io/job-name": "train",
        }
    }
    out = copies.member_copy(
        job,
        adapter_for("batch/v1", "Job"),
        min_member=2,
        binding="team-a/job-train",
        fleet_id="f",
        gang_scheduler="Koordinator",
        scheduler_name="koord-scheduler",
    )
    assert "selector" not in out["spec"]
    template = out["spec"]["template"]
    assert template["metadata"]["labels"] == {
        c.POD_GROUP_NAME_LABEL: "train",
        c.POD_GROUP_MIN_AVAILABLE_LABEL: "2",
        c.FLEET_UID_LABEL: "fleet-uid",
        c.ROLE_LABEL: "pod",
    }
    assert template["spec"]["schedulerName"] == "koord-scheduler"
    assert out["metadata"]["labels"][c.FLEET_UID_LABEL] == "fleet-uid"


def test_a_dependency_patch_tests_fleets_mark_first_and_writes_the_data_whole():
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "team-a", "labels": {"app/x": "y"}},
        "type": "Opaque",
        "data": {"token": "bmV3"},
    }
    dependency = copies.dependency_copy(secret, "fleet-test")
    ops = copies.dependency_patch(dependency, "fleet-test")
    assert ops[0] == {
        "op": "test",
        "path": "/metadata/labels/fleet.dev~1managed-by",
        "value": "fleet-test",
    }
    assert {"op": "add", "path": "/data", "value": {"token": "bmV3"}} in ops
    assert not any(op["path"] == "/type" for op in ops)  # a Secret's type cannot change
    assert {"op": "add", "path": "/metadata/labels/app~1x", "value": "y"} in ops
    digest = copies.dependency_digest(dependency)
    assert {
        "op": "add",
        "path": "/metadata/annotations/fleet.dev~1applied-digest",
        "value": digest,
    } in ops
    # What is created carries the same digest, so its annotations exist for the patch.
    created = copies.stamped_dependency(dependency)
    assert created["metadata"]["annotations"][c.APPLIED_DIGEST_ANNOTATION] == digest
    assert created["type"] == "Opaque"


def test_a_required_domain_pins_its_templates_and_a_preferred_one_is_only_preferred():
    rack = "topology.kubernetes.io/rack"
    job = _fleet_job()
    out = copies.member_copy(
        job,
        PYTORCH,
        min_member=3,
        binding="b",
        fleet_id="f",
        pin=(Domain(rack, "r7", ("worker",)), Domain(rack, "r9", ("master",), required=False)),
    )
    specs = {
        role: spec["template"]["spec"] for role, spec in out["spec"]["pytorchReplicaSpecs"].items()
    }
    terms = specs["Worker"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": rack, "operator": "In", "values": ["r7"]}]}]
    master = specs["Master"]["affinity"]["nodeAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in master
    assert master["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {
            "weight": 100,
            "preference": {"matchExpressions": [{"key": rack, "operator": "In", "values": ["r9"]}]},
        }
    ]
    assert "affinity" not in job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
