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
* `release` when the job is deleted or gone: its quota is released and its unit removed.

Every decision is the core's (`fleet.core.admission`); this module reads and writes.
"""

from __future__ import annotations

import logging

from fleet.api import constants as c
from fleet.controller.context import Job, Shell, save
from fleet.controller.keys import WorkloadKey
from fleet.controller.queue.kubequeue import KubeQueue
from fleet.controller.queue.units import key_of_job, new_unit, spec_of, state_of
from fleet.controller.status_mirror import (
    binding_conditions,
    mark_created,
    set_scheduled_condition,
)
from fleet.core import lifecycle
from fleet.core.admission import DEQUEUED, RUNNING, TERMINAL, TIMEOUT_BACKOFF, UnitState
from fleet.kube import ApiError, Obj

log = logging.getLogger(__name__)

#: The sentence a gang held by the queue carries in its binding, before the queue's reason.
QUEUED_MESSAGE = "suspension.scheduling holds the job for the queue"
#: How soon a queued job is looked at again while the queue is being rebuilt.
NOT_READY_RETRY_SECONDS = 1.0
#: Why-kinds that get their own condition reason and a Warning Event.
_LOUD = ("NoQuota", "NeverFits")


def queued(job: Job) -> bool:
    suspension = job.binding.spec.suspension
    return bool(suspension is not None and suspension.scheduling)


async def admit(shell: Shell, job: Job) -> bool:
    """Whether the job may go to placement now (see the module docstring)."""
    kq = shell.kube_queue
    key = key_of_job(job.key)
    if not queued(job):
        if key in kq.admission:
            await release(shell, job.key)  # the policy stopped queueing it
        return True
    if not kq.ready:
        shell.queue.add_after(job.key, NOT_READY_RETRY_SECONDS)
        return False
    if key in kq.unsaved:
        return False  # decided, not yet written: the pass requeues the job once it is
    unit = kq.units.get(key)
    if unit is not None and _consumer_uid(unit) != job.uid:
        await release(shell, job.key)  # left by an earlier job of the same name
        unit = None
    if unit is None:
        unit = await _create(shell, kq, job, key)
    known = key in kq.admission
    kq.admission.upsert(spec_of(unit), state_of(unit))
    if not known:
        kq.request_pass()
    now = shell.clock.now()
    phase = kq.admission.phase(key)
    if phase == RUNNING and kq.admission.unplaced(key, now):
        await _write(kq, key, "failed over: keeps its quota and is placed again", now)
        phase = DEQUEUED
    if phase == DEQUEUED:
        return True
    await _hold(shell, kq, job, key, now)
    return False


async def placed(shell: Shell, job: WorkloadKey, cluster: str) -> None:
    """Placement chose `cluster` for `job`: its unit is Running (still holding its quota)."""
    kq = shell.kube_queue
    key = key_of_job(job)
    now = shell.clock.now()
    phase = kq.admission.phase(key)
    if phase is None or phase == RUNNING:
        return
    if not kq.admission.placed(key, now):
        # Its placement timed out while it was being placed: it runs, so it holds its quota
        # again (as a restart would count it), rather than running uncharged.
        state = kq.admission.state(key)
        unit = kq.units.get(key)
        if state is None or unit is None or state.phase in TERMINAL:
            return
        kq.unsaved.pop(key, None)
        kq.admission.remove(key)
        kq.admission.upsert(spec_of(unit), UnitState(RUNNING, now, None, max(state.attempts, 1)))
    await _write(kq, key, f"placed in {cluster}", now)


async def observe(shell: Shell, job: Job) -> None:
    """A job that ended releases its quota at once (exactly once)."""
    kq = shell.kube_queue
    key = key_of_job(job.key)
    if key not in kq.admission:
        return
    life = job.life
    failover = job.failover
    retried = failover is not None and failover.on_job_failure
    succeeded = life.phase == "Succeeded"
    failed = life.gave_up is not None or (life.phase == "Failed" and not retried)
    if not (succeeded or failed):
        return
    now = shell.clock.now()
    if kq.admission.finished(key, succeeded, now):
        what = "succeeded" if succeeded else "failed"
        await _write(kq, key, f"the job {what}: its quota is released", now)
        kq.request_pass()


async def release(shell: Shell, key: WorkloadKey) -> None:
    """The job is deleted or gone: its quota is released at once and its unit removed."""
    kq = shell.kube_queue
    unit_key = key_of_job(key)
    kq.unsaved.pop(unit_key, None)
    kq.notices.pop(unit_key, None)
    if kq.admission.remove(unit_key):
        kq.request_pass()
    await kq.units.delete(unit_key)


# -- helpers -----------------------------------------------------------------------------------


def _consumer_uid(unit: Obj) -> str | None:
    uid = ((unit.get("spec") or {}).get("consumerRef") or {}).get("uid")
    return str(uid) if uid else None


async def _write(kq: KubeQueue, key: str, message: str, now: float) -> None:
    state = kq.admission.state(key)
    if state is None:
        return
    quota = kq.admission.quota_of(key)
    await kq.units.write(key, state, quota, message, now, queue=kq.queue_of.get(quota or ""))


async def _create(shell: Shell, kq: KubeQueue, job: Job, key: str) -> Obj:
    """The job's unit: made now, with its quota's Queue and its priority (a unit the admission
    still knows, deleted by hand, is made again with the state it had)."""
    workload = job.workload
    meta = workload["metadata"]
    tree = kq.admission.tree
    quota = tree.quota_for(meta.get("namespace") or "", meta.get("labels")) if tree else None
    priority, priority_class = await _priority(shell, kq, job)
    unit = new_unit(
        workload,
        job.kind.charge(job.gang),
        queue=kq.queue_of.get(quota or ""),
        priority=priority,
        priority_class=priority_class,
    )
    state = kq.admission.state(key)
    if state is not None:
        now = shell.clock.now()
        unit.status = None
        created = await kq.units.create(unit)
        return (
            await kq.units.write(key, state, kq.admission.quota_of(key), "made again", now)
            or created
        )
    return await kq.units.create(unit)


async def _hold(shell: Shell, kq: KubeQueue, job: Job, key: str, now: float) -> None:
    """The job waits: its binding, its condition, its unit's message (each written only when
    it changed) and, for a job with no quota or that can never fit, a Warning Event."""
    kq.notices.pop(key, None)
    why = kq.admission.why(key, now)
    phase = kq.admission.phase(key)
    text = why.message if why is not None else f"phase {phase}"
    if phase == TIMEOUT_BACKOFF:
        reason = "TimeoutBackoff"
    elif why is not None and why.kind in _LOUD:
        reason = why.kind
    else:
        reason = c.REASON_QUEUED
    message = f"{QUEUED_MESSAGE}: {text}"
    await save(
        shell,
        job,
        lifecycle.queued(job.life),
        status={"pendingReasons": None},
        conditions=binding_conditions(
            shell, job, (c.CONDITION_SCHEDULED, "False", reason, message)
        ),
    )
    shell.triggers.track(
        job.key, cluster=None, evicting=[e.from_cluster for e in job.life.evictions]
    )
    if reason in _LOUD:
        await shell.events.record(job.workload, reason, text, warning=True)
    mark_created(job.workload, "FleetQueued", "in its queue", now)
    await set_scheduled_condition(shell, job.workload, "False", reason, message)
    if phase != TIMEOUT_BACKOFF:  # the unit keeps the pass's word on why it backed off
        await _write(kq, key, text, now)


async def _priority(shell: Shell, kq: KubeQueue, job: Job) -> tuple[int, str | None]:
    """The job's PriorityClass value (0 when it names none, or one that does not exist); which
    class a job names is its kind adapter's to say."""
    name = job.kind.priority_class(job.workload)
    if not name:
        return 0, None
    if name not in kq.priorities:
        try:
            found = await shell.fleet.get("scheduling.k8s.io/v1", "PriorityClass", name)
        except ApiError as err:
            log.warning("cannot read PriorityClass %s (%s); priority 0", name, err)
            return 0, name
        if found is None:
            return 0, name
        kq.priorities[name] = int(found.get("value") or 0)
    return kq.priorities[name], name


__all__ = ["QUEUED_MESSAGE", "admit", "observe", "placed", "queued", "release"]
