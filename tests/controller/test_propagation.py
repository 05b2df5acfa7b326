"""The member copy of a fleet workload, and the dependencies propagateDeps takes along."""

from __future__ import annotations

import copy

from fleet.api import constants as c
from fleet.controller import propagation
from fleet.core.kinds import find_kind
from fleet.testing.workloads import pytorchjob

PYTORCH = find_kind("kubeflow.org/v1", "PyTorchJob")


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
    out = propagation.member_copy(_fleet_job(), PYTORCH, min_member=3, binding="team-a/pj")
    meta = out["metadata"]
    assert meta["name"] == "pytorch-test" and meta["namespace"] == "team-a"
    assert meta["labels"] == {
        "team": "a",
        c.MANAGED_BY_LABEL: "fleet",
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


def test_the_fleet_object_is_not_modified():
    job = _fleet_job()
    before = copy.deepcopy(job)
    propagation.member_copy(job, PYTORCH, min_member=3, binding="b")
    assert job == before


def test_the_applied_digest_notices_any_change_including_removals():
    job = _fleet_job()
    first = propagation.member_copy(job, PYTORCH, min_member=3, binding="b")
    assert propagation.is_current(
        first, propagation.member_copy(job, PYTORCH, min_member=3, binding="b")
    )
    del job["metadata"]["labels"]["team"]
    changed = propagation.member_copy(job, PYTORCH, min_member=3, binding="b")
    assert not propagation.is_current(first, changed)
    assert not propagation.is_current({"metadata": {}}, changed)


def test_ours_is_decided_by_the_fleet_uid_not_the_name():
    member_obj = {"metadata": {"labels": {c.FLEET_UID_LABEL: "0b1c-uid"}}}
    assert propagation.is_ours(member_obj, "0b1c-uid")
    assert not propagation.is_ours(member_obj, "a-recreated-object")
    assert not propagation.is_ours({"metadata": {}}, "0b1c-uid")


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
    assert propagation.dependencies(job, PYTORCH) == [
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
    out = propagation.dependency_copy(pvc)
    assert "status" not in out and "uid" not in out["metadata"]
    assert "volumeName" not in out["spec"]
    assert out["metadata"]["labels"][c.MANAGED_BY_LABEL] == "fleet"
