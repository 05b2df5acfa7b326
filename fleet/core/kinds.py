"""The workload kinds fleet can place, one declarative entry each.

An entry says where the pod templates live and how many pods each stands for; everything else
(requests math, gang minimum, errors) is generic. Adding a kind is adding one line to `KINDS`.
Role order matters: it is the order in which the minimum set is filled when a gang may start
with fewer pods than it has (coordinators first, then workers), see `workload.Gang.minimum`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.core import kind_jobset, kind_raycluster, kind_rayjob, kind_trainjob
from fleet.core.errors import FieldError
from fleet.core.jobstate import JobState, job_state
from fleet.core.podset import PodSet, job_pods

#: Where Kubeflow training jobs keep their gang minimum.
RUN_POLICY_MIN_AVAILABLE = "spec.runPolicy.schedulingPolicy.minAvailable"


@dataclass(frozen=True, slots=True)
class RoleMap:
    """Kubeflow layout: `field` maps role -> {replicas (default 1), template}."""

    field: str
    roles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SingleTemplate:
    """One pod template at `field`; `count(spec)` says how many pods run at once."""

    field: str
    count: Callable[[Mapping[str, Any]], int]
    component: str = "pod"


#: Objects a kind's gang is read from besides the job itself, as the shell fetched them from
#: the fleet: (kind, namespace or "", name) -> the object, or None when it does not exist.
Needed = Mapping[tuple[str, str, str], Mapping[str, Any] | None]


@dataclass(frozen=True, slots=True)
class PodSets:
    """A kind whose pod templates are found by code: `read(obj, needed)` lists them in role
    order, raising FieldError (naming the field) on bad input. `minimum_source` says, for
    explanations, where the gang minimum comes from when the sets give one. `needs(obj)` names
    the other objects (apiVersion, kind, namespace, name) the gang is read from (a TrainJob's
    runtime); such a kind's pod templates are not in the job, so fleet labels none."""

    read: Callable[[Mapping[str, Any], Needed], list[PodSet]]
    minimum_source: str = "all replicas"
    needs: Callable[[Mapping[str, Any]], list[tuple[str, str, str, str]]] | None = None


#: Reads the one state word of a member copy from its status (see `jobstate`).
StateReader = Callable[[Mapping[str, Any] | None], JobState]


@dataclass(frozen=True, slots=True)
class Kind:
    api_version: str
    kind: str
    layout: RoleMap | SingleTemplate | PodSets
    min_available: str | None = RUN_POLICY_MIN_AVAILABLE
    #: The member copy's state (default: Kubeflow-style conditions, batch Job's active pods).
    state: StateReader = job_state
    #: Status fields copied from the member copy to the fleet object as they are (conditions
    #: are always mirrored, with fleet's own in front).
    mirrored_fields: tuple[str, ...] = (
        "replicaStatuses",
        "startTime",
        "completionTime",
        "lastReconcileTime",
    )
    #: On a coscheduling member fleet writes this kind's gang itself, a scheduler-plugins
    #: PodGroup and its label on every template: the member's operator makes none for it.
    fleet_pod_group: bool = False
    #: The label selector of the pods the member's operator makes for a copy (from the copy:
    #: a RayJob's pods are its RayCluster's); None for the training operator's pod names.
    pods_of: Callable[[Mapping[str, Any]], str | None] | None = None
    #: The pod label naming a pod's role (replicated job, head or worker group).
    role_label: str | None = None


KINDS: tuple[Kind, ...] = (
    Kind(
        "kubeflow.org/v1", "PyTorchJob", RoleMap("spec.pytorchReplicaSpecs", ("Master", "Worker"))
    ),
    Kind(
        "kubeflow.org/v1",
        "TFJob",
        RoleMap("spec.tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator")),
    ),
    Kind("kubeflow.org/v1", "MPIJob", RoleMap("spec.mpiReplicaSpecs", ("Launcher", "Worker"))),
    Kind("kubeflow.org/v2beta1", "MPIJob", RoleMap("spec.mpiReplicaSpecs", ("Launcher", "Worker"))),
    Kind("kubeflow.org/v1", "XGBoostJob", RoleMap("spec.xgbReplicaSpecs", ("Master", "Worker"))),
    Kind("kubeflow.org/v1", "PaddleJob", RoleMap("spec.paddleReplicaSpecs", ("Master", "Worker"))),
    Kind("kubeflow.org/v1", "JAXJob", RoleMap("spec.jaxReplicaSpecs", ("Worker",))),
    Kind("batch/v1", "Job", SingleTemplate("spec.template", job_pods), min_available=None),
    Kind(
        kind_jobset.API_VERSION,
        kind_jobset.KIND,
        PodSets(lambda obj, _needed: kind_jobset.pod_sets(obj)),
        min_available=None,
        state=kind_jobset.state,
        mirrored_fields=kind_jobset.MIRRORED_FIELDS,
        fleet_pod_group=True,
        pods_of=kind_jobset.pods_of,
        role_label=kind_jobset.ROLE_LABEL,
    ),
    Kind(
        kind_trainjob.API_VERSION,
        kind_trainjob.KIND,
        PodSets(kind_trainjob.pod_sets_with, needs=kind_trainjob.needs),
        min_available=None,
        state=kind_trainjob.state,
        mirrored_fields=kind_trainjob.MIRRORED_FIELDS,
    ),
    Kind(
        kind_rayjob.API_VERSION,
        kind_rayjob.KIND,
        PodSets(
            lambda obj, _needed: kind_rayjob.pod_sets(obj),
            "the head and each worker group's minReplicas",
        ),
        min_available=None,
        state=kind_rayjob.state,
        mirrored_fields=kind_rayjob.MIRRORED_FIELDS,
        fleet_pod_group=True,
        pods_of=kind_rayjob.pods_of,
        role_label=kind_raycluster.ROLE_LABEL,
    ),
    Kind(
        kind_raycluster.API_VERSION,
        kind_raycluster.KIND,
        PodSets(
            lambda obj, _needed: kind_raycluster.pod_sets(obj),
            "the head and each worker group's minReplicas",
        ),
        min_available=None,
        state=kind_raycluster.state,
        mirrored_fields=kind_raycluster.MIRRORED_FIELDS,
        fleet_pod_group=True,
        pods_of=kind_raycluster.pods_of,
        role_label=kind_raycluster.ROLE_LABEL,
    ),
)

_BY_TYPE = {(k.api_version, k.kind): k for k in KINDS}


def find_kind(api_version: str, kind: str) -> Kind | None:
    return _BY_TYPE.get((api_version, kind))


def state_of(api_version: str, kind: str, status: Mapping[str, Any] | None) -> JobState:
    """The state of a job of any kind from its status (Kubeflow-style for unknown kinds)."""
    found = find_kind(api_version, kind)
    return (found.state if found else job_state)(status)


def supported() -> list[str]:
    return [f"{k.api_version}/{k.kind}" for k in KINDS]


def pod_templates(kind: Kind, obj: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """`(role, template)` for every pod template of `obj`; the dicts are `obj`'s own, so a
    caller holding a copy can edit them in place."""
    if isinstance(kind.layout, PodSets):
        if kind.layout.needs is not None:
            return []
        try:
            return [(s.name, s.template) for s in kind.layout.read(obj, {})]
        except FieldError:
            return []
    spec_path = kind.layout.field.split(".")
    node: Any = obj
    for part in spec_path:
        node = node.get(part) if isinstance(node, Mapping) else None
    if node is None:
        return []
    if isinstance(kind.layout, SingleTemplate):
        return [(kind.layout.component, node)] if isinstance(node, dict) else []
    out = []
    for role, replica in node.items():
        template = replica.get("template") if isinstance(replica, dict) else None
        if isinstance(template, dict):
            out.append((role, template))
    return out
