"""RayJob (ray.io/v1): a RayCluster of its own (the same gang), plus a submitter pod.

* Gang: `spec.rayClusterSpec`, read as a RayCluster's (see `raycluster`). A RayJob that runs
  on an existing cluster (`clusterSelector`) brings no pods to place and is refused.
* Not counted: once the cluster is ready KubeRay starts a submitter Job (one pod,
  `ray job submit`, 500m CPU / 200Mi by default) outside the gang.
* Copy: as RayCluster (`fleet_pod_group` on coscheduling members).
* State: `status.jobDeploymentStatus`: Initializing -> Created, Running, Complete -> Succeeded,
  Failed, Suspended, Retrying -> Restarting. Mirrored: jobDeploymentStatus, jobStatus,
  rayClusterName, times, reason, message. It has no conditions list (KubeRay v1.5): fleet
  says a failover with `jobDeploymentStatus: Retrying` and giving up with `Failed`.
* `kubectl amc`: the pods of the RayCluster it made (`status.rayClusterName`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.kinds.adapter import ConditionStyle, object_at
from fleet.core.kinds.raycluster import CLUSTER_LABEL, RayClusterAdapter

_STATES: dict[str, JobState] = {
    "Complete": "Succeeded",
    "Failed": "Failed",
    "Running": "Running",
    "Suspended": "Suspended",
    "Suspending": "Suspended",
    "Retrying": "Restarting",
    "Initializing": "Created",
}


class RayJobAdapter(RayClusterAdapter):
    """A RayCluster's adapter whose cluster is `spec.rayClusterSpec`: the gang, the pod specs,
    the minimum and the copy are the cluster's; the state and the pods' cluster are the job's."""

    kind = "RayJob"
    #: Its pods carry the name of the RayCluster it made (`pods_of`), not its own.
    pods_label: ClassVar[str] = ""
    run_limit_field = "spec.activeDeadlineSeconds"
    #: The cluster's, and the submitter pod KubeRay runs `ray job submit` in.
    pod_spec_paths = (
        "spec.rayClusterSpec.headGroupSpec.template.spec",
        "spec.rayClusterSpec.workerGroupSpecs[].template.spec",
        "spec.submitterPodTemplate.spec",
    )
    status_fields: ClassVar[tuple[str, ...]] = (
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
    #: KubeRay's RayJob (v1.5) has no conditions list: its words are `jobDeploymentStatus`
    #: (`fleet_word`), and fleet writes no condition on it (the API server would drop it).
    conditions: ClassVar[ConditionStyle | None] = None
    doc_gang = "its rayClusterSpec's, as a RayCluster's"
    doc_added = (
        "as RayCluster, and a submitter Job pod (500m CPU, 200Mi) after the gang runs: not counted"
    )

    def cluster(self, obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
        """(`spec.rayClusterSpec`, its path); a RayJob on an existing cluster is refused."""
        spec = object_at(obj, "spec", "")
        if spec.get("clusterSelector") and spec.get("rayClusterSpec") is None:
            raise FieldError(
                "spec.clusterSelector",
                "runs on an existing RayCluster: fleet places RayJobs that bring their own "
                "(spec.rayClusterSpec)",
            )
        return object_at(spec, "rayClusterSpec", "spec"), "spec.rayClusterSpec"

    def state(self, status: Mapping[str, Any] | None) -> JobState:
        return _STATES.get(str((status or {}).get("jobDeploymentStatus") or ""), "Pending")

    def fleet_word(
        self, word: Literal["Restarting", "Failed"], reason: str, message: str
    ) -> dict[str, Any]:
        """KubeRay's own words: `Retrying` while fleet fails it over, `Failed` when it gives up."""
        if word == "Failed":
            return {"jobDeploymentStatus": "Failed", "reason": reason, "message": message}
        return {"jobDeploymentStatus": "Retrying", "reason": None, "message": message}

    def pods_of(self, member_obj: Mapping[str, Any]) -> str | None:
        cluster = (member_obj.get("status") or {}).get("rayClusterName")
        return f"{CLUSTER_LABEL}={cluster}" if cluster else None


RAYJOB = RayJobAdapter()
