"""Failover for a bound gang: judge its cluster, move it or give up, purge what it left behind.

Every decision is the core's: `fleet.core.failover.judge` says stay, move or give up, and
`fleet.core.lifecycle` says what the binding becomes (history, exclusions, evictions, phase).
This module gathers what they need (the member's health, its taints, the copy's state) and
carries out the result: the binding first, then the member, then events and the fleet job.
"""

from __future__ import annotations

import logging

from fleet.api import constants as c
from fleet.api import format_time, rules_of_placement
from fleet.api.conditions import condition_of
from fleet.controller import copies, dependencies, preservation
from fleet.controller.context import Job, Shell, save
from fleet.controller.member_copy import copy_gone, delete_copy, release_copy
from fleet.controller.members import Member
from fleet.controller.members.health import credentials_refused, recovery
from fleet.controller.status_mirror import (
    binding_conditions,
    conditions_of,
    patch_workload_status,
    with_fleet_condition,
    with_job_condition,
)
from fleet.core import failover, ledger, lifecycle
from fleet.core.jobstate import JobState
from fleet.core.taints import no_execute_grace

log = logging.getLogger(__name__)


def copy_state(shell: Shell, job: Job, cluster: str | None) -> JobState | None:
    """The state of the gang's copy in `cluster`, as that member's watch last saw it."""
    member = shell.members.get(cluster) if cluster else None
    if member is None:
        return None
    key = job.key
    found = member.job(key.api_version, key.kind, key.namespace, key.name)
    if found is None or not copies.is_ours(found, job.uid):
        return None
    return job.kind.state(found.get("status"))


# -- copies left behind ----------------------------------------------------------------------


async def purge_old_copies(shell: Shell, job: Job) -> None:
    """Carry out the binding's evictions (the ledger of copies outside the target,
    `fleet.core.ledger`): delete each old copy when its purge mode says, in the foreground so
    its pods go first, and end the eviction only once the copy and its pods are observed gone
    in that cluster, found by its identity under whatever MemberCluster name it has now. A
    cluster that cannot be reached, or left the fleet, keeps its eviction: the binding shows the
    copy as unfenced, and the collector deletes it the moment the cluster answers again."""
    life = job.life
    now = shell.clock.now()
    plan = lifecycle.purge_plan(
        life.evictions, successor=copy_state(shell, job, life.cluster), now=now
    )
    done: list[str] = []
    outside: list[ledger.Outside] = []
    for eviction in life.evictions:
        member = holder(shell, eviction)
        key = job.key
        if member is not None and (
            member.name == life.cluster or member.lacks(key.api_version, key.kind)
        ):
            # The gang was placed in that very cluster again (under the name it has now): the
            # copy there is its current one, never to be purged. Or the cluster serves no such
            # kind, so it holds no copy.
            done.append(eviction.from_cluster)
            continue
        if (
            member is None
            or not member.ready
            or member.client is None
            or not member.jobs_synced(key.api_version, key.kind)
        ):
            outside.append(ledger.Outside(eviction, "Unreachable", eviction.created_at))
            continue
        if observed_gone(member, job):
            # Its dependencies there go now that it has (let go once: their records go too).
            job.binding = await dependencies.let_go(
                shell, key, job.binding, job.workload, member, recorded_as=eviction.from_cluster
            )
            done.append(eviction.from_cluster)
            continue
        if eviction.purge_mode == "Never" and _leaving_the_fleet(member):
            # Never keeps the old copy, and its member leaves the fleet (fleet unjoin): the copy
            # is let go with it, as --leave does (fleet's marks removed, its dependencies
            # too), and the job says so; nothing of fleet's is left there to manage.
            if await release_copy(member, key, job.uid):
                job.binding = await dependencies.leave(shell, key, job.binding, member)
                await shell.events.record(
                    job.workload,
                    "OldCopyLeft",
                    f"the old copy in {member.name} is left running, unmanaged: purgeMode "
                    f"Never keeps it, and {member.name} is leaving the fleet",
                    warning=True,
                )
            done.append(eviction.from_cluster)
            continue
        if eviction not in plan.delete:
            outside.append(ledger.Outside(eviction, "Overlap"))
            continue
        if await delete_copy(member, key, job.uid):
            fenced = eviction.reason == c.REASON_CLUSTER_LOST
            what = "fenced a stale copy" if fenced else "purged"
            await shell.events.record(
                job.workload,
                "StaleCopyDeleted" if fenced else "OldCopyDeleted",
                f"{what} in {member.name} ({eviction.purge_mode}); the gang starts again "
                "elsewhere once its pods are gone"
                if eviction.purge_mode == "Directly"
                else f"{what} in {member.name} ({eviction.purge_mode})",
            )
            shell.metrics.purges.inc(member.name)
        if observed_gone(member, job):  # its watch may have seen it go already
            job.binding = await dependencies.let_go(
                shell, key, job.binding, job.workload, member, recorded_as=eviction.from_cluster
            )
            done.append(eviction.from_cluster)
        else:
            outside.append(ledger.Outside(eviction, "Deleting"))
    job.outside = tuple(outside)
    if plan.recheck_at is not None:
        shell.queue.add_after(job.key, plan.recheck_at - now)
    if any(o.state == "Deleting" for o in outside):
        shell.queue.add_after(job.key, DELETING_RECHECK_SECONDS)  # until its pods are gone
    status, reason, message = ledger.old_copies(outside, format_time)
    current = job.binding.condition(c.CONDITION_OLD_COPIES_REMOVED)
    changed = (current is None and status == "False") or (
        current is not None and (current.status, current.message) != (status, message)
    )
    if done or changed:
        await save(
            shell,
            job,
            lifecycle.evictions_done(life, done) if done else None,
            conditions=binding_conditions(
                shell, job, (c.CONDITION_OLD_COPIES_REMOVED, status, reason, message)
            )
            if changed
            else None,
        )
        if changed and reason == ledger.UNFENCED:
            await shell.events.record(job.workload, reason, message, warning=True)
    shell.metrics.outside_copies.set(
        str(job.key), [(o.eviction.from_cluster, o.state) for o in outside]
    )
    shell.triggers.track(
        job.key,
        cluster=job.life.cluster,
        evicting=[m.name for e in job.life.evictions if (m := holder(shell, e)) is not None],
    )


#: How often a gang whose old copy is being deleted looks again for its pods to be gone (the
#: member's pod events requeue it sooner).
DELETING_RECHECK_SECONDS = 2.0


def holder(shell: Shell, eviction: lifecycle.Eviction) -> Member | None:
    """The member an old copy is in: by the cluster's identity where the eviction recorded it
    (the cluster may have joined again under another name), else by name."""
    if eviction.cluster_id:
        found = shell.members.by_identity(eviction.cluster_id)
        if found is not None:
            return found
        member = shell.members.get(eviction.from_cluster)
        # The name now reaches another cluster: this one's copy is not there.
        return member if member is not None and member.cluster_id in (None, "") else None
    return shell.members.get(eviction.from_cluster)


def _leaving_the_fleet(member: Member) -> bool:
    """Whether `member` carries the unjoining taint (`fleet unjoin`, --move or --leave)."""
    return any(t.key == c.UNJOINING_TAINT_KEY for t in member.taints)


def observed_gone(member: Member, job: Job) -> bool:
    """Whether the job's old copy and its pods are gone from `member`'s watches."""
    return copy_gone(member, job.key, job.uid)


# -- judging the current cluster ---------------------------------------------------------------


async def judge(shell: Shell, job: Job) -> bool:
    """Failover judgement on the gang's cluster; False ends this reconcile (it gave up)."""
    target = job.life.cluster
    assert target is not None
    member = shell.members.get(target)
    ready: bool | None = member is not None and member.ready
    left = member is None and shell.members.left(target)
    unseen = not member.known if member is not None else not left
    if unseen:
        ready = None  # just (re)connected, or not heard of yet: no verdict on what we have not seen
    state = copy_state(shell, job, target)
    synced = member is not None and member.jobs_synced(job.key.api_version, job.key.kind)
    tolerations = rules_of_placement(job.binding.spec.placement).tolerations
    evicting = no_execute_grace(tolerations, member.taints) if member is not None else None
    observed = failover.Observation(
        cluster_ready=ready,
        cluster_refuses=refusal_of(member),
        job_failed=(state == "Failed") if synced else None,
        job_succeeded=state == "Succeeded",
        job_running=state == "Running",
        gang_unschedulable=member.unscheduled.summary(job.uid) if member is not None else None,
        gang_timeout_seconds=job.kind.gang_timeout_seconds(job.workload),
        no_execute=(str(evicting[0]), evicting[1]) if evicting else None,
        unjoining=member is not None
        and any(
            t.key == c.UNJOINING_TAINT_KEY and t.value != c.UNJOINING_LEAVE for t in member.taints
        ),
        leaving=left
        or (
            member is not None
            and any(
                t.key == c.UNJOINING_TAINT_KEY and t.value == c.UNJOINING_LEAVE
                for t in member.taints
            )
        ),
    )
    now = shell.clock.now()
    verdict = failover.judge(
        job.failover,
        observed,
        job.life.timers,
        now,
        failovers=job.life.failover_count,
        cluster=target,
    )
    if isinstance(verdict, failover.Stay):
        job.stuck = verdict.stuck
        if verdict.refused is not None and member is not None:
            await _stay_refused(shell, job, member, verdict)
        elif verdict.stuck is not None:
            await _stay_stuck(shell, job, verdict)
        elif verdict.timers != job.life.timers:
            await save(shell, job, lifecycle.with_timers(job.life, verdict.timers))
            if verdict.waiting:
                await shell.events.record(
                    job.workload, "FailoverPending", verdict.waiting, warning=True
                )
        if verdict.recheck_at is not None:
            shell.queue.add_after(job.key, verdict.recheck_at - now + 0.05)
        return True
    if isinstance(verdict, failover.GiveUp):
        await _give_up(shell, job, target, verdict)
        return False
    if isinstance(verdict, failover.Release):
        await _release(shell, job, target, verdict)
        return False
    await _fail_over(shell, job, target, verdict)
    return True


async def _stay_stuck(shell: Shell, job: Job, verdict: failover.Stay) -> None:
    """The gang has not started in its member within its deadline: its timers are kept, the
    mirror writes the binding's Healthy=False and the fleet job's Scheduled=False (reason
    GangUnschedulable, the member's word), and a Warning Event says so once, when the copy
    turns stuck (a reconcile that finds the binding saying so already posts none)."""
    assert verdict.stuck is not None
    life = lifecycle.with_timers(job.life, verdict.timers)
    if life != job.life:
        await save(shell, job, life)
    healthy = condition_of(binding_conditions(shell, job), c.CONDITION_HEALTHY)
    if healthy.get("reason") == c.REASON_GANG_UNSCHEDULABLE:
        return
    message = verdict.stuck
    if verdict.recheck_at is not None:
        message += f"; failing over at {format_time(verdict.recheck_at)} unless it starts"
    await shell.events.record(job.workload, c.REASON_GANG_UNSCHEDULABLE, message, warning=True)
    log.warning("%s: %s", job.key, message)


def refusal_of(member: Member | None) -> str | None:
    """The member's health reason when it is NotReady for refusing fleet's credentials (or
    fleet has none it may use), not for being lost (`members.health.credentials_refused`)."""
    if member is None or member.ready or not credentials_refused(member.health.reason):
        return None
    return member.health.reason


async def _stay_refused(shell: Shell, job: Job, member: Member, verdict: failover.Stay) -> None:
    """The gang stays bound to a member that refuses fleet's credentials: the binding says so
    (Healthy=Unknown, CredentialsRefused) with the member's reason, since when and the way back,
    and a Warning Event says it once per refusal (a reconcile that finds it said already writes
    nothing)."""
    head = verdict.waiting or ""
    healthy = condition_of(binding_conditions(shell, job), c.CONDITION_HEALTHY)
    said = (
        healthy.get("status") == "Unknown"
        and healthy.get("reason") == c.REASON_CREDENTIALS_REFUSED
        and str(healthy.get("message") or "").startswith(head)
    )
    life = lifecycle.with_timers(job.life, verdict.timers)
    if said:
        if life != job.life:
            await save(shell, job, life)
        return
    now = shell.clock.now()
    since = format_time(now - (shell.clock.monotonic() - member.health.since))
    way_back = recovery(member.name, member.health.reason) or (
        f"`kubectl describe membercluster {member.name}` says what to do"
    )
    message = f"{head}; since {since}; {way_back}"
    await save(
        shell,
        job,
        life,
        conditions=binding_conditions(
            shell, job, (c.CONDITION_HEALTHY, "Unknown", c.REASON_CREDENTIALS_REFUSED, message)
        ),
    )
    await shell.events.record(job.workload, c.REASON_CREDENTIALS_REFUSED, message, warning=True)
    log.warning("%s: %s", job.key, message)


async def _give_up(shell: Shell, job: Job, target: str, verdict: failover.GiveUp) -> None:
    life = lifecycle.gave_up(job.life, verdict)
    message = life.gave_up or verdict.message
    await save(
        shell,
        job,
        life,
        conditions=binding_conditions(
            shell, job, (c.CONDITION_HEALTHY, "False", lifecycle.GAVE_UP_REASON, message)
        ),
    )
    now = shell.clock.now()
    generation = job.workload["metadata"].get("generation")
    conditions = with_fleet_condition(
        job.kind,
        conditions_of(job.workload),
        "True",
        c.REASON_SCHEDULED,
        f"Binding was scheduled to {target}",
        now,
        generation=generation,
    )
    for failed in job.kind.failed_conditions:  # a batch Job: FailureTarget, then Failed
        conditions = with_job_condition(
            job.kind,
            conditions,
            failed,
            lifecycle.GAVE_UP_REASON,
            message,
            now,
            generation=generation,
        )
    status = job.kind.fleet_word("Failed", lifecycle.GAVE_UP_REASON, message)
    if job.kind.conditions is not None:
        status["conditions"] = conditions
    if status:
        await patch_workload_status(shell, job.workload, status)
    await shell.events.record(job.workload, lifecycle.GAVE_UP_REASON, message, warning=True)
    log.warning("%s: %s", job.key, message)


async def _release(shell: Shell, job: Job, target: str, verdict: failover.Release) -> None:
    """Let the gang go with its cluster: the copy there loses fleet's labels (so no sweep, no
    later join, no other fleet takes it for a copy to manage or delete), and so do its
    dependencies (kept: the job uses them; no longer recorded), the binding is Released, and
    the fleet job says where it was left. No copy is made anywhere else."""
    member = shell.members.get(target)
    if member is not None and member.ready and member.client is not None:
        await release_copy(member, job.key, job.uid)
        job.binding = await dependencies.leave(shell, job.key, job.binding, member)
        member.snapshot.release(job.uid)
    life = lifecycle.released(job.life, verdict, shell.clock.now())
    message = life.released or verdict.message
    await save(
        shell,
        job,
        life,
        conditions=binding_conditions(
            shell, job, (c.CONDITION_HEALTHY, "False", lifecycle.RELEASED_REASON, message)
        ),
    )
    shell.triggers.track(job.key, cluster=None, evicting=[])
    if job.kind.conditions is not None:
        conditions = with_fleet_condition(
            job.kind,
            conditions_of(job.workload),
            "False",
            lifecycle.RELEASED_REASON,
            message,
            shell.clock.now(),
            generation=job.workload["metadata"].get("generation"),
        )
        await patch_workload_status(shell, job.workload, {"conditions": conditions})
    await shell.events.record(job.workload, lifecycle.RELEASED_REASON, message, warning=True)
    log.warning("%s: %s", job.key, message)


async def _fail_over(shell: Shell, job: Job, target: str, verdict: failover.Move) -> None:
    member = shell.members.get(target)
    reachable = member is not None and member.ready and member.client is not None
    # Read before the old copy can go (statePreservation): the next copy carries it.
    preserved = await preservation.preserve(
        shell, job, target, preservation.move_kind(verdict.reason)
    )
    now = shell.clock.now()
    moved = lifecycle.failed_over(
        job.life,
        verdict,
        job.failover or failover.NO_FAILOVER,
        now,
        old_cluster_reachable=reachable,
        preserved=preserved,
        cluster_id=member.cluster_id if member is not None else None,
    )
    # The move is saved first (its eviction is the record of the old copy), then the old copy
    # is deleted: a controller stopped in between finds the eviction and finishes it, and never
    # recreates the copy where the gang failed.
    await save(
        shell,
        job,
        moved.binding,
        conditions=binding_conditions(
            shell, job, (c.CONDITION_SCHEDULED, "False", c.REASON_FAILED_OVER, moved.message)
        ),
    )
    if member is not None:
        member.snapshot.release(job.uid)
    # Directly: the old copy goes now, and the new placement waits until its pods are gone
    # (the purge finds what is left of it).
    await purge_old_copies(shell, job)
    shell.triggers.track(
        job.key, cluster=None, evicting=[e.from_cluster for e in moved.binding.evictions]
    )
    shell.metrics.failovers.inc(verdict.reason)
    await shell.events.record(job.workload, "FailoverTriggered", moved.message, warning=True)
    # The kind's own words: the old copy's end dropped, its restarting type (Kubeflow's
    # Restarting) if it has one, fleet's Scheduled False, in the kind's shape.
    generation = job.workload["metadata"].get("generation")
    style = job.kind.conditions
    status = job.kind.fleet_word("Restarting", "FailingOver", moved.message)
    if style is not None:
        conditions = [x for x in conditions_of(job.workload) if x.get("type") not in style.ended]
        if style.restarting is not None:
            conditions = with_job_condition(
                job.kind,
                conditions,
                style.restarting,
                "FailingOver",
                moved.message,
                now,
                generation=generation,
            )
        status["conditions"] = with_fleet_condition(
            job.kind,
            conditions,
            "False",
            c.REASON_FAILED_OVER,
            moved.message,
            now,
            generation=generation,
        )
    if status:
        await patch_workload_status(shell, job.workload, status)
    log.warning("%s: %s", job.key, moved.message)
