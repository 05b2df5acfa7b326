"""One dequeue pass: the core decides, the units are written, then their jobs are reconciled.

`Admission.plan(now)` returns what changed (dequeued, backed off, back from backoff, notices)
and has already applied it in memory. Each decision is written to its unit's status *before*
the job is requeued, so the reconcile that releases a job to placement (or suspends it again)
always acts on a persisted decision; a decision whose write failed stays in `Passes.unsaved`
and is written by the next pass (the pass is retried with backoff), never lost. `run` returns
when the next pass is due (the next placement timeout or backoff end).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fleet.controller.events import EventRecorder
from fleet.controller.keys import WorkloadKey
from fleet.controller.metrics import Metrics, seconds_since_created
from fleet.controller.queue.units import Units, involved, job_of
from fleet.controller.workqueue import WorkQueue
from fleet.core.admission import ENQUEUED, TIMEOUT_BACKOFF, Admission, Evict, Notice, Plan
from fleet.core.admission.hold import Hold, HoldEnd

#: The Queue name of a quota path (the Queues' index, read when a unit is written).
QueueName = Callable[[str | None], str | None]

log = logging.getLogger(__name__)

#: Slack added to a wake-up so the core sees the deadline as passed.
WAKE_SLACK_SECONDS = 0.05

#: What a unit's job is told when its unit was decided: (Event reason, message, warning).
Decided = tuple[str, str, bool]


class Passes:
    """The decisions not yet written, the last notice per unit, and the pass that makes both."""

    def __init__(
        self,
        units: Units,
        events: EventRecorder,
        jobs: WorkQueue[WorkloadKey],
        queue_name: QueueName,
        metrics: Metrics | None = None,
    ) -> None:
        self.units = units
        #: Where the first dequeue of a unit reports its wait (fleet_queue_wait_seconds).
        self.metrics = metrics
        self.events = events
        self.jobs = jobs
        self.queue_name = queue_name
        #: Decisions made in memory whose unit status is not written yet (unit key -> what to
        #: tell its job); a reconcile does not act on them before they are written.
        self.unsaved: dict[str, Decided] = {}
        #: The last NoQuota/NeverFits/Queued notice per unit, for the gate's condition.
        self.notices: dict[str, Notice] = {}
        #: Evictions decided (reclaim, preemption) whose victim's binding does not record them
        #: yet, by victim unit key; the victim's reconcile records them (`recorded`).
        self.evictions: dict[str, Evict] = {}
        #: A claimant's decision, held until every victim's eviction is recorded: nothing is
        #: written for the gang that reclaims before its room is on record.
        self.held: dict[str, tuple[Decided, set[str]]] = {}
        #: Holds the passes' plans ended, and why (`Plan.unhold`), for `Holds.ending`.
        self.unheld: list[tuple[Hold, HoldEnd]] = []

    def clear(self) -> None:
        self.unheld.clear()
        self.unsaved.clear()
        self.notices.clear()
        self.evictions.clear()
        self.held.clear()

    def undecided(self, key: str) -> bool:
        """Decided in memory, not yet written (or held for its victims' records)."""
        return key in self.unsaved or key in self.held

    def evicting(self, plan: Plan) -> None:
        """Evictions decided: each victim's job is reconciled to record its own; the claimants'
        decisions wait for those records."""
        victims: dict[str, set[str]] = {}
        for evict in plan.evict:
            self.evictions[evict.key] = evict
            victims.setdefault(evict.by, set()).add(evict.key)
            unit = self.units.get(evict.key)
            if unit is not None:
                self.jobs.add(job_of(unit))
        for dequeue in plan.dequeue:
            decided: Decided = ("Dequeued", dequeue.message, False)
            self.held[dequeue.key] = (decided, victims.get(dequeue.key, set()))
        for notice in plan.notices:  # a claimant that already held its quota
            self.held[notice.key] = (
                ("Reclaiming", notice.message, False),
                victims.get(notice.key, set()),
            )
        self._release_held()

    def recorded(self, victim: str) -> Evict | None:
        """The victim's binding records its eviction: claimants waiting only for it are
        written at the next save."""
        evict = self.evictions.pop(victim, None)
        for _, waiting in self.held.values():
            waiting.discard(victim)
        self._release_held()
        return evict

    def _release_held(self) -> None:
        for key, (decided, waiting) in list(self.held.items()):
            if not waiting:
                del self.held[key]
                self.unsaved[key] = decided

    def forget(self, key: str) -> None:
        """The unit is gone: nothing of it is left to write or tell."""
        self.unsaved.pop(key, None)
        self.notices.pop(key, None)
        self.held.pop(key, None)
        if self.evictions.pop(key, None) is not None:
            self.recorded(key)

    async def run(self, admission: Admission, now: float) -> float | None:
        """Plan, write every decision, requeue the decided jobs; the delay to the next pass
        (None: only when something happens)."""
        plan = admission.plan(now)
        self.unheld.extend(plan.unhold)
        # In the order the core decided them: a unit back from backoff may be dequeued again.
        for requeue in plan.requeue:
            self.unsaved[requeue.key] = ("Requeued", requeue.message, False)
        for backoff in plan.backoff:
            self.unsaved[backoff.key] = ("TimeoutBackoff", backoff.message, True)
        for dequeue in plan.dequeue:
            self.unsaved[dequeue.key] = ("Dequeued", dequeue.message, False)
        for notice in plan.notices:
            self.notices[notice.key] = notice
            unit = self.units.get(notice.key)
            if unit is not None:
                self.jobs.add(job_of(unit))
        await self.save(admission, now)
        if plan.wake_at is None:
            return None
        return max(plan.wake_at - now, 0.0) + WAKE_SLACK_SECONDS

    async def save(self, admission: Admission, now: float) -> None:
        """Write every decided unit's status, then post its Event and requeue its job."""
        for key, (reason, message, warning) in list(self.unsaved.items()):
            state = admission.state(key)
            if state is None:  # removed meanwhile: nothing to write
                self.unsaved.pop(key, None)
                continue
            quota = admission.quota_of(key)
            unit = await self.units.write(
                key, state, quota, message, now, queue=self.queue_name(quota)
            )
            self.unsaved.pop(key, None)
            if unit is None:
                continue
            job = job_of(unit)
            if reason == "Dequeued" and state.attempts == 1 and self.metrics is not None:
                waited = seconds_since_created(unit, now)
                if waited is not None:
                    self.metrics.queue_wait_seconds.observe(waited)
            log.info("%s: %s (%s)", job, reason, message)
            await self.events.record(involved(unit), reason, message, warning=warning)
            self.jobs.add(job)

    def waiting(self, admission: Admission) -> dict[str, int]:
        """Units waiting (Enqueued or TimeoutBackoff) per quota path."""
        out: dict[str, int] = {}
        for key in self.units.keys:
            if admission.phase(key) in (ENQUEUED, TIMEOUT_BACKOFF):
                quota = admission.quota_of(key)
                if quota is not None:
                    out[quota] = out.get(quota, 0) + 1
        return out
