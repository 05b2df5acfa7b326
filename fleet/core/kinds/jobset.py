"""JobSet (jobset.x-k8s.io/v1alpha2): every replicated job's pods are one gang, written per
stage in the member when the JobSet controller creates them in stages.

* Gang: each replicated job is one role (named as the JobSet names it, in its order): `replicas`
  (default 1) Jobs of min(parallelism (default 1), completions) pods each. The minimum is all
  pods (or the pod-group label / Koordinator annotation on the templates), and placement holds
  room for all of them, staged or not.
* Stages (`stages`): the JobSet controller (v0.10) starts every Job at once under startupPolicy
  AnyOrder, its default; with `startupPolicyOrder: InOrder` it creates each replicated job once
  the one before has started (each is a stage), and with `dependsOn` once the jobs it names
  reached their status (jobs with the same dependencies are one stage, those with none the
  first). What JobSet's admission refuses of these (a dependsOn on the first job or naming a
  job not before it, an unknown status or order) is refused naming the field.
* Copy: nothing to drop. The JobSet controller makes no PodGroup, so on a coscheduling member
  fleet writes the gang itself: `scheduling.x-k8s.io/pod-group` on every template and a PodGroup
  owned by the copy (`fleet_pod_group`); ACK's pod-group labels on Koordinator; the native
  PodGroup on a Kubernetes member. A staged JobSet gets one group per stage,
  `<jobset>-<first replicated job of the stage>`, its minimum the stage's pods
  (docs/kinds.md, "Staged JobSets").
* State: Failed (condition or terminalState), Completed, Suspended; Running while a child Job
  has active or ready pods, else Pending. Mirrored: replicatedJobsStatus, terminalState,
  restarts. Fleet's own conditions are metav1.Conditions; failing over drops the old copy's
  `Failed`/`Completed` and terminalState, giving up sets `Failed` and terminalState Failed.
* `kubectl amc`: pods carry `jobset.sigs.k8s.io/jobset-name`; replicas are
  `<replicated job>-<index>`.
* Queue: the first template's priorityClassName; charged every pod.
* The operator adds: a headless Service and pod `subdomain`/`hostname`, `jobset.sigs.k8s.io/*`
  labels, `JOB_COMPLETION_INDEX`; no resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.kinds.adapter import (
    ConditionStyle,
    KindAdapter,
    PodTemplate,
    Stage,
    job_pods,
    mapping,
    name_at,
    object_at,
    optional_count,
)

NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
ROLE_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


class JobSetAdapter(KindAdapter):
    api_version = "jobset.x-k8s.io/v1alpha2"
    kind = "JobSet"
    status_fields = ("replicatedJobsStatus", "terminalState", "restarts", "restartsCountTowardsMax")
    fleet_pod_group = True
    role_label = ROLE_LABEL
    pods_label = NAME_LABEL
    pod_spec_paths = ("spec.replicatedJobs[].template.spec.template.spec",)
    #: metav1.Condition; `Completed` and `Failed` end a JobSet (and `terminalState` says which),
    #: `Suspended` and `StartupPolicyCompleted` are the controller's own. It has no
    #: waiting or restarting type: fleet's `Scheduled` says those.
    conditions = ConditionStyle("metav1", ended=("Failed", "Completed"))
    doc_gang = (
        "every replicated job's pods: `replicas` x min(parallelism, completions) each; with "
        "`startupPolicyOrder: InOrder` or `dependsOn`, the member's gang per stage"
    )
    doc_added = (
        "a headless Service, pod subdomain/hostname, `jobset.sigs.k8s.io/*` labels; "
        "on coscheduling members fleet writes the PodGroup"
    )

    def templates(self, obj: Mapping[str, Any]) -> list[PodTemplate]:
        spec = mapping(obj.get("spec"), "spec")
        jobs = spec.get("replicatedJobs")
        if not isinstance(jobs, list) or not jobs:
            raise FieldError("spec.replicatedJobs", f"expected a non-empty list, got {jobs!r}")
        out: list[PodTemplate] = []
        seen: set[str] = set()
        for i, job in enumerate(jobs):
            path = f"spec.replicatedJobs[{i}]"
            if not isinstance(job, dict):
                raise FieldError(path, f"expected an object, got {job!r}")
            name = name_at(job, "name", path)
            if name in seen:
                raise FieldError(f"{path}.name", f"replicated job {name} given twice")
            seen.add(name)
            replicas = optional_count(job, "replicas", path)
            job_spec = object_at(object_at(job, "template", path), "spec", f"{path}.template")
            pods = job_pods(job_spec, f"{path}.template.spec")
            template = object_at(job_spec, "template", f"{path}.template.spec")
            count = (1 if replicas is None else replicas) * pods
            out.append(PodTemplate(name, name, count, template, f"{path}.template.spec.template"))
        return out

    def stages(self, obj: Mapping[str, Any]) -> tuple[Stage, ...]:
        """The JobSet controller's stages (v0.10): with `startupPolicyOrder: InOrder` it
        creates each replicated job only once the one before has started, so each is a stage;
        with `dependsOn` it creates a replicated job once its dependencies reached their status,
        so those with the same dependencies (none: the first stage) are created at one moment,
        one stage. Else every Job at once: one gang (no stages), as when only one stage has
        pods."""
        templates = self.templates(obj)
        spec = mapping(obj.get("spec"), "spec")
        jobs: list[dict[str, Any]] = spec["replicatedJobs"]
        depends = [_depends_on(job, i, jobs) for i, job in enumerate(jobs)]
        if _startup_order(spec) == "InOrder":
            keys: list[object] = list(range(len(jobs)))
        elif any(depends):
            keys = [frozenset(d) for d in depends]
        else:
            return ()
        members: dict[object, list[PodTemplate]] = {}
        for key, t in zip(keys, templates, strict=True):
            if t.replicas:  # a replicated job of no pods has no gang to start
                members.setdefault(key, []).append(t)
        if len(members) < 2:
            return ()
        return tuple(
            Stage(ts[0].role, tuple(t.component for t in ts), sum(t.replicas for t in ts))
            for ts in members.values()
        )

    def state(self, status: Mapping[str, Any] | None) -> JobState:
        status = status or {}
        true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
        terminal = status.get("terminalState")
        if "Failed" in true or terminal == "Failed":
            return "Failed"
        if "Completed" in true or terminal == "Completed":
            return "Succeeded"
        if "Suspended" in true:
            return "Suspended"
        jobs = status.get("replicatedJobsStatus") or []
        if any((j.get("active") or 0) > 0 or (j.get("ready") or 0) > 0 for j in jobs):
            return "Running"
        return "Pending"

    def fleet_status(
        self,
        member: Mapping[str, Any],
        fleet: Mapping[str, Any],
        *,
        fails_over: bool,
    ) -> dict[str, Any]:
        """A failed copy that fleet fails over does not end the fleet's JobSet: its `Failed`
        condition and terminalState stay in the member."""
        out = super().fleet_status(member, fleet, fails_over=fails_over)
        copy_failed = member.get("terminalState") == "Failed" or any(
            x.get("type") == "Failed" and x.get("status") == "True" for x in out["conditions"]
        )
        if fails_over and copy_failed:
            out["conditions"] = [x for x in out["conditions"] if x.get("type") != "Failed"]
            out["terminalState"] = None
        return out

    def fleet_word(
        self, word: Literal["Restarting", "Failed"], reason: str, message: str
    ) -> dict[str, Any]:
        """A JobSet's terminalState: Failed when fleet gives up, none while it fails over."""
        return {"terminalState": "Failed" if word == "Failed" else None}

    def pods_of(self, member_obj: Mapping[str, Any]) -> str | None:
        return self.pod_selector(str((member_obj.get("metadata") or {}).get("name")))


JOBSET = JobSetAdapter()

#: `startupPolicy.startupPolicyOrder` values (JobSet's CRD enum; AnyOrder by default).
STARTUP_ORDERS = ("AnyOrder", "InOrder")
#: `dependsOn[].status` values (JobSet's CRD enum).
DEPENDENCY_STATUSES = ("Ready", "Complete")


def _startup_order(spec: Mapping[str, Any]) -> str:
    """`spec.startupPolicy.startupPolicyOrder`, AnyOrder when not given."""
    policy = spec.get("startupPolicy")
    if policy is None:
        return "AnyOrder"
    order = mapping(policy, "spec.startupPolicy").get("startupPolicyOrder") or "AnyOrder"
    if order not in STARTUP_ORDERS:
        raise FieldError(
            "spec.startupPolicy.startupPolicyOrder",
            f"expected one of {', '.join(STARTUP_ORDERS)}, got {order!r}",
        )
    return str(order)


def _depends_on(job: Mapping[str, Any], index: int, jobs: list[dict[str, Any]]) -> set[str]:
    """`name=status` of each dependency of replicated job `index` (jobs with the same set are
    created at one moment), as JobSet's webhook admits them: none on the first replicated job,
    each naming a replicated job before it (or itself) with status Ready or Complete."""
    path = f"spec.replicatedJobs[{index}].dependsOn"
    items = job.get("dependsOn")
    if items is None:
        return set()
    if not isinstance(items, list):
        raise FieldError(path, f"expected a list, got {items!r}")
    if items and index == 0:
        raise FieldError(path, "the first replicated job cannot depend on another (JobSet)")
    earlier = {str(j.get("name")) for j in jobs[: index + 1]}
    out: set[str] = set()
    for i, item in enumerate(items):
        where = f"{path}[{i}]"
        item = mapping(item, where)
        name = name_at(item, "name", where)
        if name not in earlier:
            raise FieldError(
                f"{where}.name",
                f"{name!r} is not a replicated job before {job.get('name')!r}: a replicated "
                "job depends only on earlier ones",
            )
        status = item.get("status")
        if status not in DEPENDENCY_STATUSES:
            raise FieldError(
                f"{where}.status",
                f"expected one of {', '.join(DEPENDENCY_STATUSES)}, got {status!r}",
            )
        out.add(f"{name}={status}")
    return out
