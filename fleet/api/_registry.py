"""Dispatch from apiVersion/kind to the model, for code that reads arbitrary fleet objects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fleet.api._binding import GangBinding
from fleet.api._cluster import MemberCluster
from fleet.api._meta import KubeResource
from fleet.api._policy import ClusterPropagationPolicy, PropagationPolicy
from fleet.api._queue import Queue
from fleet.api._queueunit import QueueUnit
from fleet.api._quota import ElasticQuotaTree

__all__ = ["RESOURCES", "FleetObject", "parse_list", "parse_object"]

FleetObject = (
    PropagationPolicy
    | ClusterPropagationPolicy
    | MemberCluster
    | GangBinding
    | ElasticQuotaTree
    | Queue
    | QueueUnit
)

RESOURCES: Final[tuple[type[KubeResource], ...]] = (
    PropagationPolicy,
    ClusterPropagationPolicy,
    MemberCluster,
    GangBinding,
    ElasticQuotaTree,
    Queue,
    QueueUnit,
)
"""Every top-level resource fleet serves, in CRD order (the last three are ACK's Kube Queue
kinds, in their own groups)."""

_BY_KIND: Final[dict[tuple[str, str], type[KubeResource]]] = {
    (r.crd.api_version, r.crd.kind): r for r in RESOURCES
}


def parse_object(obj: Mapping[str, Any]) -> FleetObject:
    """Parse one fleet object by its apiVersion and kind (ValueError for anything else)."""
    key = (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    model = _BY_KIND.get(key)
    if model is None:
        known = ", ".join(f"{v} {k}" for v, k in _BY_KIND)
        raise ValueError(
            f"not a fleet object: apiVersion={key[0]!r} kind={key[1]!r} (known: {known})"
        )
    parsed = model.model_validate(obj)
    assert isinstance(
        parsed,
        PropagationPolicy
        | ClusterPropagationPolicy
        | MemberCluster
        | GangBinding
        | ElasticQuotaTree
        | Queue
        | QueueUnit,
    )
    return parsed


def parse_list(obj: Mapping[str, Any]) -> list[FleetObject]:
    """Parse `kubectl get ... -o json` output: a List / <Kind>List, or a single object."""
    if "items" in obj and str(obj.get("kind") or "").endswith("List"):
        return [parse_object(item) for item in obj.get("items") or []]
    return [parse_object(obj)]
