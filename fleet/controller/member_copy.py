"""The member copy of a bound workload: created or updated, with its namespace and
dependencies, and deleted.

What the copy looks like is decided in `copies` (pure); this module writes it. A copy is
applied only when what fleet would apply differs from what it applied last (a digest
annotation), so a steady job costs no writes. An object of the same name that fleet did not
create is left alone, unless the policy says `conflictResolution: Overwrite`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from fleet.api import constants as c
from fleet.controller import copies, reserving
from fleet.controller.context import Job, Shell, save
from fleet.controller.keys import WorkloadKey
from fleet.controller.members import Member
from fleet.controller.metrics import seconds_since_created
from fleet.controller.status_mirror import binding_conditions
from fleet.kube import ApiError, Conflict, NotFound, Obj

log = logging.getLogger(__name__)

FIELD_MANAGER = "fleet"
#: API errors that mean the member refuses this copy (recorded on the binding, not retried).
_REFUSED = (400, 403, 404, 409, 422)


def dispatch_suspended(job: Job, cluster: str) -> bool:
    """Karmada's suspension.dispatching (or dispatchingOnClusters naming `cluster`)."""
    suspension = job.binding.spec.suspension
    if suspension is None:
        return False
    if suspension.dispatching:
        return True
    on = suspension.dispatching_on_clusters
    return bool(on and cluster in (on.cluster_names or ()))


async def apply(shell: Shell, job: Job, member: Member) -> Obj | None:
    """Create or update the member copy; the copy, or None if it was not applied (the reason
    is on the binding)."""
    client = member.client
    assert client is not None
    key = job.key
    seen = member.job(key.api_version, key.kind, key.namespace, key.name)
    if dispatch_suspended(job, member.name):
        await _not_applied(
            shell, job, member.name, "DispatchingSuspended", "suspension.dispatching holds it"
        )
        return seen if seen is not None and copies.is_ours(seen, job.uid) else None
    binding = f"{job.binding.metadata.namespace}/{job.binding.metadata.name}"
    desired = copies.member_copy(
        job.workload,
        job.kind,
        min_member=job.gang.min_member,
        binding=binding,
        fleet_id=shell.settings.fleet_id,
        gang_scheduler=member.gang_scheduler,
        scheduler_name=member.scheduler_name,
        needed=job.needed,
    )
    if seen is not None and copies.is_current(seen, desired):
        return seen  # nothing changed since the last apply: no write
    try:
        if seen is None and member.jobs_synced(key.api_version, key.kind):
            # The member's watch is complete and holds no copy of ours: create it outright. A
            # 409 means an object of that name exists after all: the careful path decides.
            created = await _create(shell, job, member, desired)
            if created is not None:
                log.info("%s: created in %s", key, member.name)
                await _apply_pod_group(job, member, created)
                _dispatched(shell, job)
                return created
        existing = await client.get(key.api_version, key.kind, key.name, key.namespace)
        if existing is not None and not copies.is_ours(existing, job.uid):
            if job.binding.spec.conflict_resolution != "Overwrite":
                await _not_applied(
                    shell,
                    job,
                    member.name,
                    c.REASON_APPLY_FAILED,
                    f"{key.kind} {key.namespace}/{key.name} already exists in {member.name} "
                    "and was not created by fleet for this object (conflictResolution Abort)",
                )
                return None
            await shell.events.record(
                job.workload,
                "AdoptedExistingCopy",
                f"took over {key.kind} {key.namespace}/{key.name} in {member.name} "
                "(conflictResolution Overwrite)",
            )
        if existing is not None and copies.is_current(existing, desired):
            return existing

        async def write() -> Obj:
            if existing is None:
                await _propagate_dependencies(shell, job, member)
            return await client.apply(desired, field_manager=FIELD_MANAGER)

        applied = await _in_namespace(shell, member, key.namespace, write)
    except ApiError as e:
        if e.status in _REFUSED:
            await _not_applied(shell, job, member.name, c.REASON_APPLY_FAILED, str(e))
            return None
        raise
    if existing is None:
        log.info("%s: created in %s", key, member.name)
        _dispatched(shell, job)
    await _apply_pod_group(job, member, applied)
    return applied


def _dispatched(shell: Shell, job: Job) -> None:
    """A copy was created: on the gang's first placement, the time from its creation on the
    fleet (fleet_dispatch_seconds)."""
    if len(job.life.stays) == 1:
        waited = seconds_since_created(job.workload, shell.clock.now())
        if waited is not None:
            shell.metrics.dispatch_seconds.observe(waited)


async def _apply_pod_group(job: Job, member: Member, copy: Obj) -> None:
    """The PodGroup fleet writes for kinds whose operator makes none (coscheduling members)."""
    group = job.kind.pod_group(
        copy, min_member=job.gang.min_member, gang_scheduler=member.gang_scheduler
    )
    if group is None:
        return
    group["metadata"]["labels"] = copies.member_labels(job.uid, copy_fleet_id(copy))
    client = member.client
    assert client is not None
    try:
        await client.apply(group, field_manager=FIELD_MANAGER)
    except ApiError as e:
        log.warning("%s: PodGroup not written in %s: %s", job.key, member.name, e)


def copy_fleet_id(copy: Obj) -> str:
    """The fleet id a copy of ours carries (its managed-by label)."""
    return str(((copy.get("metadata") or {}).get("labels") or {}).get(c.MANAGED_BY_LABEL, ""))


async def _create(shell: Shell, job: Job, member: Member, desired: Obj) -> Obj | None:
    """Create the copy (with its dependencies); None if something of that name is there."""
    client = member.client
    assert client is not None

    async def create() -> Obj:
        await _propagate_dependencies(shell, job, member)
        return await client.create(desired)

    try:
        return await _in_namespace(shell, member, job.key.namespace, create)
    except Conflict:
        return None


async def _in_namespace(
    shell: Shell, member: Member, namespace: str, write: Callable[[], Awaitable[Obj]]
) -> Obj:
    """Run `write`; if the member has no such namespace yet, create it and run `write` again.
    Namespaces are created only when a write says they are missing: no read per dispatch."""
    try:
        return await write()
    except NotFound:
        if not namespace or namespace in member.namespaces:
            raise
    await _create_namespace(shell, member, namespace)
    return await write()


async def delete_copy(member: Member, key: WorkloadKey, uid: str) -> bool:
    """Delete the member's copy if it is ours (by the fleet-UID label); True if one was."""
    client = member.client
    assert client is not None
    await reserving.release(member, uid)  # what was reserved for it goes with it
    if member.lacks(key.api_version, key.kind):
        return False  # no CRD for the kind there: no copy either
    try:
        found = await client.get(key.api_version, key.kind, key.name, key.namespace)
    except NotFound:
        return False  # the member does not serve the kind (its CRD is gone or never was)
    if found is None or not copies.is_ours(found, uid):
        return False
    return await client.delete(
        key.api_version, key.kind, key.name, key.namespace, uid=found["metadata"]["uid"]
    )


async def _create_namespace(shell: Shell, member: Member, namespace: str) -> None:
    client = member.client
    assert client is not None
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {c.MANAGED_BY_LABEL: shell.settings.fleet_id}},
    }
    with contextlib.suppress(Conflict):  # created meanwhile: as good
        await client.create(body)
    member.namespaces.add(namespace)


async def _propagate_dependencies(shell: Shell, job: Job, member: Member) -> None:
    """propagateDeps (or Karmada's older `association`): copy what the pod templates use."""
    client = member.client
    assert client is not None
    policy = job.policy(shell)
    if not (policy and (policy.spec.propagate_deps or policy.spec.association)):
        return
    for dep_kind, name in copies.dependencies(job.workload, job.kind, job.needed):
        api_version = copies.DEPENDENCY_KINDS[dep_kind]
        source = await shell.fleet.get(api_version, dep_kind, name, job.key.namespace)
        if source is None:
            await shell.events.record(
                job.workload,
                "DependencyMissing",
                f"{dep_kind} {job.key.namespace}/{name} is referenced but not on the fleet",
                warning=True,
            )
            continue
        copy = copies.dependency_copy(
            {"apiVersion": api_version, "kind": dep_kind, **source}, shell.settings.fleet_id
        )
        await client.apply(copy, field_manager=FIELD_MANAGER)
    await _propagate_needed(shell, job, member)


async def _propagate_needed(shell: Shell, job: Job, member: Member) -> None:
    """What the kind reads its gang from (a TrainJob's runtime) goes along too, created in the
    member when it has none of that name: one it has already (a ClusterTrainingRuntime its
    admins installed, another job's) is left as it is."""
    client = member.client
    assert client is not None
    for api_version, dep_kind, namespace, name in job.kind.needs(job.workload):
        source = await shell.fleet.get(api_version, dep_kind, name, namespace or None)
        if source is None:
            continue  # the gang could not have been read: it is not placed
        copy = copies.dependency_copy(
            {"apiVersion": api_version, "kind": dep_kind, **source}, shell.settings.fleet_id
        )
        if not namespace:
            copy["metadata"].pop("namespace", None)
        with contextlib.suppress(Conflict):
            await client.create(copy)


async def _not_applied(shell: Shell, job: Job, cluster: str, reason: str, message: str) -> None:
    """Record that the copy is not (or not fully) in `cluster`, once per message."""
    current = job.binding.condition(c.CONDITION_FULLY_APPLIED)
    if current is not None and current.status == "False" and current.message == message:
        return
    await save(
        shell,
        job,
        status={
            "aggregatedStatus": [
                {"clusterName": cluster, "applied": False, "appliedMessage": message}
            ]
        },
        conditions=binding_conditions(
            shell, job, (c.CONDITION_FULLY_APPLIED, "False", reason, message)
        ),
    )
    warning = reason != "DispatchingSuspended"
    await shell.events.record(
        job.workload, "ApplyFailed" if warning else reason, message, warning=warning
    )
