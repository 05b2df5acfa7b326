"""One cluster, one registration: which MemberCluster holds a member cluster's identity when
several are the same cluster (the same kube-system namespace UID, Karmada's Cluster spec.id).

The rule depends only on the MemberClusters themselves, never on the order a controller heard
of them, so every replica, before and after a restart, picks the same one: the one created
first (its creationTimestamp), then the first by name. The controller connects that one and
refuses the others (`DuplicateCluster`), so the cluster's capacity is counted once and a
failover from one name never lands in the same cluster under the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class Claim:
    """A MemberCluster that is the cluster in question: its name and its creationTimestamp in
    epoch seconds (None: not known, ranked after every one that is)."""

    name: str
    created: float | None = None


def holder(claims: Iterable[Claim]) -> str | None:
    """The name of the MemberCluster that holds the identity among `claims` (None: no claim)."""
    ranked = sorted(claims, key=lambda c: (c.created is None, c.created or 0.0, c.name))
    return ranked[0].name if ranked else None


__all__ = ["Claim", "holder"]
