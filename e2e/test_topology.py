"""Topology on real API servers (issue 27): a PyTorchJob that asks Kueue's way for one rack
(`kueue.x-k8s.io/podset-required-topology` on its pod templates) lands on the coscheduling
member with every pod's node in one rack, the copy pinned there by required node affinity; with
too few GPUs in any single rack it waits on the fleet saying so, and no pod is created anywhere.

The same on the Koordinator member (member-4, joined for those tests only and tainted so that no
other gang goes there); the native-gang member's are in e2e/test_native_gang.py.

Each test confines its job to fake nodes it adds (labelled with its namespace and a rack).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import MEMBERS, PYTORCHJOB, Fleet, joined_apart

RACK = "topology.kubernetes.io/rack"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
#: member-2 runs coscheduling (scheduler-plugins), as test_dispatch says.
COSCHEDULING = "member-2"
TAINT = {"key": "fleet.dev/topology", "value": "e2e", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def koordinator(fleet: Fleet) -> Iterator[ClusterClient]:
    """member-4 joined and tainted for this module (its gang scheduler: Koordinator)."""
    with joined_apart(fleet, KOORDINATOR_MEMBER, TAINT, "Koordinator") as member:
        yield member


def _rack_job(namespace: str, name: str, **kw: Any) -> dict[str, Any]:
    job = pytorchjob(name, namespace=namespace, node_selector={"test": namespace}, **kw)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        meta = spec["template"].setdefault("metadata", {})
        meta.setdefault("annotations", {})[REQUIRED] = RACK
    # Master and workers are one pod set group, so the whole gang shares one rack.
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-group-name"] = "all"
    return job


def _racks_of_pods(live: Fleet, member: str, namespace: str) -> set[str | None]:
    cluster = live.clusters[member]
    racks = set()
    for pod in cluster.pods(namespace):
        node_name = pod["spec"].get("nodeName")
        assert node_name, pod["metadata"]["name"]
        node = cluster.get("v1", "Node", node_name)
        racks.add(((node or {}).get("metadata") or {}).get("labels", {}).get(RACK))
    return racks


def test_a_required_rack_lands_whole_in_one_rack_on_the_coscheduling_member(
    live: Fleet, namespace, add_nodes
):
    # Two racks of two 1-GPU nodes and one of four: master + 2 workers (3 GPUs) fit only in c.
    add_nodes(COSCHEDULING, count=2, gpu=1, labels={"test": namespace, RACK: f"{namespace}-a"})
    add_nodes(COSCHEDULING, count=2, gpu=1, labels={"test": namespace, RACK: f"{namespace}-b"})
    add_nodes(COSCHEDULING, count=4, gpu=1, labels={"test": namespace, RACK: f"{namespace}-c"})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_rack_job(namespace, "racked", workers=2, gpus=1))

    wait_until(lambda: live.target(namespace, "racked"), what="a placement")
    assert live.target(namespace, "racked") == COSCHEDULING
    live.wait_running(namespace, "racked", COSCHEDULING)

    binding = live.binding(namespace, "racked")
    (target,) = binding["spec"]["clusters"]
    assert [(d["level"], d["value"]) for d in target["domains"]] == [(RACK, f"{namespace}-c")]
    copy = live.clusters[COSCHEDULING].get(*PYTORCHJOB, "racked", namespace)
    for spec in copy["spec"]["pytorchReplicaSpecs"].values():
        terms = spec["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert all(
            {"key": RACK, "operator": "In", "values": [f"{namespace}-c"]} in t["matchExpressions"]
            for t in terms
        )
    pods = live.clusters[COSCHEDULING].pods(namespace)
    assert len(pods) == 3
    assert _racks_of_pods(live, COSCHEDULING, namespace) == {f"{namespace}-c"}


def test_with_too_few_gpus_in_any_rack_it_waits_on_the_fleet_and_no_pod_is_made(
    live: Fleet, namespace, add_nodes
):
    # 4 GPUs on the member, but no rack with more than 2: master + 2 workers need 3 in one.
    add_nodes(COSCHEDULING, count=2, gpu=1, labels={"test": namespace, RACK: f"{namespace}-a"})
    add_nodes(COSCHEDULING, count=2, gpu=1, labels={"test": namespace, RACK: f"{namespace}-b"})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_rack_job(namespace, "no-rack", workers=2, gpus=1))

    def pending_reasons() -> list[dict[str, Any]] | None:
        b = live.binding(namespace, "no-rack")
        return ((b or {}).get("status") or {}).get("pendingReasons")

    reasons = wait_until(pending_reasons, what="pending reasons")
    by_cluster = {r["cluster"]: r for r in reasons}
    assert set(by_cluster) == set(MEMBERS)
    facts = by_cluster[COSCHEDULING].get("facts") or {}
    assert facts.get("topologyLevel") == RACK
    assert facts.get("podsThatFit") == 2 and facts.get("pods") == 3
    assert "largest rack" in by_cluster[COSCHEDULING]["reason"]
    assert live.target(namespace, "no-rack") is None
    assert live.copies(namespace, "no-rack") == []
    for member in MEMBERS:
        assert live.clusters[member].pods(namespace) == []


def test_a_required_rack_lands_whole_in_one_rack_on_the_koordinator_member(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes
):
    for rack, count in (("a", 2), ("b", 2), ("c", 4)):
        labels = {"test": namespace, RACK: f"{namespace}-{rack}"}
        add_nodes(KOORDINATOR_MEMBER, count=count, gpu=1, labels=labels)
    policy = gang_policy("gang", namespace, cluster_names=[KOORDINATOR_MEMBER])
    policy["spec"]["placement"]["clusterTolerations"] = [
        {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
    ]
    live.api.create(policy)
    live.api.create(_rack_job(namespace, "racked", workers=2, gpus=1))

    pods = live.wait_running(namespace, "racked", KOORDINATOR_MEMBER, pods=3, timeout=120)
    assert _racks_of_pods(live, KOORDINATOR_MEMBER, namespace) == {f"{namespace}-c"}
    binding = live.binding(namespace, "racked")
    (target,) = binding["spec"]["clusters"]
    assert [(d["level"], d["value"]) for d in target["domains"]] == [(RACK, f"{namespace}-c")]
    # Koordinator's gang: the seeds' pod-group labels on every pod, the gang all or nothing.
    assert {p["metadata"]["labels"].get("pod-group.scheduling.sigs.k8s.io/name") for p in pods} == {
        "racked"
    }
