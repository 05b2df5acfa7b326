"""The queue in one controller replica: its parts composed, its serial work, its interface.

`KubeQueue` composes the parts, each owning its state: the core's `Admission` (the queue's
decisions, in memory), `Trees` (the ElasticQuotaTrees and the one in force), `Queues` (fleet's
Queues in kube-queue), `Units` (the QueueUnits) and `Passes` (decisions not yet written, and the
pass that makes them). Imports run one way: the gate uses `KubeQueue`, which uses the parts,
which know nothing of it (an import-linter contract keeps it so).

Its own serial work queue runs the three things that are not one job's business: `tree` (check
the tree, put it in force, sync the Queues), `queues` (a Queue's spec changed) and `pass` (a
dequeue pass). The kopf handlers only update an index and add one of those items or a job's
key; the work runs only while this replica leads, like the reconciles. The gate (one job's
reconcile) calls the methods under "the gate's interface".

Restart. When the replica starts leading, `restore` lists every tree, Queue and QueueUnit and
rebuilds the admission from them before any reconcile runs, each unit read back by the core's
restore rules (`fleet.core.admission.restore`). Nothing is dequeued before the tree has been
read, so a restart never releases a job on a partial view.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from fleet.api import PlacementRules, QueueUnit
from fleet.api import constants as c
from fleet.controller.cache import Newest
from fleet.controller.clock import Clock
from fleet.controller.events import EventRecorder
from fleet.controller.keys import WorkloadKey
from fleet.controller.members.registry import MemberRegistry
from fleet.controller.metrics import Metrics
from fleet.controller.queue.holds import Holds
from fleet.controller.queue.holds import restored as restored_holds
from fleet.controller.queue.passes import WAKE_SLACK_SECONDS, Passes
from fleet.controller.queue.queues import QUEUE, Queues
from fleet.controller.queue.tree import TREE, Trees
from fleet.controller.queue.units import (
    UNIT,
    Units,
    involved,
    job_of,
    key_of,
    key_of_job,
    placed_copy,
    queue_evictions_of,
    spec_of,
    state_of,
)
from fleet.controller.settings import Settings
from fleet.controller.workqueue import WorkQueue
from fleet.core.admission import (
    DEQUEUED,
    ENQUEUED,
    RUNNING,
    TERMINAL,
    TIMEOUT_BACKOFF,
    Admission,
    AdmissionSettings,
    Charge,
    Evict,
    JobEnd,
    Phase,
    Placed,
    UnitState,
    WaitReason,
    restored_state,
)
from fleet.core.placement import ClusterAffinity, filter_rejection
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang
from fleet.kube import ApiError, KubeClient, Obj, Unreachable

log = logging.getLogger(__name__)


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
        members: MemberRegistry | None = None,
    ) -> None:
        self.fleet = fleet
        #: The member clusters' snapshots (a reclaim proves the waiting gang then fits).
        self.members = members
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
        self.trees = Trees(fleet, events)
        self.queues = Queues(fleet)
        self.units = Units(fleet)
        self.passes = Passes(self.units, events, jobs, self.queues.name_of, metrics)
        #: The room reclaims hold for their claimants: views, records, Events.
        self.holds = Holds(
            self.units, events, clock, members, placement_timeout=settings.queue_placement_timeout
        )
        #: PriorityClass name -> value, and Namespace name -> labels (its opt-out of reclaim):
        #: kept current by their watches (and by the gate's reads of ones not seen yet), so a
        #: unit's priority and opt-out follow them (the gate's `refresh`).
        self._priorities: dict[str, int] = {}
        self._namespaces: dict[str, dict[str, str]] = {}
        #: The gang of each queued job the gate saw (a claimant's, for a reclaim's proof), and
        #: its placement rules and excluded clusters (a reclaim looks only where it may go).
        self._gangs: dict[str, Gang] = {}
        self._rules: dict[str, tuple[PlacementRules, dict[str, str]]] = {}
        #: Evictions recorded on a victim's binding whose copy is not deleted yet: victim unit
        #: key -> the unit it made room for. That unit claims nothing more meanwhile (a gang
        #: waiting for its victims to leave, even across a backoff or a restart, never makes
        #: a second eviction for the same room).
        self._in_flight: dict[str, str] = {}
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
                reclaim=s.queue_reclaim,
                preemption=s.queue_preemption,
                reclaim_unplaced=s.queue_reclaim_unplaced,
                reclaim_loss_per_gpu=s.queue_reclaim_loss_per_gpu,
                reclaim_delay=s.queue_reclaim_delay,
                reclaim_worth=s.queue_reclaim_worth,
            )
        )

    # -- lifecycle (the controller's) -----------------------------------------------------------

    def start(self) -> None:
        self.work.running.clear()
        self.work.start()

    async def stop(self) -> None:
        await self.work.stop()

    def follow(self) -> None:
        """This replica stopped leading: stop working at once (a pass in flight is cancelled);
        `restore` starts over when it leads."""
        self.ready = False
        self.work.halt()

    def lead(self) -> None:
        """This replica leads: rebuild the queue first (retried until it succeeds)."""
        self.ready = False
        self.work.add(self.RESTORE)
        self.work.running.set()

    # -- kopf's events: indexes and work items only ----------------------------------------------

    def tree_event(self, obj: Obj, *, deleted: bool) -> None:
        self.trees.event(obj, deleted=deleted)
        self.work.add(self.TREE)

    def queue_event(self, obj: Obj, *, deleted: bool) -> None:
        if self.queues.event(obj, deleted=deleted):
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
            changed = await self.trees.sync(self.admission)
            await self.queues.sync(self.admission)
            if changed:
                self._reconcile_waiting()
            self.request_pass()
        elif item == self.QUEUES:
            await self.queues.sync(self.admission)
            self.request_pass()
        elif item == self.PASS:
            await self.run_pass()

    async def run_pass(self) -> None:
        now = self.clock.now()
        # Room held in a member that left the fleet or stays NotReady is given up.
        lost, again = self.holds.lost(self.admission.room_held())
        for cluster in sorted(lost):
            self.holds.ending(self.admission.member_lost(cluster, now).unhold)
        if again is not None:
            self.work.add_after(self.PASS, again)
        # A gang whose victims are still leaving keeps its quota (and its hold) past the
        # placement timeout: until their pods are gone (their bindings keep the eviction until
        # then), and evictions decided but not yet on record are victims still there too.
        self.admission.awaiting_room(self._awaiting_room(), now)
        delay = await self.passes.run(self.admission, now)
        if delay is not None:
            self.work.add_after(self.PASS, delay)
        await self._reclaim(now)
        self.holds.ending(self.passes.unheld)
        self.passes.unheld.clear()
        await self.holds.follow(self.admission.room_held())
        await self.queues.write_status(self.admission, self.passes.waiting(self.admission))

    def member_lost(self, member: str) -> None:
        """A member went NotReady or left: a pass gives up the room held there."""
        if any(h.cluster == member for h in self.admission.room_held().values()):
            self.request_pass()

    async def _reclaim(self, now: float) -> None:
        """Evictions that let a waiting gang start (the core's `Admission.reclaim`): each is
        recorded on its victim's binding by the victim's reconcile before anything else."""
        members = self.members
        if members is None or not self.admission.waiting_units():
            return
        not_ready = members.not_ready()
        ready = [s for s in members.snapshots() if s.name not in not_ready]
        taints = members.taints()

        def members_for(key: str) -> list[ClusterSnapshot]:
            """The members the claimant's placement may choose (its policy's filters)."""
            rules, excluded = self._rules.get(key, (PlacementRules(), {}))
            affinities: list[ClusterAffinity | None] = [g.affinity for g in rules.groups]
            affinities = affinities or [rules.affinity]
            return [
                s
                for s in ready
                if any(
                    filter_rejection(
                        s,
                        affinity=affinity,
                        failed_over=excluded,
                        taints=taints,
                        tolerations=rules.tolerations,
                    )
                    is None
                    for affinity in affinities
                )
            ]

        plan = self.admission.reclaim(
            now,
            self._running(now),
            self._gangs.get,
            members_for,
            in_flight=self._awaiting_room(),
        )
        if plan.wake_at is not None:  # a dequeued gang may claim once its reclaim delay ends
            self.work.add_after(self.PASS, plan.wake_at - now + WAKE_SLACK_SECONDS)
        self.holds.ending(plan.unhold)
        if not plan:
            return
        for evict in plan.evict:
            log.info("%s: %s", evict.key, evict.message)
        self.passes.evicting(plan)
        await self.passes.save(self.admission, now)

    def _awaiting_room(self) -> set[str]:
        """The claimants whose victims are still leaving: named by an eviction on a victim's
        binding (kept until its copy and pods are gone from the member's view), or decided and
        not on record yet."""
        pending = {evict.by for evict in self.passes.evictions.values()}
        return set(self._in_flight.values()) | pending

    def _running(self, now: float) -> dict[str, Placed]:
        """What a reclaim knows of each Running unit's copy (`placed_copy`): where it runs,
        under which owner key, since when its work began, its declared limit and its last
        checkpoint (from the fleet job and, as the member's watch last saw it, its copy)."""
        out: dict[str, Placed] = {}
        for key in self.units.keys:
            if self.admission.phase(key) != RUNNING:
                continue
            unit = self.units.get(key)
            if unit is None:
                continue
            job = job_of(unit)
            binding = self.bindings.get(job)
            if binding is None:
                continue
            clusters = (binding.get("spec") or {}).get("clusters") or [{}]
            member = self.members.get(str(clusters[0].get("name") or "")) if self.members else None
            copy = (
                member.job(job.api_version, job.kind, job.namespace, job.name)
                if member is not None
                else None
            )
            placed = placed_copy(binding, now, workload=self.workloads.get(job), copy=copy)
            if placed is not None:
                out[key] = placed
        return out

    def _reconcile_waiting(self) -> None:
        """The tree changed (or the queue was rebuilt): every waiting job's reason may have
        changed too."""
        for key in list(self.units.keys):
            if self.admission.phase(key) in (ENQUEUED, TIMEOUT_BACKOFF):
                unit = self.units.get(key)
                if unit is not None:
                    self.jobs.add(job_of(unit))

    # -- the gate's interface (one job's reconcile) ----------------------------------------------

    def knows(self, key: str) -> bool:
        """Whether the admission holds the unit (it is queued, or ended and not yet removed)."""
        return key in self.admission

    def undecided(self, key: str) -> bool:
        """Decided in memory, not yet written (or held until its victims' evictions are on
        record): a reconcile must not act on it yet."""
        return self.passes.undecided(key)

    def unit(self, key: str) -> Obj | None:
        return self.units.get(key)

    def phase(self, key: str) -> Phase | None:
        return self.admission.phase(key)

    def why(self, key: str, now: float) -> WaitReason | None:
        """Why the unit waits, as the gate tells its job (the pass's notice is then told)."""
        self.passes.notices.pop(key, None)
        return self.admission.why(key, now)

    def quota_for(self, namespace: str, labels: Any) -> str | None:
        """The quota node a job of `namespace` with `labels` is charged to (None: none)."""
        tree = self.admission.tree
        return tree.quota_for(namespace, labels) if tree is not None else None

    def queue_name(self, quota: str | None) -> str | None:
        return self.queues.name_of(quota)

    def track(
        self,
        unit: Obj,
        gang: Gang,
        rules: PlacementRules | None = None,
        excluded: dict[str, str] | None = None,
    ) -> None:
        """The gate saw the job's unit: the admission knows it (a new one asks for a pass); its
        gang and placement rules are kept for a reclaim it may claim."""
        key = key_of(unit)
        self._gangs[key] = gang
        self._rules[key] = (rules or PlacementRules(), excluded or {})
        known = key in self.admission
        self.admission.upsert(spec_of(unit), state_of(unit))
        if not known:
            self.request_pass()

    async def mark(self, key: str, *, priority: int | None, reclaimable: bool) -> None:
        """The unit's priority and opt-out of reclaim as they are now: written when they
        changed, and the admission follows (a unit keeps its phase; one that holds quota is
        judged by them from now on: the order, a preemption, a reclaim)."""
        unit = self.units.get(key)
        updated = await self.units.mark(key, priority=priority, reclaimable=reclaimable)
        if updated is not None and updated is not unit and key in self.admission:
            self.admission.upsert(spec_of(updated))

    async def resize(self, key: str, charge: Resources) -> None:
        """A running job's charge changed (its member scaled it): the unit asks `charge` from
        now on and the admission charges it so (above a max if it must: the member's
        scaling is not fleet's to refuse); a pass follows, for the room it may have freed."""
        unit = self.units.get(key)
        updated = await self.units.resize(key, charge)
        if updated is not None and updated is not unit and key in self.admission:
            self.admission.upsert(spec_of(updated))
            self.request_pass()

    async def create_unit(self, key: str, unit: QueueUnit, now: float) -> Obj:
        """Create a job's unit; one the admission still knows (deleted by hand) is made again
        with the state it had."""
        state = self.admission.state(key)
        if state is None:
            return await self.units.create(unit)
        unit.status = None
        created = await self.units.create(unit)
        written = await self.units.write(
            key, state, self.admission.quota_of(key), "made again", now
        )
        return written or created

    async def fail_over(self, key: str, now: float) -> bool:
        """A Running unit's job has no cluster any more: it keeps its quota and is placed again
        (written before the job is placed). False when the unit was not Running."""
        if not self.admission.unplaced(key, now):
            return False
        await self.write(key, "failed over: keeps its quota and is placed again", now)
        return True

    async def place(
        self, key: str, cluster: str, now: float, *, moved: bool = False
    ) -> Charge | None:
        """Placement chose `cluster`, or the job runs there: whether its unit holds its quota
        is the core's decision (`Admission.charge_running`), also for a unit whose placement
        timed out while it was placed or (`moved`) a reclaim's victim that had moved, which is
        charged where it runs, above a max if it must: granted, the unit is Running (written);
        refused, nothing changes and the caller does not let the gang run uncharged
        (docs/queue.md, "Late and moved gangs"). None: the queue does not know the unit, or it
        ended (its quota was released; nothing to decide)."""
        phase = self.admission.phase(key)
        if phase is None or phase in TERMINAL:
            return None
        held = self.admission.hold_of(key) is not None
        charge = self.admission.charge_running(key, now, moved=moved)
        if held and self.admission.hold_of(key) is None:
            self.request_pass()  # its hold ended (Placed): the pass releases its record
        if not charge.granted:
            log.info("%s: not charged in %s: %s", key, cluster, charge.message)
            return charge
        if phase != RUNNING:
            if phase != DEQUEUED:  # charged again: a backoff decided meanwhile is void
                self.passes.unsaved.pop(key, None)
            text = f"runs in {cluster}: {charge.message}" if moved else f"placed in {cluster}"
            await self.write(key, text, now)
        return charge

    async def finish(self, key: str, end: JobEnd, now: float) -> None:
        """The job ended (`fleet.core.admission.ending`): its quota is released at once, once."""
        if self.admission.finished(key, end == "Succeed", now):
            what = "succeeded" if end == "Succeed" else "failed"
            await self.write(key, f"the job {what}: its quota is released", now)
            self.request_pass()

    async def forget(self, key: str) -> None:
        """The job is deleted or gone: its quota is released at once and its unit removed. An
        eviction of it still in flight is the caller's to end (`copy_gone`): a deleted victim's
        pods may still hold the room its claimant waits for."""
        self.passes.forget(key)
        self._gangs.pop(key, None)
        if self.admission.remove(key):
            self.request_pass()
        await self.units.delete(key)

    async def write(self, key: str, message: str, now: float) -> None:
        """Write the unit's state as the admission holds it, with `message`."""
        state = self.admission.state(key)
        if state is None:
            return
        quota = self.admission.quota_of(key)
        await self.units.write(key, state, quota, message, now, queue=self.queues.name_of(quota))

    def eviction_for(self, key: str) -> Evict | None:
        """A reclaim or preemption decided for this unit, not yet recorded on its binding."""
        return self.passes.evictions.get(key)

    async def evicted(
        self, key: str, now: float, message: str | None = None, once: str | None = None
    ) -> None:
        """The unit's binding records its eviction: its unit is written (Enqueued, who
        reclaimed it and why, or `message`), its job and unit get an Event (`once`: the
        eviction's identity, see `EventRecorder.record`), and the gang that reclaimed is
        released once every one of its victims is on record."""
        evict = self.passes.recorded(key)
        if evict is None:
            return
        self._in_flight[key] = evict.by
        text = message or evict.message
        await self.write(key, text, now)
        unit = self.units.get(key)
        if unit is not None:
            reason = "Reclaimed" if evict.kind == "Reclaim" else "Preempted"
            await self.events.record(involved(unit), reason, text, warning=True, once=once)
            await self.events.record(unit, reason, text, warning=True, once=once)
        await self.passes.save(self.admission, now)

    async def kept(self, key: str, now: float) -> None:
        """The victim had moved and the core charged it where it runs now: no eviction is
        carried out, and the gang that reclaimed no longer waits for this one."""
        if self.passes.recorded(key) is not None:
            await self.passes.save(self.admission, now)

    def copy_pending(self, key: str, claimant: str) -> None:
        """The victim's binding still records its eviction for `claimant` (copy not deleted)."""
        if self._in_flight.get(key) != claimant:
            self._in_flight[key] = claimant
            self.request_pass()

    def copy_gone(self, key: str) -> None:
        """The victim's old copy is deleted (its binding has no queue eviction left): a pass
        tells the admission now, for the claimant's placement timeout counts from then."""
        if self._in_flight.pop(key, None) is not None:
            self.request_pass()

    # -- what a unit's priority and opt-out of reclaim follow (watch-fed) -------------------------

    def priority_event(self, obj: Obj, *, deleted: bool) -> None:
        """A PriorityClass changed: the jobs whose units name it are reconciled (their units
        follow its value)."""
        name = str((obj.get("metadata") or {}).get("name") or "")
        before = self._priorities.get(name)
        if deleted:
            self._priorities.pop(name, None)
        else:
            self._priorities[name] = int(obj.get("value") or 0)
        if self._priorities.get(name) == before:
            return
        for key in list(self.units.keys):
            unit = self.units.get(key)
            if unit is not None and (unit.get("spec") or {}).get("priorityClassName") == name:
                self.jobs.add(job_of(unit))

    def namespace_event(self, obj: Obj, *, deleted: bool) -> None:
        """A Namespace changed: when its opt-out of reclaim did, the jobs of its units are
        reconciled (their units follow it)."""
        name = str((obj.get("metadata") or {}).get("name") or "")
        before = self._namespaces.get(name)
        if deleted:
            self._namespaces.pop(name, None)
        else:
            self._namespaces[name] = dict((obj.get("metadata") or {}).get("labels") or {})
        now = self._namespaces.get(name)
        if before is None or now is None:
            return  # first seen, or gone with its jobs
        if before.get(c.RECLAIMABLE_LABEL) == now.get(c.RECLAIMABLE_LABEL):
            return
        for key in list(self.units.keys):
            unit = self.units.get(key)
            if unit is not None and (unit.get("metadata") or {}).get("namespace") == name:
                self.jobs.add(job_of(unit))

    def known_priority(self, name: str) -> int | None:
        """A PriorityClass value as the watch (or a read) last saw it (None: not seen)."""
        return self._priorities.get(name)

    def remember_priority(self, name: str, value: int) -> None:
        self._priorities[name] = value

    def known_namespace(self, name: str) -> dict[str, str] | None:
        """A Namespace's labels as the watch (or a read) last saw them (None: not seen)."""
        return self._namespaces.get(name)

    def remember_namespace(self, name: str, labels: dict[str, str]) -> None:
        self._namespaces[name] = labels

    # -- restart ---------------------------------------------------------------------------------

    async def restore(self) -> None:
        self.admission = self._fresh_admission()
        self.passes.clear()
        self.holds.clear()
        self.trees.reset(await self._list(TREE))
        self.queues.reset(await self._list(QUEUE, c.QUEUE_NAMESPACE))
        self.units.reset()
        units = await self._list(UNIT)
        await self.trees.sync(self.admission, announce=False)
        await self.queues.sync(self.admission)
        restored = 0
        now = self.clock.now()
        self._in_flight.clear()
        for unit in units:
            self.units.offer(unit)
            state = await self._restored_state(unit, now)
            if state is None:
                continue
            self.admission.upsert(spec_of(unit), state)
            restored += 1
            # Gangs whose victims are still leaving claim nothing more (never evict twice).
            for eviction in queue_evictions_of(self.bindings.get(job_of(unit))):
                if eviction.evicted_for:
                    self._in_flight[key_of(unit)] = eviction.evicted_for
        # A victim being deleted has no unit any more, and its pods may still hold the room
        # its claimant waits for (`gate.victim_leaving`; its reconcile says so again).
        for job, binding in self.bindings.items():
            workload = self.workloads.get(job)
            if not ((workload or {}).get("metadata") or {}).get("deletionTimestamp"):
                continue
            for eviction in queue_evictions_of(binding):
                if eviction.evicted_for:
                    self._in_flight[key_of_job(job)] = eviction.evicted_for
        # The claimants' holds, from their records (`hold.restore`); a record whose hold
        # ended while the controller was down is removed by the next pass.
        self.admission.restore_holds(restored_holds(units).values(), now)
        self.holds.restored(units)
        in_force = self.trees.in_force
        log.info(
            "queue restored: %d units (%d holding quota, %d holding room), tree %s",
            restored,
            sum(1 for k in self.admission if self.admission.holds(k)),
            len(self.admission.room_held()),
            f"{in_force.name} generation {in_force.generation}" if in_force else "none",
        )

    async def _restored_state(self, unit: Obj, now: float) -> UnitState | None:
        """The unit's persisted state, read back by the core's restore rules from what its job
        and binding say (None: leave it out)."""
        job = job_of(unit)
        workload = self.workloads.get(job)
        if workload is None:
            workload = await self.fleet.get(job.api_version, job.kind, job.name, job.namespace)
        ref_uid = ((unit.get("spec") or {}).get("consumerRef") or {}).get("uid")
        meta = (workload or {}).get("metadata") or {}
        present = (
            workload is not None
            and not meta.get("deletionTimestamp")
            and meta.get("uid") == ref_uid
        )
        binding = self.bindings.get(job) or {}
        placed = bool((binding.get("spec") or {}).get("clusters"))
        evicted = bool(queue_evictions_of(binding))
        return restored_state(
            state_of(unit), job_present=present, placed=placed, now=now, evicted=evicted
        )

    async def _list(self, kind: tuple[str, str], namespace: str | None = None) -> list[Obj]:
        listed: dict[str, Any] = await self.fleet.list(*kind, namespace)
        items: list[Obj] = listed.get("items") or []
        for item in items:
            item.setdefault("apiVersion", kind[0])
            item.setdefault("kind", kind[1])
        return items
