"""propagateDeps: the Secrets, ConfigMaps, ServiceAccounts and PVCs a job's pods use, and what
its kind reads its gang from (a TrainJob's TrainingRuntime or ClusterTrainingRuntime,
`KindAdapter.needs`), written in the member beside its copy, kept in step with the fleet, and
removed when no job needs them.

fleet never reads a dependency in a member (its identity there may not: docs/security.md), so
whether a member's object is fleet's is learnt from the writes themselves:

- **create** (POST) first: a 201 means fleet made it (its UID is recorded on the binding);
- a 409 means the member has one of that name: it is **patched** with a JSON patch whose first
  op tests fleet's mark (`fleet.dev/managed-by=<fleet id>`). A 422 (the test failed), or a
  refusal by the member's admission policy, means the object is not fleet's: under
  `conflictResolution: Abort` that is a conflict (the object is not touched, the job is not
  sent to that member); under `Overwrite` the object is first marked fleet's (and `adopted`,
  which the member's admission policy allows only in a namespace labelled
  `fleet.dev/allow-overwrite=true`) and then patched. A runtime (`Wanted.needed`) that is not
  fleet's is neither a conflict nor taken over: the member's own is left as it is, and the job
  uses it; it is recorded without a UID, so fleet never deletes it.

The binding records, per member, the digest of each dependency as fleet last wrote it and the
UID of each one fleet created (`status.dependencies`). Every reconcile (and the periodic
resync, `settings.resync_interval`) compares the fleet's objects with those digests and writes
again only what changed, with the same guarded patch. When a job's copy leaves a member (the
job is deleted, fails over, or no longer uses a dependency), each dependency fleet created there
is deleted by its recorded UID (so an object the member replaced with its own is never deleted),
unless another binding of fleet's in that member still records it (Karmada's rule: a propagated
dependency goes when no binding references it; a cluster-scoped one, a ClusterTrainingRuntime,
counts the bindings of every namespace). When the job is left running in a member that leaves
the fleet (`fleet unjoin --leave`), its dependencies there lose fleet's mark and stay
(`leave`): they now belong to the job left running there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterable
from typing import Any

from fleet.api import DependencyRecord, GangBinding
from fleet.api import constants as c
from fleet.controller import copies
from fleet.controller.context import Job, Shell
from fleet.controller.keys import WorkloadKey
from fleet.controller.members import Member
from fleet.controller.namespaces import in_namespace, list_service_account
from fleet.kube import ApiError, Conflict, Forbidden, NotFound, Obj

log = logging.getLogger(__name__)

#: The member's answers that mean "this object is not fleet's, and fleet may not change it": a
#: failed test op (422), or its admission policy's refusal (403, or 422 with reason Invalid).
_NOT_OURS = (403, 422)


@dataclasses.dataclass(frozen=True)
class Wanted:
    """One dependency as fleet writes it in a member."""

    kind: str
    name: str
    body: dict[str, Any]
    digest: str
    #: What the job's kind reads besides the job (a runtime, `KindAdapter.needs`): one the
    #: member has of its own is used as it is, never a conflict, never taken over.
    needed: bool = False


@dataclasses.dataclass
class Written:
    """What writing a job's dependencies in one member did."""

    #: The member's records after the writes (DependencyRecord dicts).
    records: list[dict[str, Any]]
    #: (kind, name, uid) of what fleet created in this attempt (deleted again if the job is
    #: not sent there after all).
    created: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    #: Why the job may not go to this member: an object there that is not fleet's.
    conflict: str | None = None


def propagates(shell: Shell, job: Job) -> bool:
    """Whether the job's policy says propagateDeps (or Karmada's older `association`)."""
    policy = job.policy(shell)
    return bool(policy and (policy.spec.propagate_deps or policy.spec.association))


async def wanted(shell: Shell, job: Job) -> list[Wanted]:
    """The dependencies of the job as fleet would write them now, read from the fleet: what its
    pods use, then what its kind reads besides it (a runtime, as this reconcile read it)."""
    if not propagates(shell, job):
        return []
    out = []
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
        body = copies.dependency_copy(
            {"apiVersion": api_version, "kind": dep_kind, **source}, shell.settings.fleet_id
        )
        out.append(Wanted(dep_kind, name, body, copies.dependency_digest(body)))
    for api_version, dep_kind, namespace, name in job.kind.needs(job.workload):
        runtime = job.needed.get((dep_kind, namespace, name))
        if runtime is None:
            continue  # the gang could not have been read: the job is not placed
        body = copies.dependency_copy(
            {**runtime, "apiVersion": api_version, "kind": dep_kind}, shell.settings.fleet_id
        )
        if not namespace:
            body["metadata"].pop("namespace", None)
        out.append(Wanted(dep_kind, name, body, copies.dependency_digest(body), needed=True))
    return out


def recorded(binding: GangBinding, cluster: str | None = None) -> list[DependencyRecord]:
    """The binding's dependency records (in `cluster`, if given)."""
    records = (binding.status.dependencies if binding.status else None) or []
    return [r for r in records if cluster is None or r.cluster == cluster]


def with_records(
    binding: GangBinding, cluster: str, records: Iterable[dict[str, Any]]
) -> list[Any] | None:
    """The binding's whole `status.dependencies` with `cluster`'s replaced by `records`."""
    others = [r.to_dict() for r in recorded(binding) if r.cluster != cluster]
    merged = sorted([*others, *records], key=lambda r: (r["cluster"], r["kind"], r["name"]))
    return merged or None


def _describe(namespace: str, member: Member, kind: str, name: str) -> str:
    where = name if kind in copies.CLUSTER_SCOPED_NEEDS else f"{namespace}/{name}"
    return f"{kind} {where} in {member.name}"


async def write(shell: Shell, job: Job, member: Member, deps: list[Wanted]) -> Written:
    """Create or update each dependency whose digest differs from what fleet last wrote in the
    member; stop at the first that is not fleet's (and may not be taken over)."""
    client = member.client
    assert client is not None
    before = {(r.kind, r.name): r for r in recorded(job.binding, member.name)}
    overwrite = job.binding.spec.conflict_resolution == "Overwrite"
    fleet_id = shell.settings.fleet_id
    namespace = job.key.namespace
    out = Written(records=[])
    await _record_before_creating(shell, job, member, deps, before)
    for dep in deps:
        last = before.get((dep.kind, dep.name))
        if last is not None and last.digest == dep.digest and not last.creating:
            out.records.append(last.to_dict())
            continue
        record: dict[str, Any] = {
            "cluster": member.name,
            "kind": dep.kind,
            "name": dep.name,
            "digest": dep.digest,
        }
        what = _describe(namespace, member, dep.kind, dep.name)
        body = copies.stamped_dependency(dep.body)
        patch = copies.dependency_patch(dep.body, fleet_id)
        api_version = copies.dependency_api_version(dep.kind)
        try:
            written = await _create_or_patch(shell, member, namespace, body, patch)
            if written is None and dep.needed:
                # The member's own runtime: the job uses it as it is; never fleet's to change
                # or delete (recorded without a UID, so not tried again until the fleet's
                # changes).
                out.records.append(DependencyRecord.model_validate(record).to_dict())
                continue
            if written is None and overwrite:
                try:
                    await member.writer.patch(
                        api_version, dep.kind, dep.name, copies.takeover_patch(fleet_id), namespace
                    )
                except ApiError as e:
                    if e.status not in _NOT_OURS:
                        raise
                    out.conflict = (
                        f"{what} is not fleet's and the member refused its takeover "
                        f"(conflictResolution Overwrite; the namespace needs the label "
                        f"{c.ALLOW_OVERWRITE_LABEL}=true): {e.message}"
                    )
                    break
                written = await _create_or_patch(shell, member, namespace, body, patch)
                if written is not None:
                    await shell.events.record(
                        job.workload,
                        "AdoptedExistingDependency",
                        f"took over {what} (conflictResolution Overwrite)",
                    )
        except ApiError as e:
            if e.status >= 500:
                raise
            out.conflict = f"{what} could not be written: {e.message}"
            break
        if written is None:
            out.conflict = (
                f"{what} already exists and was not created by fleet "
                "(conflictResolution Abort): left as it is"
            )
            break
        obj, created = written
        if dep.kind == "ServiceAccount":
            await _listed(shell, member, namespace, dep.name)
        uid = (obj.get("metadata") or {}).get("uid")
        if uid and not copies.is_adopted(obj):
            record["uid"] = uid
        if created and uid:
            out.created.append((dep.kind, dep.name, uid))
        out.records.append(DependencyRecord.model_validate(record).to_dict())
    return out


async def _record_before_creating(
    shell: Shell,
    job: Job,
    member: Member,
    deps: list[Wanted],
    before: dict[tuple[str, str], DependencyRecord],
) -> None:
    """Save a `creating` record of each dependency fleet is about to create in `member` before
    the create is sent: the ledger names everything fleet may have written in a member, so a
    controller that dies between a create and the binding write leaves no object of fleet's
    there that no record names (the collector cannot find one: fleet may not list ConfigMaps
    or Secrets in a member). A dependency with a record already is not recorded again."""
    fresh = [d for d in deps if (d.kind, d.name) not in before]
    if not fresh:
        return
    intents = [r.to_dict() for r in before.values()] + [
        DependencyRecord(
            cluster=member.name, kind=d.kind, name=d.name, digest=d.digest, creating=True
        ).to_dict()
        for d in fresh
    ]
    job.binding, _ = await shell.bindings.save(
        job.key,
        job.binding,
        status={"dependencies": with_records(job.binding, member.name, intents)},
    )


async def _listed(shell: Shell, member: Member, namespace: str, name: str) -> None:
    """A ServiceAccount fleet wrote is listed on its namespace, if fleet's, so the member's
    admission policy lets the job's pods run as it; a member that refuses (a join older than
    the annotation's rule) leaves it to the copy's own refusal, which names the annotation."""
    try:
        await list_service_account(shell, member, namespace, name)
    except ApiError as e:
        if e.status >= 500:
            raise
        log.warning("%s: ServiceAccount %s not listed on its namespace: %s", member.name, name, e)


async def _create_or_patch(
    shell: Shell, member: Member, namespace: str, body: Obj, patch: list[dict[str, Any]]
) -> tuple[Obj, bool] | None:
    """Create the dependency, or patch the member's if it is fleet's: (object, created), or None
    when the member's object is not fleet's (the guarded patch was refused)."""
    client = member.client
    assert client is not None
    meta = body["metadata"]
    for _ in range(2):  # created, or patched; deleted in between: created again
        try:
            return await in_namespace(
                shell, member, namespace, lambda: member.writer.create(body)
            ), True
        except Conflict:
            pass
        try:
            patched = await member.writer.patch(
                body["apiVersion"], body["kind"], meta["name"], patch, namespace, patch_type="json"
            )
        except NotFound:
            continue
        except ApiError as e:
            if e.status in _NOT_OURS:
                return None
            raise
        return patched, False
    raise Conflict(409, "Conflict", f"{body['kind']} {namespace}/{meta['name']} keeps changing")


async def delete_created(
    member: Member, namespace: str, created: Iterable[tuple[str, str, str]]
) -> None:
    """Delete what fleet created in this attempt, each by its UID (the job did not go there)."""
    client = member.client
    assert client is not None
    for kind, name, uid in created:
        # Replaced by the member's own meanwhile (409), or gone: not ours to delete.
        with contextlib.suppress(Conflict, NotFound):
            await member.writer.delete(
                copies.dependency_api_version(kind), kind, name, namespace, uid=uid
            )


def _used_elsewhere(shell: Shell, binding: GangBinding, cluster: str, kind: str, name: str) -> bool:
    """Whether another binding of fleet's records this dependency in `cluster` (in the same
    namespace; in any, for a cluster-scoped one)."""
    namespace = binding.metadata.namespace
    anywhere = kind in copies.CLUSTER_SCOPED_NEEDS
    for _key, other in shell.triggers.bindings.items():
        meta = other.get("metadata") or {}
        if (meta.get("namespace"), meta.get("name")) == (namespace, binding.metadata.name):
            continue
        if meta.get("namespace") != namespace and not anywhere:
            continue
        for r in (other.get("status") or {}).get("dependencies") or []:
            if (r.get("cluster"), r.get("kind"), r.get("name")) == (cluster, kind, name):
                return True
    return False


async def release(
    shell: Shell,
    binding: GangBinding,
    workload: Obj,
    member: Member,
    keep: Iterable[tuple[str, str]] = (),
    *,
    recorded_as: str | None = None,
) -> list[dict[str, Any]]:
    """Let go of the binding's dependencies in `member` but those in `keep`: each one fleet
    created is deleted (by its UID) unless another binding there records it. The records kept.
    `recorded_as`: the cluster name the records were written under, when the cluster has joined
    again under another name since (the ledger finds it by its identity)."""
    client = member.client
    assert client is not None
    namespace = str(binding.metadata.namespace or "")
    kept = set(keep)
    remaining = []
    cluster = recorded_as or member.name
    for r in recorded(binding, cluster):
        if (r.kind, r.name) in kept:
            remaining.append(r.to_dict())
            continue
        if (r.uid is None and not r.creating) or _used_elsewhere(
            shell, binding, cluster, r.kind, r.name
        ):
            continue
        try:
            # A `creating` record has no UID yet: deleted by name, which the member's admission
            # policy refuses (403) for an object without fleet's mark.
            deleted = await member.writer.delete(
                copies.dependency_api_version(r.kind), r.kind, r.name, namespace, uid=r.uid
            )
        except NotFound:
            deleted = False  # never created (the controller died before the create), or gone
        except (Conflict, Forbidden) as e:
            # Replaced by the member's own object (409, its UID differs), or its admission
            # policy says it is not fleet's (403): not fleet's to delete.
            log.info("%s: %s not deleted: %s", binding.metadata.name, (r.kind, r.name), e)
            deleted = False
        if deleted:
            what = _describe(namespace, member, r.kind, r.name)
            await shell.events.record(
                workload, "DependencyDeleted", f"deleted {what}: no job of fleet's there uses it"
            )
            log.info("%s: deleted %s", binding.metadata.name, what)
    return remaining


async def let_go(
    shell: Shell,
    key: WorkloadKey,
    binding: GangBinding,
    workload: Obj,
    member: Member,
    *,
    recorded_as: str | None = None,
) -> GangBinding:
    """The job's copy left `member` (deleted, failed over, purged): its dependencies there go
    too (`release`), and the binding stops recording them, so they count for nobody.
    `recorded_as`: as for `release`."""
    cluster = recorded_as or member.name
    if not recorded(binding, cluster):
        return binding
    await release(shell, binding, workload, member, recorded_as=cluster)
    written, _ = await shell.bindings.save(
        key, binding, status={"dependencies": with_records(binding, cluster, [])}
    )
    return written


async def leave(
    shell: Shell, key: WorkloadKey, binding: GangBinding, member: Member
) -> GangBinding:
    """The job is left running in `member`, which leaves the fleet with it (`fleet unjoin
    --leave`): each of its dependencies there loses fleet's mark (a guarded patch: one that is
    not fleet's is not touched) and is never deleted, since the job still uses it; the binding
    stops recording them."""
    records = recorded(binding, member.name)
    if not records:
        return binding
    client = member.client
    assert client is not None
    namespace = str(binding.metadata.namespace or "")
    unmark = copies.unmark_patch(shell.settings.fleet_id)
    for r in records:
        try:
            await member.writer.patch(
                copies.dependency_api_version(r.kind),
                r.kind,
                r.name,
                unmark,
                namespace,
                patch_type="json",
            )
        except NotFound:
            continue  # gone already
        except ApiError as e:
            if e.status not in _NOT_OURS:
                raise
            continue  # not fleet's (the member's own, or let go already): left as it is
        log.info("%s: let go of %s", key, _describe(namespace, member, r.kind, r.name))
    written, _ = await shell.bindings.save(
        key, binding, status={"dependencies": with_records(binding, member.name, [])}
    )
    return written
