"""Job manifests (the kinds fleet dispatches) and Gang policies for tests and the demo."""

from __future__ import annotations

import copy
from typing import Any

from fleet.core.kinds import ADAPTERS, adapter_for

OUTCOME_LABEL = "sandbox.fleet.dev/outcome"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"


def outcome_template_patch(job: dict[str, Any], outcome: str) -> dict[str, Any]:
    """A merge patch giving every pod template of a job (any kind fleet dispatches) the
    outcome label.

    Label the pods too: kwok acts on pods. The templates matter for the pods the job's operator
    creates again: on backoffLimit the training operator deletes the pods before it writes
    Failed, and when that write conflicts it loses the failure and starts fresh pods; the Job
    controller replaces failed pods until its backoffLimit. A job whose code fails would fail
    there too, so they must carry the outcome as well.
    """
    adapter = adapter_for(job["apiVersion"], job["kind"])
    if adapter is None:
        raise ValueError(f"{job.get('kind')} {job['metadata']['name']} is no kind fleet dispatches")
    patch: dict[str, Any] = {}
    for t in adapter.templates(job):
        node = patch
        for part in t.field.split("."):
            node = node.setdefault(part, {})
        node["metadata"] = {"labels": {OUTCOME_LABEL: outcome}}
    return patch


def _template(gpus: int, cpu: str, node_selector: dict[str, str] | None) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": cpu}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "pytorch",
                "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
                "resources": {"limits": limits},
            }
        ]
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"spec": spec}


def pytorchjob(
    name: str,
    *,
    workers: int = 2,
    gpus: int = 1,
    master_gpus: int | None = None,
    cpu: str = "1",
    namespace: str | None = None,
    node_selector: dict[str, str] | None = None,
    restart_policy: str = "OnFailure",
    backoff_limit: int | None = None,
) -> dict[str, Any]:
    """A PyTorchJob with one Master and `workers` Workers, `gpus` GPUs each."""
    specs = {
        "Master": {
            "replicas": 1,
            "restartPolicy": restart_policy,
            "template": _template(gpus if master_gpus is None else master_gpus, cpu, node_selector),
        },
        "Worker": {
            "replicas": workers,
            "restartPolicy": restart_policy,
            "template": _template(gpus, cpu, node_selector),
        },
    }
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    if backoff_limit is not None:
        job["spec"]["runPolicy"] = {"backoffLimit": backoff_limit}
    return job


def batch_job(
    name: str,
    *,
    pods: int = 2,
    gpus: int = 1,
    cpu: str = "1",
    namespace: str | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A batch/v1 Job running `pods` pods at once (parallelism = completions), `gpus` GPUs each;
    `backoffLimit: 0`, so one failed pod fails it (its template cannot be changed later)."""
    template = _template(gpus, cpu, node_selector)
    template["spec"]["restartPolicy"] = "Never"
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template},
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    return job


def mpijob(
    name: str,
    *,
    workers: int = 2,
    gpus: int = 1,
    cpu: str = "1",
    namespace: str | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A training-operator (kubeflow.org/v1) MPIJob: one Launcher without GPUs and `workers`
    Workers with `gpus` each; restartPolicy Never, so a failing launcher fails the job."""
    specs = {
        "Launcher": {
            "replicas": 1,
            "restartPolicy": "Never",
            "template": _template(0, cpu, node_selector),
        },
        "Worker": {
            "replicas": workers,
            "restartPolicy": "Never",
            "template": _template(gpus, cpu, node_selector),
        },
    }
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": specs},
    }
    if namespace:
        job["metadata"]["namespace"] = namespace
    return job


def with_node_selector(job: dict[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    """A copy of a Kubeflow job whose every replica is confined to nodes matching `selector`."""
    out = copy.deepcopy(job)
    spec = out["spec"]
    replica_specs = next(v for k, v in spec.items() if k.endswith("ReplicaSpecs"))
    for replica in replica_specs.values():
        replica["template"].setdefault("spec", {}).setdefault("nodeSelector", {}).update(selector)
    return out


def gang_policy(
    name: str,
    namespace: str,
    *,
    kinds: tuple[str, ...] = ("PyTorchJob",),
    toleration_seconds: int | None = 30,
    purge_mode: str = "Immediately",
    propagate_deps: bool = True,
    estimator: str | None = None,
    scoring: str | None = None,
    max_failovers: int | None = None,
    grace_period_seconds: int | None = None,
    cluster_names: list[str] | None = None,
) -> dict[str, Any]:
    """A PropagationPolicy shaped like the seeds' (Gang, Divided, failover on application)."""
    replica_scheduling: dict[str, Any] = {
        "replicaSchedulingType": "Divided",
        "customSchedulingType": "Gang",
    }
    if estimator:
        replica_scheduling["gangEstimator"] = estimator
    if scoring:
        replica_scheduling["gangScoring"] = scoring
    placement: dict[str, Any] = {"replicaScheduling": replica_scheduling}
    if cluster_names:
        placement["clusterAffinity"] = {"clusterNames": cluster_names}
    spec: dict[str, Any] = {
        "propagateDeps": propagate_deps,
        "placement": placement,
        "resourceSelectors": [{"apiVersion": _api_version(k), "kind": k} for k in kinds],
    }
    if toleration_seconds is not None:
        application: dict[str, Any] = {
            "decisionConditions": {"tolerationSeconds": toleration_seconds},
            "purgeMode": purge_mode,
        }
        if max_failovers is not None:
            application["maxFailovers"] = max_failovers
        if grace_period_seconds is not None:
            application["gracePeriodSeconds"] = grace_period_seconds
        spec["failover"] = {"application": application}
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _api_version(kind: str) -> str:
    """The apiVersion fleet dispatches `kind` at (the first adapter's: MPIJob is the training
    operator's kubeflow.org/v1)."""
    return next(a.api_version for a in ADAPTERS if a.kind == kind)
