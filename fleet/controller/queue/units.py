"""QueueUnits: one per queued job, in the job's namespace, owned by the job.

A unit's spec is kube-queue's (`consumerRef`, `queue`, `resource`: the gang's total, `priority`);
its status is the unit's place in the queue as `fleet.core.admission` decided it, with what a
restarted controller needs to rebuild the queue exactly (`dequeuedAt`, `backoffUntil`,
`attempts`, `quota`). This module converts between the object and the core's values and writes
the object; it decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fleet.api import ObjectReference, QueueUnit, ResourceList, format_time, queue_unit_name
from fleet.api import constants as c
from fleet.api._time import parse_time, to_epoch
from fleet.controller.cache import Newest
from fleet.controller.keys import WorkloadKey
from fleet.core.admission import PHASES, Placed, UnitSpec, UnitState
from fleet.core.errors import FieldError
from fleet.core.kinds import adapter_for
from fleet.core.lifecycle import Eviction
from fleet.core.quota import QUOTA_NAME_LABELS
from fleet.core.resources import Resources
from fleet.kube import ApiError, KubeClient, Obj

log = logging.getLogger(__name__)

UNIT = (c.QUEUE_API_VERSION, "QueueUnit")


def unit_key(namespace: str, name: str) -> str:
    """The key a unit has in the admission: `<namespace>/<unit name>`."""
    return f"{namespace}/{name}"


def key_of_job(key: WorkloadKey) -> str:
    """The admission key of a job's unit (its name is the binding's: `<kind>-<name>`)."""
    return unit_key(key.namespace, queue_unit_name(key.kind, key.name))


def key_of(unit: Mapping[str, Any]) -> str:
    meta = unit.get("metadata") or {}
    return unit_key(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def job_of(unit: Mapping[str, Any]) -> WorkloadKey:
    """The job a unit queues (its consumerRef)."""
    ref = (unit.get("spec") or {}).get("consumerRef") or {}
    namespace = ref.get("namespace") or (unit.get("metadata") or {}).get("namespace") or ""
    return WorkloadKey.of_reference({**ref, "namespace": namespace})


def _epoch(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return to_epoch(parse_time(value))
    except ValueError:
        return None


def placed_copy(
    binding: Mapping[str, Any],
    now: float,
    *,
    workload: Mapping[str, Any] | None = None,
    copy: Mapping[str, Any] | None = None,
) -> Placed | None:
    """What a reclaim knows of a binding's running gang, the facts the simulator gives it too
    (docs/queue.md, "Checkpoints the controller knows"); None when it names no cluster:

    * where: its cluster, and the owner key its pods carry in the member (the job's UID);
    * since when its work began: when its copy first reported Running in its current stay
      (`placementHistory[].runningSince`); a copy that has not reported Running yet has done
      no work (`now`); a Running binding written before that field was recorded counts from
      its placement (`placedAt`);
    * its declared limit: the kind's `activeDeadlineSeconds` or equivalent, on `workload`
      (`KindAdapter.run_limit_seconds`);
    * its last checkpoint: the later of the `fleet.dev/last-checkpoint` annotations on
      `workload` (the fleet job) and `copy` (its member copy)."""
    spec = binding.get("spec") or {}
    clusters = spec.get("clusters") or []
    if not clusters:
        return None
    cluster = str(clusters[0].get("name") or "")
    status = binding.get("status") or {}
    history = status.get("placementHistory") or []
    stay = next(
        (h for h in reversed(history) if h.get("cluster") == cluster and not h.get("removedAt")),
        None,
    )
    owner = str((spec.get("resource") or {}).get("uid") or "")
    if not cluster or not owner:
        return None
    started = _epoch((stay or {}).get("runningSince"))
    if started is None:
        placed_at = _epoch((stay or {}).get("placedAt"))
        started = placed_at if status.get("phase") == "Running" and placed_at else now
    kind = (
        adapter_for(str(workload.get("apiVersion")), str(workload.get("kind")))
        if workload is not None
        else None
    )
    limit = kind.run_limit_seconds(workload) if kind is not None and workload else None
    checkpoints = [t for t in (_checkpoint(workload), _checkpoint(copy)) if t is not None]
    return Placed(cluster, owner, started, limit=limit, checkpoint=max(checkpoints, default=None))


def _checkpoint(obj: Mapping[str, Any] | None) -> float | None:
    """The time an object's `fleet.dev/last-checkpoint` annotation gives (None: none, or not
    an RFC 3339 time: logged, naming the object)."""
    meta = (obj or {}).get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(c.CHECKPOINT_ANNOTATION)
    if raw is None:
        return None
    found = _epoch(raw)
    if found is None:
        log.warning(
            "%s %s/%s: annotation %s=%r is not an RFC 3339 time; no checkpoint counted",
            (obj or {}).get("kind"),
            meta.get("namespace"),
            meta.get("name"),
            c.CHECKPOINT_ANNOTATION,
            raw,
        )
    return found


def queue_evictions_of(binding: Mapping[str, Any] | None) -> list[Eviction]:
    """The queue's evictions (reclaim, preemption) a binding records and has not finished."""
    tasks = ((binding or {}).get("spec") or {}).get("gracefulEvictionTasks") or []
    return [
        Eviction(
            str(t.get("fromCluster") or ""),
            str(t.get("reason") or ""),
            str(t.get("message") or ""),
            "Gracefully",
            _epoch(t.get("creationTimestamp")) or 0.0,
            evicted_for=str(t["evictedFor"]),
        )
        for t in tasks
        if t.get("evictedFor")
    ]


def spec_of(unit: Mapping[str, Any]) -> UnitSpec:
    """The core's view of a unit: its key, namespace, the gang's total, submission and order."""
    meta = unit.get("metadata") or {}
    spec = unit.get("spec") or {}
    try:
        resources = Resources.parse(spec.get("resource") or {}, field="spec.resource")
    except FieldError as err:
        log.warning("QueueUnit %s: %s; counted as asking nothing", key_of(unit), err)
        resources = Resources({})
    labels = meta.get("labels") or {}
    label = next((labels[k] for k in QUOTA_NAME_LABELS if labels.get(k)), None)
    return UnitSpec(
        key=key_of(unit),
        namespace=str(meta.get("namespace") or ""),
        resources=resources,
        submitted=_epoch(meta.get("creationTimestamp")) or 0.0,
        priority=int(spec.get("priority") or 0),
        quota_label=label,
        borrows=labels.get(c.RECLAIMABLE_LABEL) != "false",
    )


def state_of(unit: Mapping[str, Any]) -> UnitState:
    """The unit's persisted place in the queue (a new unit is Enqueued)."""
    status = unit.get("status") or {}
    phase = status.get("phase")
    if phase not in PHASES:
        return UnitState()
    dequeued_at = _epoch(status.get("dequeuedAt"))
    if phase == "Dequeued" and dequeued_at is None:
        dequeued_at = _epoch(status.get("lastUpdateTime")) or 0.0
    return UnitState(
        phase=phase,
        dequeued_at=dequeued_at,
        backoff_until=_epoch(status.get("backoffUntil")),
        attempts=int(status.get("attempts") or 0),
    )


def status_of(
    state: UnitState, quota: str | None, message: str, now: float, current: Mapping[str, Any]
) -> dict[str, Any]:
    """The status to write: `lastUpdateTime` moves only when the phase or the message does."""
    moved = current.get("phase") != state.phase or current.get("message") != message
    return {
        "phase": state.phase,
        "message": message,
        "lastUpdateTime": format_time(now) if moved else current.get("lastUpdateTime"),
        "quota": quota,
        "dequeuedAt": format_time(state.dequeued_at) if state.dequeued_at is not None else None,
        "backoffUntil": (
            format_time(state.backoff_until) if state.backoff_until is not None else None
        ),
        "attempts": state.attempts or None,
    }


def new_unit(
    job: Obj,
    charge: Resources,
    *,
    queue: str | None,
    priority: int,
    priority_class: str | None,
    reclaimable: bool = True,
) -> QueueUnit:
    """A new unit for `job`, owned by it, asking `charge` of its quota (the kind adapter's
    `charge`), carrying the job's quota label if it has one, and the opt-out of reclaim when its
    policy or namespace set it."""
    meta = job["metadata"]
    ref = ObjectReference(
        api_version=job["apiVersion"],
        kind=job["kind"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
    )
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in QUOTA_NAME_LABELS}
    if not reclaimable:
        labels[c.RECLAIMABLE_LABEL] = "false"
    resource: ResourceList = dict(charge.quantities())
    unit = QueueUnit.for_job(
        ref,
        resource=resource,
        queue=queue,
        priority=priority,
        labels=labels or None,
    )
    unit.spec.priority_class_name = priority_class
    return unit


class Units:
    """The units the controller knows (watch events and its own writes), and their writes."""

    def __init__(self, fleet: KubeClient) -> None:
        self.fleet = fleet
        self.objects: Newest[str] = Newest()
        self.keys: set[str] = set()

    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def reset(self) -> None:
        """Forget every unit (a restart lists them again)."""
        self.objects = Newest()
        self.keys = set()

    def offer(self, obj: Obj) -> None:
        key = key_of(obj)
        self.objects.offer(key, obj)
        self.keys.add(key)

    def drop(self, key: str) -> None:
        self.objects.drop(key)
        self.keys.discard(key)

    async def create(self, unit: QueueUnit) -> Obj:
        """Create the unit, or read the one a previous run made (same name: the job's)."""
        body = unit.to_dict()
        status = body.pop("status", None)
        try:
            created = await self.fleet.create(body)
        except ApiError as err:
            if not err.conflict:
                raise
            meta = unit.metadata
            found = await self.fleet.get(*UNIT, str(meta.name), meta.namespace)
            if found is None:
                raise
            self.offer(found)
            return found
        if status:
            created = await self._patch_status(created, status)
        self.offer(created)
        return created

    async def write(
        self,
        key: str,
        state: UnitState,
        quota: str | None,
        message: str,
        now: float,
        *,
        queue: str | None = None,
    ) -> Obj | None:
        """Write the unit's status (and `spec.queue` when its quota node's Queue changed); no
        request when nothing changed. None when the unit is not known."""
        unit = self.objects.get(key)
        if unit is None:
            return None
        if queue is not None and (unit.get("spec") or {}).get("queue") != queue:
            meta = unit["metadata"]
            unit = await self.fleet.patch(
                *UNIT, meta["name"], {"spec": {"queue": queue}}, meta["namespace"]
            )
            self.offer(unit)
        current = unit.get("status") or {}
        desired = status_of(state, quota, message, now, current)
        if all(current.get(k) == v for k, v in desired.items()):
            return unit
        updated = await self._patch_status(unit, desired)
        self.offer(updated)
        return updated

    async def mark(self, key: str, *, priority: int | None, reclaimable: bool) -> Obj | None:
        """Keep the unit's priority and its opt-out of reclaim as its job's PriorityClass,
        policy and namespace say now (one patch, only when one of them changed; `priority`
        None: the job names no class, the unit keeps its own). None when the unit is not
        known."""
        unit = self.objects.get(key)
        if unit is None:
            return None
        meta = unit.get("metadata") or {}
        labels = meta.get("labels") or {}
        held = int((unit.get("spec") or {}).get("priority") or 0)
        priority = held if priority is None else priority
        if held == priority and (labels.get(c.RECLAIMABLE_LABEL) != "false") == reclaimable:
            return unit
        patch = {
            "metadata": {"labels": {c.RECLAIMABLE_LABEL: None if reclaimable else "false"}},
            "spec": {"priority": priority},
        }
        updated = await self.fleet.patch(*UNIT, meta["name"], patch, meta["namespace"])
        self.offer(updated)
        return updated

    async def resize(self, key: str, charge: Resources) -> Obj | None:
        """The unit asks `charge` of its quota from now on (a job its member scales): one patch
        of `spec.resource`, only when it differs. None when the unit is not known."""
        unit = self.objects.get(key)
        if unit is None:
            return None
        held = spec_of(unit).resources
        if held == charge:
            return unit
        wanted = dict(charge.quantities())
        resource: dict[str, Any] = {k: None for k in held if k not in wanted} | wanted
        meta = unit["metadata"]
        patch = {"spec": {"resource": resource}}
        updated = await self.fleet.patch(*UNIT, meta["name"], patch, meta["namespace"])
        self.offer(updated)
        return updated

    async def delete(self, key: str) -> None:
        unit = self.objects.get(key)
        self.drop(key)
        if unit is None:
            return
        meta = unit["metadata"]
        await self.fleet.delete(*UNIT, meta["name"], meta["namespace"], uid=meta.get("uid"))

    async def _patch_status(self, unit: Obj, status: Mapping[str, Any]) -> Obj:
        meta = unit["metadata"]
        return await self.fleet.patch(
            *UNIT, meta["name"], {"status": dict(status)}, meta["namespace"], subresource="status"
        )


def involved(unit: Obj) -> Obj:
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
