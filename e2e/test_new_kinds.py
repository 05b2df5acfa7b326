"""JobSet, RayJob and TrainJob through the whole flow, on members with their real operators.

member-2 and member-3 run the JobSet controller, Trainer and KubeRay (OPERATOR_MEMBERS);
member-1 runs none of them and is refused for these kinds with a reason. Each test: the gang
is held whole while no member can hold it, dispatched whole when capacity arrives, all its pods
Running in one member, failed over when it fails there, and `kubectl amc get pod -M` shows
its pods.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleet.amc.cli import main
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import OPERATOR_MEMBERS
from fleet.testing.workloads import (
    BATCH_JOB_NAME_LABEL,
    JOBSET_NAME_LABEL,
    RAY_CLUSTER_LABEL,
    gang_policy,
    jobset,
    raycluster,
    rayjob,
    training_runtime,
    trainjob,
)

from .conftest import Fleet

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
RAYJOB = ("ray.io/v1", "RayJob")
RAYCLUSTER = ("ray.io/v1", "RayCluster")
TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
PODGROUP = ("scheduling.x-k8s.io/v1alpha1", "PodGroup")


def _policy(namespace: str, api: tuple[str, str]) -> dict[str, Any]:
    policy = gang_policy("gang", namespace, toleration_seconds=2, purge_mode="Immediately")
    policy["spec"]["resourceSelectors"] = [{"apiVersion": api[0], "kind": api[1]}]
    return policy


def _target(live: Fleet, namespace: str, kind: tuple[str, str], name: str) -> str | None:
    binding = live.binding(namespace, name, kind) or {}
    clusters = (binding.get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


def _pending(live: Fleet, namespace: str, kind: tuple[str, str], name: str) -> dict[str, str]:
    status = (live.binding(namespace, name, kind) or {}).get("status") or {}
    return {r["cluster"]: r["code"] for r in status.get("pendingReasons") or []}


def _copies(live: Fleet, namespace: str, api: tuple[str, str], name: str) -> list[str]:
    """Members holding a copy (a member without the kind's CRD holds none)."""
    return [m for m in OPERATOR_MEMBERS if live.clusters[m].get(*api, name, namespace) is not None]


def _held_whole(live: Fleet, namespace: str, kind: tuple[str, str], name: str) -> dict[str, str]:
    """Wait until every member says why it holds no copy (member-1 runs no operator for these
    kinds: `KindNotServed`), and check none has one; the reasons by member."""
    try:
        reasons: dict[str, str] = wait_until(
            lambda: (
                (p := _pending(live, namespace, kind, name))
                and len(p) == 3
                and p.get("member-1") == "KindNotServed"
                and p
            ),
            what="pending reasons for every member",
        )
    except AssertionError as e:
        status = (live.binding(namespace, name, kind) or {}).get("status")
        raise AssertionError(f"{e}\nthe binding's status: {status}") from None
    assert _copies(live, namespace, kind, name) == []
    return reasons


def _moved(
    live: Fleet, namespace: str, kind: tuple[str, str], name: str, away_from: str
) -> str | None:
    """The member the gang is bound to, once it is another than `away_from`."""
    target = _target(live, namespace, kind, name)
    return target if target and target != away_from else None


def _fail_pods(member: ClusterClient, namespace: str, selector: str) -> None:
    """The pods of `selector` exit 1."""
    member.mark_pods(namespace, selector, "Failed")


def _running(client: ClusterClient, namespace: str, selector: str, count: int) -> bool:
    pods = client.pods(namespace, selector)
    return len(pods) == count and all(
        p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods
    )


def _amc_pods(
    namespace: str, live: Fleet, capsys: pytest.CaptureFixture[str]
) -> set[tuple[str, str]]:
    """`kubectl amc get pod -M -n <ns>`: (NAME, CLUSTER) of each pod row."""
    capsys.readouterr()
    args = ["--kubeconfig", str(live.sandbox.kubeconfig), "--context", "fleet"]
    assert main(["get", "pod", "-M", "-n", namespace, *args]) == 0
    out = capsys.readouterr().out
    return {tuple(line.split()[:2]) for line in out.splitlines()[1:] if line.strip()}  # type: ignore[misc]


def _wait_shown(
    live: Fleet,
    member: ClusterClient,
    namespace: str,
    selector: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every pod of `selector` in `member` is a row of `kubectl amc get pod -M`, in it (asked
    until it holds: the member's operator may replace a pod between the two reads)."""
    seen: dict[str, object] = {}

    def shown() -> bool:
        rows = _amc_pods(namespace, live, capsys)
        pods = {(p["metadata"]["name"], member.name) for p in member.pods(namespace, selector)}
        seen.update(amc=sorted(rows), member=sorted(pods))
        return bool(pods) and pods <= rows

    try:
        wait_until(shown, timeout=30, what=f"amc get pod -M showing {selector}")
    except AssertionError as e:
        raise AssertionError(
            f"{e}: amc showed {seen.get('amc')}, {member.name} has {seen.get('member')}"
        ) from None


def test_jobset_held_whole_then_dispatched_whole_and_failed_over(
    live: Fleet, namespace, add_nodes, capsys
):
    here = {"test": namespace}
    live.api.create(_policy(namespace, JOBSET))
    # 1 leader + 2 workers x 2 pods, one GPU each: 5 GPUs. member-2 has 4: held whole.
    add_nodes("member-2", count=1, gpu=4, labels=here)
    live.api.create(
        jobset("js", namespace=namespace, leaders=1, workers=2, worker_pods=2, node_selector=here)
    )
    reasons = _held_whole(live, namespace, JOBSET, "js")
    assert reasons == {
        "member-1": "KindNotServed",
        "member-2": "Insufficient",
        "member-3": "Insufficient",
    }

    add_nodes("member-3", count=1, gpu=8, labels=here)
    first = wait_until(lambda: _target(live, namespace, JOBSET, "js"), what="placement")
    assert first == "member-3"
    member = live.clusters[first]
    selector = f"{JOBSET_NAME_LABEL}=js"
    wait_until(lambda: _running(member, namespace, selector, 5), what="5 pods Running")
    # fleet wrote the gang for the coscheduling scheduler: a PodGroup of all 5 pods
    assert member.get(*PODGROUP, "js", namespace)["spec"]["minMember"] == 5
    wait_until(
        lambda: (live.api.get(*JOBSET, "js", namespace).get("status") or {}).get(
            "replicatedJobsStatus"
        ),
        what="the JobSet's status mirrored on the fleet",
    )
    _wait_shown(live, member, namespace, selector, capsys)

    # It fails in member-3 (its pods exit 1, no retries): it moves to member-2, now big enough.
    add_nodes("member-2", count=1, gpu=4, labels=here)
    _fail_pods(member, namespace, selector)
    second = wait_until(
        lambda: _moved(live, namespace, JOBSET, "js", first),
        timeout=90,
        what="failover",
    )
    assert second == "member-2"
    wait_until(
        lambda: _running(live.clusters[second], namespace, selector, 5),
        what="5 pods Running in member-2",
    )
    wait_until(
        lambda: _copies(live, namespace, JOBSET, "js") == [second], what="the failed copy gone"
    )


def test_rayjob_held_whole_then_dispatched_whole_and_failed_over(
    live: Fleet, namespace, add_nodes, capsys
):
    here = {"test": namespace}
    live.api.create(_policy(namespace, RAYJOB))
    # a head (no GPU) and 3 workers with 2 GPUs each: 6 GPUs; member-3 has 4.
    add_nodes("member-3", count=1, gpu=4, labels=here)
    live.api.create(rayjob("rj", namespace=namespace, workers=3, gpus=2, node_selector=here))
    reasons = _held_whole(live, namespace, RAYJOB, "rj")
    assert reasons["member-1"] == "KindNotServed"

    add_nodes("member-2", count=1, gpu=8, labels=here)
    first = wait_until(lambda: _target(live, namespace, RAYJOB, "rj"), what="placement")
    assert first == "member-2"
    member = live.clusters[first]
    cluster = wait_until(
        # The binding names the member before the copy is created there (same reconcile).
        lambda: ((member.get(*RAYJOB, "rj", namespace) or {}).get("status") or {}).get(
            "rayClusterName"
        ),
        what="the RayJob's RayCluster",
    )
    wait_until(
        lambda: _running(member, namespace, f"{RAY_CLUSTER_LABEL}={cluster}", 4),
        what="head and 3 workers Running",
    )
    # the cluster ready, KubeRay submits the job: its submitter pod runs too
    wait_until(
        lambda: _running(member, namespace, f"{BATCH_JOB_NAME_LABEL}=rj", 1),
        what="the submitter pod Running",
    )
    wait_until(
        lambda: (
            (live.api.get(*RAYJOB, "rj", namespace).get("status") or {}).get("jobDeploymentStatus")
            == "Running"
        ),
        what="Running mirrored on the fleet RayJob",
    )
    _wait_shown(live, member, namespace, f"{RAY_CLUSTER_LABEL}={cluster}", capsys)

    # The submission fails (no retries): the RayJob is Failed there and moves to member-3.
    add_nodes("member-3", count=1, gpu=4, labels=here)
    submitter = f"{BATCH_JOB_NAME_LABEL}=rj"
    assert len(member.pods(namespace, submitter)) == 1
    _fail_pods(member, namespace, submitter)
    second = wait_until(
        lambda: _moved(live, namespace, RAYJOB, "rj", first),
        timeout=90,
        what="failover",
    )
    assert second == "member-3"
    wait_until(
        lambda: _copies(live, namespace, RAYJOB, "rj") == [second], what="the failed copy gone"
    )
    moved = live.clusters[second]
    wait_until(
        lambda: (
            (c := (moved.get(*RAYJOB, "rj", namespace) or {}).get("status") or {}).get(
                "rayClusterName"
            )
            and _running(moved, namespace, f"{RAY_CLUSTER_LABEL}={c['rayClusterName']}", 4)
        ),
        what="head and 3 workers Running in member-3",
    )


def test_raycluster_held_whole_then_dispatched_whole_and_failed_over_when_its_member_is_lost(
    live: Fleet, namespace, add_nodes, capsys
):
    """KubeRay never marks a RayCluster failed (v1.5.1 sets only ready and suspended): a
    RayCluster fails over when its member is lost."""
    here = {"test": namespace}
    live.api.create(_policy(namespace, RAYCLUSTER))
    # a head (no GPU) and 3 workers with 2 GPUs each: 6 GPUs; member-3 has 4.
    add_nodes("member-3", count=1, gpu=4, labels=here)
    live.api.create(raycluster("rc", namespace=namespace, workers=3, gpus=2, node_selector=here))
    reasons = _held_whole(live, namespace, RAYCLUSTER, "rc")
    assert reasons["member-1"] == "KindNotServed"

    add_nodes("member-2", count=1, gpu=8, labels=here)
    first = wait_until(lambda: _target(live, namespace, RAYCLUSTER, "rc"), what="placement")
    assert first == "member-2"
    member = live.clusters[first]
    selector = f"{RAY_CLUSTER_LABEL}=rc"
    wait_until(lambda: _running(member, namespace, selector, 4), what="head and 3 workers Running")
    wait_until(
        lambda: (
            (live.api.get(*RAYCLUSTER, "rc", namespace).get("status") or {}).get("state") == "ready"
        ),
        what="ready mirrored on the fleet RayCluster",
    )
    _wait_shown(live, member, namespace, selector, capsys)

    # member-2 is lost: the gang moves whole to member-3, which now has room.
    add_nodes("member-3", count=1, gpu=4, labels=here)
    live.sandbox.stop_cluster(first, abrupt=True)
    try:
        second = wait_until(
            lambda: _moved(live, namespace, RAYCLUSTER, "rc", first),
            timeout=90,
            what="failover away from the lost member",
        )
        assert second == "member-3"
        wait_until(
            lambda: _running(live.clusters[second], namespace, selector, 4),
            what="head and 3 workers Running in member-3",
        )
    finally:
        live.sandbox.start_cluster(first)
    # Back, the lost member still holds the old copy: fleet fences it.
    wait_until(
        lambda: _copies(live, namespace, RAYCLUSTER, "rc") == [second],
        timeout=90,
        what="the stale copy fenced",
    )


def test_trainjob_held_whole_then_dispatched_whole_and_failed_over(
    live: Fleet, namespace, add_nodes, capsys
):
    """The runtime is defined on the fleet and taken along (propagateDeps); Trainer makes the
    coscheduling PodGroup from its podGroupPolicy. The TrainJob comes first: it is refused
    until its runtime exists, then goes on by itself."""
    here = {"test": namespace}
    live.api.create(_policy(namespace, TRAINJOB))
    # 3 trainer nodes x 2 GPUs: 6 GPUs; member-2 has 4.
    add_nodes("member-2", count=1, gpu=4, labels=here)
    live.api.create(trainjob("tj", "torch", namespace=namespace, nodes=3))
    wait_until(
        lambda: any(r == "InvalidWorkload" for r, _m, _c in live.events(namespace, "tj")),
        what="the TrainJob refused for want of its runtime",
    )
    live.api.create(training_runtime("torch", namespace=namespace, gpus=2, node_selector=here))
    reasons = _held_whole(live, namespace, TRAINJOB, "tj")
    assert reasons["member-1"] == "KindNotServed"

    add_nodes("member-3", count=1, gpu=8, labels=here)
    first = wait_until(lambda: _target(live, namespace, TRAINJOB, "tj"), what="placement")
    assert first == "member-3"
    member = live.clusters[first]
    selector = f"{JOBSET_NAME_LABEL}=tj"
    wait_until(lambda: _running(member, namespace, selector, 3), what="3 trainer nodes Running")
    # The runtime went along (created before the copy, so before any pod).
    assert member.get("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "torch", namespace)
    assert member.get(*PODGROUP, "tj", namespace)["spec"]["minMember"] == 3
    _wait_shown(live, member, namespace, selector, capsys)

    add_nodes("member-2", count=1, gpu=4, labels=here)
    _fail_pods(member, namespace, selector)
    second = wait_until(
        lambda: _moved(live, namespace, TRAINJOB, "tj", first),
        timeout=90,
        what="failover",
    )
    assert second == "member-2"
    wait_until(
        lambda: _running(live.clusters[second], namespace, selector, 3),
        what="3 trainer nodes Running in member-2",
    )
