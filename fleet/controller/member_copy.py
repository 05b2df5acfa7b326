"""The member copy of a bound workload: created or updated, with its namespace and
dependencies, and deleted.

What the copy looks like is decided in `copies` (pure); this module writes it. A copy is
applied only when what fleet would apply differs from what it applied last (a digest
annotation), so a steady job costs no writes. An object of the same name that fleet did not
create is left alone, unless the policy says `conflictResolution: Overwrite`.

The order of a dispatch, so that nothing of a member's is changed for a job that does not go
there (propagateDeps, `dependencies`):

1. placement has decided (the binding says so) and the member's watch holds no copy of ours;
2. the dependencies are written (a TrainJob's runtime among them): each created, or, when the
   member has one of that name, patched only if it is fleet's (a JSON patch that tests fleet's
   mark first); a runtime the member has of its own is used as it is. Any other one that is not
   fleet's (and may not be taken over) ends the dispatch there: what this attempt created is
   deleted again (by UID), nothing else was touched, and the gang leaves the member
   (`lifecycle.refused`: a pending reason `DependencyConflict`, an Event naming the object)
   to be placed again, elsewhere or later;
3. then the copy is created. Dependencies come first because the job's pods start as soon as
   it exists, and need them. If the copy's own create finds an object of that name that is
   not fleet's and the policy says Abort, the dependencies created in step 2 are deleted
   again (by UID): the member is left as it was.

While the copy is there, every reconcile (and the periodic resync) writes again each
dependency whose fleet object changed and lets go of those the job no longer uses; a conflict
then is reported, never a reason to take the running job away.
"""

from __future__ import annotations

import logging

from fleet.api import constants as c
from fleet.api.guard import not_open, open_label
from fleet.controller import copies, dependencies, reserving
from fleet.controller.context import Job, Shell, save
from fleet.controller.keys import WorkloadKey
from fleet.controller.members import Member
from fleet.controller.metrics import seconds_since_created
from fleet.controller.namespaces import in_namespace
from fleet.controller.status_mirror import binding_conditions
from fleet.core import lifecycle
from fleet.core.assignment import whole_gang_level
from fleet.core.kinds import adapter_for
from fleet.kube import ApiError, Conflict, NotFound, Obj

log = logging.getLogger(__name__)

FIELD_MANAGER = "fleet"
#: API errors that mean the member refuses this copy (recorded on the binding, not retried).
_REFUSED = (400, 403, 404, 409, 422)
#: How long a member that refused a gang (a dependency there is not fleet's) is avoided before
#: the gang may be placed there again (the member's object may be gone by then).
CONFLICT_RETRY_SECONDS = 300.0


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
    """Create or update the member copy (its dependencies first); the copy, or None if it was
    not applied (the reason is on the binding)."""
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
        carried=lifecycle.carried_labels(job.life),
        # The topology domains placement chose there (kept on the binding, so a restart pins
        # the same ones): the member's gang scheduler knows no topology of its own.
        pin=job.life.domains if job.life.cluster == member.name else (),
    )
    deps = await dependencies.wanted(shell, job)
    if seen is not None and copies.is_ours(seen, job.uid) and copies.is_current(seen, desired):
        await _keep_in_step(shell, job, member, deps)
        return seen  # the copy unchanged since the last apply: no write
    written: dependencies.Written | None = None
    existing: Obj | None = None
    try:
        if seen is None and member.jobs_synced(key.api_version, key.kind):
            # The member's watch is complete and holds no copy of ours: its dependencies, then
            # the copy, created outright. A 409 means an object of that name exists after all:
            # the careful path decides.
            written = await _dispatch_dependencies(shell, job, member, deps)
            if written is None:
                return None
            created = await _create(shell, job, member, desired)
            if created is not None:
                log.info("%s: created in %s", key, member.name)
                _record(job, member, written)
                await _apply_pod_group(job, member, created)
                _dispatched(shell, job)
                return created
        existing = await client.get(key.api_version, key.kind, key.name, key.namespace)
        if existing is not None and not copies.is_ours(existing, job.uid):
            if job.binding.spec.conflict_resolution != "Overwrite":
                if written is not None:  # written for a dispatch that is not going to happen
                    await _take_back(job, member, written)
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
        if existing is not None and copies.is_ours(existing, job.uid):
            # A copy of ours runs there: its dependencies are kept in step, never a reason to
            # take the job away.
            await _keep_in_step(shell, job, member, deps)
            if copies.is_current(existing, desired):
                return existing
            # What the member's own controllers own in the copy (an elastic PyTorchJob's
            # Worker replicas, scaled by its HPA) is applied as the member has it.
            job.kind.keep_member_owned(desired, existing)
        elif written is None:
            written = await _dispatch_dependencies(shell, job, member, deps)
            if written is None:
                return None
        applied = await in_namespace(
            shell,
            member,
            key.namespace,
            lambda: member.writer.apply(desired, field_manager=FIELD_MANAGER),
        )
    except ApiError as e:
        if e.status in _REFUSED:
            if written is not None and (existing is None or not copies.is_ours(existing, job.uid)):
                # The member refused the copy: what was created for it goes again.
                await _take_back(job, member, written)
            if e.status == 403 and not_open(e.message):
                await _refuse(
                    shell, job, member, _not_open(shell, job, member), c.REASON_NAMESPACE_NOT_OPEN
                )
                return None
            await _not_applied(shell, job, member.name, c.REASON_APPLY_FAILED, str(e))
            return None
        raise
    if written is not None:
        _record(job, member, written)
    if existing is None:
        log.info("%s: created in %s", key, member.name)
        _dispatched(shell, job)
    await _apply_pod_group(job, member, applied)
    return applied


async def _dispatch_dependencies(
    shell: Shell, job: Job, member: Member, deps: list[dependencies.Wanted]
) -> dependencies.Written | None:
    """Write the dependencies of a job about to be sent to `member`; None when one there is not
    fleet's (what this attempt created is deleted again, and the member refuses the job)."""
    written = await dependencies.write(shell, job, member, deps)
    if written.conflict is None:
        return written
    await _take_back(job, member, written)
    if not_open(written.conflict):
        await _refuse(
            shell, job, member, _not_open(shell, job, member), c.REASON_NAMESPACE_NOT_OPEN
        )
    else:
        await _refuse(shell, job, member, written.conflict, c.REASON_DEPENDENCY_CONFLICT)
    return None


def _not_open(shell: Shell, job: Job, member: Member) -> str:
    """What the binding and the Warning Event say when the member's admission policy refuses
    the job's namespace there: which, where, and how its admins open it."""
    namespace = job.key.namespace
    return (
        f"namespace {namespace} in {member.name} was not created by fleet and is not opened to "
        f"this fleet ({shell.settings.fleet_id}), so the member refuses fleet's writes there: "
        f"its admins open it with `fleet join {member.name} --namespaces {namespace}` (or the "
        f"label {open_label(shell.settings.fleet_id)}=true on the namespace); retried in "
        f"{CONFLICT_RETRY_SECONDS:.0f}s, elsewhere meanwhile"
    )


async def _keep_in_step(
    shell: Shell, job: Job, member: Member, deps: list[dependencies.Wanted]
) -> None:
    """The job's copy is in `member`: what changed on the fleet is written again, what it no
    longer uses is let go (`dependencies.release`); a conflict is reported, the job stays."""
    if not deps and not dependencies.recorded(job.binding, member.name):
        return
    written = await dependencies.write(shell, job, member, deps)
    used = {(d.kind, d.name) for d in deps}
    if written.conflict is None:
        # Let go of what the job no longer uses (all written: nothing was skipped).
        await dependencies.release(shell, job.binding, job.workload, member, keep=used)
    else:
        # Stopped at a conflict: the records not rewritten this time are kept as they were.
        done = {(r["kind"], r["name"]) for r in written.records}
        written.records += [
            r.to_dict()
            for r in dependencies.recorded(job.binding, member.name)
            if (r.kind, r.name) in used and (r.kind, r.name) not in done
        ]
    _record(job, member, written)
    if written.conflict is not None:
        await _not_applied(shell, job, member.name, c.REASON_DEPENDENCY_CONFLICT, written.conflict)


async def _take_back(job: Job, member: Member, written: dependencies.Written) -> None:
    """The copy is not going to `member` after all: what this attempt created for it is deleted
    again, and the records saved before creating (`creating`) go with the next binding write."""
    await dependencies.delete_created(member, job.key.namespace, written.created)
    kept = [r for r in dependencies.recorded(job.binding, member.name) if not r.creating]
    _record(job, member, dependencies.Written(records=[r.to_dict() for r in kept]))


def _record(job: Job, member: Member, written: dependencies.Written) -> None:
    """The dependency records go with the reconcile's next binding write."""
    records = dependencies.with_records(job.binding, member.name, written.records)
    current = [r.to_dict() for r in dependencies.recorded(job.binding)] or None
    if records != current:
        job.deferred_status["dependencies"] = records


async def _refuse(shell: Shell, job: Job, member: Member, message: str, reason: str) -> None:
    """`member` refuses the job (`reason`: a dependency there is not fleet's, or its namespace
    there is not open to fleet): the gang leaves it before anything of it ran, avoids it for
    `CONFLICT_RETRY_SECONDS`, and is placed again; the binding (FullyApplied, pending reasons)
    and a Warning Event say why."""
    member.snapshot.release(job.uid)
    now = shell.clock.now()
    life = lifecycle.refused(
        job.life,
        member.name,
        reason,
        message,
        now,
        retry_after=CONFLICT_RETRY_SECONDS,
    )
    await save(
        shell,
        job,
        life,
        status={
            "aggregatedStatus": [
                {"clusterName": member.name, "applied": False, "appliedMessage": message}
            ]
        },
        conditions=binding_conditions(
            shell,
            job,
            (c.CONDITION_FULLY_APPLIED, "False", reason, message),
        ),
    )
    await shell.events.record(job.workload, reason, message, warning=True)
    log.info("%s: not sent to %s: %s", job.key, member.name, message)
    shell.queue.add(job.key)


def _dispatched(shell: Shell, job: Job) -> None:
    """A copy was created: on the gang's first placement, the time from its creation on the
    fleet (fleet_dispatch_seconds)."""
    if len(job.life.stays) == 1:
        waited = seconds_since_created(job.workload, shell.clock.now())
        if waited is not None:
            shell.metrics.dispatch_seconds.observe(waited)


async def _apply_pod_group(job: Job, member: Member, copy: Obj) -> None:
    """The PodGroups fleet writes beside the copy: for kinds whose operator makes none on
    coscheduling members, and for every kind on a member with Kubernetes' own gang scheduling,
    there with the level of the domain placement chose for the whole gang, if it requires one
    (the member's scheduler then keeps the group in one domain of it; the pods' node affinity
    names the very domain). One, or one per stage of a staged job (`KindAdapter.pod_groups`),
    each owned by the copy, so the member's garbage collector deletes them all with it."""
    groups = job.kind.pod_groups(
        copy,
        min_member=job.gang.min_member,
        gang_scheduler=member.gang_scheduler,
        topology=(
            whole_gang_level(job.life.domains, (c.name for c in job.gang.components))
            if job.life.cluster == member.name
            else None
        ),
    )
    for group in groups:
        group["metadata"]["labels"] = copies.member_labels(job.uid, copy_fleet_id(copy))
        try:
            await member.writer.apply(group, field_manager=FIELD_MANAGER)
        except ApiError as e:
            name = group["metadata"]["name"]
            log.warning("%s: PodGroup %s not written in %s: %s", job.key, name, member.name, e)


def copy_fleet_id(copy: Obj) -> str:
    """The fleet id a copy of ours carries (its managed-by label)."""
    return str(((copy.get("metadata") or {}).get("labels") or {}).get(c.MANAGED_BY_LABEL, ""))


async def _create(shell: Shell, job: Job, member: Member, desired: Obj) -> Obj | None:
    """Create the copy; None if something of that name is there."""
    client = member.client
    assert client is not None
    try:
        return await in_namespace(
            shell, member, job.key.namespace, lambda: member.writer.create(desired)
        )
    except Conflict:
        return None


def copy_gone(member: Member, key: WorkloadKey, uid: str) -> bool:
    """Whether the member's watches hold neither a copy of the job `uid` nor a pod of it (pods
    carry the fleet UID label): what ends an eviction or a deletion, not the delete request.
    Its dependencies go only then (a runtime deleted while the copy still terminates can keep
    the operator's admission from letting the copy go)."""
    found = member.job(key.api_version, key.kind, key.namespace, key.name)
    if found is not None and copies.is_ours(found, uid):
        return False
    return not member.snapshot.holds_pods_of(uid)


async def delete_copy(member: Member, key: WorkloadKey, uid: str) -> bool:
    """Delete the member's copy if it is ours (by the fleet-UID label) and not being deleted
    already; True if a delete was sent."""
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
    if found["metadata"].get("deletionTimestamp"):
        return False  # deleted already: its pods are on their way out
    # In the foreground where the kind allows: the copy stays (with a deletionTimestamp) until
    # the garbage collector has removed its pods. "Copy gone" is read with its pods either way
    # (`copy_gone`, fleet.core.ledger).
    adapter = adapter_for(key.api_version, key.kind)
    return await member.writer.delete(
        key.api_version,
        key.kind,
        key.name,
        key.namespace,
        propagation=adapter.deletion_propagation if adapter is not None else "Foreground",
        uid=found["metadata"]["uid"],
    )


async def release_copy(member: Member, key: WorkloadKey, uid: str) -> bool:
    """Let the member's copy go (if it is ours): fleet's labels are removed, so nothing of
    fleet's manages, sweeps or deletes it again; True if there was one."""
    client = member.client
    assert client is not None
    await reserving.release(member, uid)
    if member.lacks(key.api_version, key.kind):
        return False
    found = await client.get(key.api_version, key.kind, key.name, key.namespace)
    if found is None or not copies.is_ours(found, uid):
        return False
    unmarked = {"metadata": {"labels": {c.MANAGED_BY_LABEL: None, c.FLEET_UID_LABEL: None}}}
    await member.writer.patch(key.api_version, key.kind, key.name, unmarked, key.namespace)
    return True


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
    event = reason if reason in ("DispatchingSuspended", c.REASON_DEPENDENCY_CONFLICT) else None
    await shell.events.record(job.workload, event or "ApplyFailed", message, warning=warning)
