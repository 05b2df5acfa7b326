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
    WorkloadRef,
    match_policy,
)

log = logging.getLogger(__name__)

AnyPolicy = PropagationPolicy | ClusterPropagationPolicy


class PolicyIndex:
    def __init__(self) -> None:
        self._namespaced: dict[tuple[str, str], PropagationPolicy] = {}
        self._cluster: dict[str, ClusterPropagationPolicy] = {}
        #: "<Kind> <ns/name>" -> why it is ignored.
        self.problems: dict[str, str] = {}

    def upsert(self, obj: Mapping[str, Any]) -> tuple[list[str], list[str]]:
        """Index a policy; returns (its semantic problems, the fields fleet does not act on);
        both empty when it is fine."""
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
            self.remove(str(kind), meta.get("namespace"), meta.get("name") or "")
            log.warning("ignoring %s: %s", label, why)
            return [why], []
        if meta.get("deletionTimestamp"):
            self.remove(str(kind), meta.get("namespace"), meta.get("name") or "")
            return [], []
        self.problems.pop(label, None)
        if isinstance(policy, PropagationPolicy):
            self._namespaced[(meta.get("namespace") or "", meta["name"])] = policy
        else:
            self._cluster[meta["name"]] = policy
        ignored = policy.spec.not_acted_on() if policy.spec.is_gang else []
        return [str(p) for p in policy.spec.problems()], ignored

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
