"""What a member cluster reports about its nodes and pods, reduced to what placement needs.

The converters take the plain dicts a watch delivers and keep only scheduling facts, so a
snapshot holds small immutable records instead of whole API objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.core.errors import FieldError, ObjectError
from fleet.core.requests import pod_requests
from fleet.core.resources import EMPTY, Resources
from fleet.core.selectors import parse_string_map
from fleet.core.taints import Taint, parse_taints

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node as the scheduler sees it: allocatable (with `pods`), labels, taints, cordon."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A pod's claim on a node. Only bound, non-terminal pods hold resources (kube-scheduler's
    informer skips Succeeded and Failed pods)."""

    uid: str
    namespace: str
    name: str
    node_name: str | None
    requests: Resources
    terminal: bool = False
    #: Which fleet placement this pod belongs to (value of the owner label), if any.
    owner_key: str | None = None
    #: Why the member's scheduler did not place it: the message of its `PodScheduled=False`
    #: condition while it is not bound to a node (None: bound, finished, or not refused yet).
    unschedulable: str | None = None

    @property
    def holds_resources(self) -> bool:
        return self.node_name is not None and not self.terminal


def node_from_k8s(obj: Mapping[str, Any]) -> NodeInfo:
    """Convert a v1 Node; raises `ObjectError` naming the node and field on malformed input."""
    meta = _meta(obj)
    name = str(meta.get("name") or "")
    try:
        spec = _section(obj, "spec")
        status = _section(obj, "status")
        # kube-scheduler uses allocatable only; a node that reports none offers nothing.
        allocatable = Resources.parse(status.get("allocatable"), field="status.allocatable")
        return NodeInfo(
            name=name,
            allocatable=allocatable,
            labels=parse_string_map(meta.get("labels"), "metadata.labels"),
            taints=parse_taints(spec.get("taints"), "spec.taints"),
            unschedulable=bool(spec.get("unschedulable", False)),
        )
    except FieldError as err:
        raise ObjectError(f"Node {name}", err.field, err.reason) from err


def pod_from_k8s(obj: Mapping[str, Any], owner_label: str | None = None) -> PodInfo:
    """Convert a v1 Pod. `owner_label` names the label that ties a pod to a fleet placement
    (e.g. `fleet.dev/binding-uid`); its value becomes `owner_key`."""
    meta = _meta(obj)
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "")
    try:
        spec = _section(obj, "spec")
        status = _section(obj, "status")
        labels = meta.get("labels") or {}
        owner = labels.get(owner_label) if owner_label and isinstance(labels, Mapping) else None
        terminal = status.get("phase") in TERMINAL_PHASES
        return PodInfo(
            uid=str(meta.get("uid") or f"{namespace}/{name}"),
            namespace=namespace,
            name=name,
            node_name=str(spec["nodeName"]) if spec.get("nodeName") else None,
            # A finished pod's requests are never used; skip parsing them.
            requests=EMPTY if terminal else pod_requests(spec, "spec"),
            terminal=terminal,
            owner_key=str(owner) if owner is not None else None,
            unschedulable=None if terminal or spec.get("nodeName") else _refused(status),
        )
    except FieldError as err:
        raise ObjectError(f"Pod {namespace}/{name}", err.field, err.reason) from err


def _refused(status: Mapping[str, Any]) -> str | None:
    """The scheduler's word on a pod it did not place: its `PodScheduled=False` condition's
    message (else its reason), as kube-scheduler, coscheduling, Koordinator and the native
    gang plugin all write it; None when there is no such condition."""
    for cond in status.get("conditions") or ():
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
        ):
            return str(cond.get("message") or cond.get("reason") or "Unschedulable")
    return None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(key, f"expected an object, got {value!r}")
    return value
