"""Proof that a Koordinator member enforces gangs from the seeds' own labels, and GangGroups.

The member runs koord-scheduler (Koordinator v1.8.0, Kubernetes 1.35 libraries) against a 1.34
API server, and a training operator with no gang scheduler of its own: the pods' labels
(`pod-group.scheduling.sigs.k8s.io/name`, `/min-available`) are all koord-scheduler goes by.
"""

from __future__ import annotations

import json
from typing import Any

from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER
from fleet.testing.workloads import JOB_NAME_LABEL
from tests.sandbox.test_member_gang import seed_tfjob

GANG = "gang.scheduling.koordinator.sh"


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "PodScheduled" and c["status"] == "False"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _all_running(pods: list[dict[str, Any]], count: int) -> bool:
    return len(pods) == count and all(
        p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods
    )


def _held_whole(member: ClusterClient, namespace: str, selector: str, count: int) -> list[str]:
    """Wait until all `count` pods were tried and found unschedulable; the ones bound then."""
    pods = wait_until(
        lambda: (
            (p := member.pods(namespace, selector))
            and len(p) == count
            and all(_unschedulable(x) or x["spec"].get("nodeName") for x in p)
            and p
        ),
        timeout=90,
        what=f"{count} pods tried by koord-scheduler",
    )
    return sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))


def test_seed_tfjob_is_held_whole_then_runs_whole(clusters, namespace, add_nodes):
    """The seeds' TFJob, labels unchanged: 1 PS + 4 workers x 2 GPUs on a member with 4 GPUs."""
    member = clusters[KOORDINATOR_MEMBER]
    selector = {"test": namespace}
    add_nodes(KOORDINATOR_MEMBER, count=2, gpu=2, labels=selector)
    member.create(seed_tfjob(namespace, selector))
    pods = f"{JOB_NAME_LABEL}=tf-smoke-gpu"

    # The PS and two workers would fit; the gang keeps every one of them off the nodes.
    assert _held_whole(member, namespace, pods, 5) == []

    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels=selector)
    wait_until(
        lambda: _all_running(member.pods(namespace, pods), 5),
        timeout=120,
        what="all 5 pods Running after 4 GPUs were added",
    )


def _gang_pod(
    namespace: str, name: str, gang: str, groups: list[str], selector: dict[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"gang-test": "true"},
            "annotations": {
                f"{GANG}/name": gang,
                f"{GANG}/min-available": "2",
                f"{GANG}/groups": json.dumps(groups),
            },
        },
        "spec": {
            "nodeSelector": selector,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 2}}}
            ],
        },
    }


def test_a_gang_group_binds_only_when_both_gangs_fit(clusters, namespace, add_nodes):
    """Two gangs of 2 pods x 2 GPUs, grouped: with room for one gang, neither binds."""
    member = clusters[KOORDINATOR_MEMBER]
    selector = {"test": namespace}
    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels=selector)
    groups = [f"{namespace}/gang-a", f"{namespace}/gang-b"]
    for gang in ("gang-a", "gang-b"):
        for i in range(2):
            member.create(_gang_pod(namespace, f"{gang}-{i}", gang, groups, selector))

    assert _held_whole(member, namespace, "gang-test=true", 4) == []

    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels=selector)
    wait_until(
        lambda: _all_running(member.pods(namespace, "gang-test=true"), 4),
        timeout=120,
        what="both gangs Running once both fit",
    )
