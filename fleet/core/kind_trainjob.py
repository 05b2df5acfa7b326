"""TrainJob (Kubeflow Trainer v2, trainer.kubeflow.org/v1alpha1): its runtime's JobSet.

A TrainJob names a TrainingRuntime (its namespace) or a ClusterTrainingRuntime
(`spec.runtimeRef`); the Trainer controller runs it as a JobSet built from the runtime's
template, with the trainer job (the replicated job labelled
`trainer.kubeflow.org/trainjob-ancestor-step: trainer`, or named `node`) running one pod per
trainer node: `spec.trainer.numNodes`, else the runtime's `mlPolicy.numNodes`. The trainer
container (`node`) asks for `spec.trainer.resourcesPerNode` when given. The gang is what the
runtime's `podGroupPolicy` makes of it: every pod of every replicated job (Trainer's
coscheduling PodGroup counts them all); without a podGroupPolicy the member does not hold them
together, but fleet still places them in one member whole.

The runtime is read from the fleet (users define runtimes there); it must exist, and fleet
takes it along to the member (see docs/kinds for propagateDeps).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.podset import PodSet, job_pods, mapping_at, name_at, optional_count

API_VERSION = "trainer.kubeflow.org/v1alpha1"
KIND = "TrainJob"
GROUP = "trainer.kubeflow.org"
CLUSTER_RUNTIME = "ClusterTrainingRuntime"
RUNTIME = "TrainingRuntime"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_JOB = "node"
MIRRORED_FIELDS = ("jobsStatus",)
#: A (Cluster)TrainingRuntime as the shell fetched it for a TrainJob (None: not on the fleet).
Runtimes = Mapping[tuple[str, str, str], Mapping[str, Any] | None]


def runtime_ref(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace or "", name) of the runtime a TrainJob names."""
    spec = mapping_at(obj, "spec", "")
    ref = mapping_at(spec, "runtimeRef", "spec")
    name = name_at(ref, "name", "spec.runtimeRef")
    group = ref.get("apiGroup") or GROUP
    if group != GROUP:
        raise FieldError("spec.runtimeRef.apiGroup", f"expected {GROUP}, got {group!r}")
    kind = ref.get("kind") or CLUSTER_RUNTIME
    if kind not in (CLUSTER_RUNTIME, RUNTIME):
        raise FieldError(
            "spec.runtimeRef.kind", f"expected {CLUSTER_RUNTIME} or {RUNTIME}, got {kind!r}"
        )
    namespace = (
        "" if kind == CLUSTER_RUNTIME else str((obj.get("metadata") or {}).get("namespace") or "")
    )
    return kind, namespace, name


def needs(obj: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(apiVersion, kind, namespace, name) of what the gang is read from: the runtime."""
    try:
        kind, namespace, name = runtime_ref(obj)
    except FieldError:
        return []  # the gang reading says what is wrong
    return [(API_VERSION, kind, namespace, name)]


def pod_sets_with(obj: Mapping[str, Any], runtimes: Runtimes) -> list[PodSet]:
    kind, namespace, name = runtime_ref(obj)
    runtime = runtimes.get((kind, namespace, name))
    if runtime is None:
        where = f" in namespace {namespace}" if namespace else ""
        raise FieldError("spec.runtimeRef.name", f"{kind} {name} does not exist{where}")
    rspec = mapping_at(runtime, "spec", kind)
    trainer = (obj.get("spec") or {}).get("trainer") or {}
    if not isinstance(trainer, Mapping):
        raise FieldError("spec.trainer", f"expected an object, got {trainer!r}")
    nodes = optional_count(trainer, "numNodes", "spec.trainer")
    if nodes is None:
        nodes = optional_count(
            rspec.get("mlPolicy") or {}, "numNodes", f"{kind} {name} spec.mlPolicy"
        )
    if nodes is not None and nodes < 1:
        raise FieldError("spec.trainer.numNodes", f"must be at least 1, got {nodes}")
    resources = trainer.get("resourcesPerNode")
    template = mapping_at(
        mapping_at(rspec, "template", f"{kind} {name} spec"), "spec", f"{kind} {name} spec.template"
    )
    jobs = template.get("replicatedJobs")
    rpath = f"{kind} {name} spec.template.spec.replicatedJobs"
    if not isinstance(jobs, list) or not jobs:
        raise FieldError(rpath, f"expected a non-empty list, got {jobs!r}")
    out: list[PodSet] = []
    for i, job in enumerate(jobs):
        path = f"{rpath}[{i}]"
        if not isinstance(job, dict):
            raise FieldError(path, f"expected an object, got {job!r}")
        jname = name_at(job, "name", path)
        replicas = optional_count(job, "replicas", path)
        job_template = mapping_at(job, "template", path)
        job_spec = mapping_at(job_template, "spec", f"{path}.template")
        pod_template = mapping_at(job_spec, "template", f"{path}.template.spec")
        labels = (job_template.get("metadata") or {}).get("labels") or {}
        is_trainer = labels.get(ANCESTOR_LABEL) == "trainer" or jname == TRAINER_JOB
        pods = (1 if replicas is None else replicas) * job_pods(job_spec, f"{path}.template.spec")
        effective = None
        if is_trainer:
            if nodes is not None:
                pods = nodes
            if isinstance(resources, Mapping):
                effective = _with_resources(pod_template.get("spec"), resources)
        out.append(
            PodSet(
                name=jname,
                pods=pods,
                template=pod_template,
                path=f"{path}.template.spec.template",
                effective_spec=effective,
            )
        )
    return out


def _with_resources(spec: object, resources: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The trainer pod spec with `resourcesPerNode` on its `node` container, as Trainer sets it."""
    if not isinstance(spec, Mapping):
        return None
    containers = [
        {**c, "resources": dict(resources)}
        if isinstance(c, Mapping) and c.get("name") == TRAINER_JOB
        else c
        for c in spec.get("containers") or []
    ]
    return {**copy.deepcopy(dict(spec)), "containers": containers}


def state(status: Mapping[str, Any] | None) -> JobState:
    """TrainJob conditions: Complete, Failed, Suspended; Running while its jobs have active
    pods (`jobsStatus[].active`), else Created."""
    status = status or {}
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    for condition, word in (
        ("Failed", "Failed"),
        ("Complete", "Succeeded"),
        ("Suspended", "Suspended"),
    ):
        if condition in true:
            return word  # type: ignore[return-value]
    if any((j.get("active") or 0) > 0 for j in status.get("jobsStatus") or []):
        return "Running"
    return "Created" if status else "Pending"
