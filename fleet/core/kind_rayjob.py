"""RayJob (ray.io/v1): a RayCluster of its own, so the same gang, plus a submitter pod.

KubeRay creates the RayCluster from `spec.rayClusterSpec` and, once it is ready, a submitter Job
(one pod, `ray job submit`, 500m CPU / 200Mi memory by default) that is not part of the gang: it
starts after the gang runs. A RayJob that names an existing cluster (`clusterSelector`) brings no
pods of its own to place and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.kind_raycluster import CLUSTER_LABEL, cluster_pod_sets
from fleet.core.podset import PodSet, mapping_at

API_VERSION = "ray.io/v1"
KIND = "RayJob"
MIRRORED_FIELDS = (
    "jobDeploymentStatus",
    "jobStatus",
    "jobId",
    "rayClusterName",
    "dashboardURL",
    "startTime",
    "endTime",
    "failed",
    "succeeded",
    "reason",
    "message",
)

_STATES: dict[str, JobState] = {
    "Complete": "Succeeded",
    "Failed": "Failed",
    "Running": "Running",
    "Suspended": "Suspended",
    "Suspending": "Suspended",
    "Retrying": "Restarting",
    "Initializing": "Created",
}


def pods_of(copy: Mapping[str, Any]) -> str | None:
    """The pods of the RayCluster the RayJob made (None until it has one)."""
    cluster = (copy.get("status") or {}).get("rayClusterName")
    return f"{CLUSTER_LABEL}={cluster}" if cluster else None


def pod_sets(obj: Mapping[str, Any]) -> list[PodSet]:
    spec = mapping_at(obj, "spec", "")
    if spec.get("clusterSelector") and spec.get("rayClusterSpec") is None:
        raise FieldError(
            "spec.clusterSelector",
            "runs on an existing RayCluster: fleet places RayJobs that bring their own "
            "(spec.rayClusterSpec)",
        )
    return cluster_pod_sets(mapping_at(spec, "rayClusterSpec", "spec"), "spec.rayClusterSpec")


def state(status: Mapping[str, Any] | None) -> JobState:
    """`status.jobDeploymentStatus`: Initializing, Running, Complete, Failed, Suspended, ..."""
    word = str((status or {}).get("jobDeploymentStatus") or "")
    return _STATES.get(word, "Pending")
