"""Which policy governs a workload, decided the way Karmada decides it; pure functions only.

Order (Karmada's detector): a PropagationPolicy in the workload's namespace beats any
ClusterPropagationPolicy; within a kind the higher explicit `priority` wins, then the more
specific selector (name > labelSelector > apiVersion/kind only), then the alphabetically first
name. A claimed workload stays with its policy unless a policy with `preemption: Always` may take
it. Only a winner with `customSchedulingType: Gang` is fleet's to act on; any other winner still
governs the workload (fleet must not fall through to a lower-ranked Gang policy).

The affinity helpers turn a policy into plain dicts and booleans so the placement engine does not
need pydantic.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final

from fleet.api._binding import PolicyRef
from fleet.api._meta import LabelSelector, Taint, Toleration
from fleet.api._policy import (
    GANG,
    ClusterAffinity,
    ClusterPropagationPolicy,
    PropagationPolicy,
    PropagationSpec,
    ResourceSelector,
)
from fleet.api.constants import FIELD_SELECTOR_LABELS

__all__ = [
    "DEFAULT_RESERVED_NAMESPACES",
    "AnyPolicy",
    "PolicyMatch",
    "Specificity",
    "WorkloadRef",
    "affinity_matches",
    "cluster_affinity_spec",
    "cluster_affinity_specs",
    "cluster_fields",
    "cluster_tolerations",
    "label_selector_matches",
    "match_policy",
    "policy_ref",
    "policy_specificity",
    "selector_specificity",
    "tolerates",
    "untolerated_taints",
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
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            labels=dict(meta.get("labels") or {}),
        )


def _requirement_matches(
    key: str, operator: str, values: Sequence[str], labels: Mapping[str, str]
) -> bool:
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        # NodeSelectorRequirement only: one integer value, compared numerically.
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, IndexError, ValueError):
            return False
        return have > want if operator == "Gt" else have < want
    return False


def label_selector_matches(
    selector: LabelSelector | Mapping[str, Any] | None, labels: Mapping[str, str]
) -> bool:
    """metav1.LabelSelector semantics; None or an empty selector matches everything."""
    if selector is None:
        return True
    if isinstance(selector, LabelSelector):
        selector = selector.to_dict()
    for k, v in (selector.get("matchLabels") or selector.get("match_labels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or selector.get("match_expressions") or []:
        if not _requirement_matches(
            expr["key"], expr["operator"], expr.get("values") or [], labels
        ):
            return False
    return True


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


# --- Cluster affinity as plain data ---------------------------------------------------------


def _affinity_dict(affinity: ClusterAffinity | None) -> dict[str, Any]:
    """One affinity as plain data; an empty list means "no restriction" (Karmada's rule)."""
    if affinity is None:
        return {
            "cluster_names": [],
            "exclude": [],
            "match_labels": {},
            "match_expressions": [],
            "field_expressions": [],
        }
    sel = affinity.label_selector
    fields = affinity.field_selector
    return {
        "cluster_names": list(affinity.cluster_names or []),
        "exclude": list(affinity.exclude or []),
        "match_labels": dict((sel.match_labels or {}) if sel else {}),
        "match_expressions": [
            {"key": e.key, "operator": e.operator, "values": list(e.values or [])}
            for e in ((sel.match_expressions or []) if sel else [])
        ],
        "field_expressions": [
            {"key": e.key, "operator": e.operator, "values": list(e.values or [])}
            for e in ((fields.match_expressions or []) if fields else [])
        ],
    }


def cluster_fields(labels: Mapping[str, str]) -> dict[str, str]:
    """A cluster's Karmada fields (provider, region, zone), which fleet keeps as labels
    (constants.FIELD_SELECTOR_LABELS); what `field_expressions` are evaluated against."""
    return {f: labels[lbl] for f, lbl in FIELD_SELECTOR_LABELS.items() if lbl in labels}


def _spec_of(policy: AnyPolicy | PropagationSpec | None) -> PropagationSpec | None:
    if policy is None or isinstance(policy, PropagationSpec):
        return policy
    return policy.spec


def cluster_affinity_specs(policy: AnyPolicy | PropagationSpec | None) -> list[dict[str, Any]]:
    """Every cluster group in preference order: clusterAffinities' terms (each with an
    `affinity_name`), or the single clusterAffinity, or one unrestricted group."""
    spec = _spec_of(policy)
    placement = spec.placement if spec else None
    if placement and placement.cluster_affinities:
        return [
            {**_affinity_dict(t), "affinity_name": t.affinity_name}
            for t in placement.cluster_affinities
        ]
    return [_affinity_dict(placement.cluster_affinity if placement else None)]


def cluster_affinity_spec(policy: AnyPolicy | PropagationSpec | None) -> dict[str, Any]:
    """The policy's cluster affinity as a plain dict with keys cluster_names, exclude,
    match_labels, match_expressions (labelSelector) and field_expressions (fieldSelector, keys
    provider/region/zone; see cluster_fields), each expression a dict of key, operator, values.

    With clusterAffinities this is the first (preferred) group; use cluster_affinity_specs for
    the fallbacks.
    """
    first = cluster_affinity_specs(policy)[0]
    first.pop("affinity_name", None)
    return first


def affinity_matches(spec: Mapping[str, Any], cluster_name: str, labels: Mapping[str, str]) -> bool:
    """Whether a cluster satisfies an affinity dict from cluster_affinity_spec."""
    if cluster_name in (spec.get("exclude") or ()):
        return False
    names = spec.get("cluster_names") or ()
    if names and cluster_name not in names:
        return False
    return label_selector_matches(
        {
            "matchLabels": spec.get("match_labels") or {},
            "matchExpressions": spec.get("match_expressions") or [],
        },
        labels,
    ) and label_selector_matches(
        {"matchExpressions": spec.get("field_expressions") or []}, cluster_fields(labels)
    )


# --- Taints and tolerations ----------------------------------------------------------------


def cluster_tolerations(policy: AnyPolicy | PropagationSpec | None) -> list[dict[str, Any]]:
    """The policy's clusterTolerations as camelCase dicts (the corev1.Toleration JSON)."""
    spec = _spec_of(policy)
    placement = spec.placement if spec else None
    return [t.to_dict() for t in (placement.cluster_tolerations or [])] if placement else []


def _as_dict(obj: Taint | Toleration | Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.to_dict() if isinstance(obj, Taint | Toleration) else obj


def tolerates(toleration: Toleration | Mapping[str, Any], taint: Taint | Mapping[str, Any]) -> bool:
    """corev1 ToleratesTaint semantics."""
    tol, tnt = _as_dict(toleration), _as_dict(taint)
    effect = tol.get("effect") or ""
    if effect and effect != tnt.get("effect"):
        return False
    operator = tol.get("operator") or "Equal"
    key = tol.get("key") or ""
    if not key:
        return operator == "Exists"
    if key != tnt.get("key"):
        return False
    if operator == "Exists":
        return True
    return (tol.get("value") or "") == (tnt.get("value") or "")


def untolerated_taints(
    taints: Iterable[Taint | Mapping[str, Any]],
    tolerations: Sequence[Toleration | Mapping[str, Any]],
    effects: Collection[str] = ("NoSchedule", "NoExecute"),
) -> list[Mapping[str, Any]]:
    """Taints with one of `effects` that no toleration tolerates (empty: the cluster is usable)."""
    out: list[Mapping[str, Any]] = []
    for taint in taints:
        t = _as_dict(taint)
        if t.get("effect") in effects and not any(tolerates(tol, t) for tol in tolerations):
            out.append(t)
    return out
