"""Placing a bound gang: the engine's decision over the live member snapshots, written first.

The rules come from the placement the binding keeps (synced from its policy): clusterAffinity or
the ordered clusterAffinities groups (searched from the group the last placement used), the
clusterTolerations against MemberCluster taints, the clusters the gang failed over from, and
the members that are not Ready. The chosen assignment is reserved in the member's snapshot
before the decision is written, so two gangs placed a moment apart never count the same GPUs.
"""

from __future__ import annotations

import logging
import time

from fleet.api import PendingReason, rules_of_placement
from fleet.api import constants as c
from fleet.controller import reserving
from fleet.controller.context import Job, Shell, save
from fleet.controller.metrics import seconds_since_created
from fleet.controller.queue.units import key_of_job
from fleet.controller.status_mirror import (
    binding_conditions,
    mark_created,
    set_scheduled_condition,
)
from fleet.controller.triggers import Demand
from fleet.core import lifecycle
from fleet.core.admission.hold import place_claimant
from fleet.core.arrivals import mix_of
from fleet.core.estimate import estimator_named
from fleet.core.fragmentation import WorkloadMix
from fleet.core.placement import Decision, GroupDecision, place_in_groups

log = logging.getLogger(__name__)

#: How many clusters a waiting gang's binding explains one by one (`pendingReasons`): the
#: closest; every cluster is counted by code in `pendingReasonCounts`, so a binding's size does
#: not grow with the fleet.
PENDING_REASONS_LIMIT = 10


async def schedule(shell: Shell, job: Job) -> str | None:
    """Place the gang; the chosen cluster, or None when it waits (the binding says why)."""
    now = shell.clock.now()
    news = shell.triggers.news  # before any snapshot is read: what comes later wakes it
    first = not job.life.stays  # its first placement: fleet_placement_seconds counts it
    rules = rules_of_placement(job.binding.spec.placement)
    estimator = estimator_named(job.binding.spec.estimator or shell.settings.estimator)
    mix = _mix(shell, job)
    members = shell.members
    for snapshot in members.snapshots():
        snapshot.expire(shell.clock.monotonic())
    started = time.perf_counter()
    # The policy's gangTopology applies to a gang whose templates ask for none.
    gang = job.gang.with_default_topology(rules.topology)
    # A claimant of a reclaim: the room held for it is its own, its member tried first
    # (`hold.place_claimant`, the simulator's rule); every other gang sees that room taken.
    claimant = key_of_job(job.key)
    hold = shell.kube_queue.admission.hold_of(claimant) if shell.kube_queue.ready else None
    views = {snapshot.name: snapshot for snapshot in members.snapshots()}

    def decide(names: list[str]) -> GroupDecision:
        return place_in_groups(
            gang,
            [views[name] for name in names],
            rules.groups,
            start_at=job.life.affinity_group,
            affinity=rules.affinity,
            estimator=estimator,
            failed_over=job.life.excluded(now),
            not_ready=members.not_ready(),
            taints=members.taints(),
            tolerations=rules.tolerations,
            mix=mix,
            lacking=_cannot_run(shell, job),
            refused=job.life.refusals(now),
            now=now,
            domain_wait_since=job.life.domain_wait_since,
        )

    result = place_claimant(hold, views, decide, _chosen)
    shell.metrics.decision_seconds.observe(time.perf_counter() - started)
    decision = result.decision
    chosen = decision.placement
    if chosen is None:
        # What the gang needs, so a member's capacity wakes it only if that member could now
        # hold it; a claimant's room is held for it alone, so any news wakes it (None).
        demand = Demand(gang, estimator) if hold is None else None
        await _wait_for_capacity(shell, job, decision, demand, news)
        return None
    target = members.get(chosen.cluster)
    assert target is not None
    target.snapshot.reserve(
        job.uid, chosen.assignment, shell.clock.monotonic() + shell.settings.reservation_seconds
    )
    # Where the member reserves capacity for gangs, the binding is Reserving until it has.
    terms = job.binding.spec.placement
    strategy = terms.replica_scheduling if terms else None
    by_policy = strategy.gang_reservation if strategy else None
    reserve = reserving.wanted(target, by_policy, reservable=job.kind.reservable)
    place = lifecycle.reserving if reserve else lifecycle.scheduled
    life = place(
        job.life, chosen.cluster, now, group=result.group, domains=chosen.assignment.domains
    )
    result_message = lifecycle.result_message(str(chosen))
    # The binding also says why this cluster won, in numbers, and why the others were not
    # chosen.
    compared = (
        chosen.runner_up is not None
        or chosen.score.fragmentation is not None
        or bool(chosen.assignment.domains)
    )
    explained = f"{result_message}; chosen: {chosen.why}" if compared else result_message
    others = "; ".join(decision.sentences())
    if others:
        explained = f"{explained}; not chosen: {others}"
    # A new binding's first decision: created with it now, its status written with the
    # dispatch's (after the member copy is created, in the same reconcile). What a crash in
    # between loses, the next reconcile derives again (see docs/controller.md, "Crash safety").
    first = not shell.bindings.written(job.binding) and place is lifecycle.scheduled
    try:
        await save(
            shell,
            job,
            life,
            status={"pendingReasons": None, "pendingReasonCounts": None},
            conditions=binding_conditions(
                shell, job, (c.CONDITION_SCHEDULED, "True", c.REASON_SCHEDULED, explained)
            ),
            observed=True,
            defer_status=first,
        )
    except BaseException:  # refused, failed, or cancelled (the replica stopped leading)
        target.snapshot.release(job.uid)
        if hold is not None:
            shell.kube_queue.holds.taken(claimant)  # held again by the next pass
        raise
    shell.triggers.track(job.key, cluster=chosen.cluster, evicting=_evicting(life))
    shell.metrics.dispatches.inc(chosen.cluster)
    if first:
        waited = seconds_since_created(job.workload, now)
        if waited is not None:
            shell.metrics.placement_seconds.observe(waited)
    shell.metrics.pending.set(len(shell.triggers.pending))
    await shell.events.record(
        job.workload, "ScheduleBindingSucceed", result_message, component=job.scheduler_name(shell)
    )
    log.info("%s: %s", job.key, result_message)
    return chosen.cluster


def _chosen(result: GroupDecision) -> str | None:
    placement = result.decision.placement
    return placement.cluster if placement is not None else None


def _cannot_run(shell: Shell, job: Job) -> dict[str, str]:
    """The members that cannot run the job: no CRD for its kind there, or (its adapter says,
    `gang_refusal`) not as one gang with that member's gang scheduler and schedulerName."""
    out = shell.members.lacking(job.key.api_version, job.key.kind)
    for name, member in shell.members.members.items():
        if name in out:
            continue
        refusal = job.kind.gang_refusal(
            job.workload,
            job.needed,
            gang_scheduler=member.gang_scheduler,
            scheduler_name=member.scheduler_name,
        )
        if refusal is not None:
            out[name] = f"cannot gang-schedule this {job.key.kind}: {refusal}"
    return out


def _mix(shell: Shell, job: Job) -> WorkloadMix | None:
    """The workload mix to rank by when the policy (or the fleet default) asks for the
    fragmentation score; before any arrival, the gang's own pods."""
    terms = job.binding.spec.placement
    strategy = terms.replica_scheduling if terms else None
    scoring = (strategy.gang_scoring if strategy else None) or shell.settings.scoring
    if scoring != "fragmentation":
        return None
    return shell.arrivals.mix() or mix_of(job.gang)


def _evicting(life: lifecycle.Binding) -> list[str]:
    return [e.from_cluster for e in life.evictions]


async def _wait_for_capacity(
    shell: Shell, job: Job, decision: Decision, demand: Demand | None, news: int
) -> None:
    """No cluster can take the gang: the binding gives the reasons of the closest
    `PENDING_REASONS_LIMIT` clusters and counts every cluster's code, and the gang is retried
    when a member that may hold it (`demand`) changes, a member turns Ready or joins, or a
    policy changes (or an exclusion runs out, or its wait for a domain does: then it is placed
    spread)."""
    now = shell.clock.now()
    wait = decision.domain_wait
    life = (
        lifecycle.waiting_for_domain(job.life, wait.since)
        if wait is not None
        else lifecycle.waiting(job.life)
    )
    reason = c.REASON_WAITING_FOR_DOMAIN if wait is not None else c.REASON_NO_CLUSTER_FIT
    reasons = [
        PendingReason(
            cluster=r.cluster, reason=r.reason, code=r.category, facts=dict(r.facts) or None
        ).to_dict()
        for r in decision.closest(PENDING_REASONS_LIMIT)
    ] or [
        PendingReason(
            cluster="(none)", reason="the fleet has no member clusters", code="NoClusters"
        ).to_dict()
    ]
    summary = (
        decision.summary()
        if decision.rejections
        else "0/0 clusters: the fleet has no member clusters"
    )
    await save(
        shell,
        job,
        life,
        status={"pendingReasons": reasons, "pendingReasonCounts": decision.counts() or None},
        conditions=binding_conditions(
            shell, job, (c.CONDITION_SCHEDULED, "False", reason, summary)
        ),
        observed=True,
    )
    shell.triggers.track(
        job.key,
        cluster=None,
        evicting=_evicting(life),
        waiting_since=shell.clock.monotonic(),
        demand=demand,
        news_seen=news,
    )
    shell.metrics.pending.set(len(shell.triggers.pending))
    ends = [life.next_exclusion_end(now), wait.until if wait is not None else None]
    retry_at = min((t for t in ends if t is not None), default=None)
    if retry_at is not None:
        shell.queue.add_after(job.key, max(retry_at - now, 0.0) + 0.05)
    await shell.events.record(
        job.workload,
        "ScheduleBindingFailed",
        summary,
        warning=True,
        component=job.scheduler_name(shell),
    )
    mark_created(job.workload, "FleetPending", "for a cluster", now)
    await set_scheduled_condition(shell, job.workload, "False", reason, summary)
