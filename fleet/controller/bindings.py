"""GangBinding reads and writes, and the conversion to and from the core's lifecycle value.

The binding is where fleet writes every decision before acting on it. This module is the only
place that knows how a `fleet.core.lifecycle.Binding` is spread over the GangBinding's spec and
status; `save` writes only what changed, spec and status each with one patch. Every patch
carries the resourceVersion of the binding it was decided from (`BindingStore.patch`), so a
decision taken from a binding someone else has written since is refused, never merged over it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fleet.api import (
    ExcludedCluster,
    FailoverRecord,
    GangBinding,
    GracefulEvictionTask,
    PlacementRecord,
    TargetCluster,
    binding_name,
    format_time,
    from_epoch,
    to_epoch,
)
from fleet.api import constants as c
from fleet.controller.cache import Newest
from fleet.controller.keys import WorkloadKey
from fleet.core import lifecycle
from fleet.core.assignment import Domain
from fleet.core.failover import FailoverSettings, Timers
from fleet.kube import ApiError, KubeClient, Obj

log = logging.getLogger(__name__)

BINDING = (c.FLEET_API_VERSION, "GangBinding")


class BindingGone(Exception):
    """The binding disappeared under a reconcile (a namespace being deleted): run again."""


class BindingChanged(Exception):
    """The binding was written by someone else after this reconcile read it (409 Conflict on
    its resourceVersion): nothing this reconcile decided from the old one was written. The
    stored binding is in the cache, and the reconcile runs again from it."""


def _epoch(value: Any) -> float | None:
    return None if value is None else to_epoch(value)


def _stamp(value: float | None) -> str | None:
    return None if value is None else format_time(value)


# -- GangBinding -> lifecycle ----------------------------------------------------------------------


def lifecycle_of(binding: GangBinding, now: float) -> lifecycle.Binding:
    """The core's view of a stored binding (`now` dates an eviction stored without a time)."""
    status = binding.status
    healthy = binding.condition(c.CONDITION_HEALTHY)
    gave_up = (
        healthy.message
        if healthy is not None and healthy.reason == lifecycle.GAVE_UP_REASON
        else None
    )
    return lifecycle.Binding(
        phase=(status.phase if status else None) or "Pending",
        cluster=binding.target_cluster,
        affinity_group=status.scheduler_observed_affinity_name if status else None,
        stays=tuple(
            lifecycle.Stay(
                r.cluster,
                to_epoch(r.placed_at),
                _epoch(r.removed_at),
                r.reason,
                _epoch(r.running_since),
            )
            for r in (status.placement_history if status else None) or ()
        ),
        failovers=tuple(
            lifecycle.FailoverRecord(h.from_cluster, h.reason, to_epoch(h.time))
            for h in (status.failover_history if status else None) or ()
        ),
        exclusions=tuple(
            lifecycle.Exclusion(e.name, e.reason or "failure", _epoch(e.until), e.code)
            for e in (status.excluded_clusters if status else None) or ()
        ),
        evictions=tuple(
            lifecycle.Eviction(
                from_cluster=t.from_cluster,
                reason=t.reason,
                message=t.message or "",
                purge_mode=t.purge_mode or "Gracefully",
                created_at=_epoch(t.creation_timestamp) or now,
                grace_period_seconds=None
                if t.grace_period_seconds is None
                else float(t.grace_period_seconds),
                evicted_for=t.evicted_for,
                preserved=tuple(sorted((t.preserved_label_state or {}).items())),
                cluster_id=t.cluster_id,
            )
            for t in binding.spec.graceful_eviction_tasks or ()
        ),
        timers=Timers(
            unhealthy_since=_epoch(status.unhealthy_since) if status else None,
            cluster_lost_since=_epoch(status.cluster_lost_since) if status else None,
            tainted_since=_epoch(status.tainted_since) if status else None,
            gang_unschedulable_since=_epoch(status.gang_unschedulable_since) if status else None,
        ),
        gave_up=gave_up,
        released=healthy.message
        if healthy is not None and healthy.reason == lifecycle.RELEASED_REASON
        else None,
        reserving_since=_epoch(status.reserving_since) if status else None,
        domain_wait_since=_epoch(status.domain_wait_since) if status else None,
        carried=tuple(sorted((binding.spec.preserved_labels or {}).items())),
        domains=tuple(
            Domain(d.level, d.value, tuple(d.components or ()), d.mode == "Required")
            for target in (binding.spec.clusters or ())[:1]
            for d in target.domains or ()
        ),
    )


def failover_settings(binding: GangBinding) -> FailoverSettings | None:
    """The failover parameters the binding copied from its policy (None: the policy set none)."""
    spec = binding.spec.failover
    if spec is None:
        return None
    return FailoverSettings(
        toleration_seconds=float(spec.toleration_seconds),
        purge_mode=spec.purge_mode,
        grace_period_seconds=None
        if spec.grace_period_seconds is None
        else float(spec.grace_period_seconds),
        max_failovers=spec.max_failovers,
        cluster_exclusion_seconds=None
        if spec.cluster_exclusion_seconds is None
        else float(spec.cluster_exclusion_seconds),
        on_job_failure=spec.on_application_failure is not False,
        on_cluster_loss=spec.on_cluster_loss is not False,
        cluster_purge_mode=spec.cluster_purge_mode,
        gang_schedule_timeout_seconds=None
        if spec.gang_schedule_timeout_seconds is None
        else float(spec.gang_schedule_timeout_seconds),
    )


# -- lifecycle -> GangBinding fields ---------------------------------------------------------------


def _evictions(life: lifecycle.Binding) -> list[dict[str, Any]] | None:
    tasks = [
        GracefulEvictionTask(
            from_cluster=e.from_cluster,
            reason=e.reason,
            message=e.message or None,
            purge_mode=e.purge_mode,
            creation_timestamp=from_epoch(e.created_at),
            grace_period_seconds=None
            if e.grace_period_seconds is None
            else int(e.grace_period_seconds),
            evicted_for=e.evicted_for,
            preserved_label_state=dict(e.preserved) or None,
            cluster_id=e.cluster_id,
        ).to_dict()
        for e in life.evictions
    ]
    return tasks or None


def persisted_status(life: lifecycle.Binding) -> dict[str, Any]:
    """The status fields that hold the lifecycle (None clears a field in a merge patch)."""
    return {
        "phase": life.phase,
        "schedulerObservedAffinityName": life.affinity_group,
        "placementHistory": [
            PlacementRecord(
                cluster=s.cluster,
                placed_at=from_epoch(s.placed_at),
                removed_at=None if s.removed_at is None else from_epoch(s.removed_at),
                reason=s.reason,
                running_since=None if s.running_since is None else from_epoch(s.running_since),
            ).to_dict()
            for s in life.stays
        ]
        or None,
        "failoverHistory": [
            FailoverRecord(
                from_cluster=f.from_cluster, reason=f.reason, time=from_epoch(f.at)
            ).to_dict()
            for f in life.failovers
        ]
        or None,
        "failoverCount": life.failover_count or None,
        "excludedClusters": [
            ExcludedCluster(
                name=e.cluster,
                reason=e.reason,
                until=None if e.until is None else from_epoch(e.until),
                code=e.code,
            ).to_dict()
            for e in life.exclusions
        ]
        or None,
        "unhealthySince": _stamp(life.timers.unhealthy_since),
        "clusterLostSince": _stamp(life.timers.cluster_lost_since),
        "taintedSince": _stamp(life.timers.tainted_since),
        "gangUnschedulableSince": _stamp(life.timers.gang_unschedulable_since),
        "reservingSince": _stamp(life.reserving_since),
        "domainWaitSince": _stamp(life.domain_wait_since),
    }


def _target(
    life: lifecycle.Binding, components: Sequence[tuple[str, int]], multi_role: bool
) -> Any:
    if life.cluster is None:
        return None
    total = sum(n for _, n in components)
    return [
        TargetCluster.from_dict(
            {
                "name": life.cluster,
                "replicas": 0 if multi_role else total,
                "components": [{"name": name, "replicas": n} for name, n in components],
                "domains": [
                    {
                        "level": d.level,
                        "value": d.value,
                        "components": list(d.components) or None,
                        "mode": "Required" if d.required else "Preferred",
                    }
                    for d in life.domains
                ]
                or None,
            }
        ).to_dict()
    ]


def _changed(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in desired.items() if current.get(k) != v}


class BindingStore:
    """Reads bindings from the watch-fed cache, creates them, and writes what changed."""

    def __init__(self, fleet: KubeClient, cache: Newest[WorkloadKey]) -> None:
        self.fleet = fleet
        self.cache = cache
        #: The cache holds every binding (listed once, then kept by the watch): a binding it
        #: lacks does not exist, and a new workload costs no GET.
        self.complete = False

    async def warm(self) -> list[Obj]:
        """List every binding once (a replica starting to lead); the bindings listed."""
        listing = await self.fleet.list(*BINDING)
        listed: list[Obj] = []
        for item in listing.get("items") or []:
            obj = {"apiVersion": BINDING[0], "kind": BINDING[1], **item}
            self.cache.offer(key_of_binding(obj), obj)
            listed.append(obj)
        self.complete = True
        return listed

    async def read(self, key: WorkloadKey) -> GangBinding | None:
        """The workload's binding: from the cache; from the API server only while the cache
        may be incomplete."""
        raw = self.cache.get(key)
        if raw is None and not self.complete:
            raw = await self.fleet.get(*BINDING, binding_name(key.kind, key.name), key.namespace)
            if raw is not None:
                self.cache.offer(key, raw)
        return GangBinding.from_dict(raw) if raw else None

    @staticmethod
    def written(binding: GangBinding) -> bool:
        """Whether the binding exists on the API server (a new one is created by its first
        `save`, so the first decision costs no separate write)."""
        return binding.metadata.resource_version is not None

    async def _create_with(
        self, key: WorkloadKey, binding: GangBinding, spec: Mapping[str, Any]
    ) -> GangBinding:
        body = binding.to_dict()
        merged = dict(body.get("spec") or {})
        for name, value in spec.items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        body["spec"] = merged
        try:
            created = await self.fleet.create(body)
        except ApiError as e:
            if not e.conflict:
                raise
            # A binding of that name exists after all. An earlier run's for this very object:
            # its decision, not this one, stands; start over from it. An earlier object's of the
            # same name (deleted, its binding not yet collected): it decides nothing for this
            # one, so it goes now rather than when the garbage collector gets to it.
            name = str(binding.metadata.name)
            existing = await self.fleet.get(*BINDING, name, key.namespace)
            if existing is not None:
                stale = ((existing.get("spec") or {}).get("resource") or {}).get("uid")
                if stale is not None and stale != binding.spec.resource.uid:
                    await self.fleet.delete(
                        *BINDING, name, key.namespace, uid=existing["metadata"].get("uid")
                    )
                    self.cache.drop(key)
                    raise BindingGone(
                        f"{key}: removed the GangBinding an earlier object of this name left"
                    ) from e
                self.cache.offer(key, existing)
            raise BindingGone(f"{key}: its GangBinding already exists; starting over") from e
        self.cache.offer(key, created)
        return GangBinding.from_dict(created)

    async def patch(
        self,
        key: WorkloadKey,
        binding: GangBinding,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> GangBinding:
        """Merge-patch `binding` (as this reconcile read or last wrote it) with `body`, on the
        condition that nobody wrote it since: the patch carries its `metadata.resourceVersion`,
        which the API server compares with the stored one (409 Conflict if they differ), for the
        status subresource as for the object. On a conflict the stored binding is read into the
        cache and `BindingChanged` ends the reconcile, which starts over from it; on NotFound,
        `BindingGone`. Returns the binding as written (the cache follows)."""
        meta = binding.metadata
        name, namespace = str(meta.name), meta.namespace
        version = meta.resource_version
        if version is None:
            raise ValueError(f"GangBinding {namespace}/{name}: no resourceVersion to patch from")
        guarded = {**body, "metadata": {**(body.get("metadata") or {}), "resourceVersion": version}}
        try:
            updated = await self.fleet.patch(
                *BINDING, name, guarded, namespace, subresource=subresource
            )
        except ApiError as e:
            if e.not_found:
                self.cache.drop(key)
                raise BindingGone(f"{key}: its GangBinding was deleted; starting over") from e
            if not e.conflict:
                raise
            stored = await self.fleet.get(*BINDING, name, namespace)
            if stored is None:
                self.cache.drop(key)
                raise BindingGone(f"{key}: its GangBinding was deleted; starting over") from e
            self.cache.offer(key, stored)
            raise BindingChanged(
                f"{key}: GangBinding {namespace}/{name} changed after resourceVersion {version} "
                f"(now {stored['metadata'].get('resourceVersion')}); starting over from it"
            ) from e
        self.cache.offer(key, updated)
        return GangBinding.from_dict(updated)

    async def save(
        self,
        key: WorkloadKey,
        binding: GangBinding,
        *,
        life: lifecycle.Binding | None = None,
        components: Sequence[tuple[str, int]] = (),
        multi_role: bool = False,
        conditions: list[dict[str, Any]] | None = None,
        spec: Mapping[str, Any] | None = None,
        status: Mapping[str, Any] | None = None,
        observed: bool = False,
        carried: Mapping[str, Any] | None = None,
        defer_status: bool = False,
    ) -> tuple[GangBinding, dict[str, Any]]:
        """Write the lifecycle (if given), conditions and any other spec or status fields;
        only fields that differ from `binding` are sent. Returns the binding as written, and
        the status changes not written: `carried` (an earlier save's deferred changes) goes
        under this save's own; with `defer_status` the status patch is not sent but returned.

        `observed`: this write completes what the controller decided for the binding's spec as
        it now stands, so `status.observedGeneration` becomes that spec's generation (the one
        after the spec patch, if any): how a reader knows fleet has acted on a change."""
        current_spec = binding.to_dict().get("spec") or {}
        current_status = (binding.to_dict().get("status") or {}) if binding.status else {}
        desired_spec: dict[str, Any] = dict(spec or {})
        desired_status: dict[str, Any] = {**(carried or {}), **(status or {})}
        if life is not None:
            desired_spec["clusters"] = _target(life, components, multi_role)
            desired_spec["gracefulEvictionTasks"] = _evictions(life)
            # In the spec with the eviction that read them: one write holds both.
            desired_spec["preservedLabels"] = dict(life.carried) or None
            desired_status |= persisted_status(life)
        if conditions is not None:
            desired_status["conditions"] = conditions
        spec_patch = _changed(current_spec, desired_spec)
        written = binding
        if not self.written(binding):
            # First write of a new binding: one create carries the spec with the decision.
            spec_patch = {}
            written = await self._create_with(key, binding, desired_spec)
        if spec_patch:
            written = await self.patch(key, written, {"spec": spec_patch})
        if observed and written.metadata.generation is not None:
            desired_status["observedGeneration"] = written.metadata.generation
        status_patch = _changed(current_status, desired_status)
        if defer_status:
            return written, status_patch
        if status_patch:
            written = await self.patch(key, written, {"status": status_patch}, subresource="status")
        return written, {}


def key_of_binding(obj: Obj) -> WorkloadKey:
    """The workload a GangBinding is for."""
    return WorkloadKey.of_reference((obj.get("spec") or {}).get("resource") or {})
