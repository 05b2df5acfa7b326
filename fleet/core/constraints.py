"""Where a pod may run, independent of resources: nodeSelector, required affinity, tolerations.

These are the non-resource filters of kube-scheduler that decide feasibility (NodeUnschedulable,
NodeAffinity, TaintToleration). Preferred affinity and PreferNoSchedule only move scores, so they
cannot make a gang infeasible and are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.core.errors import FieldError
from fleet.core.selectors import NodeSelector, parse_string_map
from fleet.core.taints import (
    Taint,
    Toleration,
    parse_tolerations,
    tolerates_unschedulable,
    untolerated,
)


@dataclass(frozen=True, slots=True)
class PodConstraints:
    """The placement rules of one pod template; hashable so verdicts can be cached per node kind."""

    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: NodeSelector | None = None
    tolerations: tuple[Toleration, ...] = ()

    @classmethod
    def of(
        cls,
        node_selector: Mapping[str, str] | None = None,
        affinity: NodeSelector | None = None,
        tolerations: Sequence[Toleration] = (),
    ) -> PodConstraints:
        return cls(tuple(sorted((node_selector or {}).items())), affinity, tuple(tolerations))

    @classmethod
    def from_pod_spec(cls, spec: Mapping[str, Any], field: str) -> PodConstraints:
        """Read the constraints of a pod spec; `field` is the path of that spec, for errors."""
        selector = parse_string_map(spec.get("nodeSelector"), f"{field}.nodeSelector")
        affinity = None
        aff = spec.get("affinity")
        if aff is not None:
            if not isinstance(aff, Mapping):
                raise FieldError(f"{field}.affinity", f"expected an object, got {aff!r}")
            node_aff = aff.get("nodeAffinity")
            if node_aff is not None:
                if not isinstance(node_aff, Mapping):
                    raise FieldError(f"{field}.affinity.nodeAffinity", "expected an object")
                required = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
                if required is not None:
                    affinity = NodeSelector.parse(
                        required,
                        f"{field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                    )
        tolerations = parse_tolerations(spec.get("tolerations"), f"{field}.tolerations")
        return cls.of(selector, affinity, tolerations)

    def rejection(
        self,
        labels: Mapping[str, str],
        taints: Sequence[Taint],
        unschedulable: bool,
        node_name: str = "",
    ) -> str | None:
        """Why a node with these properties cannot take the pod (a plural-subject phrase such as
        `are cordoned`), or None when it can. Checked in kube-scheduler's filter order."""
        if unschedulable and not tolerates_unschedulable(self.tolerations):
            return "are cordoned"
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return f"lack label {key}={value}"
        if self.affinity is not None and not self.affinity.matches(labels, node_name):
            return "fail required node affinity"
        taint = untolerated(self.tolerations, taints)
        if taint is not None:
            return f"have untolerated taint {taint}"
        return None

    def needs_node_identity(self, identity_keys: frozenset[str]) -> bool:
        """True when the rules look at per-node facts (its name, or labels such as hostname that
        are unique per node); such rules cannot be judged once per group of look-alike nodes."""
        keys = {key for key, _ in self.node_selector}
        if self.affinity is not None:
            if self.affinity.uses_fields():
                return True
            keys |= self.affinity.label_keys()
        return bool(keys & identity_keys)

    def describe(self) -> str:
        parts = []
        if self.node_selector:
            parts.append("nodeSelector " + ",".join(f"{k}={v}" for k, v in self.node_selector))
        if self.affinity is not None:
            parts.append(f"affinity {self.affinity}")
        if self.tolerations:
            parts.append(f"{len(self.tolerations)} tolerations")
        return "; ".join(parts) or "no constraints"


ANYWHERE = PodConstraints()
