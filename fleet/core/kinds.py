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

from fleet.core.errors import FieldError

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


@dataclass(frozen=True, slots=True)
class Kind:
    api_version: str
    kind: str
    layout: RoleMap | SingleTemplate
    min_available: str | None = RUN_POLICY_MIN_AVAILABLE


def optional_count(spec: Mapping[str, Any], key: str, field: str) -> int | None:
    """A non-negative integer field of `spec`, or None when absent."""
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"{field}.{key}", f"expected an integer, got {value!r}")
    if value < 0:
        raise FieldError(f"{field}.{key}", f"must not be negative, got {value}")
    return value


def job_pods(spec: Mapping[str, Any]) -> int:
    """Pods a batch/v1 Job runs at once: the Job controller's `wantActive` before any success.

    parallelism (default 1), capped by completions when set (Indexed and NonIndexed alike)."""
    parallelism = optional_count(spec, "parallelism", "spec")
    completions = optional_count(spec, "completions", "spec")
    pods = 1 if parallelism is None else parallelism
    return pods if completions is None else min(pods, completions)


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
)

_BY_TYPE = {(k.api_version, k.kind): k for k in KINDS}


def find_kind(api_version: str, kind: str) -> Kind | None:
    return _BY_TYPE.get((api_version, kind))


def supported() -> list[str]:
    return [f"{k.api_version}/{k.kind}" for k in KINDS]


def pod_templates(kind: Kind, obj: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """`(role, template)` for every pod template of `obj`; the dicts are `obj`'s own, so a
    caller holding a copy can edit them in place."""
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
