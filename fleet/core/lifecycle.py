"""The binding lifecycle: what one gang's binding remembers, and how each event changes it.

A `Binding` is everything fleet must remember about one gang across controller restarts: its
phase, the cluster it is bound to, every stay, every failover, the clusters it must avoid, the
copies it left behind, and the failover timers. The controller persists it in the GangBinding's
status and spec; the simulator keeps one per job. Both change it only through the functions
below, so a failover in the simulator leaves the same history, exclusions and phase as one in
the controller, and the controller's shell never computes any of it itself.

Pure values in, pure values out: times are epoch seconds passed in by the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from fleet.core.assignment import Domain
from fleet.core.failover import (
    CLEAR,
    UNCHARGED_REASONS,
    FailoverReason,
    FailoverSettings,
    GiveUp,
    Move,
    PurgeMode,
    Release,
    Timers,
    delete_before_placing,
    exclusion_until,
    purge_old_copy,
    still_excluded,
)
from fleet.core.jobstate import JobState

Phase = Literal[
    "Pending",
    "Queued",
    "Reserving",
    "Scheduled",
    "Dispatched",
    "Running",
    "Succeeded",
    "Failed",
    "FailingOver",
    "Released",
]
Health = Literal["Healthy", "Unhealthy", "Unknown"]

#: The event message ACK One (and the seeds) print when a binding is scheduled.
SCHEDULED_PREFIX = "Binding has been scheduled successfully. Result: "
GAVE_UP_REASON = "FailoverLimitReached"


@dataclass(frozen=True, slots=True)
class Stay:
    """One stay of the gang in a cluster."""

    cluster: str
    placed_at: float
    removed_at: float | None = None
    reason: str | None = None
    #: When its copy first reported Running in this stay (None: not yet): when its work began,
    #: for a reclaim's work lost and declared limit (docs/queue.md, "Worth it").
    running_since: float | None = None


@dataclass(frozen=True, slots=True)
class FailoverRecord:
    """One failover: the cluster the gang left, why, and when."""

    from_cluster: str
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class Exclusion:
    """A cluster the gang must avoid, and until when (None: for its lifetime)."""

    cluster: str
    reason: str
    until: float | None = None
    #: None for a failover's exclusion; a code (DependencyConflict) when the cluster refused
    #: the job before anything ran there: placement reports it under that code.
    code: str | None = None


@dataclass(frozen=True, slots=True)
class Eviction:
    """A copy the gang left in a cluster that is still to be removed (Karmada's
    GracefulEvictionTask)."""

    from_cluster: str
    reason: str
    message: str
    purge_mode: PurgeMode
    created_at: float
    grace_period_seconds: float | None = None
    #: A reclaim or a preemption: the queue unit this eviction makes room for (None: a
    #: failover's). Recorded before the copy is deleted, so a restarted controller finishes it.
    evicted_for: str | None = None
    #: The old copy's state for the next one (Karmada's `preservedLabelState`): label ->
    #: value, read from its status by the policy's statePreservation rules before it is removed.
    preserved: tuple[tuple[str, str], ...] = ()
    #: The identity of the cluster the copy is in (its `kube-system` UID, as join recorded it
    #: on the MemberCluster), so the copy is found again if the cluster comes back under
    #: another MemberCluster name (`fleet.core.ledger`). None where none was recorded.
    cluster_id: str | None = None

    @property
    def by_queue(self) -> bool:
        """Made by the queue (reclaim or preemption), not by a failover."""
        return self.evicted_for is not None


@dataclass(frozen=True, slots=True)
class Binding:
    """The restart-safe memory of one gang's binding."""

    phase: Phase = "Pending"
    cluster: str | None = None
    #: The clusterAffinities group the current placement came from (Karmada's
    #: schedulerObservedAffinityName); a new placement starts its search there.
    affinity_group: str | None = None
    stays: tuple[Stay, ...] = ()
    failovers: tuple[FailoverRecord, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    timers: Timers = CLEAR
    #: Set when the gang may not fail over again: why it was failed on the fleet.
    gave_up: str | None = None
    #: While its capacity is being reserved in `cluster` (Koordinator Reservations): since when.
    reserving_since: float | None = None
    #: Labels the next copy carries (statePreservation): what the last move preserved from the
    #: copy it moved away from. Kept across later placements until a move preserves anew.
    carried: tuple[tuple[str, str], ...] = ()
    #: Set when the gang was let go with its cluster (`fleet unjoin --leave`, or its
    #: MemberCluster deleted under it): where it was left, and why.
    released: str | None = None
    #: The topology domains the current placement chose in `cluster` (what the copy is
    #: pinned to); kept in the binding so a restart pins the copy the same way.
    domains: tuple[Domain, ...] = ()
    #: While unplaced: since when the gang, fitting only spread, waits for one domain of its
    #: preferred topology (`fleet.core.domainwait`); kept so a restart neither resets nor
    #: forgets the bound on that wait. Cleared when it is placed.
    domain_wait_since: float | None = None

    @property
    def failover_count(self) -> int:
        """Failovers counted against maxFailovers: not those the job did not cause (an unjoined
        member's)."""
        return sum(1 for f in self.failovers if f.reason not in UNCHARGED_REASONS)

    @property
    def finished(self) -> bool:
        """Nothing more will happen to it: it succeeded, failed for good on the fleet, or was
        released with its cluster."""
        return self.phase == "Succeeded" or self.gave_up is not None or self.released is not None

    def excluded(self, now: float) -> dict[str, str]:
        """Cluster -> why, for every cluster the gang failed over from and must still avoid at
        `now`."""
        return {
            e.cluster: e.reason
            for e in self.exclusions
            if e.code is None and still_excluded(e.until, now)
        }

    def refusals(self, now: float) -> dict[str, tuple[str, str]]:
        """Cluster -> (code, why), for every cluster that refused the gang (see `refused`) and
        is still avoided at `now`."""
        return {
            e.cluster: (e.code, e.reason)
            for e in self.exclusions
            if e.code is not None and still_excluded(e.until, now)
        }

    def next_exclusion_end(self, now: float) -> float | None:
        """When the next exclusion runs out (a placement may succeed then), if any does."""
        ends = [e.until for e in self.exclusions if e.until is not None and e.until > now]
        return min(ends, default=None)

    def clusters_holding_copies(self) -> list[str]:
        """Every cluster that may still hold a copy fleet manages: the target (unless the gang
        was released there), the clusters with an eviction pending, and any stay not yet
        ended."""
        clusters = {self.cluster} if self.cluster and self.released is None else set()
        clusters |= {e.from_cluster for e in self.evictions}
        clusters |= {s.cluster for s in self.stays if s.removed_at is None}
        if self.released is not None:
            clusters.discard(self.cluster)
        return sorted(c for c in clusters if c)


# -- placement ---------------------------------------------------------------------------------


def queued(binding: Binding) -> Binding:
    """Held by the queue (suspension.scheduling) until it is admitted."""
    return dataclasses.replace(binding, phase="Queued")


def waiting(binding: Binding) -> Binding:
    """No cluster can take the gang now; it waits for capacity (a wait for a domain that
    started keeps its start: it is bounded from there)."""
    return dataclasses.replace(binding, phase="Pending")


def waiting_for_domain(binding: Binding, since: float) -> Binding:
    """The gang fits only spread and waits for one domain of its preferred topology, since
    `since` (the decision's `domain_wait.since`)."""
    return dataclasses.replace(binding, phase="Pending", domain_wait_since=since)


def scheduled(
    binding: Binding,
    cluster: str,
    now: float,
    *,
    group: str | None = None,
    domains: tuple[Domain, ...] = (),
) -> Binding:
    """The gang was placed in `cluster` (from clusterAffinities group `group`, if any), inside
    the topology `domains` placement chose there (if any).

    An old copy still waiting to be purged there (the gang came back once its exclusion ran
    out) becomes the new copy: its eviction is dropped, or purging it would delete the copy
    that now runs."""
    return dataclasses.replace(
        binding,
        phase="Scheduled",
        cluster=cluster,
        affinity_group=group,
        domains=domains,
        domain_wait_since=None,
        stays=(*binding.stays, Stay(cluster, now)),
        evictions=tuple(e for e in binding.evictions if e.from_cluster != cluster),
    )


def reserving(
    binding: Binding,
    cluster: str,
    now: float,
    *,
    group: str | None = None,
    domains: tuple[Domain, ...] = (),
) -> Binding:
    """The gang was placed in `cluster`, whose capacity is reserved for it before it is
    dispatched (Reservations); it is dispatched once they are Available."""
    placed = scheduled(binding, cluster, now, group=group, domains=domains)
    return dataclasses.replace(placed, phase="Reserving", reserving_since=now)


def reserved(binding: Binding) -> Binding:
    """Every Reservation is Available: the gang is dispatched."""
    return dataclasses.replace(binding, phase="Scheduled", reserving_since=None)


def reservation_failed(binding: Binding, reason: str, now: float, *, retry_after: float) -> Binding:
    """Reserving failed (a Reservation Failed, or the wait ran out): the gang leaves the cluster
    before anything ran there, avoids it for `retry_after` seconds, and is placed again. Not a
    failover: nothing ran, and maxFailovers is not charged."""
    cluster = binding.cluster
    if cluster is None:
        raise ValueError("a binding with no cluster has nothing reserved")
    why = "ReservationFailed"
    return dataclasses.replace(
        binding,
        phase="Pending",
        cluster=None,
        reserving_since=None,
        stays=tuple(
            dataclasses.replace(s, removed_at=now, reason=why)
            if s.cluster == cluster and s.removed_at is None
            else s
            for s in binding.stays
        ),
        exclusions=(
            *(e for e in binding.exclusions if e.cluster != cluster),
            Exclusion(cluster, f"{why}: {reason}", now + retry_after),
        ),
    )


def refused(
    binding: Binding, cluster: str, code: str, reason: str, now: float, *, retry_after: float
) -> Binding:
    """`cluster` refused the gang before its copy was made there (a dependency there is not
    fleet's, `code` DependencyConflict): the gang leaves it, avoids it for `retry_after`
    seconds (placement reports it under `code`), and is placed again. Not a failover: nothing
    ran, and maxFailovers is not charged."""
    left = binding
    if binding.cluster == cluster:
        left = dataclasses.replace(
            binding,
            phase="Pending",
            cluster=None,
            reserving_since=None,
            stays=tuple(
                dataclasses.replace(s, removed_at=now, reason=code)
                if s.cluster == cluster and s.removed_at is None
                else s
                for s in binding.stays
            ),
        )
    return dataclasses.replace(
        left,
        exclusions=(
            *(e for e in left.exclusions if e.cluster != cluster),
            Exclusion(cluster, reason, now + retry_after, code),
        ),
    )


def result_message(result: str) -> str:
    """`Binding has been scheduled successfully. Result: {member-1:0,[{master 1} {worker 2}]}`,
    from a placement's ACK-style result string."""
    return f"{SCHEDULED_PREFIX}{result}"


# -- what the member copy says -----------------------------------------------------------------


def phase_of(job: JobState) -> Phase:
    """The binding's phase once its copy exists in the member and reports `job`."""
    if job in ("Succeeded", "Failed", "Running"):
        return job
    return "Dispatched"


def health_of(job: JobState | None) -> Health:
    """Karmada's per-cluster health of a copy: a Failed job is Unhealthy."""
    if job is None:
        return "Unknown"
    return "Unhealthy" if job == "Failed" else "Healthy"


def observed(binding: Binding, job: JobState, now: float | None = None) -> Binding:
    """The copy in the bound cluster reports `job`; the phase follows it. The first Running it
    reports in its open stay dates the stay's `running_since` (`now`; the stay's `placed_at`
    when the binding was Running already, written by a controller that did not record it)."""
    if binding.gave_up is not None:
        return binding
    stays = binding.stays
    if job == "Running" and now is not None:
        before = binding.phase == "Running"
        stays = tuple(
            dataclasses.replace(s, running_since=s.placed_at if before else now)
            if s.cluster == binding.cluster and s.removed_at is None and s.running_since is None
            else s
            for s in stays
        )
    return dataclasses.replace(binding, phase=phase_of(job), stays=stays)


def recovered(binding: Binding, now: float) -> Binding:
    """The binding with a stay in its target dated `now` if it has none open there: its first
    placement's status was never written (the controller stopped between the binding's create,
    which carries the decision, and the dispatch's status write, which carries the stay)."""
    cluster = binding.cluster
    if cluster is None or any(s.cluster == cluster and s.removed_at is None for s in binding.stays):
        return binding
    return dataclasses.replace(binding, stays=(*binding.stays, Stay(cluster, now)))


def with_timers(binding: Binding, timers: Timers) -> Binding:
    """The failover judgement's timers, persisted so a restart resumes the same window."""
    return dataclasses.replace(binding, timers=timers)


# -- failover ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FailedOver:
    """The binding after a failover, and what must happen to the copy it leaves."""

    binding: Binding
    #: Delete the old copy before the gang is placed again (purge mode Directly, old cluster
    #: reachable).
    delete_old_copy: bool
    #: The purge mode that applies to the old copy.
    purge_mode: PurgeMode
    #: A sentence for events and conditions.
    message: str


def failed_over(
    binding: Binding,
    move: Move,
    settings: FailoverSettings,
    now: float,
    *,
    old_cluster_reachable: bool,
    preserved: Mapping[str, str] | None = None,
    cluster_id: str | None = None,
) -> FailedOver:
    """Move the gang off its cluster: record the failover, exclude the cluster, end the stay,
    leave an eviction for the old copy (whatever the purge mode: it is the record that the copy
    may still be there until it is observed gone, `fleet.core.ledger`), clear the timers, and
    wait for a new placement. `preserved`: the labels statePreservation read from the old
    copy's status (`statepreservation.preserved_labels`), for the next copy. `cluster_id`: the
    old cluster's identity, kept on the eviction."""
    kept = _labels(preserved)
    old = binding.cluster
    if old is None:
        raise ValueError("a binding with no cluster cannot fail over")
    mode = settings.purge_mode_for(move.reason)
    delete_now = delete_before_placing(mode, old_cluster_reachable=old_cluster_reachable)
    evictions = (
        *(e for e in binding.evictions if e.from_cluster != old),
        Eviction(
            from_cluster=old,
            reason=move.reason,
            message=move.message,
            purge_mode=mode,
            created_at=now,
            grace_period_seconds=settings.grace_period_seconds,
            preserved=kept,
            cluster_id=cluster_id,
        ),
    )
    exclusions = (
        *(e for e in binding.exclusions if e.cluster != old),
        Exclusion(old, move.reason, exclusion_until(settings, now)),
    )
    stays = tuple(
        dataclasses.replace(s, removed_at=now, reason=move.reason)
        if s.cluster == old and s.removed_at is None
        else s
        for s in binding.stays
    )
    left = f"; the copy in {old} is left in place (purgeMode Never)" if mode == "Never" else ""
    return FailedOver(
        binding=dataclasses.replace(
            binding,
            phase="FailingOver",
            cluster=None,
            stays=stays,
            failovers=(*binding.failovers, FailoverRecord(old, move.reason, now)),
            exclusions=exclusions,
            evictions=evictions,
            timers=CLEAR,
            carried=kept if preserved is not None else binding.carried,
        ),
        delete_old_copy=delete_now,
        purge_mode=mode,
        message=f"failing over from {old}: {move.message}{left}",
    )


#: Stay and eviction reasons of a gang the queue evicted (reclaim, preemption).
RECLAIMED = "Reclaimed"
PREEMPTED = "Preempted"


def evicted_by_queue(
    binding: Binding,
    *,
    preempted: bool,
    evicted_for: str,
    message: str,
    now: float,
    grace_period_seconds: float,
    preserved: Mapping[str, str] | None = None,
    cluster_id: str | None = None,
) -> Binding:
    """The queue evicted the gang whole (a reclaim or a preemption): its stay ends, its copy is
    left for deletion after `grace_period_seconds` (an eviction that names the unit it makes
    room for), and it waits in its queue again (phase Queued). Not a failover: no failover is
    recorded or charged against maxFailovers, and its cluster is not excluded. `preserved`: as
    for `failed_over` (the policy's statePreservation, failover.application's else cluster's)."""
    kept = _labels(preserved)
    old = binding.cluster
    if old is None:
        raise ValueError("a binding with no cluster cannot be evicted")
    reason = PREEMPTED if preempted else RECLAIMED
    stays = tuple(
        dataclasses.replace(s, removed_at=now, reason=reason)
        if s.cluster == old and s.removed_at is None
        else s
        for s in binding.stays
    )
    eviction = Eviction(
        from_cluster=old,
        reason=reason,
        message=message,
        purge_mode="Gracefully",
        created_at=now,
        grace_period_seconds=grace_period_seconds,
        evicted_for=evicted_for,
        preserved=kept,
        cluster_id=cluster_id,
    )
    return dataclasses.replace(
        binding,
        phase="Queued",
        cluster=None,
        stays=stays,
        evictions=(*(e for e in binding.evictions if e.from_cluster != old), eviction),
        timers=CLEAR,
        reserving_since=None,
        carried=kept if preserved is not None else binding.carried,
    )


def _labels(preserved: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((preserved or {}).items()))


def carried_labels(binding: Binding) -> dict[str, str]:
    """The labels the gang's next copy carries (statePreservation), to put on it when it is
    created in a member."""
    return dict(binding.carried)


def queue_evictions(binding: Binding) -> tuple[Eviction, ...]:
    """The evictions the queue made that are not finished (the copy not deleted yet)."""
    return tuple(e for e in binding.evictions if e.by_queue)


def gave_up(binding: Binding, verdict: GiveUp) -> Binding:
    """The gang may not fail over again: it is Failed on the fleet, with its history."""
    trail = ", ".join(f"{f.from_cluster} ({f.reason})" for f in binding.failovers) or "none"
    return dataclasses.replace(
        binding,
        phase="Failed",
        gave_up=f"{verdict.message}; failover history: {trail}",
    )


#: The Healthy condition's reason on a binding released with its cluster.
RELEASED_REASON = "Released"


def released(binding: Binding, verdict: Release, now: float) -> Binding:
    """The gang was let go with its cluster: phase Released, its stay ended, no eviction, no
    failover, no exclusion; nothing will place it again."""
    stays = tuple(
        dataclasses.replace(s, removed_at=now, reason=RELEASED_REASON)
        if s.cluster == binding.cluster and s.removed_at is None
        else s
        for s in binding.stays
    )
    return dataclasses.replace(
        binding,
        phase="Released",
        stays=stays,
        timers=CLEAR,
        reserving_since=None,
        released=verdict.message,
    )


# -- copies left behind ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PurgePlan:
    """Which old copies to delete now, which to keep for later, and when to look again."""

    delete: tuple[Eviction, ...]
    keep: tuple[Eviction, ...]
    recheck_at: float | None = None


def purge_plan(
    evictions: Iterable[Eviction], *, successor: JobState | None, now: float
) -> PurgePlan:
    """Apply each eviction's purge mode: Directly deletes now; Gracefully once the gang runs
    (or succeeded) in its new cluster, or after the grace period; Never keeps it."""
    delete: list[Eviction] = []
    keep: list[Eviction] = []
    recheck: list[float] = []
    for eviction in evictions:
        verdict = purge_old_copy(
            eviction.purge_mode,
            evicted_at=eviction.created_at,
            successor_running=successor in ("Running", "Succeeded"),
            now=now,
            grace_period_seconds=eviction.grace_period_seconds,
        )
        if verdict.delete:
            delete.append(eviction)
        else:
            keep.append(eviction)
            if verdict.recheck_at is not None:
                recheck.append(verdict.recheck_at)
    return PurgePlan(tuple(delete), tuple(keep), min(recheck, default=None))


def evictions_done(binding: Binding, done: Iterable[str]) -> Binding:
    """The old copies in the `done` clusters are gone (or the clusters left the fleet)."""
    gone = set(done)
    return dataclasses.replace(
        binding, evictions=tuple(e for e in binding.evictions if e.from_cluster not in gone)
    )


__all__ = [
    "GAVE_UP_REASON",
    "PREEMPTED",
    "RECLAIMED",
    "RELEASED_REASON",
    "SCHEDULED_PREFIX",
    "Binding",
    "Eviction",
    "Exclusion",
    "FailedOver",
    "FailoverReason",
    "FailoverRecord",
    "Health",
    "Phase",
    "PurgePlan",
    "Stay",
    "evicted_by_queue",
    "evictions_done",
    "failed_over",
    "gave_up",
    "health_of",
    "observed",
    "phase_of",
    "purge_plan",
    "queue_evictions",
    "queued",
    "released",
    "reservation_failed",
    "reserved",
    "reserving",
    "result_message",
    "scheduled",
    "waiting",
    "with_timers",
]
