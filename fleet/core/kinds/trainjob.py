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
* Copy: nothing to drop. Its pod templates are the runtime's, so fleet marks its pods through
  `spec.podTemplateOverrides` (Trainer v2.1 merges each entry's metadata into the pod
  templates of its target jobs; `spec.labels`/`spec.annotations` reach only the JobSet and its
  Jobs, not the pods): one entry per replicated job, last, with fleet's labels and the gang.
  On Koordinator (or an unknown scheduler) ACK's pod-group labels; on a coscheduling member
  Trainer makes the PodGroup when the runtime's podGroupPolicy is coscheduling, otherwise
  fleet labels the pods `scheduling.x-k8s.io/pod-group` and writes the PodGroup beside the
  copy (`pod_group`). A gang already in the runtime's or the user's templates is kept.
  podTemplateOverrides cannot set schedulerName: a member that asks for one the runtime's
  templates do not name, a runtime whose podGroupPolicy is for another gang scheduler, and
  Volcano without the runtime's volcano policy cannot run it as a gang (`gang_refusal`). With
  propagateDeps the runtime goes along as one more dependency (controller.dependencies): created
  in the member when it has none of that name, kept in step with the fleet's, deleted when no
  TrainJob of fleet's there names it; one the member has of its own is used and never touched.
  What its templates (with the job's overrides) name goes along too.
* State: Failed, Complete, Suspended conditions (metav1.Condition, no Created or Restarting:
  fleet says those with its Scheduled condition); Running while its jobs have active pods.
* `kubectl amc`: pods carry `jobset.sigs.k8s.io/jobset-name` (the JobSet is the TrainJob's
  namesake).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from fleet.core import gangmarks
from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.kinds.adapter import (
    POD_GROUP_ACCESS,
    Access,
    ConditionStyle,
    KindAdapter,
    Needed,
    PodMarks,
    PodTemplate,
    job_pods,
    mapping,
    name_at,
    native_pod_group,
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
    #: Its pod templates are the runtime's: Reservations are made and matched from the copy's
    #: own templates (`reserving`), which it has none of, so none is made for it.
    reservable = False
    #: Trainer v2.1 reconciles a TrainJob that is being deleted like any other and applies its
    #: JobSet again: in the foreground the garbage collector deletes that JobSet, Trainer
    #: makes it anew, and the copy stays a minute or more (seen on the sandbox). Deleted in the
    #: background, the copy goes at once; the collector then takes its JobSet, Jobs and pods,
    #: and fleet waits for those pods (they carry its labels through podTemplateOverrides).
    deletion_propagation = "Background"
    #: Trainer names the JobSet it makes after the TrainJob.
    pods_label = NAME_LABEL
    #: metav1.Condition: Suspended, Complete, Failed (Trainer v2.1).
    conditions = ConditionStyle("metav1", ended=("Failed", "Complete"))
    member_access = (
        Access(
            GROUP,
            ("trainingruntimes", "clustertrainingruntimes"),
            {
                "create": "propagateDeps: the runtime a TrainJob names is created in a member "
                "that has none of that name (one the member has of its own is never changed)",
                "patch": "propagateDeps: a runtime fleet created is kept in step with the fleet's "
                "by a JSON patch whose first op tests fleet's managed-by label; `fleet unjoin "
                "--leave` removes that label",
                "delete": "propagateDeps: a runtime fleet created is deleted (by its UID) once no "
                "TrainJob of fleet's in the member names it",
            },
            "Kubeflow Trainer runtimes, which a TrainJob's gang is read from.",
        ),
        POD_GROUP_ACCESS,
    )
    fleet_access = (
        Access(
            GROUP,
            ("trainingruntimes", "clustertrainingruntimes"),
            {
                "get": "a TrainJob's gang is read from the runtime it names",
                "list": "kopf lists the runtimes",
                "watch": "a TrainJob created before its runtime goes on once the runtime exists",
            },
            "Kubeflow Trainer runtimes, read (and taken along with propagateDeps).",
        ),
    )
    doc_gang = (
        "its (Cluster)TrainingRuntime's replicated jobs, `numNodes` trainer pods; "
        "all pods (the runtime's podGroupPolicy)"
    )
    doc_added = (
        "a JobSet from the runtime, `PET_*` env and port 29500, and with podGroupPolicy "
        "coscheduling the PodGroup (else, on coscheduling members, fleet writes it); fleet's "
        "marks go in `podTemplateOverrides`; the runtime goes along with propagateDeps"
    )

    needs_kinds = ((API_VERSION, RUNTIME), (API_VERSION, CLUSTER_RUNTIME))
    #: Its own pod specs are the overrides it merges into the runtime's templates.
    pod_spec_paths = ("spec.podTemplateOverrides[].spec",)
    needs_pod_spec_paths: ClassVar[Mapping[str, tuple[str, ...]]] = {
        kind: ("spec.template.spec.replicatedJobs[].template.spec.template.spec",)
        for kind in (RUNTIME, CLUSTER_RUNTIME)
    }
    cluster_scoped_needs = frozenset({CLUSTER_RUNTIME})

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
        """The runtime's templates as the job's pods get them: with the job's own
        podTemplateOverrides merged in (its tolerations, node selectors, volumes...)."""
        return [
            PodTemplate(t.component, t.role, t.replicas, _overridden(obj, t), t.field)
            for t in self._runtime_templates(obj, needed)
        ]

    def _runtime(self, obj: Mapping[str, Any], needed: Needed) -> Mapping[str, Any] | None:
        try:
            kind, namespace, name = runtime_ref(obj)
        except FieldError:
            return None
        return needed.get((kind, namespace, name))

    def _runtime_templates(self, obj: Mapping[str, Any], needed: Needed) -> list[PodTemplate]:
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

    def pod_templates(self, obj: Mapping[str, Any], needed: Needed) -> list[PodTemplate]:
        """The runtime's templates with the job's overrides, and what the job itself names:
        `spec.trainer.env` on the trainer's `node` container, the initializers' secretRef."""
        out = super().pod_templates(obj, needed)
        spec = obj.get("spec") or {}
        trainer_env = (spec.get("trainer") or {}).get("env") if isinstance(spec, Mapping) else None
        init = (spec.get("initializer") or {}) if isinstance(spec, Mapping) else {}
        for t in out:
            containers = (t.template.get("spec") or {}).get("containers") or []
            if trainer_env and t.component == TRAINER_JOB:
                for c in containers:
                    if c.get("name") == TRAINER_JOB:
                        c["env"] = [*(c.get("env") or []), *trainer_env]
            for step in ("dataset", "model"):
                secret = ((init.get(step) or {}).get("secretRef") or {}).get("name")
                if secret and t.component == f"{step}-initializer" and containers:
                    first = containers[0]
                    first["envFrom"] = [
                        *(first.get("envFrom") or []),
                        {"secretRef": {"name": secret}},
                    ]
        return out

    def mark_pods(self, copy_obj: dict[str, Any], marks: PodMarks, needed: Needed) -> None:
        """One podTemplateOverrides entry per replicated job of the runtime, after the user's
        own (so fleet's labels win): fleet's labels, the pod's role, and the gang for the
        member's scheduler unless the runtime, the user's overrides or Trainer's podGroupPolicy
        already give one. schedulerName cannot be set there (`gang_refusal`)."""
        runtime = self._runtime(copy_obj, needed)
        if runtime is None:
            return  # its gang could not be read: it is not placed
        try:
            templates = self.templates_with(copy_obj, needed)
        except FieldError:
            return
        policy = _pod_group_policy(runtime)
        entries = []
        for t in templates:
            meta = t.template.get("metadata") or {}
            have = dict(meta.get("labels") or {})
            annotations = meta.get("annotations") or {}
            labels: dict[str, str] = {}
            if marks.gang_scheduler == gangmarks.COSCHEDULING:
                if "coscheduling" not in policy:
                    labels[gangmarks.COSCHEDULING_POD_GROUP_LABEL] = marks.name
            elif marks.gang_scheduler == gangmarks.KUBERNETES:
                labels[gangmarks.KUBERNETES_POD_GROUP_LABEL] = marks.name
            elif (
                gangmarks.writes_pod_group_labels(marks.gang_scheduler)
                and not policy
                and gangmarks.KOORDINATOR_GANG_NAME_ANNOTATION not in annotations
            ):
                labels[gangmarks.POD_GROUP_NAME_LABEL] = marks.name
                labels[gangmarks.POD_GROUP_MIN_AVAILABLE_LABEL] = str(marks.min_member)
            labels = {k: v for k, v in labels.items() if k not in have}  # a user's gang is kept
            labels.update(marks.labels)
            if marks.role_label:
                labels[marks.role_label] = t.component
            if labels:
                entries.append({"targetJobs": [{"name": t.role}], "metadata": {"labels": labels}})
        if entries:
            spec = copy_obj["spec"]
            spec["podTemplateOverrides"] = [*(spec.get("podTemplateOverrides") or []), *entries]

    def gang_refusal(
        self,
        obj: Mapping[str, Any],
        needed: Needed,
        *,
        gang_scheduler: str | None,
        scheduler_name: str | None,
    ) -> str | None:
        runtime = self._runtime(obj, needed)
        if runtime is None:
            return None  # reading the gang says what is wrong
        rname = f"{runtime_ref(obj)[0]} {runtime_ref(obj)[2]}"
        policy = _pod_group_policy(runtime)
        wants = {"coscheduling": gangmarks.COSCHEDULING, "volcano": gangmarks.VOLCANO}
        for key, scheduler in wants.items():
            if key in policy and gang_scheduler not in (None, scheduler):
                return (
                    f"{rname}'s podGroupPolicy makes a {scheduler} gang, and the member's gang "
                    f"scheduler is {gang_scheduler}"
                )
        if gang_scheduler == gangmarks.VOLCANO and "volcano" not in policy:
            return (
                f"a TrainJob gets a Volcano gang only from its runtime's podGroupPolicy, and "
                f"{rname} has none"
            )
        if scheduler_name:
            try:
                templates = self.templates_with(obj, needed)
            except FieldError:
                return None
            unnamed = [
                t.role for t in templates if not (t.template.get("spec") or {}).get("schedulerName")
            ]
            if unnamed:
                return (
                    f"the member schedules gangs with schedulerName {scheduler_name}, which a "
                    f"TrainJob cannot set (Trainer's podTemplateOverrides have no "
                    f"schedulerName) and {rname} does not name for {', '.join(unnamed)}"
                )
        return None

    def pod_group(
        self,
        member_obj: Mapping[str, Any],
        *,
        min_member: int,
        gang_scheduler: str | None,
        topology: str | None = None,
    ) -> dict[str, Any] | None:
        """The PodGroup of a copy fleet labelled itself: for coscheduling when its runtime has
        no podGroupPolicy (Trainer makes none), the native one on a member with Kubernetes'
        own gang scheduling (Trainer knows no such PodGroup)."""
        label = {
            gangmarks.COSCHEDULING: gangmarks.COSCHEDULING_POD_GROUP_LABEL,
            gangmarks.KUBERNETES: gangmarks.KUBERNETES_POD_GROUP_LABEL,
        }.get(gang_scheduler or "")
        if label is None:
            return None
        name = (member_obj.get("metadata") or {}).get("name")
        for entry in (member_obj.get("spec") or {}).get("podTemplateOverrides") or []:
            labels = (entry.get("metadata") or {}).get("labels") or {}
            if labels.get(label) == name:
                if gang_scheduler == gangmarks.KUBERNETES:
                    return native_pod_group(member_obj, min_member, topology)
                return self._pod_group(member_obj, min_member)
        return None

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


def _pod_group_policy(runtime: Mapping[str, Any]) -> Mapping[str, Any]:
    """The runtime's podGroupPolicy (`coscheduling` or `volcano`), empty when it has none."""
    policy = (runtime.get("spec") or {}).get("podGroupPolicy")
    return policy if isinstance(policy, Mapping) else {}


def _by_name(base: list[Any], over: list[Any]) -> list[Any]:
    """A list merged by `name` (a strategic merge's), the override's entries winning."""
    names = {x.get("name") for x in over if isinstance(x, Mapping)}
    return [x for x in base if not (isinstance(x, Mapping) and x.get("name") in names)] + over


def _overridden(obj: Mapping[str, Any], t: PodTemplate) -> dict[str, Any]:
    """A copy of the runtime's pod template `t` with the TrainJob's podTemplateOverrides that
    target its job merged in, in order, as Trainer merges them (a strategic merge patch of the
    pod template: maps merged, named lists merged by name, the rest replaced)."""
    template = copy.deepcopy(t.template)
    overrides = (obj.get("spec") or {}).get("podTemplateOverrides") or []
    for entry in overrides if isinstance(overrides, list) else []:
        if not isinstance(entry, Mapping):
            continue
        targets = {x.get("name") for x in entry.get("targetJobs") or [] if isinstance(x, Mapping)}
        if t.role not in targets:
            continue
        meta = entry.get("metadata") or {}
        out_meta = template.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            if isinstance(meta.get(key), Mapping):
                out_meta[key] = {**(out_meta.get(key) or {}), **meta[key]}
        spec = entry.get("spec") or {}
        out_spec = template.setdefault("spec", {})
        for key, value in spec.items() if isinstance(spec, Mapping) else ():
            if key in ("containers", "initContainers"):
                out_spec[key] = _containers(out_spec.get(key) or [], value or [])
            elif key in ("volumes", "imagePullSecrets", "schedulingGates"):
                out_spec[key] = _by_name(out_spec.get(key) or [], list(value or []))
            elif key == "nodeSelector" and isinstance(value, Mapping):
                out_spec[key] = {**(out_spec.get(key) or {}), **value}
            else:
                out_spec[key] = copy.deepcopy(value)
    return template


def _containers(base: list[Any], over: list[Any]) -> list[Any]:
    """Containers with a ContainerOverride's env and volumeMounts merged by name."""
    by_name = {x.get("name"): x for x in over if isinstance(x, Mapping)}
    out = []
    for c in base:
        o = by_name.get(c.get("name")) if isinstance(c, Mapping) else None
        if o is None:
            out.append(c)
            continue
        merged = dict(c)
        for key in ("env", "volumeMounts"):
            if o.get(key):
                merged[key] = _by_name(list(c.get(key) or []), list(o[key]))
        out.append(merged)
    return out


TRAINJOB = TrainJobAdapter()
