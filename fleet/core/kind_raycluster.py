"""RayCluster (ray.io/v1): the head plus every worker group's minimum is the gang.

KubeRay starts one head pod and, per worker group, `replicas` (clamped to minReplicas ..
maxReplicas) times `numOfHosts` pods. A Ray cluster cannot work without its head; its workers
are needed down to each group's `minReplicas` (the autoscaler may add the rest later), so the
gang's minimum is the head plus `minReplicas * numOfHosts` per group, as KubeRay's own
scheduler-plugins integration counts it (there with the desired replicas).

KubeRay gives every worker an init container (`wait-gcs-ready`, 200m CPU and 256Mi memory)
that waits for the head; fleet counts it when it computes a worker's requests, since the member
will (see docs/sandbox.md, "What the operators add to pods").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.podset import PodSet, mapping_at, name_at, optional_count

API_VERSION = "ray.io/v1"
KIND = "RayCluster"
MIRRORED_FIELDS = (
    "state",
    "reason",
    "desiredWorkerReplicas",
    "availableWorkerReplicas",
    "readyWorkerReplicas",
    "minWorkerReplicas",
    "maxWorkerReplicas",
    "lastUpdateTime",
)
HEAD = "head"
#: The init container KubeRay (v1.5.1) adds to every worker pod, as it writes it.
WAIT_GCS_READY = {
    "name": "wait-gcs-ready",
    "resources": {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "256Mi"},
    },
}


#: Labels KubeRay puts on a cluster's pods: the cluster, and the group (`headgroup` or the
#: worker group's name).
CLUSTER_LABEL = "ray.io/cluster"
ROLE_LABEL = "ray.io/group"


def pods_of(copy: Mapping[str, Any]) -> str | None:
    return f"{CLUSTER_LABEL}={(copy.get('metadata') or {}).get('name')}"


def cluster_pod_sets(spec: Mapping[str, Any], path: str) -> list[PodSet]:
    """The head and the worker groups of a RayCluster spec found at `path`."""
    head_spec = mapping_at(spec, "headGroupSpec", path)
    head = PodSet(
        name=HEAD,
        pods=1,
        template=mapping_at(head_spec, "template", f"{path}.headGroupSpec"),
        path=f"{path}.headGroupSpec.template",
    )
    out = [head]
    groups = spec.get("workerGroupSpecs") or []
    if not isinstance(groups, list):
        raise FieldError(f"{path}.workerGroupSpecs", f"expected a list, got {groups!r}")
    seen = {HEAD}
    for i, group in enumerate(groups):
        gpath = f"{path}.workerGroupSpecs[{i}]"
        if not isinstance(group, dict):
            raise FieldError(gpath, f"expected an object, got {group!r}")
        name = name_at(group, "groupName", gpath)
        if name in seen:
            raise FieldError(f"{gpath}.groupName", f"group {name} given twice (or named head)")
        seen.add(name)
        minimum = optional_count(group, "minReplicas", gpath) or 0
        maximum = optional_count(group, "maxReplicas", gpath)
        replicas = optional_count(group, "replicas", gpath)
        hosts = optional_count(group, "numOfHosts", gpath)
        hosts = 1 if hosts is None else hosts
        if maximum is not None and maximum < minimum:
            raise FieldError(
                f"{gpath}.maxReplicas", f"{maximum} is smaller than minReplicas {minimum}"
            )
        desired = minimum if replicas is None else max(minimum, replicas)
        if maximum is not None:
            desired = min(desired, maximum)
        if group.get("suspend") is True:
            desired = minimum = 0
        template = mapping_at(group, "template", gpath)
        out.append(
            PodSet(
                name=name,
                pods=desired * hosts,
                template=template,
                path=f"{gpath}.template",
                minimum=minimum * hosts,
                effective_spec=_with_wait_gcs_ready(template.get("spec")),
            )
        )
    return out


def _with_wait_gcs_ready(spec: object) -> Mapping[str, Any] | None:
    if not isinstance(spec, Mapping):
        return None  # the template's own error is reported by the caller
    inits = list(spec.get("initContainers") or [])
    if any(isinstance(c, Mapping) and c.get("name") == WAIT_GCS_READY["name"] for c in inits):
        return None
    return {**spec, "initContainers": [*inits, WAIT_GCS_READY]}


def pod_sets(obj: Mapping[str, Any]) -> list[PodSet]:
    return cluster_pod_sets(mapping_at(obj, "spec", ""), "spec")


def state(status: Mapping[str, Any] | None) -> JobState:
    """`status.state` is `ready` once every pod runs (`suspended` when suspended); a cluster
    has no end of its own, only a failed one (`failed`, older KubeRay)."""
    status = status or {}
    word = str(status.get("state") or "").lower()
    if word == "failed":
        return "Failed"
    if word == "suspended":
        return "Suspended"
    if word == "ready":
        return "Running"
    return "Pending"
