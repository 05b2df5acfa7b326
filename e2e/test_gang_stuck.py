"""A gang stuck in its member (issue 34, item 5), on real API servers: a PyTorchJob pinned to a
rack of the coscheduling member (member-2) whose rack is taken by member-local pods after
fleet dispatched it. Its pods are refused by the member's scheduler, so past the policy's
`gangScheduleTimeoutSeconds` the fleet says it is not Healthy, with the member's word, and
`tolerationSeconds` later it fails over to where it runs.

The member's scheduler is held (stopped) from before the job is created until the rack is
taken, so the member-local pods always win the rack: without that, the race between the gang's
pods and the local ones would decide the test.
"""

from __future__ import annotations

from typing import Any

from fleet.testing.kube import wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import PYTORCHJOB, Fleet

RACK = "topology.kubernetes.io/rack"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
#: member-2 runs coscheduling (scheduler-plugins), as test_dispatch says.
COSCHEDULING = "member-2"
ELSEWHERE = "member-1"


def _rack_job(namespace: str, name: str) -> dict[str, Any]:
    """Master + 2 workers, one GPU each, the whole gang in one rack (Kueue's annotations)."""
    job = pytorchjob(
        name, namespace=namespace, node_selector={"test": namespace}, workers=2, gpus=1
    )
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        annotations = spec["template"].setdefault("metadata", {}).setdefault("annotations", {})
        annotations[REQUIRED] = RACK
        annotations["kueue.x-k8s.io/podset-group-name"] = "all"
    return job


def _local_pod(namespace: str, name: str, node: str) -> dict[str, Any]:
    """A pod of the member's own (no fleet mark), bound straight to `node`, holding its GPU."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "local"}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {
                        "requests": {"nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


def _healthy(live: Fleet, namespace: str, name: str) -> dict[str, Any] | None:
    conditions = ((live.binding(namespace, name) or {}).get("status") or {}).get("conditions")
    return next((c for c in conditions or [] if c["type"] == "Healthy"), None)


def _gang_pods(live: Fleet, namespace: str) -> list[dict[str, Any]]:
    return [
        p
        for p in live.clusters[COSCHEDULING].pods(namespace)
        if (p["metadata"].get("labels") or {}).get("app") != "local"
    ]


def test_a_gang_whose_rack_was_taken_after_dispatch_is_not_healthy_then_fails_over(
    live: Fleet, namespace: str, add_nodes
):
    rack = add_nodes(
        COSCHEDULING, count=3, gpu=1, labels={"test": namespace, RACK: f"{namespace}-r"}
    )
    live.api.create(
        gang_policy(
            "gang",
            namespace,
            toleration_seconds=10,
            purge_mode="Immediately",
            gang_schedule_timeout_seconds=15,
        )
    )
    cluster = live.clusters[COSCHEDULING]
    live.sandbox.stop_component(COSCHEDULING, "kube-scheduler")
    try:
        live.api.create(_rack_job(namespace, "stuck"))
        wait_until(lambda: live.target(namespace, "stuck"), what="a placement")
        assert live.target(namespace, "stuck") == COSCHEDULING
        # Dispatched, its pods made by the member's operator; then the member's own pods take
        # every node of the rack it is pinned to.
        wait_until(lambda: len(_gang_pods(live, namespace)) == 3, what="the gang's pods")
        for i, node in enumerate(rack):
            cluster.create(_local_pod(namespace, f"local-{i}", node))
    finally:
        live.sandbox.start_component(COSCHEDULING, "kube-scheduler")

    # The member's scheduler refuses the gang: past 15 s the fleet says so, with its word.
    healthy = wait_until(
        lambda: (h := _healthy(live, namespace, "stuck")) and h["status"] == "False" and h,
        timeout=60,
        what="the binding's Healthy=False",
    )
    assert healthy["reason"] == "GangUnschedulable"
    assert COSCHEDULING in healthy["message"] and "not scheduled" in healthy["message"]
    refused = [
        c.get("message") or ""
        for p in _gang_pods(live, namespace)
        for c in p["status"].get("conditions") or []
        if c["type"] == "PodScheduled" and c["status"] == "False"
    ]
    assert refused, "the member's scheduler refused the gang's pods"
    assert any(p["metadata"]["name"] in healthy["message"] for p in _gang_pods(live, namespace))
    job = live.job(namespace, "stuck") or {}
    scheduled = next(c for c in job["status"]["conditions"] if c["type"] == "Scheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "GangUnschedulable")
    events = [(r, m) for r, m, _ in live.events(namespace, "stuck") if r == "GangUnschedulable"]
    assert len(events) == 1 and COSCHEDULING in events[0][1]
    assert live.target(namespace, "stuck") == COSCHEDULING  # tolerated for 10 s yet

    # Room elsewhere; tolerationSeconds later it fails over there and runs.
    add_nodes(ELSEWHERE, count=1, gpu=4, labels={"test": namespace, RACK: f"{namespace}-e"})
    moved = wait_until(
        lambda: (t := live.target(namespace, "stuck")) != COSCHEDULING and t,
        timeout=60,
        what="the failover",
    )
    assert moved == ELSEWHERE
    history = (live.binding(namespace, "stuck") or {})["status"]["failoverHistory"]
    assert [(h["fromCluster"], h["reason"]) for h in history] == [
        (COSCHEDULING, "GangUnschedulable")
    ]
    live.wait_running(namespace, "stuck", ELSEWHERE)
    assert live.copies(namespace, "stuck") == [ELSEWHERE]
    assert cluster.get(*PYTORCHJOB, "stuck", namespace) is None
    wait_until(
        lambda: (_healthy(live, namespace, "stuck") or {}).get("status") == "True",
        what="Healthy again where it runs",
    )
