"""The fleet's policies, kept in memory from their watch, and what they mean for placement.

A policy that fails to parse (an older CRD, a hand-edited object) is reported and skipped; it
never stops the controller or the jobs other policies govern.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from fleet.api import (
    ClusterPropagationPolicy,
    PolicyMatch,
    PolicyRef,
    PropagationPolicy,
    PropagationSpec,
    WorkloadRef,
    cluster_affinity_spec,
    match_policy,
)
from fleet.core.placement import ClusterAffinity
from fleet.core.selectors import LabelSelector, Requirement

log = logging.getLogger(__name__)

AnyPolicy = PropagationPolicy | ClusterPropagationPolicy


class PolicyIndex:
    def __init__(self) -> None:
        self._namespaced: dict[tuple[str, str], PropagationPolicy] = {}
        self._cluster: dict[str, ClusterPropagationPolicy] = {}
        #: "<Kind> <ns/name>" -> why it is ignored.
        self.problems: dict[str, str] = {}

    def upsert(self, obj: Mapping[str, Any]) -> list[str]:
        """Index a policy; returns its semantic problems (empty if it is fine)."""
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        label = f"{kind} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")
        try:
            policy: AnyPolicy
            if kind == "PropagationPolicy":
                policy = PropagationPolicy.from_dict(obj)
            else:
                policy = ClusterPropagationPolicy.from_dict(obj)
        except ValidationError as e:
            why = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
            )
            self.problems[label] = why
            self.remove(str(kind), meta.get("namespace"), meta.get("name", ""))
            log.warning("ignoring %s: %s", label, why)
            return [why]
        if meta.get("deletionTimestamp"):
            self.remove(str(kind), meta.get("namespace"), meta.get("name", ""))
            return []
        self.problems.pop(label, None)
        if isinstance(policy, PropagationPolicy):
            self._namespaced[(meta.get("namespace", ""), meta["name"])] = policy
        else:
            self._cluster[meta["name"]] = policy
        return [str(p) for p in policy.spec.problems()]

    def remove(self, kind: str, namespace: str | None, name: str) -> None:
        if kind == "PropagationPolicy":
            self._namespaced.pop((namespace or "", name), None)
        else:
            self._cluster.pop(name, None)

    def match(
        self, workload: Mapping[str, Any], claimed_by: PolicyRef | None = None
    ) -> PolicyMatch:
        ref = WorkloadRef.from_object(workload)
        local = [p for (ns, _), p in self._namespaced.items() if ns == ref.namespace]
        return match_policy(ref, local, list(self._cluster.values()), claimed_by=claimed_by)

    def get(self, ref: PolicyRef) -> AnyPolicy | None:
        if ref.kind == "PropagationPolicy":
            return self._namespaced.get((ref.namespace or "", ref.name))
        return self._cluster.get(ref.name)


def core_affinity(spec: PropagationSpec | None) -> ClusterAffinity | None:
    """The policy's clusterAffinity as the placement engine's plain dataclass."""
    raw = cluster_affinity_spec(spec)
    if not any(raw.get(k) for k in raw):
        return None

    def requirements(items: Any) -> tuple[Requirement, ...]:
        return tuple(
            Requirement(e["key"], e["operator"], tuple(e.get("values") or ())) for e in items or ()
        )

    labels = raw.get("match_labels") or {}
    expressions = requirements(raw.get("match_expressions"))
    selector = LabelSelector.of(labels, *expressions) if labels or expressions else None
    return ClusterAffinity(
        cluster_names=tuple(raw.get("cluster_names") or ()),
        exclude=tuple(raw.get("exclude") or ()),
        label_selector=selector,
        field_selector=requirements(raw.get("field_expressions")),
    )
