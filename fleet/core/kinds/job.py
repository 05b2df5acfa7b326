"""batch/v1 Job: one pod template, `parallelism` pods at once.

* Gang: `spec.template`, `min(parallelism (default 1), completions)` pods: the Job
  controller's `wantActive` before any pod succeeded (Indexed and NonIndexed alike). The
  minimum is the pod-group label or Koordinator annotation on the template, else all pods.
* Copy: the fleet's API server defaulted `spec.selector` and the template labels
  `controller-uid`, `batch.kubernetes.io/controller-uid`, `job-name` and
  `batch.kubernetes.io/job-name` from the fleet object's UID and name; a member refuses a copy
  that carries them (422: the selector must be the member object's own UID), so they are
  dropped, as Karmada's native interpreter does, unless the user chose the selector
  (`spec.manualSelector: true`). The gang goes on the template as ACK's pod-group labels, for
  Koordinator or an unknown scheduler; the Job controller makes no PodGroup, so on a
  coscheduling member fleet labels the template `scheduling.x-k8s.io/pod-group` and writes the
  PodGroup beside the copy (`fleet_pod_group`); Volcano gets no gang for it (refused there).
* State: Failed (or FailureTarget, which only ever leads to Failed) and Complete (or
  SuccessCriteriaMet) win; Suspended; else Running while pods are active, else Pending.
* Status mirror: active, ready, terminating as the copy has them; the fleet's API server
  refuses a Job status that takes back a terminal condition, lowers `failed` (or `succeeded`),
  or changes a set `startTime` (Kubernetes 1.32+, JobManagedBy), so across failovers
  `startTime` is the first copy's, `succeeded` and `failed` the largest seen, and a copy's
  Failed/FailureTarget (and its completionTime) are written only when no failover follows; a
  Job failed for good on the fleet gets FailureTarget, then Failed.
* `kubectl amc`: pods are named at random by the Job controller, found by their owner (and
  labelled `batch.kubernetes.io/job-name`).
* Queue: the template's priorityClassName; charged every pod.
* Not counted: nothing; the Job controller creates pods from the template as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from fleet.core.jobstate import JobState
from fleet.core.kinds.adapter import (
    ConditionStyle,
    KindAdapter,
    PodTemplate,
    job_pods,
    mapping,
    template_at,
)

#: The labels the API server generates for a Job (selector and template), from its UID and name.
GENERATED_LABELS: Final = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)


class BatchJob(KindAdapter):
    api_version = "batch/v1"
    kind = "Job"
    multi_role = False
    pods_label = "batch.kubernetes.io/job-name"
    mutable_templates = False  # spec.template is immutable once the Job exists
    run_limit_field = "spec.activeDeadlineSeconds"
    pod_spec_paths = ("spec.template.spec",)
    #: The Job controller makes no PodGroup: on coscheduling members fleet writes it.
    fleet_pod_group = True
    doc_gang = "`spec.template`, min(parallelism, completions) pods"
    doc_dropped = "`spec.selector`, `controller-uid` and `job-name` labels"
    doc_added = "nothing; on coscheduling members fleet writes the PodGroup"
    state_conditions: ClassVar[tuple[tuple[str, JobState], ...]] = (
        ("Failed", "Failed"),
        ("FailureTarget", "Failed"),
        ("Complete", "Succeeded"),
        ("SuccessCriteriaMet", "Succeeded"),
        ("Suspended", "Suspended"),
    )
    status_fields = (
        "active",
        "ready",
        "succeeded",
        "failed",
        "terminating",
        "startTime",
        "completionTime",
    )
    #: A batch/v1 JobCondition; the API server takes a Failed condition only after
    #: FailureTarget. No Created or Restarting: a Job has none.
    conditions = ConditionStyle(
        "batch", ended=("FailureTarget", "Failed"), failed=("FailureTarget", "Failed")
    )

    def templates(self, obj: Mapping[str, Any]) -> list[PodTemplate]:
        pods = job_pods(mapping(obj.get("spec"), "spec"), "spec")
        template = template_at(obj, "spec.template")
        return [PodTemplate("pod", "", pods, template, "spec.template")]

    def fleet_status(
        self,
        member: Mapping[str, Any],
        fleet: Mapping[str, Any],
        *,
        fails_over: bool,
    ) -> dict[str, Any]:
        out = super().fleet_status(member, fleet, fails_over=fails_over)
        out["startTime"] = fleet.get("startTime") or member.get("startTime")
        for counter in ("succeeded", "failed"):
            most = max(_count(fleet.get(counter)), _count(member.get(counter)))
            out[counter] = most or None
        failing = {"Failed", "FailureTarget"}
        copy_failed = any(
            x.get("type") in failing and x.get("status") == "True" for x in out["conditions"]
        )
        if fails_over and copy_failed:
            out["conditions"] = [x for x in out["conditions"] if x.get("type") not in failing]
            out["completionTime"] = fleet.get("completionTime")
        return out

    def drop_server_set(self, copy_obj: dict[str, Any]) -> None:
        spec = copy_obj["spec"]
        if spec.get("manualSelector") is True:
            return
        selector = spec.get("selector")
        if isinstance(selector, dict):
            match = selector.get("matchLabels")
            if isinstance(match, dict):
                for key in GENERATED_LABELS:
                    match.pop(key, None)
                if not match:
                    selector.pop("matchLabels")
            if not selector:
                spec.pop("selector")
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        if isinstance(labels, dict):
            for key in GENERATED_LABELS:
                labels.pop(key, None)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


JOB = BatchJob()
