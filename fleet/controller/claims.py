"""A workload's claim by a Gang policy: the binding that records it, the terms it copies from the
policy, the finalizer that guards its member copies, and the cleanup when it is deleted.

Karmada's rules, as docs/api.md states them: the governing policy is matched once and keeps its
claim, unless a policy with `preemption: Always` outranks it; a claim whose policy was deleted
passes to the next Gang policy that matches. The binding keeps a copy of the policy's placement,
suspension and conflictResolution, synced on every policy change (with `activationPreference:
Lazy`, only when the workload itself changes). Failover settings are copied once, at binding, so
a policy edit never changes a failover under way.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from fleet.api import (
    BindingFailover,
    GangBinding,
    GangComponent,
    GangSpec,
    PropagationSpec,
    WorkloadReference,
)
from fleet.api import constants as c
from fleet.api.matching import policy_ref
from fleet.controller import dependencies
from fleet.controller.context import Job, Shell
from fleet.controller.keys import WorkloadKey
from fleet.controller.member_copy import copy_gone, delete_copy
from fleet.controller.policies import AnyPolicy
from fleet.controller.status_mirror import set_scheduled_condition
from fleet.core.kinds import Needed, adapter_for, gang_from_workload
from fleet.core.workload import Gang, WorkloadError
from fleet.kube import ApiError, Obj, merge_patch

log = logging.getLogger(__name__)

#: The Event that says what the kind's operator may add beyond the gang (`say_outside_gang`).
REASON_OUTSIDE_GANG = "OutsideGang"

#: Annotation on a GangBinding: the workload generation its copy of the policy's terms was last
#: synced at (what activationPreference Lazy compares).
TERMS_GENERATION_ANNOTATION = "fleet.dev/terms-generation"
#: How often deletion is retried while a member holding a copy cannot be reached.
CLEANUP_RETRY_SECONDS = 10.0
#: How often a deleted job whose member copy is still going looks again (its job and pod
#: events requeue it sooner).
DELETING_RECHECK_SECONDS = 2.0


async def interpret(shell: Shell, workload: Obj, needed: Needed | None = None) -> Gang | None:
    """The workload's gang, or None if it cannot be read (said on the workload when a Gang
    policy governs it). `needed`: what its kind reads besides it, if fetched already."""
    try:
        if needed is None:
            needed = await needed_by(shell, workload)
        return gang_from_workload(workload, needed)
    except WorkloadError as e:
        if shell.policies.match(workload).gang:
            await shell.events.record(workload, "InvalidWorkload", str(e), warning=True)
            await set_scheduled_condition(shell, workload, "False", "InvalidWorkload", str(e))
        return None


async def say_outside_gang(shell: Shell, workload: Obj) -> None:
    """A Normal `OutsideGang` Event, once per object and sentence, for each thing its kind's
    operator may add beyond the gang fleet placed (`KindAdapter.outside_gang`: a Ray
    autoscaler's workers past `replicas`). A changed spec that says something new says it
    again; a recreated object of the same name too (the uid is in the Event's identity)."""
    adapter = adapter_for(str(workload.get("apiVersion")), str(workload.get("kind")))
    uid = str(workload["metadata"].get("uid"))
    for sentence in adapter.outside_gang(workload) if adapter else []:
        digest = hashlib.sha256(f"{uid}\n{sentence}".encode()).hexdigest()[:16]
        await shell.events.record(workload, REASON_OUTSIDE_GANG, sentence, once=f"og-{digest}")


async def needed_by(shell: Shell, workload: Obj) -> Needed:
    """The objects on the fleet the workload's kind reads its gang from (a TrainJob's
    runtime), None for those that do not exist."""
    adapter = adapter_for(str(workload.get("apiVersion")), str(workload.get("kind")))
    out: dict[tuple[str, str, str], Obj | None] = {}
    for api_version, kind, namespace, name in adapter.needs(workload) if adapter else []:
        out[(kind, namespace, name)] = await shell.fleet.get(
            api_version, kind, name, namespace or None
        )
    return out


def _terms(spec: PropagationSpec) -> dict[str, Any]:
    """The binding spec fields that follow the policy."""
    return {
        "placement": spec.placement.to_dict() if spec.placement else None,
        "suspension": spec.suspension.to_dict() if spec.suspension else None,
        "conflictResolution": spec.conflict_resolution,
    }


async def bind(shell: Shell, key: WorkloadKey, workload: Obj, gang: Gang) -> GangBinding | None:
    """Create the binding if a Gang policy governs the workload (None otherwise)."""
    match = shell.policies.match(workload)
    if match.policy is None or not match.gang or match.ref is None:
        return None
    spec = match.policy.spec
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
        estimator=spec.gang_estimator or shell.settings.estimator,
        failover=BindingFailover.from_policy(spec.failover),
        suspension=spec.suspension,
        placement=spec.placement,
        conflict_resolution=spec.conflict_resolution,
    )
    generation = (workload.get("metadata") or {}).get("generation")
    binding.metadata.annotations = {TERMS_GENERATION_ANNOTATION: str(generation)}
    shell.arrivals.observe(gang)
    # Not written yet: the first save creates it with the first decision in one request
    # (BindingStore.save), before anything is done in a member.
    log.info("%s: bound by %s (%s)", key, match.ref.name, match.reason)
    return binding


async def sync_claim(shell: Shell, job: Job) -> None:
    """Keep the claim and the binding's copy of the policy's terms current."""
    claimed = job.binding.spec.policy
    match = shell.policies.match(job.workload, claimed_by=claimed)
    policy, ref = match.policy, match.ref
    if policy is None or ref is None:
        return  # no policy governs it any more: it keeps what it has
    if ref != claimed:
        if not match.gang:
            if shell.policies.get(claimed) is not None:
                await shell.events.record(
                    job.workload,
                    "ClaimKept",
                    f"{match.reason}; fleet keeps the gang under {claimed.kind} "
                    f"{claimed.name}, since only a Gang policy can take a placed gang over",
                )
            return
        await _transfer(shell, job, policy, match.reason)
        return
    generation = str((job.workload.get("metadata") or {}).get("generation"))
    synced = (job.binding.metadata.annotations or {}).get(TERMS_GENERATION_ANNOTATION)
    if policy.spec.activation_preference == "Lazy" and synced == generation:
        return  # Lazy: the policy's changes wait for the workload to change
    terms = _terms(policy.spec)
    current = job.binding.to_dict()["spec"]
    if any(current.get(k) != v for k, v in terms.items()) or synced != generation:
        await _write_terms(shell, job, terms, generation)


async def _transfer(shell: Shell, job: Job, policy: AnyPolicy, why: str) -> None:
    """Another Gang policy takes the claim (preemption, or the old policy was deleted)."""
    spec = policy.spec
    failover = BindingFailover.from_policy(spec.failover)
    terms = _terms(spec) | {
        "policy": policy_ref(policy).to_dict(),
        "estimator": spec.gang_estimator or shell.settings.estimator,
        "failover": failover.to_dict() if failover else None,
    }
    generation = str((job.workload.get("metadata") or {}).get("generation"))
    await _write_terms(shell, job, terms, generation)
    await shell.events.record(job.workload, "PolicyClaimChanged", why)
    log.info("%s: %s", job.key, why)


async def _write_terms(shell: Shell, job: Job, terms: dict[str, Any], generation: str) -> None:
    """Make the binding's copy of the terms equal the policy's: a field the policy no longer
    sets is removed from the copy too (a toleration dropped, dispatching no longer
    suspended), not left behind by the merge."""
    if not shell.bindings.written(job.binding):
        raw = job.binding.to_dict()
        raw["metadata"].setdefault("annotations", {})[TERMS_GENERATION_ANNOTATION] = generation
        raw["spec"] = {**raw["spec"], **terms}
        job.binding = GangBinding.from_dict(raw)  # written with the first save
        return
    current = job.binding.to_dict()["spec"]
    spec = merge_patch({key: current.get(key) for key in terms}, terms)
    # On the binding as read: a claim moved by another writer since is not overwritten.
    job.binding = await shell.bindings.patch(
        job.key,
        job.binding,
        {"metadata": {"annotations": {TERMS_GENERATION_ANNOTATION: generation}}, "spec": spec},
    )


# -- the finalizer ------------------------------------------------------------------------------


def claim_annotation(job: Job) -> str:
    """`<Kind>/<namespace>/<name>` of the claiming policy (namespace empty for a cluster one)."""
    ref = job.binding.spec.policy
    return f"{ref.kind}/{ref.namespace or ''}/{ref.name}"


async def mark_claimed(shell: Shell, job: Job) -> None:
    """Put fleet's finalizer and the claiming policy's annotation on the workload, in one write
    and only when one of them is missing or stale."""
    meta = job.workload["metadata"]
    claim = claim_annotation(job)
    if (
        c.FINALIZER in (meta.get("finalizers") or [])
        and (meta.get("annotations") or {}).get(c.POLICY_ANNOTATION) == claim
    ):
        return
    await _set_finalizer(shell, job.workload, present=True, claim=claim)


async def _set_finalizer(
    shell: Shell, workload: Obj, *, present: bool, claim: str | None = None
) -> None:
    """Add or remove fleet's finalizer (and set the claim annotation), guarded by
    resourceVersion so a concurrent change to the list is never lost; a conflict reads the
    object again and retries once."""
    key = WorkloadKey.of(workload)
    for attempt in (1, 2):
        finalizers = [f for f in workload["metadata"].get("finalizers") or [] if f != c.FINALIZER]
        if present:
            finalizers.append(c.FINALIZER)
        metadata: dict[str, Any] = {
            "finalizers": finalizers,
            "resourceVersion": workload["metadata"]["resourceVersion"],
        }
        if claim is not None:
            metadata["annotations"] = {c.POLICY_ANNOTATION: claim}
        try:
            updated = await shell.fleet.patch(
                key.api_version, key.kind, key.name, {"metadata": metadata}, key.namespace
            )
        except ApiError as e:
            if not e.conflict or attempt == 2:
                raise
            fresh = await shell.fleet.get(key.api_version, key.kind, key.name, key.namespace)
            if fresh is None:
                return
            workload.clear()
            workload.update(fresh)
            continue
        workload["metadata"] = updated["metadata"]
        shell.triggers.wrote_workload(updated)
        return


# -- deletion -----------------------------------------------------------------------------------


async def finalize(
    shell: Shell, key: WorkloadKey, workload: Obj, binding: GangBinding | None, holding: list[str]
) -> bool:
    """Delete the workload's member copies, then let it go; False while a member holding one
    cannot be reached (retried, and said in a CleanupPending event), or while a copy and its
    pods are not gone yet (its dependencies, a TrainJob's runtime among them, go only then)."""
    if c.FINALIZER not in (workload["metadata"].get("finalizers") or []):
        return True
    uid = workload["metadata"]["uid"]
    policy = shell.policies.get(binding.spec.policy) if binding else None
    preserve = bool(policy and policy.spec.preserve_resources_on_deletion)
    if not preserve:
        waiting: list[str] = []
        deleting: list[str] = []
        for cluster in holding:
            member = shell.members.get(cluster)
            if member is None and shell.members.left(cluster):
                continue  # the member left the fleet: nothing to reach
            if member is None or not member.ready or member.client is None:
                waiting.append(cluster)
                continue
            await delete_copy(member, key, uid)
            if not copy_gone(member, key, uid):
                deleting.append(cluster)  # its dependencies go once it has (its pods too)
                continue
            if binding is not None:  # its dependencies there go too, unless others use them
                binding = await dependencies.let_go(shell, key, binding, workload, member)
        if deleting and not waiting:
            shell.queue.add_after(key, DELETING_RECHECK_SECONDS)
            return False
        if waiting:
            message = f"waiting for {', '.join(waiting)} to be reachable to delete its copy"
            await shell.events.record(workload, "CleanupPending", message, warning=True)
            shell.queue.add_after(key, CLEANUP_RETRY_SECONDS)
            return False
    for snapshot in shell.members.snapshots():
        snapshot.release(uid)
    await _set_finalizer(shell, workload, present=False)
    shell.events.forget(uid)
    log.info("%s: deleted; member copies %s", key, "kept" if preserve else "removed")
    return True


__all__ = [
    "bind",
    "claim_annotation",
    "finalize",
    "interpret",
    "mark_claimed",
    "sync_claim",
]
