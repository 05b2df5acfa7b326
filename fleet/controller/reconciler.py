"""Reconcile one fleet workload: bind, place, dispatch, mirror status, fail over, clean up.

Every step reads what it needs (the workload and its GangBinding from watch-fed caches, the
member's copy from its member) and writes its decision to the GangBinding before acting on a
member, so a controller killed at any point and started again finds the decision and finishes
it: member objects have the fleet
object's name and namespace and carry its UID, creating one that exists adopts it, deleting one
that is gone is a no-op. The decisions themselves (placement, failover, purge) are the pure
functions of fleet.core.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from fleet.api import (
    BindingFailover,
    ConditionStatus,
    ExcludedCluster,
    FailoverRecord,
    GangBinding,
    GangComponent,
    GangSpec,
    GracefulEvictionTask,
    PendingReason,
    PlacementRecord,
    TargetCluster,
    TargetComponent,
    WorkloadReference,
    binding_name,
)
from fleet.api import constants as c
from fleet.api.conditions import set_condition
from fleet.controller import propagation
from fleet.controller.cache import Newest
from fleet.controller.events import EventRecorder
from fleet.controller.members import Member, MemberRegistry
from fleet.controller.metrics import Metrics
from fleet.controller.policies import PolicyIndex, core_affinity
from fleet.controller.settings import Settings
from fleet.controller.workqueue import WorkQueue
from fleet.core import failover
from fleet.core.estimate import estimator_named
from fleet.core.jobstate import JobState, job_state
from fleet.core.kinds import Kind, find_kind
from fleet.core.placement import place
from fleet.core.workload import Gang, WorkloadError, gang_from_workload
from fleet.kube import ApiError, KubeClient, Obj, Unreachable

log = logging.getLogger(__name__)

BINDING = (c.FLEET_API_VERSION, "GangBinding")
FIELD_MANAGER = "fleet"
#: The fleet-side condition fleet adds in front of the mirrored member conditions.
FLEET_CONDITION = "Scheduled"


class BindingGone(Exception):
    """The binding disappeared under a reconcile (a namespace being deleted): run again."""


@dataclasses.dataclass(frozen=True, order=True)
class WorkloadKey:
    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> WorkloadKey:
        meta = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _stamp(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(t: dt.datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def _from_epoch(t: float | None) -> dt.datetime | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.UTC).replace(microsecond=0)


class Reconciler:
    def __init__(
        self,
        fleet: KubeClient,
        members: MemberRegistry,
        policies: PolicyIndex,
        settings: Settings,
        events: EventRecorder,
        metrics: Metrics,
    ) -> None:
        self.fleet = fleet
        self.members = members
        self.policies = policies
        self.settings = settings
        self.events = events
        self.metrics = metrics
        self.queue: WorkQueue[WorkloadKey] = WorkQueue(
            self.reconcile, workers=settings.workers, expected=(Unreachable, BindingGone)
        )
        #: Workloads waiting for capacity, with when they started waiting (FIFO on retry).
        self.pending: dict[WorkloadKey, float] = {}
        #: Every workload seen on the fleet, so a new policy can pick up existing jobs.
        self.known: set[WorkloadKey] = set()
        #: Workload -> cluster it is bound to, so a member's news reaches its workloads.
        self.placed: dict[WorkloadKey, str] = {}
        #: Workload -> clusters it left a copy in that is still to be purged (or fenced).
        self.evicting: dict[WorkloadKey, set[str]] = {}
        #: What each workload's decision-relevant fields last were (see workload_changed).
        self._fingerprints: dict[WorkloadKey, tuple[object, ...]] = {}
        #: Newest copies of workloads and their bindings (watch events and our own writes).
        self.workloads: Newest[WorkloadKey] = Newest()
        self.bindings: Newest[WorkloadKey] = Newest()

    # -- triggers ---------------------------------------------------------------------------

    def workload_changed(self, obj: Obj, *, deleted: bool = False) -> None:
        """A fleet workload event. Changes to its status alone are fleet's own mirror writes and
        need no reconcile; everything a decision reads (spec, labels, annotations, finalizers,
        deletion) does."""
        key = WorkloadKey.of(obj)
        if deleted:
            self.workloads.drop(key)
            self.queue.add(key)
            return
        self.workloads.offer(key, obj)
        self.known.add(key)
        meta = obj.get("metadata") or {}
        fingerprint = (
            meta.get("uid"),
            meta.get("generation"),
            meta.get("deletionTimestamp"),
            tuple(meta.get("finalizers") or ()),
            tuple(sorted((meta.get("labels") or {}).items())),
            tuple(sorted((meta.get("annotations") or {}).items())),
        )
        if self._fingerprints.get(key) == fingerprint and not meta.get("deletionTimestamp"):
            return
        self._fingerprints[key] = fingerprint
        self.queue.add(key)

    def binding_changed(self, obj: Obj, *, deleted: bool = False) -> None:
        """Keep the binding cache current (another replica, or a person, may write bindings)."""
        ref = (obj.get("spec") or {}).get("resource") or {}
        key = WorkloadKey(
            ref.get("apiVersion", ""),
            ref.get("kind", ""),
            ref.get("namespace") or "",
            ref.get("name", ""),
        )
        if deleted:
            self.bindings.drop(key)
        else:
            self.bindings.offer(key, obj)

    def member_job_changed(self, member: str, _event: str, obj: Obj) -> None:
        self.queue.add(WorkloadKey.of(obj))

    def retry_pending(self) -> None:
        for key, _ in sorted(self.pending.items(), key=lambda kv: kv[1]):
            self.queue.add(key)

    def member_health_changed(self, member: str, _ready: bool) -> None:
        for key, cluster in list(self.placed.items()):
            if cluster == member:
                self.queue.add(key)
        for key, clusters in list(self.evicting.items()):
            if member in clusters:
                self.queue.add(key)
        self.retry_pending()

    def policies_changed(self) -> None:
        for key in list(self.known):
            if key not in self.placed:
                self.queue.add(key)

    # -- the loop body ------------------------------------------------------------------------

    async def reconcile(self, key: WorkloadKey) -> None:
        try:
            await self._reconcile(key)
        except Exception:
            self.metrics.reconciles.inc("error")
            raise
        self.metrics.reconciles.inc("ok")

    async def _reconcile(self, key: WorkloadKey) -> None:
        kind = find_kind(key.api_version, key.kind)
        if kind is None:
            return
        workload = self.workloads.get(key)
        if workload is None:
            workload = await self.fleet.get(key.api_version, key.kind, key.name, key.namespace)
            if workload is None:
                self._forget(key)
                return
            self.workloads.offer(key, workload)
        workload = copy.deepcopy(workload)
        raw = self.bindings.get(key)
        if raw is None:
            raw = await self.fleet.get(*BINDING, binding_name(key.kind, key.name), key.namespace)
            if raw is not None:
                self.bindings.offer(key, raw)
        binding = GangBinding.from_dict(raw) if raw else None
        if binding is not None and binding.spec.resource.uid != workload["metadata"]["uid"]:
            binding = None  # left by an earlier object of the same name; GC removes it
        if workload["metadata"].get("deletionTimestamp"):
            await self._finalize(key, workload, binding)
            return
        gang = await self._interpret(workload)
        if gang is None:
            return
        if binding is None:
            binding = await self._bind(key, workload, gang)
            if binding is None:
                return
        await self._ensure_finalizer(workload)
        if (binding.status and binding.status.phase) == "Failed" and _gave_up(binding):
            return
        step = _Step(self, key, kind, workload, binding, gang)
        await step.run()

    def _forget(self, key: WorkloadKey) -> None:
        self.known.discard(key)
        self.pending.pop(key, None)
        self.placed.pop(key, None)
        self.evicting.pop(key, None)
        self._fingerprints.pop(key, None)
        self.workloads.drop(key)
        self.bindings.drop(key)
        self.metrics.pending.set(len(self.pending))

    async def _interpret(self, workload: Obj) -> Gang | None:
        try:
            return gang_from_workload(workload)
        except WorkloadError as e:
            if self.policies.match(workload).gang:
                await self.events.record(workload, "InvalidWorkload", str(e), warning=True)
                await self._set_workload_condition(workload, "False", "InvalidWorkload", str(e))
            return None

    async def _bind(self, key: WorkloadKey, workload: Obj, gang: Gang) -> GangBinding | None:
        match = self.policies.match(workload)
        if match.policy is None or not match.gang or match.ref is None:
            return None
        spec = match.policy.spec
        app = spec.application_failover
        estimator = spec.gang_estimator or self.settings.estimator
        binding = GangBinding.for_workload(
            WorkloadReference.from_object(workload),
            match.ref,
            GangSpec(
                min_member=max(gang.min_member, 1),
                components=[
                    GangComponent(
                        name=comp.name, replicas=comp.replicas, requests=comp.requests.quantities()
                    )
                    for comp in gang.components
                ],
            ),
            estimator=estimator,
            failover=BindingFailover.from_policy(app) if app else None,
            suspension=spec.suspension,
        )
        try:
            created = await self.fleet.create(binding.to_dict())
        except ApiError as e:
            if not e.conflict:
                raise
            existing = await self.fleet.get(*BINDING, str(binding.metadata.name), key.namespace)
            owner = ((existing or {}).get("spec") or {}).get("resource", {}).get("uid")
            if existing is None or owner != workload["metadata"]["uid"]:
                raise  # a binding of an earlier object of that name, not yet collected: retry
            created = existing
        self.bindings.offer(key, created)
        log.info("%s: bound by %s (%s)", key, match.ref.name, match.reason)
        return GangBinding.from_dict(created)

    async def _ensure_finalizer(self, workload: Obj) -> None:
        if c.FINALIZER not in (workload["metadata"].get("finalizers") or []):
            await self._set_finalizer(workload, present=True)

    async def _set_finalizer(self, workload: Obj, *, present: bool) -> None:
        """Add or remove fleet's finalizer, guarded by resourceVersion so a concurrent change to
        the list is never lost; a conflict reads the object again and retries once."""
        key = WorkloadKey.of(workload)
        for attempt in (1, 2):
            finalizers = [
                f for f in workload["metadata"].get("finalizers") or [] if f != c.FINALIZER
            ]
            if present:
                finalizers.append(c.FINALIZER)
            patch = {
                "metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": workload["metadata"]["resourceVersion"],
                }
            }
            try:
                updated = await self.fleet.patch(
                    key.api_version, key.kind, key.name, patch, key.namespace
                )
            except ApiError as e:
                if not e.conflict or attempt == 2:
                    raise
                fresh = await self.fleet.get(key.api_version, key.kind, key.name, key.namespace)
                if fresh is None:
                    return
                workload.clear()
                workload.update(fresh)
                continue
            workload["metadata"] = updated["metadata"]
            self.workloads.offer(key, updated)
            return

    async def _finalize(self, key: WorkloadKey, workload: Obj, binding: GangBinding | None) -> None:
        finalizers = list(workload["metadata"].get("finalizers") or [])
        if c.FINALIZER not in finalizers:
            return
        uid = workload["metadata"]["uid"]
        policy = self.policies.get(binding.spec.policy) if binding else None
        preserve = bool(policy and policy.spec.preserve_resources_on_deletion)
        if not preserve:
            waiting = []
            # Without its binding (a deleted namespace takes bindings first) any member may
            # hold the copy: look in every one; the UID label says which copy is ours.
            clusters = _clusters_holding(binding) if binding else sorted(self.members.members)
            for cluster in clusters:
                member = self.members.get(cluster)
                if member is None:
                    continue  # the member was removed from the fleet: nothing to reach
                if not member.ready or member.client is None:
                    waiting.append(cluster)
                    continue
                await _delete_copy(member, key, uid)
            if waiting:
                message = f"waiting for {', '.join(waiting)} to be reachable to delete its copy"
                await self.events.record(workload, "CleanupPending", message, warning=True)
                self.queue.add_after(key, 10)
                return
        for snapshot in self.members.snapshots():
            snapshot.release(uid)
        await self._set_finalizer(workload, present=False)
        self.events.forget(uid)
        self._forget(key)
        log.info("%s: deleted; member copies %s", key, "kept" if preserve else "removed")

    async def patch_status(self, workload: Obj, status: dict[str, Any]) -> None:
        """Merge-patch the fleet workload's status; `workload` and the cache follow."""
        meta = workload["metadata"]
        updated = await self.fleet.patch(
            workload["apiVersion"],
            workload["kind"],
            meta["name"],
            {"status": status},
            meta.get("namespace"),
            subresource="status",
        )
        workload["status"] = updated.get("status")
        workload["metadata"] = updated["metadata"]
        self.workloads.offer(WorkloadKey.of(workload), updated)

    async def _set_workload_condition(
        self, workload: Obj, status: str, reason: str, message: str
    ) -> None:
        conditions = _with_fleet_condition(
            (workload.get("status") or {}).get("conditions") or [], status, reason, message
        )
        if conditions != (workload.get("status") or {}).get("conditions"):
            await self.patch_status(workload, {"conditions": conditions})


@dataclasses.dataclass
class _Step:
    """One reconcile of one bound workload (a plain object so the phases can share state)."""

    r: Reconciler
    key: WorkloadKey
    kind: Kind
    workload: Obj
    binding: GangBinding
    gang: Gang

    @property
    def uid(self) -> str:
        uid: str = self.workload["metadata"]["uid"]
        return uid

    async def run(self) -> None:
        await self._purge_old_copies()
        target = self.binding.target_cluster
        if target is not None and not await self._judge(target):
            return
        target = self.binding.target_cluster
        if target is None:
            target = await self._schedule()
            if target is None:
                return
        member = self.r.members.get(target)
        if member is None or not member.ready or member.client is None:
            self.r.placed[self.key] = target
            return  # health changes requeue us; failover judges a lasting loss
        copy = await self._apply(member)
        if copy is not None:
            await self._mirror(member, copy)

    # -- binding writes ---------------------------------------------------------------------

    async def _patch_binding(
        self, spec: dict[str, Any] | None, status: dict[str, Any] | None
    ) -> None:
        try:
            await self._write_binding(spec, status)
        except ApiError as e:
            if not e.not_found:
                raise
            self.r.bindings.drop(self.key)
            raise BindingGone(f"{self.key}: its GangBinding was deleted; starting over") from e

    async def _write_binding(
        self, spec: dict[str, Any] | None, status: dict[str, Any] | None
    ) -> None:
        meta = self.binding.metadata
        name = str(meta.name)
        if spec is not None:
            updated = await self.r.fleet.patch(*BINDING, name, {"spec": spec}, meta.namespace)
            self.r.bindings.offer(self.key, updated)
            self.binding = GangBinding.from_dict(updated)
        if status is not None:
            updated = await self.r.fleet.patch(
                *BINDING, name, {"status": status}, meta.namespace, subresource="status"
            )
            self.r.bindings.offer(self.key, updated)
            self.binding = GangBinding.from_dict(updated)

    def _conditions(self, *changes: tuple[str, ConditionStatus, str, str]) -> list[dict[str, Any]]:
        """The binding's conditions with each (type, status, reason, message) set."""
        current = self.binding.status.conditions if self.binding.status else None
        for type_, status, reason, message in changes:
            current = set_condition(
                current,
                type_,
                status,
                reason,
                message[:32000],
                _now(),
                observed_generation=self.binding.metadata.generation,
            )
        return [x.to_dict() for x in current or []]

    def _status_list(self, name: str) -> list[dict[str, Any]]:
        """A list field of the binding's status by its JSON name, as dicts."""
        attr = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)
        items = getattr(self.binding.status, attr) if self.binding.status else None
        return [x.to_dict() for x in items or []]

    # -- 1. old copies ------------------------------------------------------------------------

    async def _purge_old_copies(self) -> None:
        tasks = self.binding.spec.graceful_eviction_tasks or []
        if not tasks:
            return
        target = self.binding.target_cluster
        successor = self._member_state(target) if target else None
        remaining = []
        for task in tasks:
            mode = task.purge_mode or "Gracefully"
            created = _epoch(task.creation_timestamp) or time.time()
            verdict = failover.purge_old_copy(
                mode,
                evicted_at=created,
                successor_running=successor in ("Running", "Succeeded"),
                now=time.time(),
                grace_period_seconds=task.grace_period_seconds,
            )
            member = self.r.members.get(task.from_cluster)
            if member is None:
                continue  # the cluster left the fleet: nothing to purge
            if not verdict.delete:
                remaining.append(task)
                if verdict.recheck_at is not None:
                    self.r.queue.add_after(self.key, verdict.recheck_at - time.time())
                continue
            if not member.ready or member.client is None:
                remaining.append(task)  # fenced when it comes back (health change requeues)
                continue
            deleted = await _delete_copy(member, self.key, self.uid)
            if deleted:
                what = "fenced a stale copy" if task.reason == c.REASON_CLUSTER_LOST else "purged"
                await self.r.events.record(
                    self.workload,
                    "StaleCopyDeleted"
                    if task.reason == c.REASON_CLUSTER_LOST
                    else "OldCopyDeleted",
                    f"{what} in {task.from_cluster} ({mode})",
                )
                self.r.metrics.purges.inc(task.from_cluster)
        if remaining:
            self.r.evicting[self.key] = {t.from_cluster for t in remaining}
        else:
            self.r.evicting.pop(self.key, None)
        if len(remaining) != len(tasks):
            await self._patch_binding(
                {"gracefulEvictionTasks": [t.to_dict() for t in remaining] or None}, None
            )

    # -- 2. failover ----------------------------------------------------------------------------

    def _member_state(self, cluster: str | None) -> JobState | None:
        member = self.r.members.get(cluster) if cluster else None
        if member is None:
            return None
        copy = member.job(self.key.api_version, self.key.kind, self.key.namespace, self.key.name)
        if copy is None or not propagation.is_ours(copy, self.uid):
            return None
        return job_state(copy.get("status"))

    def _settings(self) -> failover.FailoverSettings | None:
        spec = self.binding.spec.failover
        if spec is None:
            return None
        return failover.FailoverSettings(
            toleration_seconds=float(spec.toleration_seconds),
            purge_mode=spec.purge_mode,
            grace_period_seconds=None
            if spec.grace_period_seconds is None
            else float(spec.grace_period_seconds),
            max_failovers=spec.max_failovers,
            cluster_exclusion_seconds=None
            if spec.cluster_exclusion_seconds is None
            else float(spec.cluster_exclusion_seconds),
        )

    async def _judge(self, target: str) -> bool:
        """Failover judgement on the current cluster; False ends this reconcile."""
        member = self.r.members.get(target)
        ready: bool | None = member is not None and member.ready
        if member is not None and not member.known:
            ready = None  # just (re)connected: no verdict on what we have not seen
        state = self._member_state(target)
        synced = member is not None and member.jobs_synced(self.key.api_version, self.key.kind)
        observed = failover.Observation(
            cluster_ready=ready,
            job_failed=(state == "Failed") if synced else None,
            job_succeeded=state == "Succeeded",
        )
        status = self.binding.status
        timers = failover.Timers(
            unhealthy_since=_epoch(status.unhealthy_since) if status else None,
            cluster_lost_since=_epoch(status.cluster_lost_since) if status else None,
        )
        now = time.time()
        verdict = failover.judge(
            self._settings(),
            observed,
            timers,
            now,
            failovers=(status.failover_count if status else None) or 0,
            cluster=target,
        )
        if isinstance(verdict, failover.Stay):
            if verdict.timers != timers:
                await self._patch_binding(
                    None,
                    {
                        "unhealthySince": _stamp_or_none(verdict.timers.unhealthy_since),
                        "clusterLostSince": _stamp_or_none(verdict.timers.cluster_lost_since),
                    },
                )
                if verdict.waiting:
                    await self.r.events.record(
                        self.workload, "FailoverPending", verdict.waiting, warning=True
                    )
            if verdict.recheck_at is not None:
                self.r.queue.add_after(self.key, verdict.recheck_at - now + 0.05)
            return True
        if isinstance(verdict, failover.GiveUp):
            await self._give_up(target, verdict)
            return False
        await self._fail_over(target, verdict, member)
        return True

    async def _give_up(self, target: str, verdict: failover.GiveUp) -> None:
        history = self._status_list("failoverHistory")
        trail = ", ".join(f"{h['fromCluster']} ({h['reason']})" for h in history) or "none"
        message = f"{verdict.message}; failover history: {trail}"
        await self._patch_binding(
            None,
            {
                "phase": "Failed",
                "conditions": self._conditions(
                    (c.CONDITION_HEALTHY, "False", "FailoverLimitReached", message)
                ),
            },
        )
        conditions = _with_fleet_condition(
            (self.workload.get("status") or {}).get("conditions") or [],
            "True",
            c.REASON_SCHEDULED,
            f"Binding was scheduled to {target}",
        )
        conditions = [x for x in conditions if x.get("type") != "Failed"] + [
            _job_condition("Failed", "FailoverLimitReached", message)
        ]
        await self.r.patch_status(self.workload, {"conditions": conditions})
        await self.r.events.record(self.workload, "FailoverLimitReached", message, warning=True)
        log.warning("%s: %s", self.key, message)

    async def _fail_over(self, target: str, verdict: failover.Move, member: Member | None) -> None:
        settings = self._settings()
        assert settings is not None
        now_dt = _now()
        now = now_dt.timestamp()
        reachable = member is not None and member.ready and member.client is not None
        mode = settings.purge_mode
        tasks = [t.to_dict() for t in self.binding.spec.graceful_eviction_tasks or []]
        if failover.delete_before_placing(mode, old_cluster_reachable=reachable):
            assert member is not None
            await _delete_copy(member, self.key, self.uid)
        elif mode != "Never":
            tasks.append(
                GracefulEvictionTask(
                    from_cluster=target,
                    reason=verdict.reason,
                    message=verdict.message,
                    purge_mode=mode,
                    creation_timestamp=now_dt,
                    grace_period_seconds=None
                    if settings.grace_period_seconds is None
                    else int(settings.grace_period_seconds),
                ).to_dict()
            )
        status = self.binding.status
        count = ((status.failover_count if status else None) or 0) + 1
        history = [
            *self._status_list("failoverHistory"),
            FailoverRecord(from_cluster=target, reason=verdict.reason, time=now_dt).to_dict(),
        ]
        until = _from_epoch(failover.exclusion_until(settings, now))
        excluded = [e for e in self._status_list("excludedClusters") if e["name"] != target]
        excluded.append(ExcludedCluster(name=target, reason=verdict.reason, until=until).to_dict())
        placements = self._status_list("placementHistory")
        for record in placements:
            if record["cluster"] == target and not record.get("removedAt"):
                record["removedAt"] = _stamp(now_dt)
                record["reason"] = verdict.reason
        await self._patch_binding(
            {"clusters": None, "gracefulEvictionTasks": tasks or None},
            {
                "phase": "FailingOver",
                "failoverCount": count,
                "failoverHistory": history,
                "excludedClusters": excluded,
                "placementHistory": placements,
                "unhealthySince": None,
                "clusterLostSince": None,
                "conditions": self._conditions(
                    (
                        c.CONDITION_SCHEDULED,
                        "False",
                        c.REASON_FAILED_OVER,
                        f"failing over from {target}: {verdict.message}",
                    )
                ),
            },
        )
        self.r.placed.pop(self.key, None)
        if tasks:
            self.r.evicting[self.key] = {t["fromCluster"] for t in tasks}
        self.r.metrics.failovers.inc(verdict.reason)
        left = {"Never": f"; the copy in {target} is left in place (purgeMode Never)"}.get(mode, "")
        message = f"failing over from {target}: {verdict.message}{left}"
        await self.r.events.record(self.workload, "FailoverTriggered", message, warning=True)
        conditions = [
            x
            for x in (self.workload.get("status") or {}).get("conditions") or []
            if x.get("type") not in ("Failed", "Running", "Succeeded")
        ]
        conditions.append(_job_condition("Restarting", "FailingOver", message))
        await self.r.patch_status(
            self.workload,
            {
                "conditions": _with_fleet_condition(
                    conditions, "False", c.REASON_FAILED_OVER, message
                )
            },
        )
        log.warning("%s: %s", self.key, message)

    # -- 3. placement ---------------------------------------------------------------------------

    async def _schedule(self) -> str | None:
        if self.binding.spec.suspension and self.binding.spec.suspension.scheduling:
            await self._patch_binding(
                None,
                {
                    "phase": "Pending",
                    "conditions": self._conditions(
                        (
                            c.CONDITION_SCHEDULED,
                            "False",
                            c.REASON_QUEUED,
                            "suspension.scheduling holds the job for the queue",
                        )
                    ),
                },
            )
            return None
        now = time.time()
        policy = self.r.policies.get(self.binding.spec.policy)
        affinity = core_affinity(policy.spec if policy else None)
        excluded = {
            e.name: e.reason or "failure"
            for e in (self.binding.status.excluded_clusters if self.binding.status else None) or []
            if failover.still_excluded(_epoch(e.until), now)
        }
        estimator = estimator_named(self.binding.spec.estimator or self.r.settings.estimator)
        clock = time.monotonic()
        for snapshot in self.r.members.snapshots():
            snapshot.expire(clock)
        started = time.perf_counter()
        decision = place(
            self.gang,
            self.r.members.snapshots(),
            estimator=estimator,
            affinity=affinity,
            failed_over=excluded,
            not_ready=self.r.members.not_ready(),
        )
        self.r.metrics.decision_seconds.observe(time.perf_counter() - started)
        if decision.placement is None:
            await self._wait_for_capacity(decision.summary(), decision.sentences())
            return None
        chosen = decision.placement
        target = self.r.members.get(chosen.cluster)
        assert target is not None
        target.snapshot.reserve(
            self.uid, chosen.assignment, clock + self.r.settings.reservation_seconds
        )
        now_dt = _now()
        result = f"Binding has been scheduled successfully. Result: {chosen}"
        # The binding also says why the other clusters were not chosen.
        others = "; ".join(decision.sentences())
        explained = f"{result}; not chosen: {others}" if others else result
        try:
            await self._patch_binding(
                {
                    "clusters": [
                        TargetCluster(
                            name=chosen.cluster,
                            replicas=0 if chosen.multi_role else chosen.replicas,
                            components=[
                                TargetComponent(name=name, replicas=n)
                                for name, n in self._component_replicas()
                            ],
                        ).to_dict()
                    ]
                },
                {
                    "phase": "Scheduled",
                    "pendingReasons": None,
                    "placementHistory": [
                        *self._status_list("placementHistory"),
                        PlacementRecord(cluster=chosen.cluster, placed_at=now_dt).to_dict(),
                    ],
                    "conditions": self._conditions(
                        (c.CONDITION_SCHEDULED, "True", c.REASON_SCHEDULED, explained)
                    ),
                },
            )
        except Exception:
            target.snapshot.release(self.uid)
            raise
        self.r.pending.pop(self.key, None)
        self.r.metrics.pending.set(len(self.r.pending))
        self.r.metrics.dispatches.inc(chosen.cluster)
        scheduler = self._scheduler_name()
        await self.r.events.record(
            self.workload, "ScheduleBindingSucceed", result, component=scheduler
        )
        log.info("%s: %s", self.key, result)
        return chosen.cluster

    def _component_replicas(self) -> list[tuple[str, int]]:
        return [(comp.name, comp.replicas) for comp in self.gang.components]

    def _scheduler_name(self) -> str:
        policy = self.r.policies.get(self.binding.spec.policy)
        return (policy.spec.scheduler_name if policy else None) or "default-scheduler"

    async def _wait_for_capacity(self, summary: str, sentences: list[str]) -> None:
        self.r.pending.setdefault(self.key, time.time())
        self.r.metrics.pending.set(len(self.r.pending))
        reasons = [
            PendingReason(cluster=s.split(": ", 1)[0], reason=s.split(": ", 1)[-1]).to_dict()
            for s in sentences
        ] or [PendingReason(cluster="(none)", reason="the fleet has no member clusters").to_dict()]
        if not sentences:
            summary = "0/0 clusters: the fleet has no member clusters"
        await self._patch_binding(
            None,
            {
                "phase": "Pending",
                "pendingReasons": reasons,
                "conditions": self._conditions(
                    (c.CONDITION_SCHEDULED, "False", c.REASON_NO_CLUSTER_FIT, summary)
                ),
            },
        )
        await self.r.events.record(
            self.workload,
            "ScheduleBindingFailed",
            summary,
            warning=True,
            component=self._scheduler_name(),
        )
        status = self.workload.get("status") or {}
        conditions = status.get("conditions") or [
            _job_condition(
                "Created",
                "FleetPending",
                f"{self.key.kind} {self.key.name} is created on the fleet and waits for a cluster.",
            )
        ]
        await self.r.patch_status(
            self.workload,
            {
                "conditions": _with_fleet_condition(
                    conditions, "False", c.REASON_NO_CLUSTER_FIT, summary
                )
            },
        )

    # -- 4. the member copy ---------------------------------------------------------------------

    async def _apply(self, member: Member) -> Obj | None:
        """Create or update the member copy; None if it could not be applied (recorded)."""
        assert member.client is not None
        client = member.client
        self.r.placed[self.key] = member.name
        binding_ref = f"{self.binding.metadata.namespace}/{self.binding.metadata.name}"
        desired = propagation.member_copy(
            self.workload, self.kind, min_member=self.gang.min_member, binding=binding_ref
        )
        seen = member.job(self.key.api_version, self.key.kind, self.key.namespace, self.key.name)
        if seen is not None and propagation.is_current(seen, desired):
            return seen  # nothing changed since the last apply: no write
        try:
            existing = await client.get(
                self.key.api_version, self.key.kind, self.key.name, self.key.namespace
            )
            if existing is not None and not propagation.is_ours(existing, self.uid):
                await self._apply_failed(
                    member.name,
                    f"{self.key.kind} {self.key.namespace}/{self.key.name} already exists in "
                    f"{member.name} and was not created by fleet for this object",
                )
                return None
            if existing is not None and propagation.is_current(existing, desired):
                return existing
            if existing is None:
                await self._ensure_namespace(member)
                await self._propagate_dependencies(client)
            copy = await client.apply(desired, field_manager=FIELD_MANAGER)
        except ApiError as e:
            if e.status in (400, 403, 404, 409, 422):
                await self._apply_failed(member.name, str(e))
                return None
            raise
        if existing is None:
            log.info("%s: created in %s", self.key, member.name)
        return copy

    async def _ensure_namespace(self, member: Member) -> None:
        if not self.key.namespace or self.key.namespace in member.namespaces:
            return
        assert member.client is not None
        if await member.client.get("v1", "Namespace", self.key.namespace) is None:
            namespace = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": self.key.namespace,
                    "labels": {c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE},
                },
            }
            await member.client.apply(namespace, field_manager=FIELD_MANAGER)
        member.namespaces.add(self.key.namespace)

    async def _propagate_dependencies(self, client: KubeClient) -> None:
        policy = self.r.policies.get(self.binding.spec.policy)
        if not (policy and policy.spec.propagate_deps):
            return
        for dep_kind, name in propagation.dependencies(self.workload, self.kind):
            api_version = propagation.DEPENDENCY_KINDS[dep_kind]
            source = await self.r.fleet.get(api_version, dep_kind, name, self.key.namespace)
            if source is None:
                await self.r.events.record(
                    self.workload,
                    "DependencyMissing",
                    f"{dep_kind} {self.key.namespace}/{name} is referenced but not on the fleet",
                    warning=True,
                )
                continue
            copy = propagation.dependency_copy(
                {"apiVersion": api_version, "kind": dep_kind, **source}
            )
            await client.apply(copy, field_manager=FIELD_MANAGER)

    async def _apply_failed(self, cluster: str, message: str) -> None:
        current = self.binding.condition(c.CONDITION_FULLY_APPLIED)
        if current is not None and current.status == "False" and current.message == message:
            return
        await self._patch_binding(
            None,
            {
                "phase": "Scheduled",
                "aggregatedStatus": [
                    {"clusterName": cluster, "applied": False, "appliedMessage": message}
                ],
                "conditions": self._conditions(
                    (c.CONDITION_FULLY_APPLIED, "False", c.REASON_APPLY_FAILED, message)
                ),
            },
        )
        await self.r.events.record(self.workload, "ApplyFailed", message, warning=True)

    # -- 5. status --------------------------------------------------------------------------------

    async def _mirror(self, member: Member, copy: Obj) -> None:
        seen = member.job(self.key.api_version, self.key.kind, self.key.namespace, self.key.name)
        if seen is not None and int(seen["metadata"].get("resourceVersion", 0)) > int(
            copy["metadata"].get("resourceVersion", 0)
        ):
            copy = seen
        member_status = dict(copy.get("status") or {})
        state = job_state(member_status)
        result = self.binding.condition(c.CONDITION_SCHEDULED)
        mirrored = {
            k: member_status.get(k)
            for k in ("replicaStatuses", "startTime", "completionTime", "lastReconcileTime")
        }
        mirrored["conditions"] = _with_fleet_condition(
            member_status.get("conditions") or [],
            "True",
            c.REASON_SCHEDULED,
            result.message if result else f"scheduled to {member.name}",
        )
        current = self.workload.get("status") or {}
        if any(current.get(k) != v for k, v in mirrored.items()):
            await self.r.patch_status(self.workload, mirrored)
        health = "Unhealthy" if state == "Failed" else "Healthy"
        phase = {"Succeeded": "Succeeded", "Failed": "Failed", "Running": "Running"}.get(
            state, "Dispatched"
        )
        entry = {
            "clusterName": member.name,
            "applied": True,
            "health": health,
            "jobState": state,
        }
        status = self.binding.status
        applied = self.binding.condition(c.CONDITION_FULLY_APPLIED)
        if (
            self._status_list("aggregatedStatus") == [entry]
            and status is not None
            and status.phase == phase
            and applied is not None
            and applied.status == "True"
        ):
            return
        await self._patch_binding(
            None,
            {
                "phase": phase,
                "aggregatedStatus": [entry],
                "conditions": self._conditions(
                    (
                        c.CONDITION_FULLY_APPLIED,
                        "True",
                        c.REASON_FULLY_APPLIED,
                        f"applied to {member.name}",
                    ),
                    (
                        c.CONDITION_HEALTHY,
                        "False" if health == "Unhealthy" else "True",
                        c.REASON_UNHEALTHY if health == "Unhealthy" else c.REASON_HEALTHY,
                        f"{self.key.kind} is {state} in {member.name}",
                    ),
                ),
            },
        )


# -- helpers ------------------------------------------------------------------------------------


def _gave_up(binding: GangBinding) -> bool:
    healthy = binding.condition(c.CONDITION_HEALTHY)
    return healthy is not None and healthy.reason == "FailoverLimitReached"


def _clusters_holding(binding: GangBinding) -> list[str]:
    clusters = {binding.target_cluster} if binding.target_cluster else set()
    clusters |= {t.from_cluster for t in binding.spec.graceful_eviction_tasks or []}
    for record in (binding.status.placement_history if binding.status else None) or []:
        if record.removed_at is None:
            clusters.add(record.cluster)
    return sorted(x for x in clusters if x)


async def _delete_copy(member: Member, key: WorkloadKey, uid: str) -> bool:
    """Delete the member's copy if it is ours (by the fleet-UID label); True if one was deleted."""
    assert member.client is not None
    copy = await member.client.get(key.api_version, key.kind, key.name, key.namespace)
    if copy is None or not propagation.is_ours(copy, uid):
        return False
    return await member.client.delete(
        key.api_version, key.kind, key.name, key.namespace, uid=copy["metadata"]["uid"]
    )


def _stamp_or_none(t: float | None) -> str | None:
    moment = _from_epoch(t)
    return _stamp(moment) if moment else None


def _job_condition(type_: str, reason: str, message: str) -> dict[str, Any]:
    stamp = _stamp(_now())
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
        "lastUpdateTime": stamp,
    }


def _with_fleet_condition(
    conditions: list[dict[str, Any]], status: str, reason: str, message: str
) -> list[dict[str, Any]]:
    """The job's conditions with fleet's `Scheduled` first, so the State column (the last
    condition) keeps showing the job's own state."""
    rest = [x for x in conditions if x.get("type") != FLEET_CONDITION]
    old = next((x for x in conditions if x.get("type") == FLEET_CONDITION), None)
    message = message[:4000]
    if old and (old.get("status"), old.get("reason"), old.get("message")) == (
        status,
        reason,
        message,
    ):
        return [old, *rest]
    stamp = _stamp(_now())
    transition = (
        old.get("lastTransitionTime", stamp) if old and old.get("status") == status else stamp
    )
    ours = {
        "type": FLEET_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
        "lastUpdateTime": stamp,
    }
    return [ours, *rest]
