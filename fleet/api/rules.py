"""The policy's placement rules as the placement engine's values, converted in one place.

Selectors, taints and tolerations are evaluated by `fleet.core` alone (`core.selectors`,
`core.taints`, `core.placement`); this module only turns the pydantic models users write into
those values. There is no second implementation of their semantics in `fleet.api`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fleet.api._meta import LabelSelector, NodeSelectorRequirement, Taint, Toleration
from fleet.api._policy import ClusterAffinity, Placement, PropagationSpec
from fleet.api.constants import FIELD_SELECTOR_LABELS
from fleet.core import placement as core_placement
from fleet.core import selectors as core_selectors
from fleet.core import taints as taint_rules
from fleet.core.domainwait import DEFAULT_WAIT_SECONDS
from fleet.core.topology import PREFERRED, TopologyRule

__all__ = [
    "PlacementRules",
    "cluster_fields",
    "core_affinity",
    "core_label_selector",
    "core_taints",
    "core_tolerations",
    "placement_rules",
    "rules_of_placement",
]


def _requirements(
    items: Iterable[NodeSelectorRequirement] | None,
) -> tuple[core_selectors.Requirement, ...]:
    return tuple(
        core_selectors.Requirement(e.key, e.operator, tuple(e.values or ())) for e in items or ()
    )


def core_label_selector(selector: LabelSelector | None) -> core_selectors.LabelSelector | None:
    """metav1.LabelSelector as the core's; None (no selector) matches everything."""
    if selector is None:
        return None
    expressions = tuple(
        core_selectors.Requirement(e.key, e.operator, tuple(e.values or ()))
        for e in selector.match_expressions or ()
    )
    return core_selectors.LabelSelector.of(selector.match_labels or {}, *expressions)


def core_affinity(affinity: ClusterAffinity | None) -> core_placement.ClusterAffinity | None:
    """Karmada's clusterAffinity as the engine's; None when it restricts nothing."""
    if affinity is None:
        return None
    fields = affinity.field_selector
    converted = core_placement.ClusterAffinity(
        cluster_names=tuple(affinity.cluster_names or ()),
        exclude=tuple(affinity.exclude or ()),
        label_selector=core_label_selector(affinity.label_selector),
        field_selector=_requirements(fields.match_expressions if fields else None),
    )
    selector = converted.label_selector
    restricts_labels = selector is not None and bool(selector.match_labels or selector.expressions)
    if not (
        converted.cluster_names or converted.exclude or converted.field_selector or restricts_labels
    ):
        return None
    return converted


def core_taints(taints: Iterable[Taint] | None) -> tuple[taint_rules.Taint, ...]:
    return tuple(taint_rules.Taint(t.key, t.effect, t.value or "") for t in taints or ())


def core_tolerations(
    tolerations: Iterable[Toleration] | None,
) -> tuple[taint_rules.Toleration, ...]:
    return tuple(
        taint_rules.Toleration(
            key=t.key or "",
            operator=t.operator or "Equal",
            value=t.value or "",
            effect=t.effect or "",
            toleration_seconds=None
            if t.toleration_seconds is None
            else float(t.toleration_seconds),
        )
        for t in tolerations or ()
    )


def cluster_fields(labels: Mapping[str, str]) -> dict[str, str]:
    """A cluster's Karmada fields (provider, region, zone), which fleet keeps as labels
    (constants.FIELD_SELECTOR_LABELS): what a fieldSelector is evaluated against."""
    return {f: labels[lbl] for f, lbl in FIELD_SELECTOR_LABELS.items() if lbl in labels}


@dataclass(frozen=True, slots=True)
class PlacementRules:
    """Where a policy lets a gang go, in the engine's terms."""

    #: `clusterAffinity`; None when absent or when `clusterAffinities` is used.
    affinity: core_placement.ClusterAffinity | None = None
    #: `clusterAffinities`, in order (empty when absent).
    groups: tuple[core_placement.AffinityGroup, ...] = ()
    #: `clusterTolerations`, against MemberCluster taints.
    tolerations: tuple[taint_rules.Toleration, ...] = ()
    #: `replicaScheduling.gangTopology`: the whole-gang default for jobs that ask for none.
    topology: TopologyRule | None = None


def placement_rules(spec: PropagationSpec | None) -> PlacementRules:
    """The placement part of a policy (no policy: anywhere, tolerating nothing)."""
    return rules_of_placement(spec.placement if spec else None)


def rules_of_placement(placement: Placement | None) -> PlacementRules:
    """`spec.placement` (of a policy, or as a binding keeps it) in the engine's terms."""
    if placement is None:
        return PlacementRules()
    groups: Sequence[core_placement.AffinityGroup] = ()
    if placement.cluster_affinities:
        groups = tuple(
            core_placement.AffinityGroup(
                t.affinity_name, core_affinity(t) or core_placement.ClusterAffinity()
            )
            for t in placement.cluster_affinities
        )
    strategy = placement.replica_scheduling
    topology = strategy.gang_topology if strategy else None
    return PlacementRules(
        affinity=None if groups else core_affinity(placement.cluster_affinity),
        groups=tuple(groups),
        tolerations=core_tolerations(placement.cluster_tolerations),
        topology=TopologyRule(
            topology.level,
            topology.mode,
            source="spec.placement.replicaScheduling.gangTopology",
            wait_seconds=_wait_seconds(topology.mode, topology.wait_seconds),
        )
        if topology
        else None,
    )


def _wait_seconds(mode: str, wait_seconds: int | None) -> float:
    """`gangTopology.waitSeconds` in the engine's terms: Preferred's, or its default when
    absent; Required has none (it never places spread)."""
    if mode != PREFERRED:
        return 0.0
    return float(DEFAULT_WAIT_SECONDS if wait_seconds is None else wait_seconds)
