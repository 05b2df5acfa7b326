"""RayCluster (ray.io/v1): the head plus every worker group's minimum is the gang.

* Gang: `head` (1 pod), then one component per worker group: `replicas` clamped to
  minReplicas..maxReplicas, times `numOfHosts` (a suspended group has none). A Ray cluster
  cannot work without its head, and its workers are needed down to each group's minReplicas
  (the autoscaler may add the rest), so the minimum is the head plus
  `minReplicas x numOfHosts` per group (or the pod-group label on the templates). With several
  groups whose minReplicas is below replicas the minimum set takes the groups in order.
* Requests: KubeRay gives every worker an init container `wait-gcs-ready` (200m CPU, 256Mi)
  that waits for the head; fleet counts it (`pod_spec`), as the member will. With
  `enableInTreeAutoscaling: true` KubeRay adds the `autoscaler` sidecar to the head pod, whose
  resources are `autoscalerOptions.resources` when given (whole: its limits stand in for missing
  requests, as the API server defaults them), else 500m CPU and 512Mi; fleet counts it too.
* Autoscaling: the gang is what the spec says now (`replicas` per group, its minimum the
  minReplicas). Workers the autoscaler adds later, up to maxReplicas, are outside the gang:
  fleet does not count, reserve or charge them; the member's scheduler places them (or leaves
  them Pending) like any pod (docs/kinds.md).
* Copy: nothing to drop. KubeRay runs without a batch scheduler (its scheduler-plugins mode
  refuses RayJobs), so on a coscheduling member fleet writes the gang (`fleet_pod_group`).
* State: `status.state` ready -> Running, suspended -> Suspended, failed -> Failed. Fleet's
  conditions are metav1.Conditions; giving up sets `state: failed`.
* `kubectl amc`: pods carry `ray.io/cluster`; replicas are `head`, `<group>-<index>`.
* Queue: the first template's priorityClassName; charged every pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState
from fleet.core.kinds.adapter import (
    ConditionStyle,
    KindAdapter,
    PodTemplate,
    mapping,
    name_at,
    object_at,
    optional_count,
)
from fleet.core.requests import container_requests

CLUSTER_LABEL = "ray.io/cluster"
ROLE_LABEL = "ray.io/group"
HEAD = "head"
MINIMUM_SOURCE = "the head and each worker group's minReplicas"
#: The init container KubeRay (v1.5.1) adds to every worker pod, as it writes it.
WAIT_GCS_READY = {
    "name": "wait-gcs-ready",
    "resources": {
        "limits": {"cpu": "200m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "256Mi"},
    },
}

#: The sidecar KubeRay (v1.5.1, `BuildAutoscalerContainer`) appends to the head pod's containers
#: when `enableInTreeAutoscaling` is true. `autoscalerOptions.resources`, when given, replaces
#: these resources whole (`mergeAutoscalerOverrides`).
AUTOSCALER = "autoscaler"
AUTOSCALER_RESOURCES = {
    "limits": {"cpu": "500m", "memory": "512Mi"},
    "requests": {"cpu": "500m", "memory": "512Mi"},
}


def autoscaler_container(cluster: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    """The autoscaler sidecar KubeRay adds to the head of the RayCluster spec `cluster` at
    `path` (only what placement reads: its name and resources), or None without in-tree
    autoscaling. A malformed `autoscalerOptions.resources` raises a FieldError naming it."""
    if cluster.get("enableInTreeAutoscaling") is not True:
        return None
    options = cluster.get("autoscalerOptions")
    resources: object = None
    if options is not None:
        resources = mapping(options, f"{path}.autoscalerOptions").get("resources")
    if resources is None:
        resources = AUTOSCALER_RESOURCES
    container = {"name": AUTOSCALER, "resources": resources}
    container_requests(container, f"{path}.autoscalerOptions")  # names the field if malformed
    return container


def cluster_templates(spec: Mapping[str, Any], path: str) -> list[tuple[PodTemplate, int]]:
    """(template, pods of it the gang needs) for the head and each worker group of a RayCluster
    spec at `path`."""
    head_spec = object_at(spec, "headGroupSpec", path)
    head = object_at(head_spec, "template", f"{path}.headGroupSpec")
    out = [(PodTemplate(HEAD, HEAD, 1, head, f"{path}.headGroupSpec.template"), 1)]
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
        least = optional_count(group, "minReplicas", gpath) or 0
        most = optional_count(group, "maxReplicas", gpath)
        replicas = optional_count(group, "replicas", gpath)
        hosts = optional_count(group, "numOfHosts", gpath)
        hosts = 1 if hosts is None else hosts
        if most is not None and most < least:
            raise FieldError(f"{gpath}.maxReplicas", f"{most} is smaller than minReplicas {least}")
        desired = least if replicas is None else max(least, replicas)
        if most is not None:
            desired = min(desired, most)
        if group.get("suspend") is True:
            desired = least = 0
        template = object_at(group, "template", gpath)
        out.append(
            (PodTemplate(name, name, desired * hosts, template, f"{gpath}.template"), least * hosts)
        )
    return out


def ray_pod_spec(cluster: Mapping[str, Any], path: str, template: PodTemplate) -> Mapping[str, Any]:
    """A Ray pod's spec as KubeRay creates it from the RayCluster spec `cluster` at `path`:
    workers get `wait-gcs-ready`, the head the autoscaler sidecar when autoscaling is on."""
    spec = mapping(template.template.get("spec"), f"{template.field}.spec")
    if template.component == HEAD:
        sidecar = autoscaler_container(cluster, path)
        containers = spec.get("containers") or []
        if sidecar is None or not isinstance(containers, list):
            return spec  # malformed containers: the requests reading names the field
        return {**spec, "containers": [*containers, sidecar]}
    inits = list(spec.get("initContainers") or [])
    if any(isinstance(c, Mapping) and c.get("name") == WAIT_GCS_READY["name"] for c in inits):
        return spec
    return {**spec, "initContainers": [*inits, WAIT_GCS_READY]}


def autoscaled_growth(
    cluster: Mapping[str, Any], path: str, found: Sequence[tuple[PodTemplate, int]]
) -> list[str]:
    """One sentence per worker group the in-tree autoscaler may grow beyond the pods fleet
    placed for it (`found`, from `cluster_templates` of the same spec): up to maxReplicas x
    numOfHosts, or without bound when maxReplicas is not given."""
    if cluster.get("enableInTreeAutoscaling") is not True:
        return []
    out = []
    workers = {t.component: t.replicas for t, _least in found}
    for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
        gpath = f"{path}.workerGroupSpecs[{i}]"
        name = name_at(group, "groupName", gpath)
        if group.get("suspend") is True:
            continue
        hosts = optional_count(group, "numOfHosts", gpath)
        most = optional_count(group, "maxReplicas", gpath)
        placed = workers[name]
        if most is None:
            upto = "without bound (no maxReplicas)"
        elif most * (1 if hosts is None else hosts) > placed:
            upto = f"up to {most * (1 if hosts is None else hosts)} pods ({gpath}.maxReplicas)"
        else:
            continue
        out.append(
            f"{path}.enableInTreeAutoscaling: the autoscaler may grow worker group {name} "
            f"beyond the {placed} pods fleet placed ({gpath}.replicas) {upto}; those are "
            "outside the gang: not counted, reserved or charged, placed by the member's "
            "scheduler or left Pending. Set replicas to hold room for more."
        )
    return out


def ray_minimum(found: Sequence[tuple[PodTemplate, int]]) -> tuple[int, str]:
    return sum(min(least, t.replicas) for t, least in found), MINIMUM_SOURCE


def ray_state(status: Mapping[str, Any] | None) -> JobState:
    word = str((status or {}).get("state") or "").lower()
    if word == "failed":
        return "Failed"
    if word == "suspended":
        return "Suspended"
    if word == "ready":
        return "Running"
    return "Pending"


class RayClusterAdapter(KindAdapter):
    api_version = "ray.io/v1"
    kind = "RayCluster"
    pods_label: ClassVar[str] = CLUSTER_LABEL
    pod_spec_paths: tuple[str, ...] = (
        "spec.headGroupSpec.template.spec",
        "spec.workerGroupSpecs[].template.spec",
    )
    status_fields: ClassVar[tuple[str, ...]] = (
        "state",
        "reason",
        "desiredWorkerReplicas",
        "availableWorkerReplicas",
        "readyWorkerReplicas",
        "minWorkerReplicas",
        "maxWorkerReplicas",
        "lastUpdateTime",
    )
    fleet_pod_group = True
    role_label = ROLE_LABEL
    #: metav1.Condition (RayClusterProvisioned, HeadPodReady, ...); none ends a cluster, whose
    #: end is `state: failed` (`fleet_word`).
    conditions: ClassVar[ConditionStyle | None] = ConditionStyle("metav1", ended=(), failed=())
    doc_gang = (
        "the head plus each worker group's `replicas` (within minReplicas..maxReplicas) x "
        "numOfHosts; minimum: the head plus each group's minReplicas x numOfHosts"
    )
    doc_added = (
        "workers' init container `wait-gcs-ready` (200m CPU, 256Mi: counted), probes, "
        "a shared-memory volume; with `enableInTreeAutoscaling` the head's `autoscaler` "
        "sidecar (`autoscalerOptions.resources`, else 500m CPU, 512Mi: counted), and the "
        "workers the autoscaler adds beyond `replicas` (outside the gang: not counted); on "
        "coscheduling members fleet writes the PodGroup"
    )

    def cluster(self, obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
        """(the RayCluster spec, its path): the object's own spec."""
        return object_at(obj, "spec", ""), "spec"

    def _found(self, obj: Mapping[str, Any]) -> list[tuple[PodTemplate, int]]:
        return cluster_templates(*self.cluster(obj))

    def templates(self, obj: Mapping[str, Any]) -> list[PodTemplate]:
        return [t for t, _least in self._found(obj)]

    def pod_spec(self, obj: Mapping[str, Any], template: PodTemplate) -> Mapping[str, Any]:
        return ray_pod_spec(*self.cluster(obj), template)

    def outside_gang(self, obj: Mapping[str, Any]) -> list[str]:
        return autoscaled_growth(*self.cluster(obj), self._found(obj))

    def min_member(
        self, obj: Mapping[str, Any], templates: Sequence[PodTemplate], total: int
    ) -> tuple[int, str]:
        given, source = super().min_member(obj, templates, total)
        return (given, source) if source != "all replicas" else ray_minimum(self._found(obj))

    def state(self, status: Mapping[str, Any] | None) -> JobState:
        return ray_state(status)

    def fleet_word(
        self, word: Literal["Restarting", "Failed"], reason: str, message: str
    ) -> dict[str, Any]:
        """`state: failed` when fleet gives up; the failed copy's state goes when it moves."""
        if word == "Failed":
            return {"state": "failed", "reason": message}
        return {"state": None, "reason": None}

    def pods_of(self, member_obj: Mapping[str, Any]) -> str | None:
        return self.pod_selector(str((member_obj.get("metadata") or {}).get("name")))


RAYCLUSTER = RayClusterAdapter()
