"""The collector: makes every connected member match the ledger.

The bindings are the ledger of what fleet wants in each cluster (`fleet.core.ledger`): a job's
copy is on record in its target, and in a cluster its binding has an eviction of. The
collector looks at every copy of this fleet's in a member (its job watches follow only this
fleet's, by the managed-by label) and deletes those the ledger does not want:
the job's fleet object is gone (a finalizer removed by hand, a restored backup, a replica that
died before writing its binding), or the job is bound elsewhere and its binding has no record of
a copy in this cluster (a binding restored from a backup, a cluster joined under a name whose
old copies were recorded under an identity that was never written down). A copy the binding has
an eviction for, found by the cluster's identity under whatever name it has now, is the
reconcile's to purge, by its purge mode (`failovers.purge_old_copies`), with its Event.
Deletion is by UID, in the foreground where the kind allows (`KindAdapter.deletion_propagation`),
so the copy's pods go before it does.

It runs for a member as soon as its watches are synced after each (re)connection, and nothing
new is placed there before (`Member.fenced`, `MemberRegistry.not_ready`): a cluster that comes
back is fenced first. Then every `sweep_interval`, as the sweep it replaces did. It decides from
the watch-fed caches, and before a copy is deleted its binding and its fleet object are read
again from the fleet API server, never only from the caches: a binding is always written before
the copy it decides, so a fresh read sees why any copy was made. Only the leader collects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from fleet.api import GangBinding, binding_name
from fleet.api import constants as c
from fleet.controller.bindings import lifecycle_of
from fleet.controller.context import Shell
from fleet.controller.keys import WorkloadKey
from fleet.controller.member_copy import delete_copy
from fleet.controller.members import Member
from fleet.core import ledger
from fleet.core.kinds import adapter_for
from fleet.kube import ApiError, Obj, Unreachable

log = logging.getLogger(__name__)


def synced(member: Member) -> bool:
    """Whether the member's job watches hold everything of this fleet's there: every
    dispatchable kind was looked for, and each served kind's watch has listed."""
    connection = member.connection
    if connection is None or connection.missing_kinds is None:
        return False
    return all(informer.synced.is_set() for informer in connection.jobs.values())


async def collect(shell: Shell, member: Member) -> int:
    """Delete every copy of this fleet's in `member` that no binding wants there; how many were
    deleted. Marks the member fenced once a whole pass has run on its current connection."""
    connection = member.connection
    if not member.ready or connection is None or not synced(member):
        return 0
    place = ledger.Place(member.name, member.cluster_id)
    deleted = 0
    complete = True
    for informer in list(connection.jobs.values()):
        for copy in list(informer.store.values()):
            labels = (copy.get("metadata") or {}).get("labels") or {}
            uid = labels.get(c.FLEET_UID_LABEL)
            if labels.get(c.MANAGED_BY_LABEL) != shell.settings.fleet_id or not uid:
                continue
            if (copy.get("metadata") or {}).get("deletionTimestamp"):
                continue  # being deleted: its pods are on their way out
            try:
                why, workload = await _unwanted(shell, place, copy, uid)
                if why is None:
                    continue
                key = WorkloadKey.of(copy)
                if await delete_copy(member, key, uid):
                    deleted += 1
                    await _deleted(shell, member, key, why, workload)
            except (ApiError, Unreachable) as e:
                complete = False
                log.info("collector: %s in %s not looked at yet: %s", copy, member.name, e)
    if complete and connection is member.connection and not member.fenced:
        log.info("member %s: fenced (%d copies no binding wants deleted)", member.name, deleted)
        shell.members.fenced(member)  # Ready now; the gangs waiting for room are told
    return deleted


async def _unwanted(
    shell: Shell, place: ledger.Place, copy: Obj, uid: str
) -> tuple[ledger.Unwanted | None, Obj | None]:
    """The ledger's verdict on one copy, with the job's fleet object when it exists. Decided
    from the watch-fed caches first (a steady fleet costs no request); a copy they say is
    unwanted is decided again from the fleet API server's current word before anything is
    deleted."""
    key = WorkloadKey.of(copy)
    if adapter_for(key.api_version, key.kind) is None:
        return None, None
    cached = _verdict(
        shell, place, uid, shell.triggers.workloads.get(key), shell.triggers.bindings.get(key)
    )
    if cached is None:
        return None, None
    workload = await shell.fleet.get(key.api_version, key.kind, key.name, key.namespace)
    stored = await shell.fleet.get(
        c.FLEET_API_VERSION, "GangBinding", binding_name(key.kind, key.name), key.namespace
    )
    exists = workload is not None and (workload.get("metadata") or {}).get("uid") == uid
    return _verdict(shell, place, uid, workload, stored), workload if exists else None


def _verdict(
    shell: Shell, place: ledger.Place, uid: str, workload: Obj | None, stored: Obj | None
) -> ledger.Unwanted | None:
    if workload is None or (workload.get("metadata") or {}).get("uid") != uid:
        return ledger.unwanted(None, place, workload_exists=False)
    binding = GangBinding.model_validate(stored) if stored is not None else None
    if binding is not None and binding.spec.resource.uid != uid:
        binding = None  # an earlier object's binding: this job's is not written yet
    life = lifecycle_of(binding, shell.clock.now()) if binding is not None else None
    return ledger.unwanted(life, place, workload_exists=True)


async def _deleted(
    shell: Shell, member: Member, key: WorkloadKey, why: ledger.Unwanted, workload: Obj | None
) -> None:
    if why == "Orphaned" or workload is None:
        shell.metrics.orphans.inc(member.name)
        log.warning("%s: deleted its copy in %s: the fleet object is gone", key, member.name)
        return
    shell.metrics.purges.inc(member.name)
    message = (
        f"fenced a stale copy in {member.name} (cluster {member.cluster_id or 'not recorded'}):"
        " the job is not bound there and no eviction keeps it"
    )
    log.warning("%s: %s", key, message)
    await shell.events.record(workload, "StaleCopyDeleted", message, warning=True)
    shell.queue.add(key)


async def collect_all(shell: Shell) -> int:
    """One pass over every member; how many copies were deleted."""
    deleted = 0
    for member in list(shell.members.members.values()):
        deleted += await collect(shell, member)
    return deleted


async def collect_forever(shell: Shell, leading: asyncio.Event, wake: asyncio.Event) -> None:
    """While this replica leads: a pass whenever a member (re)connects (`wake`), and every
    `settings.sweep_interval` seconds (0: no periodic pass); members not fenced yet are looked
    at again every second until their watches have synced."""
    while True:
        unfenced = any(not m.fenced for m in shell.members.members.values())
        interval = shell.settings.sweep_interval
        timeout = 1.0 if unfenced else (interval if interval > 0 else None)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout)
        wake.clear()
        if leading.is_set():
            try:
                await collect_all(shell)
            except Exception:  # one bad pass must not end the collector
                log.exception("collector pass failed")


__all__ = ["collect", "collect_all", "collect_forever", "synced"]
