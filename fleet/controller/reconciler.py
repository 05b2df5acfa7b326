"""Reconcile one fleet workload: the order of the steps, nothing else.

Every step reads what it needs (the workload and its binding from watch-fed caches, the member's
copy from its member) and writes its decision to the binding before acting on a member, so a
controller killed at any point and started again finds the decision and finishes it: member
objects have the fleet object's name and namespace and carry its UID, creating one that exists
adopts it, deleting one that is gone is a no-op. Decisions are the core's (`fleet.core`);
docs/architecture.md follows one job through these steps.
"""

from __future__ import annotations

import copy
import logging

from fleet.controller import (
    claims,
    failovers,
    member_copy,
    placing,
    reserving,
    status_mirror,
)
from fleet.controller.bindings import BindingChanged, BindingGone, lifecycle_of
from fleet.controller.context import Job, Shell, save
from fleet.controller.keys import WorkloadKey
from fleet.controller.queue import gate
from fleet.controller.queue.units import key_of_job
from fleet.core import ledger
from fleet.core.kinds import adapter_for
from fleet.kube import Obj, Unreachable

#: Failures a reconcile expects now and then, worth a log line rather than a traceback. The
#: binding ones end a reconcile whose binding was deleted, or written by someone else, since it
#: was read; the work queue runs it again (after its backoff) from the stored binding.
EXPECTED_FAILURES = (Unreachable, BindingGone, BindingChanged)

log = logging.getLogger(__name__)


class Reconciler:
    """Runs `reconcile` for each key of its work queue, one at a time per key."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    async def reconcile(self, key: WorkloadKey) -> None:
        try:
            await self._reconcile(key)
        except Exception:
            self.shell.metrics.reconciles.inc("error")
            raise
        self.shell.metrics.reconciles.inc("ok")

    async def _reconcile(self, key: WorkloadKey) -> None:
        shell = self.shell
        kind = adapter_for(key.api_version, key.kind)
        if kind is None:
            return
        workload = await self._workload(key)
        if workload is None:
            await gate.release(shell, key)
            gate.victim_gone(shell, key)
            shell.triggers.forget(key)
            return
        binding = await shell.bindings.read(key)
        if binding is not None and binding.spec.resource.uid != workload["metadata"]["uid"]:
            binding = None  # an earlier object's: creating this one's removes it (BindingStore)
        now = shell.clock.now()

        # 1. Deleted: its quota released, the member copies deleted, then the workload goes.
        if workload["metadata"].get("deletionTimestamp"):
            life = lifecycle_of(binding, now) if binding else None
            gate.victim_leaving(shell, key, life)
            await gate.release(shell, key)
            holding = life.clusters_holding_copies() if life else sorted(shell.members.members)
            if await claims.finalize(shell, key, workload, binding, holding):
                gate.victim_gone(shell, key)  # its copies and their pods are gone
                shell.triggers.forget(key)
            return

        # 2. Bound: a Gang policy governs it, its claim and terms are current, and the
        # finalizer guards its copies before any exists (with the claim as an annotation).
        needed = await claims.needed_by(shell, workload)
        gang = await claims.interpret(shell, workload, needed)
        if gang is None:
            return
        if binding is None:
            binding = await claims.bind(shell, key, workload, gang)
            if binding is None:
                return
        await claims.say_outside_gang(shell, workload)
        job = Job(key, kind, workload, binding, lifecycle_of(binding, now), gang, needed)
        await self._bound(job)
        # Every step has acted on the binding's spec as it now stands.
        await save(shell, job, observed=True)

    async def _bound(self, job: Job) -> None:
        shell = self.shell
        key = job.key
        await claims.sync_claim(shell, job)
        await claims.mark_claimed(shell, job)
        if job.life.gave_up is not None or job.life.released is not None:
            # Failed for good on the fleet (maxFailovers), or let go with its cluster: nothing
            # places it again, but the copies earlier moves left (a lost member's, fenced until
            # it answers) are still purged, or a released gang would get company.
            await failovers.purge_old_copies(shell, job)
            await gate.observe(shell, job)
            return

        # 3. An eviction the queue decided (reclaim, preemption) is recorded on the binding;
        # old copies a failover or an eviction left behind are purged; then the current
        # cluster's verdict.
        await gate.refresh(shell, job)
        await gate.carry_out_eviction(shell, job)
        await failovers.purge_old_copies(shell, job)
        await gate.evictions_settled(shell, job)
        if job.life.cluster is not None and not await failovers.judge(shell, job):
            return

        # 4. Placed, or held by the queue (suspension.scheduling), or waiting for capacity.
        cluster = job.life.cluster
        if cluster is None:
            if ledger.placement_waits(job.outside):
                return  # Directly: placed again once the old copy's pods are gone (requeued)
            held = shell.kube_queue.admission.hold_of(key_of_job(key))
            if held is not None:  # room a reclaim holds for it: reserved in the member too
                await reserving.hold_room(shell, job, held)
            if not await gate.admit(shell, job):
                return
            unplaced = job.life
            cluster = await placing.schedule(shell, job)
            if cluster is None:
                return
            if not await gate.placed(shell, job, cluster, unplaced):
                return  # the queue refused to charge it: nothing is sent to the member

        # 5. The member copy, and its status mirrored back.
        shell.triggers.track(
            key, cluster=cluster, evicting=[e.from_cluster for e in job.life.evictions]
        )
        member = shell.members.get(cluster)
        if member is None or not member.ready or member.client is None:
            return  # its health change requeues the gang; failover judges a lasting loss
        if job.life.phase == "Reserving" and not await reserving.reserve(shell, job, member):
            return  # reserving: dispatched once every Reservation is Available
        applied = await member_copy.apply(shell, job, member)
        if applied is not None:
            await status_mirror.mirror(shell, job, member, applied)
            await gate.observe(shell, job, applied)  # an ended job releases its quota
            await reserving.release_after_use(shell, job, member)

    async def _workload(self, key: WorkloadKey) -> Obj | None:
        """The workload from the watch-fed cache (a private copy), else from the API server."""
        shell = self.shell
        workload = shell.triggers.workloads.get(key)
        if workload is None:
            workload = await shell.fleet.get(key.api_version, key.kind, key.name, key.namespace)
            if workload is None:
                return None
            shell.triggers.workloads.offer(key, workload)
        return copy.deepcopy(workload)
