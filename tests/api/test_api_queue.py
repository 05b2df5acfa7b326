"""The Kube Queue kinds: the seeds' tree parses unchanged and checks out, Queues and QueueUnits are
built as ACK names them and carry what a restart needs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from fleet.api import (
    ElasticQuotaTree,
    ObjectReference,
    Queue,
    QueueUnit,
    constants,
    parse_object,
)
from fleet.api.crdgen import _value_problems as value_problems
from fleet.api.crdgen import crd_for
from fleet.core.quota import check_tree, queue_name_prefix

Docs = Callable[[str], list[dict[str, Any]]]


def _seed(repo: Path, load_docs: Docs) -> dict[str, Any]:
    (doc,) = load_docs((repo / "policies" / "elasticquotatree-seed.yaml").read_text())
    return doc


def test_seed_tree_parses_unchanged_and_round_trips(repo: Path, load_docs: Docs) -> None:
    doc = _seed(repo, load_docs)
    tree = parse_object(doc)
    assert isinstance(tree, ElasticQuotaTree)
    assert tree.namespace == constants.QUOTA_TREE_NAMESPACE
    root = tree.spec.root
    assert root.max == {
        "cpu": 999900,
        "memory": "400000Gi",
        "kube-queue/max-jobs": 10000000000,
        "nvidia.com/gpu": 100000,
    }
    assert root.children is not None and root.children[0].namespaces == ["default"]
    assert tree.to_dict() == doc  # nothing added, nothing lost


def test_seed_tree_validates_against_its_crd_and_the_core_rules(
    repo: Path, load_docs: Docs
) -> None:
    doc = _seed(repo, load_docs)
    schema = crd_for(ElasticQuotaTree)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    body = {k: v for k, v in doc.items() if k != "metadata"}
    assert value_problems(body, schema, "ElasticQuotaTree") == []
    check = check_tree(ElasticQuotaTree.from_dict(doc).spec.to_dict())
    assert check.valid
    assert [p.rule for p in check.warnings] == ["RootMinEqualsMax"]


def test_tree_status_with_problems_validates_against_the_crd() -> None:
    tree = ElasticQuotaTree.from_dict(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
            "kind": "ElasticQuotaTree",
            "metadata": {"name": "t", "namespace": "kube-system", "generation": 3},
            "spec": {"root": {"name": "root", "children": [{"name": "a", "min": {"cpu": 2}}]}},
            "status": {
                "state": "Invalid",
                "valid": False,
                "observedGeneration": 3,
                "inForce": {"namespace": "kube-system", "name": "t", "generation": 2},
                "problems": [
                    {
                        "node": "root",
                        "field": "spec.root.children",
                        "rule": "ChildrenMinWithinParentMin",
                        "severity": "Error",
                        "message": "the children's min add up to 2 CPU, this node's min is 0",
                    }
                ],
                "message": "root: the children's min add up to 2 CPU ...",
            },
        }
    )
    schema = crd_for(ElasticQuotaTree)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    body = tree.to_dict()
    body.pop("metadata")
    assert value_problems(body, schema, "ElasticQuotaTree") == []


def test_deep_trees_parse_in_the_model_and_past_the_typed_crd_levels() -> None:
    node: dict[str, Any] = {"name": "leaf", "namespaces": ["x"]}
    for depth in range(6):
        node = {"name": f"n{depth}", "children": [node]}
    node["name"] = "root"
    tree = ElasticQuotaTree.from_dict(
        {"metadata": {"name": "t", "namespace": "kube-system"}, "spec": {"root": node}}
    )
    check = check_tree(tree.spec.to_dict())
    assert check.tree is not None and check.tree.quota_for("x", None) is not None


def test_unknown_node_field_is_refused_by_the_model() -> None:
    with pytest.raises(ValidationError, match="weight"):
        ElasticQuotaTree.from_dict({"spec": {"root": {"name": "root", "weight": 1}}})


def test_queue_for_a_quota_node_reads_like_acks() -> None:
    queue = Queue.for_quota("root/child-2", queue_name_prefix("root/child-2"))
    data = queue.to_dict()
    assert data["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and data["kind"] == "Queue"
    assert data["metadata"] == {
        "generateName": "root-child-2-",
        "namespace": "kube-queue",
        "annotations": {"kube-queue/quota-fullname": "root/child-2"},
    }
    assert data["spec"] == {"queuePolicy": "Priority"}
    assert queue.quota_path == "root/child-2"


def test_kube_queue_objects_parse_including_fifo() -> None:
    q = Queue.from_dict(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "root-kdzw7", "namespace": "kube-queue"},
            "spec": {"queuePolicy": "FIFO", "priority": 3},
        }
    )
    assert q.spec.queue_policy == "FIFO" and q.quota_path is None
    with pytest.raises(ValidationError):
        Queue.from_dict({"spec": {"queuePolicy": "Strict"}})


def test_queue_unit_for_a_job() -> None:
    job = ObjectReference(
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        namespace="default",
        name="pytorch-test",
        uid="u-1",
    )
    unit = QueueUnit.for_job(
        job,
        resource={"cpu": "12", "nvidia.com/gpu": 3},
        queue="root-child-2-v5zxz",
        priority=10,
        labels={"quota.scheduling.alibabacloud.com/name": "child-2"},
    )
    data = unit.to_dict()
    assert data["metadata"]["name"] == "pytorchjob-pytorch-test"
    assert data["metadata"]["namespace"] == "default"
    assert data["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert data["spec"]["consumerRef"]["name"] == "pytorch-test"
    assert data["status"] == {"phase": "Enqueued"}
    with pytest.raises(ValueError, match="needs apiVersion, kind, name, uid"):
        QueueUnit.for_job(ObjectReference(name="x"), resource={})


def test_queue_unit_status_keeps_what_a_restart_needs() -> None:
    text = """
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: QueueUnit
metadata: {name: pytorchjob-a, namespace: default}
spec:
  consumerRef: {apiVersion: kubeflow.org/v1, kind: PyTorchJob, name: a, namespace: default}
  queue: root-child-2-v5zxz
  resource: {cpu: 12, nvidia.com/gpu: "3"}
status:
  phase: TimeoutBackoff
  message: not placed within 300 s
  lastUpdateTime: "2025-01-01T00:05:00Z"
  quota: root/child-2
  dequeuedAt: "2025-01-01T00:00:00Z"
  backoffUntil: "2025-01-01T00:06:00Z"
  attempts: 1
"""
    unit = QueueUnit.from_dict(yaml.safe_load(text))
    assert unit.phase == "TimeoutBackoff"
    assert unit.status is not None
    assert unit.status.backoff_until == datetime(2025, 1, 1, 0, 6, tzinfo=UTC)
    assert unit.status.attempts == 1
    assert QueueUnit.from_dict(unit.to_dict()) == unit
