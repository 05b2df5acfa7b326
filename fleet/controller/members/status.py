"""The MemberCluster status: what fleet last saw of each member, written by the leader only."""

from __future__ import annotations

from typing import Any, Literal

from fleet.api import constants as c
from fleet.api import format_time
from fleet.api.conditions import upsert_condition
from fleet.controller.clock import Clock
from fleet.controller.members.member import FENCING_MESSAGE, Member
from fleet.controller.members.renewal import RenewalState
from fleet.kube import KubeClient

MEMBER_CLUSTER = (c.FLEET_API_VERSION, "MemberCluster")


def token_renewal(token: RenewalState | None) -> dict[str, Any] | None:
    """status.tokenRenewal (None: the member holds no bound token; a merge patch removes it)."""
    if token is None:
        return None
    return {
        "lastRenewalTime": format_time(token.issued),
        "expirationTime": format_time(token.expires),
        "nextAttemptTime": format_time(token.next_attempt),
        "consecutiveFailures": token.failures,
    }


def watch_condition(
    conditions: list[dict[str, Any]], state: tuple[bool, str] | None, now: float
) -> list[dict[str, Any]]:
    """The conditions with KubeconfigWatched set from the Secret watch's state (left as they
    are while it is not known yet: a restarted controller's first list is not a change)."""
    if state is None:
        return conditions
    ok, why = state
    if ok:
        return upsert_condition(
            conditions,
            c.CONDITION_KUBECONFIG_WATCHED,
            "True",
            c.REASON_WATCHING,
            "the kubeconfig Secret's namespace is watched: edits and renewals are taken in",
            now,
        )
    return upsert_condition(
        conditions,
        c.CONDITION_KUBECONFIG_WATCHED,
        "False",
        c.REASON_WATCH_FAILED,
        f"the controller cannot watch the kubeconfig Secret's namespace: {why}; an edited or "
        "renewed kubeconfig is not taken in until it can (its Role there: the chart's "
        "controller.secretsNamespaces)",
        now,
    )


def token_condition(
    conditions: list[dict[str, Any]], token: RenewalState | None, now: float
) -> list[dict[str, Any]]:
    """The conditions with TokenRenewed set from `token` (removed when there is none)."""
    if token is None:
        return [x for x in conditions if x.get("type") != c.CONDITION_TOKEN_RENEWED]
    expires = format_time(token.expires)
    if token.failure is not None:
        reason, error = token.failure
        return upsert_condition(
            conditions,
            c.CONDITION_TOKEN_RENEWED,
            "False",
            reason,
            f"{error}; the token expires at {expires} and the member stays Ready until then "
            "(`fleet join` again issues a new one)",
            now,
        )
    issued = format_time(token.issued)
    return upsert_condition(
        conditions,
        c.CONDITION_TOKEN_RENEWED,
        "True",
        c.REASON_TOKEN_RENEWED if token.renewed else c.REASON_TOKEN_VALID,
        f"{'renewed' if token.renewed else 'issued'} at {issued}, expires at {expires}",
        now,
    )


def guarded(member: Member) -> tuple[Literal["True", "False"], str, str]:
    """The Guarded condition's (status, reason, message) of a member `fleet join` made."""
    if not member.guard:
        return (
            "False",
            "NoAdmissionPolicy",
            "the member serves no ValidatingAdmissionPolicy (Kubernetes < 1.30): fleet's "
            "identity there is limited by RBAC alone (docs/security.md)",
        )
    if member.guard_missing is not None:
        return "False", c.REASON_GUARD_MISSING, member.guard_missing
    return (
        "True",
        c.REASON_GUARD_IN_FORCE,
        f"ValidatingAdmissionPolicy {member.guard} narrows fleet's identity there",
    )


class MemberStatusWriter:
    """Writes Ready (with reason), version, node count and resources; skips unchanged status."""

    def __init__(self, fleet: KubeClient, clock: Clock) -> None:
        self.fleet = fleet
        self.clock = clock

    async def write(self, member: Member) -> None:
        current = await self.fleet.get(*MEMBER_CLUSTER, member.name)
        if current is None:
            return
        status = dict(current.get("status") or {})
        now = self.clock.now()
        # Ready means placeable: a member that answers is not Ready until the collector has
        # fenced it (every object of fleet's there that no binding wants deleted).
        fencing = member.ready and not member.fenced
        # Nor is one whose guard was found gone (its gangs stay; nothing new goes there).
        unguarded = member.ready and not fencing and member.unguarded
        reason, message = member.health.reason, member.health.message
        if fencing:
            reason, message = c.REASON_FENCING, FENCING_MESSAGE
        elif unguarded:
            reason, message = c.REASON_GUARD_MISSING, str(member.guard_missing)
        conditions = upsert_condition(
            status.get("conditions"),
            c.CONDITION_READY,
            "True" if member.ready and not fencing and not unguarded else "False",
            reason,
            message,
            now,
            observed_generation=member.generation,
        )
        conditions = watch_condition(conditions, member.secret_watch, now)
        if member.guard is not None:
            conditions = upsert_condition(
                conditions,
                c.CONDITION_GUARDED,
                *guarded(member),
                now,
                observed_generation=member.generation,
            )
        desired: dict[str, Any] = {"conditions": token_condition(conditions, member.token, now)}
        desired["tokenRenewal"] = token_renewal(member.token)
        if member.gang_scheduler:
            desired["gangScheduler"] = member.gang_scheduler
        if member.ready:
            allocatable, allocated, nodes = member.totals()
            desired |= {
                "kubernetesVersion": member.version,
                "nodeCount": nodes,
                "resources": {
                    "allocatable": allocatable.quantities(),
                    "allocated": allocated.quantities(),
                },
            }
        if all(status.get(k) == v for k, v in desired.items()):
            return
        desired["lastProbeTime"] = format_time(now)
        if desired["tokenRenewal"] is None and "tokenRenewal" not in status:
            del desired["tokenRenewal"]
        await self.fleet.patch(
            *MEMBER_CLUSTER, member.name, {"status": desired}, subresource="status"
        )
