"""The admission gate: what one reconcile asks of the queue, and tells it.

A job whose binding has `suspension.scheduling: true` is queued: it gets a QueueUnit, and it is
released to gang placement only while the core has it Dequeued (holding its quota) and that
decision is written on the unit. The reconciler calls:

* `admit` before placing: True when the job may be placed (no queue holds it, or its unit is
  Dequeued); otherwise the job waits, its binding and the job's `Scheduled` condition say why
  (`SchedulingSuspended`, `NoQuota`, `NeverFits` or `TimeoutBackoff`), with an Event for the
  last three. A unit that was Running and has no cluster any more failed over: it keeps its
  quota and is placed again at once (`Admission.unplaced`).
* `placed` after placement chose a cluster: the unit is Running.
* `observe` after the member's state is mirrored: a job that succeeded, failed for good or gave
  up releases its quota at once.
* `release` when the job is deleted or gone: its quota is released and its unit removed;
  `victim_leaving` / `victim_gone` around it: a deleted job the queue evicted for another gang
  keeps that gang waiting for its room until its copies' pods are gone.

Every decision is the core's (`fleet.core.admission`); this module reads and writes.
"""

from __future__ import annotations

import hashlib
import logging

from fleet.api import constants as c
from fleet.api import format_time, rules_of_placement
from fleet.controller import preservation
from fleet.controller.context import Job, Shell, save
from fleet.controller.keys import WorkloadKey
from fleet.controller.queue.kubequeue import KubeQueue
from fleet.controller.queue.units import key_of_job, new_unit
from fleet.controller.status_mirror import (
    binding_conditions,
    mark_created,
    set_scheduled_condition,
)
from fleet.core import lifecycle
from fleet.core.admission import (
    DEQUEUED,
    LOUD_REASONS,
    RUNNING,
    TIMEOUT_BACKOFF,
    unit_end,
    waiting_reason,
)
from fleet.kube import Obj

log = logging.getLogger(__name__)

#: The sentence a gang held by the queue carries in its binding, before the queue's reason.
QUEUED_MESSAGE = "suspension.scheduling holds the job for the queue"
#: The Event a job gets when placement chose a cluster but the queue refused to charge it.
REASON_NOT_CHARGED = "QueueNotCharged"
#: How soon a queued job is looked at again while the queue is being rebuilt.
NOT_READY_RETRY_SECONDS = 1.0


def queued(job: Job) -> bool:
    suspension = job.binding.spec.suspension
    return bool(suspension is not None and suspension.scheduling)


async def admit(shell: Shell, job: Job) -> bool:
    """Whether the job may go to placement now (see the module docstring)."""
    kq = shell.kube_queue
    key = key_of_job(job.key)
    if not queued(job):
        if kq.knows(key):
            await release(shell, job.key)  # the policy stopped queueing it
        return True
    if not kq.ready:
        shell.queue.add_after(job.key, NOT_READY_RETRY_SECONDS)
        return False
    if kq.undecided(key):
        return False  # decided, not yet written: the pass requeues the job once it is
    unit = kq.unit(key)
    if unit is not None and _consumer_uid(unit) != job.uid:
        await release(shell, job.key)  # left by an earlier job of the same name
        unit = None
    if unit is None:
        unit = await _create(shell, kq, job, key)
    now = shell.clock.now()
    # Where the gang may not go: the clusters it failed over from, and those that refused it
    # (a dependency there is not fleet's): a reclaim makes no room for it there.
    refused = {cluster: why for cluster, (_, why) in job.life.refusals(now).items()}
    avoid = job.life.excluded(now) | refused
    kq.track(unit, job.gang, rules_of_placement(job.binding.spec.placement), avoid)
    phase = kq.phase(key)
    if phase == RUNNING and await kq.fail_over(key, now):
        phase = DEQUEUED
    if phase == DEQUEUED and not lifecycle.queue_evictions(job.life):
        return True
    # (a gang the queue evicted is placed again only once its old copy is gone)
    await _hold(shell, kq, job, key, now)
    return False


async def refresh(shell: Shell, job: Job) -> None:
    """Every reconcile of a job with a unit (held, dequeued or running): the unit's priority and
    opt-out of reclaim follow the job's PriorityClass, policy and namespace as they are now
    (their watches reconcile the jobs a change concerns), so the order, a preemption and a
    reclaim judge it by them."""
    kq = shell.kube_queue
    key = key_of_job(job.key)
    unit = kq.unit(key)
    if unit is None or not kq.ready or _consumer_uid(unit) != job.uid:
        return
    priority, priority_class = await _priority(shell, kq, job)
    reclaimable = await _reclaimable(shell, kq, job)
    # A job that names no class keeps its unit's own priority (an admin's edit of the unit).
    await kq.mark(key, priority=priority if priority_class else None, reclaimable=reclaimable)


async def carry_out_eviction(shell: Shell, job: Job) -> None:
    """A reclaim or preemption chose this job's gang: record it on the binding first (its stay
    ends, an eviction names the unit it makes room for, the copy is deleted after the grace
    period by the purge that follows), then tell the queue, which writes the unit and releases
    the gang that reclaimed. Not a failover: nothing is charged against maxFailovers."""
    kq = shell.kube_queue
    key = key_of_job(job.key)
    evict = kq.eviction_for(key)
    if evict is None:
        return
    now = shell.clock.now()
    cluster = job.life.cluster
    if cluster is not None and cluster != evict.cluster:
        # It had already moved (a failover) when its turn came. The eviction is carried out only
        # in the cluster whose room the claimant's proof needs (`evict.cluster`, where the hold
        # is): evicting it where it runs now would free nothing the claimant needs. The core
        # charges it there again (above a max if it must: docs/queue.md, "Late and moved gangs").
        await kq.place(key, cluster, now, moved=True)
        await kq.kept(key, now)
        return
    if job.life.cluster == evict.cluster:
        # Read before the copy is deleted (statePreservation): its next placement carries it.
        preserved = await preservation.preserve(shell, job, evict.cluster, "queue")
        life = lifecycle.evicted_by_queue(
            job.life,
            preempted=evict.kind == "Preempt",
            evicted_for=evict.by,
            message=evict.message,
            now=now,
            grace_period_seconds=shell.settings.queue_reclaim_grace,
            preserved=preserved,
        )
        reason = _eviction_reason(evict.kind)
        message = f"{QUEUED_MESSAGE}: {evict.message}"
        await save(
            shell,
            job,
            life,
            conditions=binding_conditions(
                shell, job, (c.CONDITION_SCHEDULED, "False", reason, message)
            ),
        )
        await set_scheduled_condition(shell, job.workload, "False", reason, message)
        once = eviction_event_name(lifecycle.queue_evictions(life)[-1])
        await shell.events.record(job.workload, reason, evict.message, warning=True, once=once)
        await kq.evicted(key, now, once=once)
    else:
        # Off that cluster already: the record was made before (a reconcile that failed after
        # it, or a controller killed after it); the queue is told under the record's identity,
        # so its Events are the record's, told once.
        record = next(
            (
                e
                for e in lifecycle.queue_evictions(job.life)
                if e.from_cluster == evict.cluster and e.evicted_for == evict.by
            ),
            None,
        )
        identity = eviction_event_name(record) if record is not None else None
        await kq.evicted(key, now, once=identity)


async def placed(
    shell: Shell, job: Job, cluster: str, unplaced: lifecycle.Binding | None = None
) -> bool:
    """Placement chose `cluster` for the job: its unit is Running (still holding its quota).
    False when the core refused to charge it: its placement timed out while it was being
    placed and its quota has no room now (docs/queue.md, "Late and moved gangs"). Then nothing
    is sent to the member: the binding goes back to `unplaced` (what it was before placement),
    the reservation in the member's snapshot is dropped, and the job waits for its queue."""
    kq = shell.kube_queue
    key = key_of_job(job.key)
    now = shell.clock.now()
    charge = await kq.place(key, cluster, now)
    if charge is None or charge.granted:
        return True
    member = shell.members.get(cluster)
    if member is not None:
        member.snapshot.release(job.uid)
    if unplaced is not None:
        job.life = unplaced
    text = f"placed in {cluster} after its placement timed out, and not charged: {charge.message}"
    await shell.events.record(job.workload, REASON_NOT_CHARGED, text, warning=True)
    await _hold(shell, kq, job, key, now)
    return False


async def observe(shell: Shell, job: Job, copy: Obj | None = None) -> None:
    """A job that ended releases its quota at once (exactly once; the core's rule says when a
    job has ended, the same the simulator uses). One that runs, its member copy `copy`, is
    charged what the copy runs (`running_charge`: an elastic job its member scales)."""
    kq = shell.kube_queue
    key = key_of_job(job.key)
    if not kq.knows(key):
        return
    failover = job.failover
    end = unit_end(
        job.life.phase,
        gave_up=job.life.gave_up is not None,
        retried_on_failure=failover is not None and failover.on_job_failure,
    )
    if end is not None:
        await kq.finish(key, end, shell.clock.now())
    elif copy is not None and kq.phase(key) == RUNNING:
        await kq.resize(key, job.kind.running_charge(job.gang, copy))


async def release(shell: Shell, key: WorkloadKey) -> None:
    """The job is deleted or gone: its quota is released at once and its unit removed."""
    await shell.kube_queue.forget(key_of_job(key))


def victim_leaving(shell: Shell, key: WorkloadKey, life: lifecycle.Binding | None) -> None:
    """The job is being deleted (before `release`): if the queue evicted it for another gang
    (recorded on its binding, or decided and not yet recorded), that gang goes on waiting for
    the room, its placement timeout and its hold stopped, until the job is gone with its copies
    and their pods (`victim_gone`): their grace period may be long."""
    kq = shell.kube_queue
    unit = key_of_job(key)
    pending = [e for e in lifecycle.queue_evictions(life) if e.evicted_for] if life else []
    decided = kq.eviction_for(unit)
    claimant = pending[-1].evicted_for if pending else decided.by if decided else None
    if claimant:
        kq.copy_pending(unit, claimant)


def victim_gone(shell: Shell, key: WorkloadKey) -> None:
    """The job is gone, its copies and their pods with it: a gang it made room for has it."""
    shell.kube_queue.copy_gone(key_of_job(key))


# -- helpers -----------------------------------------------------------------------------------


def _consumer_uid(unit: Obj) -> str | None:
    uid = ((unit.get("spec") or {}).get("consumerRef") or {}).get("uid")
    return str(uid) if uid else None


async def _create(shell: Shell, kq: KubeQueue, job: Job, key: str) -> Obj:
    """The job's unit: made now, with its quota's Queue and its priority."""
    workload = job.workload
    meta = workload["metadata"]
    quota = kq.quota_for(meta.get("namespace") or "", meta.get("labels"))
    priority, priority_class = await _priority(shell, kq, job)
    unit = new_unit(
        workload,
        job.kind.charge(job.gang),
        queue=kq.queue_name(quota),
        priority=priority,
        priority_class=priority_class,
        reclaimable=await _reclaimable(shell, kq, job),
    )
    return await kq.create_unit(key, unit, shell.clock.now())


async def _hold(shell: Shell, kq: KubeQueue, job: Job, key: str, now: float) -> None:
    """The job waits: its binding, its condition, its unit's message (each written only when
    it changed) and, for a job with no quota or that can never fit, a Warning Event."""
    why = kq.why(key, now)
    phase = kq.phase(key)
    text = why.message if why is not None else f"phase {phase}"
    reason = waiting_reason(phase, why.kind if why is not None else None)
    for eviction in lifecycle.queue_evictions(job.life):
        # Evicted by the queue, its copy not deleted yet: the condition says so, in numbers.
        reason = _eviction_reason("Preempt" if eviction.reason == lifecycle.PREEMPTED else "")
        text = f"{eviction.message}; its copy in {eviction.from_cluster} is being deleted; {text}"
    message = f"{QUEUED_MESSAGE}: {text}"
    await save(
        shell,
        job,
        lifecycle.queued(job.life),
        status={"pendingReasons": None, "pendingReasonCounts": None},
        conditions=binding_conditions(
            shell, job, (c.CONDITION_SCHEDULED, "False", reason, message)
        ),
    )
    shell.triggers.track(
        job.key, cluster=None, evicting=[e.from_cluster for e in job.life.evictions]
    )
    if reason in LOUD_REASONS:
        await shell.events.record(job.workload, reason, text, warning=True)
    mark_created(job.workload, "FleetQueued", "in its queue", now)
    await set_scheduled_condition(shell, job.workload, "False", reason, message)
    if phase != TIMEOUT_BACKOFF:  # the unit keeps the pass's word on why it backed off
        await kq.write(key, text, now)


async def _reclaimable(shell: Shell, kq: KubeQueue, job: Job) -> bool:
    """False when the job's policy (label or annotation) or its namespace (label) sets
    `kube-queue.fleet.dev/reclaimable: "false"` (docs/queue.md, "Reclaim"). A namespace not
    seen by the watch yet is read; a failed read raises (the reconcile is retried), never
    taken for "reclaimable"."""
    policy = shell.policies.get(job.binding.spec.policy)
    meta = policy.metadata if policy is not None else None
    for marks in (meta.labels, meta.annotations) if meta is not None else ():
        if (marks or {}).get(c.RECLAIMABLE_LABEL) == "false":
            return False
    namespace = job.key.namespace
    labels = kq.known_namespace(namespace)
    if labels is None:
        found = await shell.fleet.get("v1", "Namespace", namespace)
        labels = dict(((found or {}).get("metadata") or {}).get("labels") or {})
        if found is not None:
            kq.remember_namespace(namespace, labels)
    return labels.get(c.RECLAIMABLE_LABEL) != "false"


async def evictions_settled(shell: Shell, job: Job) -> None:
    """After the purge: while a queue eviction is left on the binding, the gang it made room for
    waits for it (kept from the binding itself); once none is left, the victim's old copy is
    gone and the gang it made room for may claim again. A pending eviction's Events are posted
    (once: a controller killed between the record and its Events leaves them to this one)."""
    key = key_of_job(job.key)
    pending = [e for e in lifecycle.queue_evictions(job.life) if e.evicted_for]
    if pending:
        # Read from the binding on every reconcile, so a restarted controller knows it even
        # before its caches have every binding.
        shell.kube_queue.copy_pending(key, pending[-1].evicted_for or "")
        for eviction in pending:
            once = eviction_event_name(eviction)
            await shell.events.record(
                job.workload, eviction.reason, eviction.message, warning=True, once=once
            )
            unit = shell.kube_queue.unit(key)
            if unit is not None:
                await shell.events.record(
                    unit, eviction.reason, eviction.message, warning=True, once=once
                )
    else:
        shell.kube_queue.copy_gone(key)


def eviction_event_name(eviction: lifecycle.Eviction) -> str:
    """The identity of a queue eviction's Events: a digest of what its record on the binding
    holds (cluster, claimant, creation second), the same before and after a restart."""
    fact = "|".join(
        (eviction.from_cluster, eviction.evicted_for or "", format_time(eviction.created_at))
    )
    return "evicted-" + hashlib.sha256(fact.encode()).hexdigest()[:12]


def _eviction_reason(kind: str) -> str:
    return lifecycle.PREEMPTED if kind == "Preempt" else lifecycle.RECLAIMED


async def _priority(shell: Shell, kq: KubeQueue, job: Job) -> tuple[int, str | None]:
    """The job's PriorityClass value (0 when it names none, or one that does not exist); which
    class a job names is its kind adapter's to say. A class not seen by the watch yet is read;
    a failed read raises (the reconcile is retried), never taken for priority 0."""
    name = job.kind.priority_class(job.workload, job.needed)
    if not name:
        return 0, None
    known = kq.known_priority(name)
    if known is None:
        found = await shell.fleet.get("scheduling.k8s.io/v1", "PriorityClass", name)
        if found is None:
            return 0, name
        known = int(found.get("value") or 0)
        kq.remember_priority(name, known)
    return known, name


__all__ = [
    "QUEUED_MESSAGE",
    "admit",
    "carry_out_eviction",
    "evictions_settled",
    "observe",
    "placed",
    "queued",
    "refresh",
    "release",
    "victim_gone",
    "victim_leaving",
]
