"""The filters that rule a member out for a gang before any capacity is looked at (step 1 of
`fleet.core.placement`): not ready, failed over from, cluster taints the policy does not
tolerate, and Karmada's cluster affinity."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from fleet.core.decision import AFFINITY, FAILED_OVER, NOT_READY, TAINTED, Rejection
from fleet.core.explain import clip
from fleet.core.selectors import LabelSelector, Requirement
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration, untolerated


@dataclass(frozen=True, slots=True)
class ClusterAffinity:
    """Karmada's `placement.clusterAffinity`, already converted from the policy model."""

    cluster_names: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    label_selector: LabelSelector | None = None
    #: `fieldSelector.matchExpressions` over the cluster's provider / region / zone.
    field_selector: tuple[Requirement, ...] = ()

    def rejection(self, cluster: ClusterSnapshot) -> str | None:
        if cluster.name in self.exclude:
            return "excluded by clusterAffinity (listed in exclude)"
        if self.label_selector is not None:
            miss = self.label_selector.first_mismatch(cluster.labels)
            if miss is not None:
                return f"excluded by clusterAffinity (labelSelector needs {miss})"
        for req in self.field_selector:
            if not req.matches(cluster.fields):
                return f"excluded by clusterAffinity (fieldSelector needs {req})"
        if self.cluster_names and cluster.name not in self.cluster_names:
            return "excluded by clusterAffinity (not in clusterNames)"
        return None


def filter_rejection(
    cluster: ClusterSnapshot,
    *,
    affinity: ClusterAffinity | None = None,
    failed_over: Mapping[str, str] | None = None,
    not_ready: Collection[str] | Mapping[str, str] = (),
    taints: Mapping[str, Sequence[Taint]] | None = None,
    tolerations: Sequence[Toleration] = (),
) -> Rejection | None:
    """The first filter (step 1 of the module docstring) that rules `cluster` out for a gang,
    before any capacity is looked at; None when it may hold it. `place` applies it to every
    cluster; a reclaim uses it to look for room only where the gang may go."""
    name = cluster.name
    if name in not_ready:
        why = not_ready.get(name) if isinstance(not_ready, Mapping) else None
        return Rejection(name, f"not ready ({why})" if why else "not ready", NOT_READY)
    if failed_over and name in failed_over:
        why = failed_over[name]
        text = f"the job failed over from it ({why})" if why else "the job failed over from it"
        return Rejection(name, clip(text), FAILED_OVER)
    cluster_taints = (taints or {}).get(name)
    if cluster_taints:
        blocking = untolerated(tolerations, cluster_taints)
        if blocking is not None:
            text = f"has the taint {blocking}, which the policy does not tolerate"
            return Rejection(name, clip(text), TAINTED)
    if affinity is not None:
        excluded = affinity.rejection(cluster)
        if excluded is not None:
            return Rejection(name, excluded, AFFINITY)
    return None
