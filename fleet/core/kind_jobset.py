"""JobSet (jobset.x-k8s.io/v1alpha2): every replicated job's pods are one gang.

A replicated job is `replicas` identical batch Jobs, each running `parallelism` pods (capped by
`completions`), so a JobSet's gang is the sum over its replicated jobs; the JobSet controller
starts every Job at once (startupPolicy AnyOrder, its default), and a JobSet whose pods do not
all run is no use to the job in it. Each replicated job is one role, named as the JobSet names
it, in the order given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.podset import PodSet, job_pods, mapping_at, name_at, optional_count

API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
#: Status fields mirrored to the fleet JobSet (besides its conditions).
MIRRORED_FIELDS = ("replicatedJobsStatus", "terminalState", "restarts", "restartsCountTowardsMax")


#: Labels the JobSet controller puts on its pods: the JobSet, and the replicated job (role).
NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
ROLE_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def pods_of(copy: Mapping[str, Any]) -> str | None:
    return f"{NAME_LABEL}={(copy.get('metadata') or {}).get('name')}"


def pod_sets(obj: Mapping[str, Any]) -> list[PodSet]:
    spec = mapping_at(obj, "spec", "")
    jobs = spec.get("replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        raise FieldError("spec.replicatedJobs", f"expected a non-empty list, got {jobs!r}")
    out: list[PodSet] = []
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
        job_spec = mapping_at(mapping_at(job, "template", path), "spec", f"{path}.template")
        pods = job_pods(job_spec, f"{path}.template.spec")
        template = mapping_at(job_spec, "template", f"{path}.template.spec")
        out.append(
            PodSet(
                name=name,
                pods=(1 if replicas is None else replicas) * pods,
                template=template,
                path=f"{path}.template.spec.template",
            )
        )
    return out


def state(status: Mapping[str, Any] | None) -> JobState:
    """JobSet conditions are Completed, Failed and Suspended; it is Running while a child Job
    has active pods, else Pending."""
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
