"""Reservation-backed dispatch to a Koordinator member (ACK's `enableReservation`).

When a gang is placed in a member whose MemberCluster enables `spec.reservation`, the binding
goes `Reserving` and fleet, before it dispatches anything:

1. creates one Koordinator Reservation per pod of the gang's minimum set (the plan is the
   core's, `fleet.core.reservation`): named deterministically, labelled with the fleet id and the
   fleet object's UID, owned by the gang's pods of that role (a label selector), with the
   member's TTL; not a Koordinator gang (why: `fleet.core.reservation`), so all or nothing is
   the next step's doing;
2. judges what the member reports with the core (`judge_reservations`, time passed in) every
   `RECHECK_SECONDS` until every Reservation is Available, one Failed, or the bounded wait ran
   out;
3. then dispatches the job, whose pods consume the Reservations; or deletes them all, records
   why on the binding (`lifecycle.reservation_failed`: the member is avoided for a while) and
   places the gang again, elsewhere.

A restarted controller finds the binding `Reserving` since its stored time, and the
Reservations by name: creating one that exists adopts it. Reservations are deleted after use
(once the job runs), on deletion of the job, and on failover; the TTL bounds anything left
when fleet itself is gone.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fleet.api import constants as c
from fleet.api.rules import rules_of_placement
from fleet.controller.context import Job, Shell, save
from fleet.controller.copies import member_labels, pin_domains
from fleet.controller.keys import WorkloadKey
from fleet.controller.members import Member
from fleet.controller.status_mirror import binding_conditions
from fleet.core import lifecycle
from fleet.core.admission.hold import Hold, held_domains
from fleet.core.assignment import Domain
from fleet.core.gangmarks import KOORDINATOR
from fleet.core.reservation import (
    DEFAULT_RETRY_AFTER_SECONDS,
    DEFAULT_TTL_SECONDS,
    DEFAULT_WAIT_SECONDS,
    FallBack,
    KeepWaiting,
    PlannedReservation,
    ReservationPlan,
    Reserved,
    SeenReservation,
    judge_reservations,
    plan_reservations,
    reserves,
)
from fleet.kube import ApiError, Conflict, Obj

log = logging.getLogger(__name__)

RESERVATION = ("scheduling.koordinator.sh/v1alpha1", "Reservation")
#: How often a Reserving gang looks at its Reservations again (they are not watched).
RECHECK_SECONDS = 1.0
#: The binding condition that tells the reservation phase.
CONDITION_RESERVED = "Reserved"


def wanted(member: Member | None, policy: str | None = None, *, reservable: bool = True) -> bool:
    """Whether a gang placed in `member` is reserved there first (`fleet.core.reservation.
    reserves`): Koordinator members, as the policy's `replicaScheduling.gangReservation` or
    else the member's `spec.reservation.enabled` says; never a kind whose pods could not
    consume the Reservations (`KindAdapter.reservable`)."""
    if member is None or not reservable:
        return False
    return reserves(
        supported=member.gang_scheduler == KOORDINATOR,
        member_enabled=member.reservation is not None,
        policy=policy,
    )


def reservation_objects(
    job: Job, plan: ReservationPlan, fleet_id: str, pin: Sequence[Domain] = ()
) -> list[dict[str, Any]]:
    """The Reservations of `plan`, as created in the member (pure). `pin`: the topology
    domains they must keep to, pinned as the member copy's pods are (`copies.pin_domains`):
    the placement's domains, or the domains a hold's room is in (`hold.held_domains`), so the
    member reserves the room where the gang's pods may use it."""
    listed = [(t.component, copy.deepcopy(t.template)) for t in job.kind.templates(job.workload)]
    if pin:
        pin_domains(listed, pin)
    templates = dict(listed)
    return [
        _reservation(job, plan, planned, templates.get(planned.role.lower()) or {}, fleet_id)
        for planned in plan.reservations
    ]


def _reservation(
    job: Job,
    plan: ReservationPlan,
    planned: PlannedReservation,
    template: Mapping[str, Any],
    fleet_id: str,
) -> dict[str, Any]:
    role = planned.role.lower()
    spec = template.get("spec") or {}
    pod_spec: dict[str, Any] = {"containers": [_container(x) for x in spec.get("containers") or []]}
    for field in ("nodeSelector", "tolerations", "affinity", "priorityClassName"):
        if spec.get(field):
            pod_spec[field] = spec[field]
    owner = {c.FLEET_UID_LABEL: plan.uid, c.ROLE_LABEL: role}
    return {
        "apiVersion": RESERVATION[0],
        "kind": RESERVATION[1],
        "metadata": {
            "name": planned.name,
            "labels": {**member_labels(plan.uid, fleet_id), c.ROLE_LABEL: role},
            "annotations": {
                c.BINDING_ANNOTATION: f"{job.key.namespace}/{job.binding.metadata.name}",
            },
        },
        "spec": {
            "template": {"metadata": {"namespace": job.key.namespace}, "spec": pod_spec},
            "owners": [{"labelSelector": {"matchLabels": owner}}],
            "ttl": f"{plan.ttl_seconds}s",
            "allocateOnce": True,
        },
    }


def _container(container: Mapping[str, Any]) -> dict[str, Any]:
    """What a Reservation's template needs of a container: its requests, spelled out (a limit
    without a request is the request, as the API server defaults it for pods but not here)."""
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = {**limits, **(resources.get("requests") or {})}
    out: dict[str, Any] = {"name": container.get("name") or "main"}
    if container.get("image"):
        out["image"] = container["image"]
    out["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    return out


def _affinity(obj: Mapping[str, Any]) -> object:
    """A Reservation's template's affinity: where its room may be (`pin`)."""
    return (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("affinity")


def seen_reservation(obj: Obj) -> SeenReservation:
    """What a member's Reservation says: its phase, node, and why it is not (yet) usable."""
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    message = "; ".join(
        f"{x.get('reason')}: {x.get('message')}" if x.get("message") else str(x.get("reason"))
        for x in conditions
        if x.get("status") == "False" or x.get("reason") in ("Expired", "Unschedulable")
    )
    return SeenReservation(status.get("phase"), status.get("nodeName"), message)


async def reserve(shell: Shell, job: Job, member: Member) -> bool:
    """Reserve the gang's capacity in `member`; True once it may be dispatched there."""
    client = member.client
    assert client is not None
    ttl, wait = member.reservation or (DEFAULT_TTL_SECONDS, DEFAULT_WAIT_SECONDS)
    plan = plan_reservations(job.gang, job.uid, ttl_seconds=ttl)
    now = shell.clock.now()
    since = job.life.reserving_since if job.life.reserving_since is not None else now
    seen: dict[str, SeenReservation] = {}
    try:
        existing = await _ours(member, job.uid)
        created = 0
        pin = job.life.domains if job.life.cluster == member.name else ()
        for body in reservation_objects(job, plan, shell.settings.fleet_id, pin):
            name = body["metadata"]["name"]
            found = existing.get(name)
            if found is not None and _affinity(found) == _affinity(body):
                seen[name] = seen_reservation(found)
                continue
            if found is not None:
                # Made for a hold in another domain than the placement chose (or by an older
                # controller): its room is not where the pods may run. Made again, pinned, once
                # it is gone (until then it is waited for, as one not Available yet).
                await member.writer.delete(*RESERVATION, name, uid=found["metadata"]["uid"])
                seen[name] = SeenReservation()
                continue
            try:
                seen[name] = seen_reservation(await member.writer.create(body))
                created += 1
            except Conflict:  # made by another fleet or left by someone: not ours to use
                seen[name] = SeenReservation("Failed", None, "exists and is not fleet's")
        if created:
            shell.metrics.reservation_attempts.inc(member.name)
            await shell.events.record(
                job.workload,
                "Reserving",
                f"reserving {len(plan.names)} pods in {member.name} "
                f"(Reservations {plan.prefix}-*, TTL {ttl}s, wait {wait:.0f}s)",
            )
    except ApiError as e:
        seen = {n: SeenReservation("Failed", None, f"create refused: {e}") for n in plan.names}
    verdict = judge_reservations(plan, seen, since=since, now=now, wait_seconds=wait)
    if isinstance(verdict, Reserved):
        shell.metrics.reservation_seconds.observe(max(0.0, now - since))
        await save(
            shell,
            job,
            lifecycle.reserved(job.life),
            conditions=binding_conditions(
                shell,
                job,
                (
                    CONDITION_RESERVED,
                    "True",
                    "Available",
                    f"{len(plan.names)} Reservations Available in {member.name}",
                ),
            ),
        )
        await shell.events.record(
            job.workload,
            "Reserved",
            f"{len(plan.names)} Reservations Available in {member.name} after "
            f"{now - since:.1f}s; dispatching",
        )
        return True
    if isinstance(verdict, KeepWaiting):
        message = f"{verdict.progress} in {member.name}"
        current = job.binding.condition(CONDITION_RESERVED)
        if current is None or current.message != message:
            await save(
                shell,
                job,
                conditions=binding_conditions(
                    shell, job, (CONDITION_RESERVED, "False", "Reserving", message)
                ),
            )
        shell.queue.add_after(job.key, min(RECHECK_SECONDS, max(0.05, verdict.recheck_at - now)))
        return False
    assert isinstance(verdict, FallBack)
    timed_out = now >= since + wait
    await _fall_back(shell, job, member, verdict.reason, "Timeout" if timed_out else "Failed")
    return False


async def hold_room(shell: Shell, job: Job, hold: Hold) -> None:
    """While a reclaim holds room for this gang (`fleet.core.admission.hold`) in a member that
    takes Reservations, reserve it there for the gang now: the same Reservations its placement
    makes (same names, so `reserve` adopts them), pinned to the domain the held room is in
    when the gang requires one (`hold.held_domains`). They keep the room from member-local pods
    that come after the Reservations take it, not from one already waiting for it: which of
    them koord-scheduler gives the freed room is its doing (docs/queue.md, measured). Deleted
    when the hold ends without the gang placed (`release`)."""
    member = shell.members.get(hold.cluster)
    terms = job.binding.spec.placement
    strategy = terms.replica_scheduling if terms else None
    policy = strategy.gang_reservation if strategy else None
    if not wanted(member, policy, reservable=job.kind.reservable):
        return
    assert member is not None
    client = member.client
    if client is None or not member.ready:
        return
    ttl, _ = member.reservation or (DEFAULT_TTL_SECONDS, DEFAULT_WAIT_SECONDS)
    plan = plan_reservations(job.gang, job.uid, ttl_seconds=ttl)
    # The gang's required topology (the policy's default included, as its placement reads it):
    # the Reservations keep to the domain the held room is in.
    rules = job.gang.with_default_topology(rules_of_placement(terms).topology).topology
    pin = held_domains(hold, rules, lambda node: _labels(member, node))
    existing = await _ours(member, job.uid)
    created = missing = 0
    for body in reservation_objects(job, plan, shell.settings.fleet_id, pin):
        found = existing.get(body["metadata"]["name"])
        if found is not None and seen_reservation(found).phase != "Failed":
            continue
        if found is not None:
            # Expired (the victims' pods took longer to leave than its TTL) or refused: it keeps
            # nothing, and placement would fall back on it. Made again while the hold lasts.
            name = found["metadata"]["name"]
            await member.writer.delete(*RESERVATION, name, uid=found["metadata"]["uid"])
        try:
            await member.writer.create(body)
            created += 1
        except Conflict:  # not fleet's (the placement's reserve says so), or not gone yet
            missing += 1
    # Looked at again before their TTL can run out, however long the victims take (soon, if
    # one that expired is not gone yet).
    shell.queue.add_after(job.key, RECHECK_SECONDS if missing else ttl / 2)
    if created:
        await shell.events.record(
            job.workload,
            "Reserving",
            f"reserving {len(plan.names)} pods in {member.name} for the room held for this "
            f"gang (Reservations {plan.prefix}-*, TTL {ttl}s)",
        )


def _labels(member: Member, node: str) -> Mapping[str, str]:
    """A node's labels in fleet's view of the member (none: it is not there)."""
    found = member.snapshot.node(node)
    return found.labels if found is not None else {}


async def release_held(shell: Shell, hold: Hold, why: str | None, job: Obj) -> None:
    """A hold ended (`why`): the Reservations `hold_room` made for it in its member are deleted,
    unless the gang was placed there (its placement adopted them; `release_after_use` deletes
    them once it runs). `job`: the claimant's job (an Event's involved object)."""
    member = shell.members.get(hold.cluster)
    uid = str((job.get("metadata") or {}).get("uid") or "")
    if member is None or not uid:
        return
    if why == "Placed" and shell.triggers.placed.get(WorkloadKey.of(job)) == hold.cluster:
        return
    await release(member, uid)


async def _fall_back(shell: Shell, job: Job, member: Member, reason: str, kind: str) -> None:
    """Delete every Reservation, record why, avoid the member for a while, place again."""
    await release(member, job.uid)
    member.snapshot.release(job.uid)
    now = shell.clock.now()
    life = lifecycle.reservation_failed(
        job.life, reason, now, retry_after=DEFAULT_RETRY_AFTER_SECONDS
    )
    message = f"reserving in {member.name} failed: {reason}; placing the gang again"
    await save(
        shell,
        job,
        life,
        conditions=binding_conditions(
            shell, job, (CONDITION_RESERVED, "False", "ReservationFailed", message)
        ),
    )
    shell.metrics.reservation_failures.inc(kind)
    await shell.events.record(job.workload, "ReservationFailed", message, warning=True)
    log.info("%s: %s", job.key, message)
    shell.queue.add(job.key)


async def _ours(member: Member, uid: str) -> dict[str, Obj]:
    """The Reservations made for the fleet object `uid` (UIDs are unique: no other fleet's)."""
    client = member.client
    assert client is not None
    listed = await client.list(*RESERVATION, label_selector=f"{c.FLEET_UID_LABEL}={uid}")
    return {o["metadata"]["name"]: o for o in listed.get("items") or []}


async def release(member: Member, uid: str) -> int:
    """Delete every Reservation made in `member` for the fleet object `uid`; how many."""
    client = member.client
    if client is None or member.gang_scheduler != KOORDINATOR:
        return 0
    deleted = 0
    with contextlib.suppress(ApiError):
        for name, obj in (await _ours(member, uid)).items():
            if await member.writer.delete(*RESERVATION, name, uid=obj["metadata"]["uid"]):
                deleted += 1
    return deleted


async def release_after_use(shell: Shell, job: Job, member: Member) -> None:
    """Once the job runs, its pods have consumed the Reservations: delete them."""
    current = job.binding.condition(CONDITION_RESERVED)
    if current is None or current.status != "True" or job.life.phase != "Running":
        return
    deleted = await release(member, job.uid)
    await save(
        shell,
        job,
        conditions=binding_conditions(
            shell,
            job,
            (
                CONDITION_RESERVED,
                "False",
                "Released",
                f"the job runs in {member.name}; {deleted} Reservations deleted",
            ),
        ),
    )
