"""Which policy governs a workload, decided the way Karmada decides it; pure functions only.

Order (Karmada's detector): a PropagationPolicy in the workload's namespace beats any
ClusterPropagationPolicy; within a kind the higher explicit `priority` wins, then the more
specific selector (name > labelSelector > apiVersion/kind only), then the alphabetically first
name. A claimed workload stays with its policy unless a policy with `preemption: Always` may take
it. Only a winner with `customSchedulingType: Gang` is fleet's to act on; any other winner still
governs the workload (fleet must not fall through to a lower-ranked Gang policy).

Selector semantics are the core's (`fleet.core.selectors`, via `fleet.api.rules`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final

from fleet.api._binding import PolicyRef
from fleet.api._meta import LabelSelector
from fleet.api._policy import (
    GANG,
    ClusterPropagationPolicy,
    PropagationPolicy,
    PropagationSpec,
    ResourceSelector,
)
from fleet.api.rules import core_label_selector

__all__ = [
    "DEFAULT_RESERVED_NAMESPACES",
    "AnyPolicy",
    "PolicyMatch",
    "Specificity",
    "WorkloadRef",
    "label_selector_matches",
    "match_policy",
    "policy_ref",
    "policy_specificity",
    "selector_specificity",
]

AnyPolicy = PropagationPolicy | ClusterPropagationPolicy

DEFAULT_RESERVED_NAMESPACES: Final = frozenset(
    {"kube-system", "kube-public", "kube-node-lease", "fleet-system"}
)
"""Namespaces a ClusterPropagationPolicy never selects from (a PropagationPolicy placed in one
still works: that is explicit intent)."""


class Specificity(IntEnum):
    """How precisely a selector matched; Karmada's implicit priority."""

    NONE = 0
    KIND = 1
    LABEL_SELECTOR = 2
    NAME = 3


@dataclass(frozen=True)
class WorkloadRef:
    """What policy matching needs to know about a workload."""

    api_version: str
    kind: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> WorkloadRef:
        """From a Kubernetes object as a dict (what kubectl get -o json returns)."""
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion") or ""),
            kind=str(obj.get("kind") or ""),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            labels=dict(meta.get("labels") or {}),
        )


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics (evaluated by the core); None matches everything."""
    converted = core_label_selector(selector)
    return converted is None or converted.matches(labels)


def selector_specificity(
    selector: ResourceSelector, workload: WorkloadRef, policy_namespace: str | None = None
) -> Specificity:
    """How one resource selector matches the workload (NONE if it does not).

    `policy_namespace` is set for a PropagationPolicy, which only selects in its own namespace.
    """
    if selector.api_version != workload.api_version or selector.kind != workload.kind:
        return Specificity.NONE
    if policy_namespace is not None and workload.namespace != policy_namespace:
        return Specificity.NONE
    if selector.namespace and selector.namespace != workload.namespace:
        return Specificity.NONE
    if selector.name:
        return Specificity.NAME if selector.name == workload.name else Specificity.NONE
    if selector.label_selector is None:
        return Specificity.KIND
    if label_selector_matches(selector.label_selector, workload.labels):
        return Specificity.LABEL_SELECTOR
    return Specificity.NONE


def policy_specificity(
    policy: AnyPolicy,
    workload: WorkloadRef,
    reserved_namespaces: Collection[str] = DEFAULT_RESERVED_NAMESPACES,
) -> Specificity:
    """The best match among the policy's selectors (NONE if none matches or it is being deleted)."""
    if policy.metadata.deletion_timestamp is not None:
        return Specificity.NONE
    if isinstance(policy, PropagationPolicy):
        ns: str | None = policy.metadata.namespace or ""
    else:
        ns = None
        if workload.namespace in reserved_namespaces:
            return Specificity.NONE
    return max(
        (selector_specificity(s, workload, ns) for s in policy.spec.resource_selectors),
        default=Specificity.NONE,
    )


def policy_ref(policy: AnyPolicy) -> PolicyRef:
    """The reference a GangBinding records for the policy."""
    return PolicyRef(
        kind=policy.kind,
        namespace=policy.metadata.namespace if isinstance(policy, PropagationPolicy) else None,
        name=policy.metadata.name or "",
    )


def _same_policy(policy: AnyPolicy, ref: PolicyRef) -> bool:
    return (
        policy.kind == ref.kind
        and (policy.metadata.name or "") == ref.name
        and (
            not isinstance(policy, PropagationPolicy)
            or (policy.metadata.namespace or "") == (ref.namespace or "")
        )
    )


@dataclass(frozen=True)
class PolicyMatch:
    """The outcome of policy matching, with a sentence fit for an event or a log line."""

    policy: AnyPolicy | None
    specificity: Specificity
    gang: bool
    reason: str

    @property
    def ref(self) -> PolicyRef | None:
        return policy_ref(self.policy) if self.policy is not None else None

    @property
    def spec(self) -> PropagationSpec | None:
        return self.policy.spec if self.policy is not None else None


def _describe(policy: AnyPolicy) -> str:
    ns = policy.metadata.namespace
    where = f"{ns}/" if isinstance(policy, PropagationPolicy) and ns else ""
    return f"{policy.kind} {where}{policy.metadata.name}"


def _ranked(
    policies: Iterable[AnyPolicy], workload: WorkloadRef, reserved: Collection[str]
) -> list[tuple[AnyPolicy, Specificity]]:
    scored = [(p, policy_specificity(p, workload, reserved)) for p in policies]
    matched: list[tuple[AnyPolicy, Specificity]] = [
        (p, s) for p, s in scored if s is not Specificity.NONE
    ]
    matched.sort(key=lambda ps: (-ps[0].spec.priority, -ps[1], ps[0].metadata.name or ""))
    return matched


def _result(policy: AnyPolicy, spec: Specificity, how: str) -> PolicyMatch:
    if policy.spec.is_gang:
        return PolicyMatch(
            policy, spec, True, f"{_describe(policy)} {how} and asks for Gang scheduling"
        )
    cst = policy.spec.custom_scheduling_type
    detail = f"customSchedulingType is {cst!r}" if cst else "it sets no customSchedulingType"
    return PolicyMatch(
        policy,
        spec,
        False,
        f"{_describe(policy)} {how}, but {detail}; only {GANG!r} policies are fleet's to act on",
    )


def match_policy(
    workload: WorkloadRef,
    propagation_policies: Iterable[PropagationPolicy],
    cluster_propagation_policies: Iterable[ClusterPropagationPolicy],
    *,
    claimed_by: PolicyRef | None = None,
    reserved_namespaces: Collection[str] = DEFAULT_RESERVED_NAMESPACES,
) -> PolicyMatch:
    """The policy that governs `workload`, and whether fleet acts on it.

    `claimed_by` is the policy that already claimed the workload (from its fleet.dev/policy
    annotation or its binding). It keeps the workload while it still matches, unless a policy
    with preemption Always outranks it: a PropagationPolicy takes a workload from any
    ClusterPropagationPolicy and from a lower-priority PropagationPolicy; a
    ClusterPropagationPolicy only from a lower-priority ClusterPropagationPolicy.
    """
    pps = _ranked(propagation_policies, workload, reserved_namespaces)
    cpps = _ranked(cluster_propagation_policies, workload, reserved_namespaces)

    if claimed_by is not None:
        current = next(((p, s) for p, s in pps + cpps if _same_policy(p, claimed_by)), None)
        if current is not None:
            cur, cur_spec = current
            cur_is_pp = isinstance(cur, PropagationPolicy)
            for cand, cand_spec in pps + cpps:
                if cand is cur or cand.spec.preemption != "Always":
                    continue
                if isinstance(cand, PropagationPolicy):
                    wins = not cur_is_pp or cand.spec.priority > cur.spec.priority
                else:
                    wins = not cur_is_pp and cand.spec.priority > cur.spec.priority
                if wins:
                    return _result(cand, cand_spec, f"preempts {_describe(cur)}")
            return _result(cur, cur_spec, "keeps its claim")

    if pps:
        return _result(pps[0][0], pps[0][1], "matches")
    if cpps:
        return _result(cpps[0][0], cpps[0][1], "matches")
    return PolicyMatch(
        None,
        Specificity.NONE,
        False,
        f"no PropagationPolicy or ClusterPropagationPolicy selects {workload.kind} "
        f"{workload.namespace + '/' if workload.namespace else ''}{workload.name}",
    )
