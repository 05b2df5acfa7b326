"""The queue's parts in one controller replica: the admission, its indexes, its work.

`KubeQueue` holds the core's `Admission` (the queue's whole state, in memory), the indexes the
kopf handlers keep (trees, Queues in kube-queue, QueueUnits), and a serial work queue of its own
for the three things that are not one job's business: `tree` (check the tree, put it in force,
sync the Queues), `queues` (a Queue's spec changed) and `pass` (a dequeue pass). The handlers
only update an index and add one of those items or a job's key; the work runs only while this
replica leads, like the reconciles.

Restart. When the replica starts leading, `restore` lists every tree, Queue and QueueUnit and
rebuilds the admission from them before any reconcile runs: each unit is upserted with its
persisted phase and times (Dequeued and Running units hold their quota again), a unit whose
binding already names a cluster counts as Running (the placement was written, the unit's status
not yet), a unit whose job is gone or being deleted is left out. Nothing is dequeued before the
tree has been read, so a restart never releases a job on a partial view.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from fleet.api import constants as c
from fleet.controller.cache import Newest
from fleet.controller.clock import Clock
from fleet.controller.events import EventRecorder
from fleet.controller.keys import WorkloadKey
from fleet.controller.metrics import Metrics
from fleet.controller.queue import passes, queues, tree
from fleet.controller.queue.tree import InForce
from fleet.controller.queue.units import UNIT, Units, job_of, key_of, spec_of, state_of
from fleet.controller.settings import Settings
from fleet.controller.workqueue import WorkQueue
from fleet.core.admission import (
    DEQUEUED,
    ENQUEUED,
    RUNNING,
    TIMEOUT_BACKOFF,
    Admission,
    AdmissionSettings,
    Notice,
    UnitState,
)
from fleet.kube import ApiError, KubeClient, Obj, Unreachable

log = logging.getLogger(__name__)

#: What a unit's job is told when its unit was decided: (Event reason, message, warning).
Decided = tuple[str, str, bool]


class KubeQueue:
    RESTORE: Final = "restore"
    TREE: Final = "tree"
    QUEUES: Final = "queues"
    PASS: Final = "pass"

    def __init__(
        self,
        fleet: KubeClient,
        events: EventRecorder,
        clock: Clock,
        settings: Settings,
        jobs: WorkQueue[WorkloadKey],
        *,
        bindings: Newest[WorkloadKey],
        workloads: Newest[WorkloadKey],
        metrics: Metrics | None = None,
    ) -> None:
        self.fleet = fleet
        #: Where the first dequeue of a unit reports its wait (fleet_queue_wait_seconds).
        self.metrics = metrics
        #: The controller's caches of bindings and workloads (read by `restore`).
        self.bindings = bindings
        self.workloads = workloads
        #: Whether the queue was rebuilt since this replica started leading; until then the
        #: gate holds every queued job and no pass runs.
        self.ready = False
        self.events = events
        self.clock = clock
        self.settings = settings
        #: The controller's work queue of jobs (a decided unit's job is reconciled).
        self.jobs = jobs
        self.admission = self._fresh_admission()
        #: Every ElasticQuotaTree, by (namespace, name).
        self.trees: dict[tuple[str, str], Obj] = {}
        #: fleet's Queues in kube-queue, by name; and the Queue name of each quota path.
        self.queues: dict[str, Obj] = {}
        self.queue_of: dict[str, str] = {}
        self.units = Units(fleet)
        self.in_force: InForce | None = None
        #: Whether the trees have been read since this replica started leading.
        self.tree_read = False
        self.namespace_ready = False
        #: Decisions made in memory whose unit status is not written yet (unit key -> what to
        #: tell its job); a reconcile does not act on them before they are written.
        self.unsaved: dict[str, Decided] = {}
        #: The last NoQuota/NeverFits/Queued notice per unit, for the gate's condition.
        self.notices: dict[str, Notice] = {}
        #: PriorityClass name -> value.
        self.priorities: dict[str, int] = {}
        self.work: WorkQueue[str] = WorkQueue(
            self.process, workers=1, expected=(ApiError, Unreachable)
        )

    def _fresh_admission(self) -> Admission:
        s = self.settings
        return Admission(
            AdmissionSettings(
                placement_timeout=s.queue_placement_timeout,
                backoff_seconds=s.queue_backoff_seconds,
                backoff_limit=max(s.queue_backoff_limit, s.queue_backoff_seconds),
            )
        )

    # -- lifecycle (the controller's) -----------------------------------------------------------

    def start(self) -> None:
        self.work.running.clear()
        self.work.start()

    async def stop(self) -> None:
        await self.work.stop()

    def follow(self) -> None:
        """This replica stopped leading: stop working; `restore` starts over when it leads."""
        self.ready = False
        self.work.running.clear()

    def lead(self) -> None:
        """This replica leads: rebuild the queue first (retried until it succeeds)."""
        self.ready = False
        self.work.add(self.RESTORE)
        self.work.running.set()

    # -- kopf's events: indexes and work items only ----------------------------------------------

    def tree_event(self, obj: Obj, *, deleted: bool) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if deleted:
            self.trees.pop(key, None)
        else:
            self.trees[key] = obj
        self.work.add(self.TREE)

    def queue_event(self, obj: Obj, *, deleted: bool) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != c.QUEUE_NAMESPACE:
            return
        name = str(meta.get("name") or "")
        old = self.queues.get(name)
        if deleted:
            self.queues.pop(name, None)
        else:
            self.queues[name] = obj
        if deleted or old is None or old.get("spec") != obj.get("spec"):
            self.work.add(self.QUEUES)

    def unit_event(self, obj: Obj, *, deleted: bool) -> None:
        """A unit changed: its job is reconciled when its spec changed (a priority edit) or it
        was deleted (the gate makes it again while the job waits); status echoes are not."""
        key = key_of(obj)
        held = self.units.get(key)
        if deleted:
            self.units.drop(key)
            self.jobs.add(job_of(obj))
            return
        self.units.offer(obj)
        if held is None or held.get("spec") != obj.get("spec"):
            self.jobs.add(job_of(obj))

    def request_pass(self) -> None:
        """Capacity freed, a unit arrived, the tree changed: run a dequeue pass."""
        self.work.add(self.PASS)

    # -- work -------------------------------------------------------------------------------------

    async def process(self, item: str) -> None:
        """Run one work item (the work queue's worker does; tests call it directly)."""
        if item == self.RESTORE:
            await self.restore()
            self.ready = True
            self._reconcile_waiting()
            self.request_pass()
        elif not self.ready:
            return  # `restore` reads everything anyway
        elif item == self.TREE:
            changed = await tree.sync(self)
            await queues.sync(self)
            if changed:
                self._reconcile_waiting()
            self.request_pass()
        elif item == self.QUEUES:
            await queues.sync(self)
            self.request_pass()
        elif item == self.PASS:
            await self.run_pass()

    async def run_pass(self) -> None:
        await passes.run(self)

    def _reconcile_waiting(self) -> None:
        """The tree changed (or the queue was rebuilt): every waiting job's reason may have
        changed too."""
        for key in list(self.units.keys):
            if self.admission.phase(key) in (ENQUEUED, TIMEOUT_BACKOFF):
                unit = self.units.get(key)
                if unit is not None:
                    self.jobs.add(job_of(unit))

    # -- restart ---------------------------------------------------------------------------------

    async def restore(self) -> None:
        self.admission = self._fresh_admission()
        self.in_force = None
        self.tree_read = False
        self.unsaved.clear()
        self.notices.clear()
        self.trees = {
            (t["metadata"]["namespace"], t["metadata"]["name"]): t
            for t in await self._list(tree.TREE)
        }
        self.queues = {
            q["metadata"]["name"]: q for q in await self._list(queues.QUEUE, c.QUEUE_NAMESPACE)
        }
        self.units = Units(self.fleet)
        units = await self._list(UNIT)
        await tree.sync(self, announce=False)
        await queues.sync(self)
        restored = 0
        for unit in units:
            self.units.offer(unit)
            state = await self._restored_state(unit)
            if state is None:
                continue
            self.admission.upsert(spec_of(unit), state)
            restored += 1
        log.info(
            "queue restored: %d units (%d holding quota), tree %s",
            restored,
            sum(1 for k in self.admission if self.admission.holds(k)),
            f"{self.in_force.name} generation {self.in_force.generation}"
            if self.in_force
            else "none",
        )

    async def _restored_state(self, unit: Obj) -> UnitState | None:
        """The unit's persisted state, corrected by its job and binding (None: leave it out)."""
        job = job_of(unit)
        workload = self.workloads.get(job)
        if workload is None:
            workload = await self.fleet.get(job.api_version, job.kind, job.name, job.namespace)
        ref_uid = ((unit.get("spec") or {}).get("consumerRef") or {}).get("uid")
        meta = (workload or {}).get("metadata") or {}
        if workload is None or meta.get("deletionTimestamp") or meta.get("uid") != ref_uid:
            return None  # deleted or being deleted: its quota is released
        state = state_of(unit)
        binding = self.bindings.get(job) or {}
        placed = bool((binding.get("spec") or {}).get("clusters"))
        if placed and state.phase not in (RUNNING, "Succeed", "Failed"):
            return UnitState(RUNNING, state.dequeued_at, None, max(state.attempts, 1))
        if state.phase == DEQUEUED and state.dequeued_at is None:
            return UnitState(DEQUEUED, self.clock.now(), None, state.attempts)
        return state

    async def _list(self, kind: tuple[str, str], namespace: str | None = None) -> list[Obj]:
        listed: dict[str, Any] = await self.fleet.list(*kind, namespace)
        items: list[Obj] = listed.get("items") or []
        for item in items:
            item.setdefault("apiVersion", kind[0])
            item.setdefault("kind", kind[1])
        return items
