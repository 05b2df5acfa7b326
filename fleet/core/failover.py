"""Failover decisions: when a gang must leave its cluster, and what becomes of the copy it leaves.

Pure functions over plain values. Every timer is a timestamp the caller persists (the controller
keeps them in the GangBinding's status), so a restarted controller resumes a toleration window
where it was instead of starting it again, and the simulator drives the same code with simulated
time.

Purge modes use Karmada's spelling; ACK One's synonyms are mapped before they get here
(Immediately -> Directly, Graciously -> Gracefully).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

PurgeMode = Literal["Directly", "Gracefully", "Never"]
#: Karmada's eviction reasons: the job failed, its cluster was lost, or the cluster carries a
#: NoExecute taint the policy does not tolerate; and fleet's own: the gang never started in its
#: member (its pods refused by the member's scheduler past the gang's deadline), and the cluster
#: is being unjoined (`fleet unjoin --move`).
FailoverReason = Literal[
    "ApplicationFailure", "GangUnschedulable", "ClusterLost", "TaintUntolerated", "MemberUnjoined"
]
#: Failovers that are not the job's doing, so they do not count against maxFailovers.
UNCHARGED_REASONS: frozenset[str] = frozenset({"MemberUnjoined"})
#: Failovers of the application in its member (not of the member): `failover.application`'s
#: purge mode and statePreservation apply to them.
APPLICATION_REASONS: frozenset[str] = frozenset({"ApplicationFailure", "GangUnschedulable"})

#: How long a gang's pods may go refused by its member's scheduler before the copy is not
#: Healthy (and `tolerationSeconds` later fails over), when neither the policy
#: (`failover.application.gangScheduleTimeoutSeconds`) nor the job (its gang scheduler's
#: `scheduleTimeoutSeconds`) says: Karmada's default tolerationSeconds, so a stuck gang is
#: flagged after 5 minutes and moved after 10 by default.
DEFAULT_GANG_SCHEDULE_TIMEOUT_SECONDS = 300.0

#: Karmada's default graceful-eviction timeout: the longest an old copy waits for its successor.
DEFAULT_GRACE_SECONDS = 600.0


@dataclasses.dataclass(frozen=True)
class FailoverSettings:
    """A job's failover parameters, as its policy set them when it was first bound.

    `failover.application` turns on both triggers (a failed job, a lost cluster) with its
    tolerationSeconds; `failover.cluster` alone turns on the lost-cluster trigger and sets the
    purge mode for copies left in lost or tainted clusters. A NoExecute cluster taint the policy
    does not tolerate evicts whatever the policy says, as Karmada's taint manager does.
    """

    toleration_seconds: float = 300.0
    purge_mode: PurgeMode = "Gracefully"
    grace_period_seconds: float | None = None
    #: Give up after this many failovers; None = never give up.
    max_failovers: int | None = None
    #: How long a cluster the job failed in stays excluded; None = for the job's lifetime.
    cluster_exclusion_seconds: float | None = None
    #: A Failed copy triggers a failover (`failover.application` is set).
    on_job_failure: bool = True
    #: A lost cluster triggers a failover (`failover.application` or `failover.cluster` is set).
    on_cluster_loss: bool = True
    #: `failover.cluster.purgeMode`: how copies in lost or tainted clusters go; None = purge_mode.
    cluster_purge_mode: PurgeMode | None = None
    #: `failover.application.gangScheduleTimeoutSeconds` (fleet's extension): how long the
    #: gang's pods may go refused by the member's scheduler; None: see `gang_deadline`.
    gang_schedule_timeout_seconds: float | None = None

    def purge_mode_for(self, reason: FailoverReason) -> PurgeMode:
        """The purge mode for a copy left behind for `reason`."""
        if reason in APPLICATION_REASONS or self.cluster_purge_mode is None:
            return self.purge_mode
        return self.cluster_purge_mode


#: A policy without `failover`: only an untolerated NoExecute taint moves the job.
NO_FAILOVER = FailoverSettings(on_job_failure=False, on_cluster_loss=False)


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the controller sees of the job's current copy right now.

    `None` means "not known yet" (a controller that just started has not heard from the member,
    or has not listed its jobs): nothing is judged on it, and the persisted timers stand.
    """

    #: The member answers and reports Ready.
    cluster_ready: bool | None
    #: Why the member is not Ready when that is not a loss: it answers but refuses fleet's
    #: credentials, or fleet has none it may use (the member's health reason, e.g.
    #: `CredentialsRefused`, `KubeconfigSecretMissing`). The member is up as far as anyone
    #: knows and its copy most likely runs: no failover on that ground (a second copy would run
    #: the job twice), and its copy's state, which cannot be seen, is not judged.
    cluster_refuses: str | None = None
    #: The member copy is Failed (its conditions say so); meaningless while the cluster is lost.
    job_failed: bool | None = False
    #: The member copy Succeeded: a finished job never moves.
    job_succeeded: bool = False
    #: The member copy is Running (its conditions say so): its gang started, it is not stuck.
    job_running: bool = False
    #: What the member's scheduler says of the gang's pods it refused (`PodScheduled=False`,
    #: `fleet.core.unscheduled`); None while none is refused (not created yet, bound, running).
    gang_unschedulable: str | None = None
    #: The gang scheduler's own timeout as the job declares it (Kubeflow's
    #: `runPolicy.schedulingPolicy.scheduleTimeoutSeconds`), if it does: see `gang_deadline`.
    gang_timeout_seconds: float | None = None
    #: An untolerated NoExecute taint on the cluster: (the taint, seconds it is tolerated for;
    #: 0 = not at all). See `fleet.core.taints.no_execute_grace`.
    no_execute: tuple[str, float] | None = None
    #: The cluster is being unjoined (`fleet unjoin --move`): every gang leaves it now.
    unjoining: bool = False
    #: The cluster is leaving with its jobs (`fleet unjoin --leave`), or has left the fleet
    #: (its MemberCluster deleted) while the gang was bound there: the copy stays where it is,
    #: unmanaged, and the gang is released, never started elsewhere.
    leaving: bool = False


@dataclasses.dataclass(frozen=True)
class Timers:
    """When each failover condition started; None while it does not hold."""

    unhealthy_since: float | None = None
    cluster_lost_since: float | None = None
    tainted_since: float | None = None
    #: Since when the gang's pods are refused by the member's scheduler (continuously).
    gang_unschedulable_since: float | None = None


CLEAR = Timers()


@dataclasses.dataclass(frozen=True)
class Stay:
    """Keep the job where it is; persist `timers`; look again at `recheck_at` if set."""

    timers: Timers
    recheck_at: float | None = None
    #: Why we are waiting (a failure being tolerated), for status and events.
    waiting: str | None = None
    #: The job stays through its cluster refusing fleet's credentials (`cluster_refuses`):
    #: `waiting` says so, and nothing changes until the cluster's health does.
    refused: str | None = None
    #: The gang has not started in its member within its deadline: why, with the member's word
    #: (the copy is not Healthy, reason `GangUnschedulable`).
    stuck: str | None = None


@dataclasses.dataclass(frozen=True)
class Move:
    """Fail the job over: re-place it with its current cluster excluded."""

    reason: FailoverReason
    message: str


@dataclasses.dataclass(frozen=True)
class GiveUp:
    """The job may not fail over again: mark it Failed on the fleet."""

    reason: FailoverReason
    message: str


@dataclasses.dataclass(frozen=True)
class Release:
    """Let the gang go: its copy runs on where it is, no longer managed by fleet, and no other
    copy is ever made (its cluster left the fleet with it)."""

    message: str


Verdict = Stay | Move | GiveUp | Release


def judge(
    settings: FailoverSettings | None,
    observed: Observation,
    timers: Timers,
    now: float,
    *,
    failovers: int = 0,
    cluster: str = "its cluster",
) -> Verdict:
    """Decide whether the job stays, fails over, or has failed over too often.

    A lost cluster is judged before the job's own state, because the job's state is stale while
    the cluster cannot be reached. Each condition's clock starts when it is first seen and is
    cleared as soon as it stops holding, so a flapping job only moves after a continuous
    `toleration_seconds` of failure.

    A cluster that refuses fleet's credentials (`cluster_refuses`) is not lost: the job stays
    there, with no cluster-lost clock, for as long as it does; an untolerated NoExecute taint
    (and an unjoin, before it) still moves it, as the operator asked.

    A copy that neither failed nor runs is judged last on its gang starting (`_gang_start`):
    pods the member's scheduler keeps refusing past the gang's deadline make it stuck, and
    `tolerationSeconds` later move it (`GangUnschedulable`).
    """
    settings = settings or NO_FAILOVER
    if observed.leaving:
        # Judged first: whatever else holds, a second copy elsewhere would run the job twice.
        return Release(f"left running in {cluster}, which left the fleet with it")
    if observed.job_succeeded and observed.cluster_ready:
        return Stay(CLEAR)
    if observed.unjoining:
        # The operator is taking the cluster out of the fleet: no toleration, whatever the
        # policy says, and not counted against maxFailovers (see UNCHARGED_REASONS).
        return Move("MemberUnjoined", f"{cluster} is being unjoined from the fleet")
    if observed.cluster_ready is None:
        return Stay(timers)
    refused = not observed.cluster_ready and observed.cluster_refuses is not None
    # While the copy's state cannot be judged (its member lost or refusing fleet) or the
    # member's taint is what counts, the copy's own clocks stand as they were.
    gang_since = timers.gang_unschedulable_since
    if not observed.cluster_ready and not refused:
        if not settings.on_cluster_loss:
            return Stay(
                Timers(unhealthy_since=timers.unhealthy_since, gang_unschedulable_since=gang_since)
            )
        since = timers.cluster_lost_since if timers.cluster_lost_since is not None else now
        kept = Timers(
            unhealthy_since=timers.unhealthy_since,
            cluster_lost_since=since,
            gang_unschedulable_since=gang_since,
        )
        return _after_toleration(
            settings,
            kept,
            since,
            settings.toleration_seconds,
            now,
            failovers,
            "ClusterLost",
            f"{cluster} has been unreachable or not Ready",
        )
    unhealthy = timers.unhealthy_since
    if observed.no_execute is not None:
        taint, grace = observed.no_execute
        since = timers.tainted_since if timers.tainted_since is not None else now
        kept = Timers(
            unhealthy_since=unhealthy, tainted_since=since, gang_unschedulable_since=gang_since
        )
        return _after_toleration(
            settings,
            kept,
            since,
            grace,
            now,
            failovers,
            "TaintUntolerated",
            f"{cluster} has the NoExecute taint {taint}, which the policy does not tolerate",
        )
    if refused:
        # The copy's state cannot be seen (what the watch last held is stale): kept as it was.
        return Stay(
            Timers(unhealthy_since=unhealthy, gang_unschedulable_since=gang_since),
            refused=observed.cluster_refuses,
            waiting=f"{cluster} is not Ready because it refuses fleet's credentials, or fleet "
            f"has none it may use ({observed.cluster_refuses}), not because it is lost: the "
            "job's copy most likely runs there, so fleet does not fail it over on that ground",
        )
    if observed.job_failed is None:
        return Stay(
            Timers(
                unhealthy_since=unhealthy if settings.on_job_failure else None,
                gang_unschedulable_since=gang_since,
            )
        )
    if observed.job_failed and settings.on_job_failure:
        since = unhealthy if unhealthy is not None else now
        return _after_toleration(
            settings,
            Timers(unhealthy_since=since),
            since,
            settings.toleration_seconds,
            now,
            failovers,
            "ApplicationFailure",
            f"the job has been Failed in {cluster}",
        )
    if observed.job_failed:
        return Stay(CLEAR)
    return _gang_start(settings, observed, timers, now, failovers, cluster)


def gang_deadline(settings: FailoverSettings, job_timeout: float | None) -> float:
    """How long a gang's pods may go refused by its member's scheduler before the copy is
    stuck: the policy's `gangScheduleTimeoutSeconds`, else the gang scheduler's own timeout as
    the job declares it, else `DEFAULT_GANG_SCHEDULE_TIMEOUT_SECONDS`."""
    if settings.gang_schedule_timeout_seconds is not None:
        return settings.gang_schedule_timeout_seconds
    if job_timeout is not None:
        return job_timeout
    return DEFAULT_GANG_SCHEDULE_TIMEOUT_SECONDS


def _gang_start(
    settings: FailoverSettings,
    observed: Observation,
    timers: Timers,
    now: float,
    failovers: int,
    cluster: str,
) -> Verdict:
    """A copy that neither failed nor runs, judged on its gang starting: while the member's
    scheduler refuses some of its pods, the clock runs from the first refusal seen; past the
    gang's deadline the copy is stuck (not Healthy), and `tolerationSeconds` later it fails over
    (`GangUnschedulable`, counted against maxFailovers) where `failover.application` is on. A
    gang with no pod refused (pods not created yet, all bound) or that runs clears the clock."""
    if observed.gang_unschedulable is None or observed.job_running:
        return Stay(CLEAR)
    since = timers.gang_unschedulable_since if timers.gang_unschedulable_since is not None else now
    kept = Timers(gang_unschedulable_since=since)
    deadline = gang_deadline(settings, observed.gang_timeout_seconds)
    stuck_at = since + deadline
    if now < stuck_at:
        return Stay(kept, recheck_at=stuck_at)
    said = observed.gang_unschedulable
    stuck = (
        f"the gang has not started in {cluster} within its {deadline:.0f}s gang schedule "
        f"timeout: {said}"
    )
    if not settings.on_job_failure:
        return Stay(kept, stuck=stuck)
    verdict = _after_toleration(
        settings,
        kept,
        stuck_at,
        settings.toleration_seconds,
        now,
        failovers,
        "GangUnschedulable",
        f"the gang has not started in {cluster} ({said}) and has been past its "
        f"{deadline:.0f}s gang schedule timeout",
    )
    if isinstance(verdict, Stay):
        return dataclasses.replace(verdict, stuck=stuck)
    return verdict


def _after_toleration(
    settings: FailoverSettings,
    timers: Timers,
    since: float,
    toleration: float,
    now: float,
    failovers: int,
    reason: FailoverReason,
    what: str,
) -> Verdict:
    deadline = since + toleration
    held = now - since
    if now < deadline:
        return Stay(
            timers,
            recheck_at=deadline,
            waiting=f"{what} for {held:.0f}s; failing over after "
            f"{toleration:.0f}s (tolerationSeconds)",
        )
    if settings.max_failovers is not None and failovers >= settings.max_failovers:
        return GiveUp(
            reason,
            f"{what} for {held:.0f}s and the job already failed over {failovers} time(s) "
            f"(maxFailovers {settings.max_failovers})",
        )
    return Move(reason, f"{what} for {held:.0f}s (tolerationSeconds {toleration:.0f})")


def exclusion_until(settings: FailoverSettings, now: float) -> float | None:
    """Until when a cluster the job failed over from stays excluded (None: for good)."""
    if settings.cluster_exclusion_seconds is None:
        return None
    return now + settings.cluster_exclusion_seconds


def still_excluded(until: float | None, now: float) -> bool:
    return until is None or now < until


def delete_before_placing(mode: PurgeMode, *, old_cluster_reachable: bool) -> bool:
    """`Directly` removes the old copy before the job is placed again.

    When the old cluster cannot be reached, waiting for that deletion would defeat failover:
    the job is placed again at once and the stale copy is deleted (fenced) when the cluster
    comes back.
    """
    return mode == "Directly" and old_cluster_reachable


@dataclasses.dataclass(frozen=True)
class Purge:
    """What to do now with an old copy left in a cluster the job moved away from."""

    delete: bool
    #: When to look again if not deleting now (None: nothing will change by itself).
    recheck_at: float | None = None


def purge_old_copy(
    mode: PurgeMode,
    *,
    evicted_at: float,
    successor_running: bool,
    now: float,
    grace_period_seconds: float | None = None,
) -> Purge:
    """`Directly`: delete now. `Gracefully`: once the new copy runs, or after the grace period.
    `Never`: leave it for a person."""
    if mode == "Directly":
        return Purge(delete=True)
    if mode == "Never":
        return Purge(delete=False)
    grace = DEFAULT_GRACE_SECONDS if grace_period_seconds is None else grace_period_seconds
    deadline = evicted_at + grace
    if successor_running or now >= deadline:
        return Purge(delete=True)
    return Purge(delete=False, recheck_at=deadline)
