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
  Koordinator or an unknown scheduler; a coscheduling member gets no gang for a Job (it would
  need a PodGroup object; fleet places the Job whole in one member all the same).
* State: Failed (or FailureTarget, which only ever leads to Failed) and Complete (or
  SuccessCriteriaMet) win; Suspended; else Running while pods are active, else Pending. The
  status mirror copies active, ready, succeeded, failed, terminating and the times.
* `kubectl amc`: pods are named at random by the Job controller, found by their owner.
* Queue: the template's priorityClassName; charged every pod.
* Not counted: nothing; the Job controller creates pods from the template as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from fleet.core.jobstate import JobState
from fleet.core.kinds.adapter import KindAdapter, PodTemplate, job_pods, mapping, template_at

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
    doc_gang = "`spec.template`, min(parallelism, completions) pods"
    doc_dropped = "`spec.selector`, `controller-uid` and `job-name` labels"
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

    def templates(self, obj: Mapping[str, Any]) -> list[PodTemplate]:
        pods = job_pods(mapping(obj.get("spec"), "spec"), "spec")
        template = template_at(obj, "spec.template")
        return [PodTemplate("pod", "", pods, template, "spec.template")]

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


JOB = BatchJob()
