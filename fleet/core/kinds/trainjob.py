"""TrainJob (Kubeflow Trainer v2, trainer.kubeflow.org/v1alpha1): its runtime's JobSet.

* Gang: a TrainJob names a TrainingRuntime (its namespace) or a ClusterTrainingRuntime
  (`spec.runtimeRef`), read from the fleet (`needs`: users define runtimes there); Trainer runs
  it as a JobSet of the runtime's replicated jobs, the trainer job (labelled
  `trainer.kubeflow.org/trainjob-ancestor-step: trainer`, or named `node`) with one pod per
  trainer node: `spec.trainer.numNodes`, else the runtime's `mlPolicy.numNodes`; its `node`
  container asks for `spec.trainer.resourcesPerNode` when given. The gang is what the runtime's
  podGroupPolicy makes of it: Trainer's coscheduling PodGroup counts every pod of every
  replicated job, so the minimum is all pods. A runtime that does not exist is refused, naming
  `spec.runtimeRef.name`.
* Copy: nothing to drop, no labels (the templates are in the runtime); with propagateDeps the
  runtime goes along, created in the member when it has none of that name. Trainer makes the
  PodGroup on coscheduling members; on Koordinator the runtime's templates must carry the gang.
* State: Failed, Complete, Suspended conditions; Running while its jobs have active pods.
* `kubectl amc`: pods carry `jobset.sigs.k8s.io/jobset-name` (the JobSet is the TrainJob's
  namesake).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.kinds.adapter import (
    KindAdapter,
    Needed,
    PodTemplate,
    job_pods,
    mapping,
    name_at,
    object_at,
    optional_count,
)
from fleet.core.kinds.jobset import NAME_LABEL, ROLE_LABEL

API_VERSION = "trainer.kubeflow.org/v1alpha1"
GROUP = "trainer.kubeflow.org"
CLUSTER_RUNTIME = "ClusterTrainingRuntime"
RUNTIME = "TrainingRuntime"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_JOB = "node"


def runtime_ref(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace or "", name) of the runtime a TrainJob names."""
    spec = object_at(obj, "spec", "")
    ref = object_at(spec, "runtimeRef", "spec")
    name = name_at(ref, "name", "spec.runtimeRef")
    group = ref.get("apiGroup") or GROUP
    if group != GROUP:
        raise FieldError("spec.runtimeRef.apiGroup", f"expected {GROUP}, got {group!r}")
    kind = ref.get("kind") or CLUSTER_RUNTIME
    if kind not in (CLUSTER_RUNTIME, RUNTIME):
        raise FieldError(
            "spec.runtimeRef.kind", f"expected {CLUSTER_RUNTIME} or {RUNTIME}, got {kind!r}"
        )
    meta = obj.get("metadata") or {}
    namespace = "" if kind == CLUSTER_RUNTIME else str(meta.get("namespace") or "")
    return kind, namespace, name


def _with_resources(spec: object, resources: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The trainer pod spec with `resourcesPerNode` on its `node` container, as Trainer sets."""
    if not isinstance(spec, Mapping):
        return None
    containers = [
        {**c, "resources": dict(resources)}
        if isinstance(c, Mapping) and c.get("name") == TRAINER_JOB
        else c
        for c in spec.get("containers") or []
    ]
    return {**copy.deepcopy(dict(spec)), "containers": containers}


class TrainJobAdapter(KindAdapter):
    api_version = API_VERSION
    kind = "TrainJob"
    status_fields = ("jobsStatus",)
    role_label = ROLE_LABEL
    #: Its pod templates are the runtime's: its pods carry no fleet labels to match Reservations.
    reservable = False
    #: Trainer names the JobSet it makes after the TrainJob.
    pods_label = NAME_LABEL
    doc_gang = (
        "its (Cluster)TrainingRuntime's replicated jobs, `numNodes` trainer pods; "
        "all pods (the runtime's podGroupPolicy)"
    )
    doc_added = (
        "a JobSet from the runtime, `PET_*` env and port 29500, and with podGroupPolicy "
        "coscheduling the PodGroup; the runtime goes along with propagateDeps"
    )

    needs_kinds = ((API_VERSION, RUNTIME), (API_VERSION, CLUSTER_RUNTIME))

    def needs(self, obj: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
        try:
            kind, namespace, name = runtime_ref(obj)
        except FieldError:
            return []  # reading the gang says what is wrong
        return [(API_VERSION, kind, namespace, name)]

    def templates(self, obj: Mapping[str, Any]) -> list[PodTemplate]:
        """None of its own: its pod templates are in the runtime."""
        return []

    def templates_with(self, obj: Mapping[str, Any], needed: Needed) -> list[PodTemplate]:
        kind, namespace, name = runtime_ref(obj)
        runtime = needed.get((kind, namespace, name))
        if runtime is None:
            where = f" in namespace {namespace}" if namespace else ""
            raise FieldError("spec.runtimeRef.name", f"{kind} {name} does not exist{where}")
        rname = f"{kind} {name}"
        rspec = object_at(runtime, "spec", rname)
        trainer = (obj.get("spec") or {}).get("trainer") or {}
        if not isinstance(trainer, Mapping):
            raise FieldError("spec.trainer", f"expected an object, got {trainer!r}")
        nodes = optional_count(trainer, "numNodes", "spec.trainer")
        if nodes is None:
            policy = rspec.get("mlPolicy") or {}
            nodes = optional_count(policy, "numNodes", f"{rname} spec.mlPolicy")
        if nodes is not None and nodes < 1:
            raise FieldError("spec.trainer.numNodes", f"must be at least 1, got {nodes}")
        template = object_at(
            object_at(rspec, "template", f"{rname} spec"), "spec", f"{rname} spec.template"
        )
        rpath = f"{rname} spec.template.spec.replicatedJobs"
        jobs = template.get("replicatedJobs")
        if not isinstance(jobs, list) or not jobs:
            raise FieldError(rpath, f"expected a non-empty list, got {jobs!r}")
        out: list[PodTemplate] = []
        for i, job in enumerate(jobs):
            path = f"{rpath}[{i}]"
            if not isinstance(job, dict):
                raise FieldError(path, f"expected an object, got {job!r}")
            jname = name_at(job, "name", path)
            replicas = optional_count(job, "replicas", path)
            job_template = object_at(job, "template", path)
            job_spec = object_at(job_template, "spec", f"{path}.template")
            pod_template = object_at(job_spec, "template", f"{path}.template.spec")
            labels = (job_template.get("metadata") or {}).get("labels") or {}
            pods = (1 if replicas is None else replicas) * job_pods(
                job_spec, f"{path}.template.spec"
            )
            if (labels.get(ANCESTOR_LABEL) == "trainer" or jname == TRAINER_JOB) and nodes:
                pods = nodes
            out.append(
                PodTemplate(jname, jname, pods, pod_template, f"{path}.template.spec.template")
            )
        return out

    def pod_spec(self, obj: Mapping[str, Any], template: PodTemplate) -> Mapping[str, Any]:
        spec = mapping(template.template.get("spec"), f"{template.field}.spec")
        resources = ((obj.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode")
        if isinstance(resources, Mapping):
            with_resources = _with_resources(spec, resources)
            if with_resources is not None:
                return with_resources
        return spec

    def state(self, status: Mapping[str, Any] | None) -> JobState:
        status = status or {}
        true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
        if "Failed" in true:
            return "Failed"
        if "Complete" in true:
            return "Succeeded"
        if "Suspended" in true:
            return "Suspended"
        if any((j.get("active") or 0) > 0 for j in status.get("jobsStatus") or []):
            return "Running"
        return "Created" if status else "Pending"

    def pods_of(self, member_obj: Mapping[str, Any]) -> str | None:
        return self.pod_selector(str((member_obj.get("metadata") or {}).get("name")))

    def priority_class(self, obj: Mapping[str, Any]) -> str | None:
        return None  # in the runtime's templates, which the queue does not read


TRAINJOB = TrainJobAdapter()
