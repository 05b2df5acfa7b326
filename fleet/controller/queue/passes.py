"""One dequeue pass: the core decides, the units are written, then their jobs are reconciled.

`Admission.plan(now)` returns what changed (dequeued, backed off, back from backoff, notices)
and has already applied it in memory. Each decision is written to its unit's status *before*
the job is requeued, so the reconcile that releases a job to placement (or suspends it again)
always acts on a persisted decision; a decision whose write failed stays in `KubeQueue.unsaved`
and is written by the next pass (the pass is retried with backoff), never lost. The pass asks
to run again at `plan.wake_at` (the next placement timeout or backoff end).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fleet.controller.metrics import seconds_since_created
from fleet.controller.queue import queues
from fleet.controller.queue.units import job_of
from fleet.core.admission import ENQUEUED, TIMEOUT_BACKOFF
from fleet.kube import Obj

if TYPE_CHECKING:
    from fleet.controller.queue.kubequeue import KubeQueue

log = logging.getLogger(__name__)

#: Slack added to a wake-up so the core sees the deadline as passed.
WAKE_SLACK_SECONDS = 0.05


async def run(kq: KubeQueue) -> None:
    now = kq.clock.now()
    plan = kq.admission.plan(now)
    # In the order the core decided them: a unit back from backoff may be dequeued again.
    for requeue in plan.requeue:
        kq.unsaved[requeue.key] = ("Requeued", requeue.message, False)
    for backoff in plan.backoff:
        kq.unsaved[backoff.key] = ("TimeoutBackoff", backoff.message, True)
    for dequeue in plan.dequeue:
        kq.unsaved[dequeue.key] = ("Dequeued", dequeue.message, False)
    for notice in plan.notices:
        kq.notices[notice.key] = notice
        unit = kq.units.get(notice.key)
        if unit is not None:
            kq.jobs.add(job_of(unit))
    await save(kq, now)
    if plan.wake_at is not None:
        kq.work.add_after(kq.PASS, max(plan.wake_at - now, 0.0) + WAKE_SLACK_SECONDS)
    await queues.write_status(kq, waiting(kq))


async def save(kq: KubeQueue, now: float) -> None:
    """Write every decided unit's status, then post its Event and requeue its job."""
    for key, (reason, message, warning) in list(kq.unsaved.items()):
        state = kq.admission.state(key)
        if state is None:  # removed meanwhile: nothing to write
            kq.unsaved.pop(key, None)
            continue
        quota = kq.admission.quota_of(key)
        unit = await kq.units.write(
            key, state, quota, message, now, queue=kq.queue_of.get(quota or "")
        )
        kq.unsaved.pop(key, None)
        if unit is None:
            continue
        job = job_of(unit)
        if reason == "Dequeued" and state.attempts == 1 and kq.metrics is not None:
            waited = seconds_since_created(unit, now)
            if waited is not None:
                kq.metrics.queue_wait_seconds.observe(waited)
        log.info("%s: %s (%s)", job, reason, message)
        await kq.events.record(_involved(unit), reason, message, warning=warning)
        kq.jobs.add(job)


def _involved(unit: Obj) -> Obj:
    """The unit's job as an Event's involved object (from its consumerRef)."""
    ref = (unit.get("spec") or {}).get("consumerRef") or {}
    return {
        "apiVersion": ref.get("apiVersion"),
        "kind": ref.get("kind"),
        "metadata": {
            "name": ref.get("name"),
            "namespace": ref.get("namespace"),
            "uid": ref.get("uid"),
        },
    }


def waiting(kq: KubeQueue) -> dict[str, int]:
    """Units waiting (Enqueued or TimeoutBackoff) per quota path."""
    out: dict[str, int] = {}
    for key in kq.units.keys:
        if kq.admission.phase(key) in (ENQUEUED, TIMEOUT_BACKOFF):
            quota = kq.admission.quota_of(key)
            if quota is not None:
                out[quota] = out.get(quota, 0) + 1
    return out
