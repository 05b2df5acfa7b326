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
FailoverReason = Literal["ApplicationFailure", "ClusterLost"]

#: Karmada's default graceful-eviction timeout: the longest an old copy waits for its successor.
DEFAULT_GRACE_SECONDS = 600.0


@dataclasses.dataclass(frozen=True)
class FailoverSettings:
    """A job's failover parameters, as its policy set them when it was first bound."""

    toleration_seconds: float = 300.0
    purge_mode: PurgeMode = "Gracefully"
    grace_period_seconds: float | None = None
    #: Give up after this many failovers; None = never give up.
    max_failovers: int | None = None
    #: How long a cluster the job failed in stays excluded; None = for the job's lifetime.
    cluster_exclusion_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the controller sees of the job's current copy right now.

    `None` means "not known yet" (a controller that just started has not heard from the member,
    or has not listed its jobs): nothing is judged on it, and the persisted timers stand.
    """

    #: The member answers and reports Ready.
    cluster_ready: bool | None
    #: The member copy is Failed (its conditions say so); meaningless while the cluster is lost.
    job_failed: bool | None = False
    #: The member copy Succeeded: a finished job never moves.
    job_succeeded: bool = False


@dataclasses.dataclass(frozen=True)
class Timers:
    """When each failover condition started; None while it does not hold."""

    unhealthy_since: float | None = None
    cluster_lost_since: float | None = None


CLEAR = Timers()


@dataclasses.dataclass(frozen=True)
class Stay:
    """Keep the job where it is; persist `timers`; look again at `recheck_at` if set."""

    timers: Timers
    recheck_at: float | None = None
    #: Why we are waiting (a failure being tolerated), for status and events.
    waiting: str | None = None


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


Verdict = Stay | Move | GiveUp


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
    """
    if settings is None or (observed.job_succeeded and observed.cluster_ready):
        return Stay(CLEAR)
    if observed.cluster_ready is None:
        return Stay(timers)
    if not observed.cluster_ready:
        since = timers.cluster_lost_since if timers.cluster_lost_since is not None else now
        kept = Timers(unhealthy_since=timers.unhealthy_since, cluster_lost_since=since)
        return _after_toleration(
            settings,
            kept,
            since,
            now,
            failovers,
            "ClusterLost",
            f"{cluster} has been unreachable or not Ready",
        )
    if observed.job_failed is None:
        return Stay(Timers(unhealthy_since=timers.unhealthy_since))
    if observed.job_failed:
        since = timers.unhealthy_since if timers.unhealthy_since is not None else now
        kept = Timers(unhealthy_since=since, cluster_lost_since=None)
        return _after_toleration(
            settings,
            kept,
            since,
            now,
            failovers,
            "ApplicationFailure",
            f"the job has been Failed in {cluster}",
        )
    return Stay(CLEAR)


def _after_toleration(
    settings: FailoverSettings,
    timers: Timers,
    since: float,
    now: float,
    failovers: int,
    reason: FailoverReason,
    what: str,
) -> Verdict:
    deadline = since + settings.toleration_seconds
    held = now - since
    if now < deadline:
        return Stay(
            timers,
            recheck_at=deadline,
            waiting=f"{what} for {held:.0f}s; failing over after "
            f"{settings.toleration_seconds:.0f}s (tolerationSeconds)",
        )
    if settings.max_failovers is not None and failovers >= settings.max_failovers:
        return GiveUp(
            reason,
            f"{what} for {held:.0f}s and the job already failed over {failovers} time(s) "
            f"(maxFailovers {settings.max_failovers})",
        )
    return Move(
        reason, f"{what} for {held:.0f}s (tolerationSeconds {settings.toleration_seconds:.0f})"
    )


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
