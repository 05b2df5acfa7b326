"""The MemberCluster status: what fleet last saw of each member, written by the leader only."""

from __future__ import annotations

from typing import Any

from fleet.api import constants as c
from fleet.api import format_time
from fleet.api.conditions import upsert_condition
from fleet.controller.clock import Clock
from fleet.controller.members.member import Member
from fleet.kube import KubeClient

MEMBER_CLUSTER = (c.FLEET_API_VERSION, "MemberCluster")


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
        desired: dict[str, Any] = {
            "conditions": upsert_condition(
                status.get("conditions"),
                c.CONDITION_READY,
                "True" if member.ready else "False",
                member.health.reason,
                member.health.message,
                now,
                observed_generation=member.generation,
            )
        }
        if member.guard is not None:
            guarded = bool(member.guard)
            desired["conditions"] = upsert_condition(
                desired["conditions"],
                c.CONDITION_GUARDED,
                "True" if guarded else "False",
                "AdmissionPolicy" if guarded else "NoAdmissionPolicy",
                f"ValidatingAdmissionPolicy {member.guard} narrows fleet's identity there"
                if guarded
                else "the member serves no ValidatingAdmissionPolicy (Kubernetes < 1.30): "
                "fleet's identity there is limited by RBAC alone (docs/security.md)",
                now,
                observed_generation=member.generation,
            )
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
        await self.fleet.patch(
            *MEMBER_CLUSTER, member.name, {"status": desired}, subresource="status"
        )
