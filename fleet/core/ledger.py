"""What fleet wants in each cluster, and what to do with what it finds there.

The binding is the ledger: for one job it names the cluster the job is bound to and, as
evictions, every other cluster that may still hold a copy (each with the cluster's identity,
the `kube-system` UID that `fleet join` records, so a cluster found again under another
MemberCluster name is still known). A copy is on record in exactly two cases: the cluster is
the job's target, or the binding has an eviction of that cluster (carried out by the reconcile
as its purge mode says: Directly at once, Gracefully once the new copy runs or the grace period
ends, Never not at all). Everything else of fleet's in a cluster is unwanted, and the collector
deletes it: so a cluster that comes back, under any name, after a failover, a
MemberCluster deleted while it was unreachable, or a restored backup, is fenced by the same rule
that removes orphans.

An eviction ends only when its copy is *observed gone*: the copy object and its pods are no
longer in the cluster's watches. A cluster that cannot be reached, or that is no member any
more, keeps its evictions: they are the record of an unfenced copy, shown on the binding until
the cluster answers again.

Pure values in, pure values out; time is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from fleet.core.lifecycle import Binding, Eviction

#: Why a copy fleet finds in a cluster must go (or None: it is wanted there).
Unwanted = Literal["Orphaned", "Stale"]


@dataclass(frozen=True, slots=True)
class Place:
    """A cluster as the collector sees it: the MemberCluster name it is reached through now,
    and its identity (None where join recorded none)."""

    name: str
    cluster_id: str | None = None


def same_cluster(eviction: Eviction, place: Place) -> bool:
    """Whether `eviction` is about the cluster at `place`: by identity where both know it
    (a cluster re-joined under another name is the same cluster), else by name."""
    if eviction.cluster_id and place.cluster_id:
        return eviction.cluster_id == place.cluster_id
    return eviction.from_cluster == place.name


def evictions_at(binding: Binding, place: Place) -> tuple[Eviction, ...]:
    """The binding's evictions of the cluster at `place`."""
    return tuple(e for e in binding.evictions if same_cluster(e, place))


def unwanted(binding: Binding | None, place: Place, *, workload_exists: bool) -> Unwanted | None:
    """Whether a copy of a job found at `place` must be deleted by the collector, and why.

    `binding`: the job's binding as last written (None: none yet, so nothing is decided and
    the copy is kept: the reconcile that writes the binding first decides). `workload_exists`:
    the fleet object with the copy's UID still exists. A copy the binding has an eviction for
    is the reconcile's to purge, by its purge mode (`fleet.controller.failovers`): it is on
    record, so it is left to that path, which says what it did on the job."""
    if not workload_exists:
        return "Orphaned"
    if binding is None or binding.cluster == place.name or evictions_at(binding, place):
        return None
    return "Stale"


#: Where an old copy stands, as the shell observed its cluster: Unreachable (the cluster does
#: not answer, or left the fleet: the copy is unfenced), Overlap (it answers and the copy runs on
#: by its purge mode: Gracefully within its grace period, Never), Deleting (deleted, its pods not
#: gone yet).
OutsideState = Literal["Unreachable", "Overlap", "Deleting"]

#: OldCopiesRemoved reasons (the GangBinding condition; fleet.api.constants names them).
UNFENCED = "CopyUnfenced"
OVERLAP = "CopyOverlap"
DELETING = "CopyDeleting"
NONE_LEFT = "NoOldCopies"


@dataclass(frozen=True, slots=True)
class Outside:
    """A copy the job may still have outside its target."""

    eviction: Eviction
    state: OutsideState
    #: Unreachable: since when the cluster has not answered, if known (epoch seconds).
    since: float | None = None


def placement_waits(outside: Sequence[Outside]) -> tuple[Outside, ...]:
    """The old copies a new placement must wait for: purge mode Directly in a cluster that
    answers, not observed gone yet (the new copy starts only once the old one's pods are gone).
    Where the old cluster cannot be reached, waiting would defeat failover: the gang is placed
    again and the copy is fenced when the cluster answers, shown meanwhile."""
    return tuple(
        o for o in outside if o.eviction.purge_mode == "Directly" and o.state != "Unreachable"
    )


def old_copies(
    outside: Sequence[Outside], format_time: Callable[[float], str]
) -> tuple[Literal["True", "False"], str, str]:
    """The OldCopiesRemoved condition (status, reason, message) for the copies left outside the
    target: the worst state first (unfenced, then overlapping, then deleting), every cluster
    named with its identity and since when."""
    if not outside:
        return "True", NONE_LEFT, "no copy of the job is left outside its target"
    parts = []
    for o in outside:
        e = o.eviction
        where = f"{e.from_cluster} (cluster {e.cluster_id or 'not recorded'})"
        if o.state == "Unreachable":
            since = f" (unfenced since {format_time(o.since)})" if o.since is not None else ""
            parts.append(
                f"a copy may still run in {where}, which fleet cannot reach{since}: it is "
                "deleted as soon as that cluster answers again, under any MemberCluster name"
            )
        elif o.state == "Overlap":
            rule = (
                "until a person removes it (purgeMode Never)"
                if e.purge_mode == "Never"
                else "until the new copy runs or its grace period ends (purgeMode Gracefully)"
            )
            since = format_time(e.created_at)
            parts.append(f"the old copy in {where} runs on {rule}, since {since}")
        else:
            parts.append(f"the old copy in {where} is being deleted; its pods are not gone yet")
    states = {o.state for o in outside}
    reason = UNFENCED if "Unreachable" in states else OVERLAP if "Overlap" in states else DELETING
    return "False", reason, "; ".join(parts)


__all__ = [
    "DELETING",
    "NONE_LEFT",
    "OVERLAP",
    "UNFENCED",
    "Outside",
    "OutsideState",
    "Place",
    "Unwanted",
    "evictions_at",
    "old_copies",
    "placement_waits",
    "same_cluster",
    "unwanted",
]
