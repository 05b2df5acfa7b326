"""Proof that each job operator a sandbox member can run makes its kind's pods there.

The JobSet controller, the Kubeflow Trainer v2 controller and the KubeRay operator are built from
their Go modules (`fleet/sandbox/toolchain.py`, OPERATOR_PARTS) and run in OPERATOR_MEMBERS.
Each test creates its object directly in a member (no fleet) and waits for its pods to be
Running on the member's fake nodes; what the operator added to the pods is checked too, since
fleet cannot see it when it places the job (docs/sandbox.md, "What the operators add to pods").
"""

from __future__ import annotations

from typing import Any

from fleet.kube import Forbidden
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import OPERATOR_MEMBERS
from fleet.testing.workloads import (
    BATCH_JOB_NAME_LABEL,
    JOBSET_NAME_LABEL,
    OUTCOME_LABEL,
    RAY_CLUSTER_LABEL,
    jobset,
    rayjob,
    training_runtime,
    trainjob,
)

MEMBER = OPERATOR_MEMBERS[0]
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
RAYJOB = ("ray.io/v1", "RayJob")
RAYCLUSTER = ("ray.io/v1", "RayCluster")
PODGROUP = ("scheduling.x-k8s.io/v1alpha1", "PodGroup")
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def _running(member: ClusterClient, namespace: str, selector: str, count: int) -> list[Any]:
    pods = member.pods(namespace, selector)
    ok = len(pods) == count and all(
        p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running"
        for p in pods
    )
    return pods if ok else []


def _wait_running(member: ClusterClient, namespace: str, selector: str, count: int) -> list[Any]:
    return wait_until(
        lambda: _running(member, namespace, selector, count),
        timeout=120,
        what=f"{count} pods {selector} Running in {member.name}",
    )


def test_jobset_controller_runs_every_replicated_job(clusters, namespace, add_nodes):
    member = clusters[MEMBER]
    add_nodes(MEMBER, count=1, gpu=8)
    member.create(jobset("js", namespace=namespace, leaders=1, workers=2, worker_pods=2))

    pods = _wait_running(member, namespace, f"{JOBSET_NAME_LABEL}=js", 5)

    jobs = sorted(j["metadata"]["name"] for j in member.items("batch/v1", "Job", namespace))
    assert jobs == ["js-leader-0", "js-worker-0", "js-worker-1"]
    # The JobSet's defaulting webhook ran (the sandbox registers it): it set the success policy
    # and DNS hostnames, which the controller turned into a headless Service.
    spec = member.get(*JOBSET, "js", namespace)["spec"]
    assert spec["successPolicy"]["operator"] == "All"
    assert spec["network"]["enableDNSHostnames"] is True
    assert member.get("v1", "Service", "js", namespace)["spec"]["clusterIP"] == "None"
    # What the controller adds to the pods: its labels, and the subdomain of that Service.
    for pod in pods:
        assert pod["spec"]["subdomain"] == "js"
        assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] in (
            "leader",
            "worker",
        )


def _created_once_the_runtime_is_seen(member: ClusterClient, job: dict[str, Any]) -> bool:
    try:
        member.create(job)
    except Forbidden as e:
        if "must be created before" in str(e):
            return False
        raise
    return True


def test_trainer_runs_a_trainjob_as_a_gang_of_nodes(clusters, namespace, add_nodes):
    member = clusters[MEMBER]
    add_nodes(MEMBER, count=1, gpu=8)
    member.create(training_runtime("torch", namespace=namespace, gpus=1))
    # Trainer's webhook checks the runtime against its own cache, which may not have it yet.
    wait_until(
        lambda: _created_once_the_runtime_is_seen(
            member, trainjob("tj", "torch", namespace=namespace, nodes=3)
        ),
        timeout=30,
        what="the TrainJob admitted (its runtime seen by Trainer's webhook)",
    )

    pods = _wait_running(member, namespace, f"{JOBSET_NAME_LABEL}=tj", 3)

    # It runs as a JobSet of the runtime's template, one Job per trainer node...
    assert member.get(*JOBSET, "tj", namespace) is not None
    # ... and the runtime's podGroupPolicy made a coscheduling PodGroup of all the nodes.
    assert member.get(*PODGROUP, "tj", namespace)["spec"]["minMember"] == 3
    for pod in pods:
        assert pod["metadata"]["labels"][POD_GROUP_LABEL] == "tj"
        env = {e["name"] for e in pod["spec"]["containers"][0].get("env") or []}
        assert {"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"} <= env


def test_kuberay_runs_a_rayjob_then_fails_it_with_its_submitter(clusters, namespace, add_nodes):
    member = clusters[MEMBER]
    add_nodes(MEMBER, count=1, gpu=8)
    member.create(rayjob("rj", namespace=namespace, workers=2, gpus=1))

    cluster = wait_until(
        lambda: (member.get(*RAYJOB, "rj", namespace).get("status") or {}).get("rayClusterName"),
        timeout=60,
        what="the RayJob's RayCluster",
    )
    ray_pods = _wait_running(member, namespace, f"{RAY_CLUSTER_LABEL}={cluster}", 3)
    # The head is Ready (kwok reports it so), so the cluster is ready and the job is submitted
    # from a submitter Job: one more pod, which fleet never sees in the RayJob's spec.
    wait_until(
        lambda: (
            (member.get(*RAYCLUSTER, cluster, namespace).get("status") or {}).get("state")
            == "ready"
        ),
        timeout=60,
        what=f"RayCluster {cluster} ready",
    )
    submitter = _wait_running(member, namespace, f"{BATCH_JOB_NAME_LABEL}=rj", 1)
    assert member.get(*RAYJOB, "rj", namespace)["status"]["jobDeploymentStatus"] == "Running"
    roles = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in ray_pods)
    assert roles == ["head", "worker", "worker"]

    # A failed submission (no retries in this RayJob) fails the RayJob.
    name = submitter[0]["metadata"]["name"]
    member.patch("v1", "Pod", name, {"metadata": {"labels": {OUTCOME_LABEL: "Failed"}}}, namespace)
    wait_until(
        lambda: (
            (member.get(*RAYJOB, "rj", namespace).get("status") or {}).get("jobDeploymentStatus")
            == "Failed"
        ),
        timeout=90,
        what="RayJob Failed after its submitter failed",
    )
