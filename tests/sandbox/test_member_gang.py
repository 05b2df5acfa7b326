"""Proof that each member cluster enforces gangs with the real scheduler and operator."""

from __future__ import annotations

from typing import Any

from fleet.demo import seeds
from fleet.testing.kube import ClusterClient, job_condition, wait_until
from fleet.testing.workloads import (
    JOB_NAME_LABEL,
    pytorchjob,
    with_node_selector,
)

PG = ("scheduling.x-k8s.io/v1alpha1", "PodGroup")


def seed_tfjob(namespace: str, selector: dict[str, str]) -> dict[str, Any]:
    job = seeds.manifest("tf-smoke-gpu.yaml")  # the seeds' TFJob, as the demo submits it
    job["metadata"]["namespace"] = namespace
    return with_node_selector(job, selector)


def _running(pods: list[dict[str, Any]], count: int) -> bool:
    return len(pods) == count and all(
        p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods
    )


def _mark(member: ClusterClient, namespace: str, job: str, outcome: str) -> None:
    member.mark_job(("kubeflow.org/v1", "TFJob"), job, namespace, outcome)


def test_pytorchjob_runs_as_one_gang(clusters, namespace, add_nodes):
    member = clusters["member-1"]
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    member.create(
        pytorchjob("pytorch-test", namespace=namespace, node_selector={"test": namespace})
    )

    group = wait_until(
        lambda: member.get(*PG, "pytorch-test", namespace), what="the job's PodGroup"
    )
    assert group["spec"]["minMember"] == 3
    pods = wait_until(
        lambda: (
            (p := member.pods(namespace, f"{JOB_NAME_LABEL}=pytorch-test")) and _running(p, 3) and p
        ),
        what="3 pods bound and Running",
    )
    assert {p["metadata"]["name"] for p in pods} == {
        "pytorch-test-master-0",
        "pytorch-test-worker-0",
        "pytorch-test-worker-1",
    }


def test_seed_tfjob_is_held_whole_until_capacity_appears(clusters, namespace, add_nodes):
    """The seeds' scenario: 4 GPUs in all, a gang needing 8 waits with no pod bound."""
    member = clusters["member-2"]
    selector = {"test": namespace}
    add_nodes("member-2", count=2, gpu=2, labels=selector)
    member.create(seed_tfjob(namespace, selector))

    group = wait_until(lambda: member.get(*PG, "tf-smoke-gpu", namespace), what="PodGroup")
    assert group["spec"]["minMember"] == 5
    wait_until(
        lambda: len(member.pods(namespace, f"{JOB_NAME_LABEL}=tf-smoke-gpu")) == 5,
        what="5 pods created",
    )

    # The PS and two workers would fit; the gang must keep every pod unbound. The scheduler
    # says it has tried each pod and bound none: PodScheduled=False (Unschedulable) on all 5,
    # those that fit included, once the coscheduling permit wait (10s) rejects them.
    def all_unschedulable() -> list[dict] | None:
        pods = member.pods(namespace, f"{JOB_NAME_LABEL}=tf-smoke-gpu")
        refused = [
            p
            for p in pods
            if any(
                (c["type"], c["status"], c.get("reason"))
                == ("PodScheduled", "False", "Unschedulable")
                for c in (p.get("status") or {}).get("conditions") or []
            )
        ]
        return pods if len(refused) == len(pods) == 5 else None

    pods = wait_until(all_unschedulable, timeout=90, what="all 5 pods refused by the scheduler")
    assert [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")] == []

    add_nodes("member-2", count=1, gpu=4, labels=selector)
    wait_until(
        lambda: _running(member.pods(namespace, f"{JOB_NAME_LABEL}=tf-smoke-gpu"), 5),
        timeout=90,
        what="all 5 pods Running after 4 GPUs were added",
    )


def test_marked_pods_fail_or_finish_the_job(clusters, namespace, add_nodes):
    member = clusters["member-3"]
    selector = {"test": namespace}
    add_nodes("member-3", count=2, gpu=8, labels=selector)
    failing = seed_tfjob(namespace, selector)
    failing["metadata"]["name"] = "tf-fails"
    # OnFailure pods crash-loop as under a kubelet; the job's backoffLimit turns that into Failed.
    failing["spec"]["runPolicy"] = {"backoffLimit": 0}
    finishing = seed_tfjob(namespace, selector)
    finishing["metadata"]["name"] = "tf-finishes"
    finishing["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 2
    for job in (failing, finishing):
        member.create(job)
    for name, count in (("tf-fails", 5), ("tf-finishes", 3)):
        wait_until(
            lambda n=name, c=count: _running(member.pods(namespace, f"{JOB_NAME_LABEL}={n}"), c),
            timeout=90,
            what=f"{name} running",
        )

    _mark(member, namespace, "tf-fails", "Failed")
    _mark(member, namespace, "tf-finishes", "Succeeded")
    tf = ("kubeflow.org/v1", "TFJob")
    wait_until(
        lambda: job_condition(member.get(*tf, "tf-fails", namespace), "Failed"),
        what="tf-fails Failed",
    )
    wait_until(
        lambda: job_condition(member.get(*tf, "tf-finishes", namespace), "Succeeded"),
        what="tf-finishes Succeeded",
    )
