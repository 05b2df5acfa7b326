"""The Fleet view: every member, whether it is Ready and reachable, its gang scheduler, its GPUs
(total, free, the largest free block on one node) and a grid of its nodes by free GPUs.

Ready is the controller's verdict (the MemberCluster's Ready condition); reachable is whether the
dashboard's own watch, with the user's credentials, gets answers. GPU figures come from the
core's ClusterSnapshot fed by the member's nodes and pods, the structure placement reads, so
"largest free block" means what the `nodes` estimator means by it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.api import MemberCluster, find_condition
from fleet.api import constants as c
from fleet.core.resources import GPU, Resources
from fleet.dashboard.state import CAPACITY_RESOURCES, MemberLive
from fleet.dashboard.views.parse import age, read

#: Nodes drawn per member; a larger member shows its first ones and says how many were left.
MAX_NODES_DRAWN = 2000


def member_status(member: MemberCluster | None, live: MemberLive | None) -> str:
    """One word for the member's badge: Ready, NotReady, Unreachable or Unknown."""
    if live is not None and live.reachable is False:
        return "Unreachable"
    if member is None:
        return "Unknown"
    condition = find_condition(member.status.conditions if member.status else None, "Ready")
    if condition is None:
        return "Unknown"
    return "Ready" if condition.status == "True" else "NotReady"


def _gpus(member: MemberCluster | None, live: MemberLive | None) -> dict[str, Any]:
    if live is not None and live.reachable and len(live.snapshot):
        snap = live.snapshot
        total = sum(n.allocatable.get(GPU) for n in snap.nodes())
        return {
            "total": total,
            "free": snap.total_free(GPU),
            "largestFree": snap.max_free(GPU),
            "source": "watch",
        }
    # Not watched (yet): the controller's last probe, which has no per-node figures.
    resources = member.status.resources if member and member.status else None
    if resources is None:
        return {"total": None, "free": None, "largestFree": None, "source": "none"}
    allocatable = Resources.parse(resources.allocatable or {})
    allocated = Resources.parse(resources.allocated or {})
    total = allocatable.get(GPU)
    return {
        "total": total,
        "free": max(0, total - allocated.get(GPU)),
        "largestFree": None,
        "source": "probe",
    }


def _nodes(live: MemberLive | None) -> tuple[list[dict[str, Any]], int]:
    if live is None:
        return [], 0
    drawn: list[dict[str, Any]] = []
    nodes = sorted(live.snapshot.nodes(), key=lambda n: n.name)
    for node in nodes[:MAX_NODES_DRAWN]:
        free = live.snapshot.free(node.name) or Resources()
        drawn.append(
            {
                "name": node.name,
                "gpus": node.allocatable.get(GPU),
                "free": free.get(GPU),
                "cordoned": node.unschedulable,
            }
        )
    drawn += [{"name": name, "error": why} for name, why in sorted(live.node_errors.items())]
    return drawn, max(0, len(nodes) - MAX_NODES_DRAWN)


def member_row(
    raw: Mapping[str, Any] | None, live: MemberLive | None, now: float
) -> dict[str, Any]:
    """One member: its MemberCluster (None when only the watch knows it) and what the
    dashboard's watch sees."""
    name = live.name if live is not None else ""
    member, error = (None, "") if raw is None else read(MemberCluster, raw)
    if raw is not None:
        name = str((raw.get("metadata") or {}).get("name") or name)
    status = member.status if member else None
    ready = find_condition(status.conditions if status else None, c.CONDITION_READY)
    nodes, more = _nodes(live)
    return {
        "name": name,
        "error": error,
        "status": member_status(member, live),
        "ready": ready.status if ready else None,
        "readyReason": (ready.reason or "") if ready else "",
        "readyMessage": (ready.message or "") if ready else "",
        "reachable": live.reachable if live else None,
        "problem": live.problem if live else "",
        # Watches that fail (a refusal: "Reservation refused: ... 403 ...") without making the
        # member unreachable; the Node and Pod watches' failures are `problem`.
        "watchProblems": {
            resource: why
            for resource, why in sorted(live.watch_problems.items())
            if resource not in CAPACITY_RESOURCES
        }
        if live
        else {},
        "gangScheduler": (status.gang_scheduler if status else None)
        or (member.spec.gang_scheduler if member else None),
        "version": status.kubernetes_version if status else None,
        "nodeCount": len(live.snapshot)
        if live and live.reachable
        else (status.node_count if status else None),
        "labels": member.labels if member else {},
        "age": age(raw, now) if raw is not None else "",
        "gpus": _gpus(member, live),
        "nodes": nodes,
        "nodesNotDrawn": more,
    }


def fleet_view(
    members: Mapping[str, Mapping[str, Any]],
    live: Mapping[str, MemberLive],
    now: float,
    problems: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every MemberCluster (by object key), with what the watches see of it."""
    rows = []
    by_name: dict[str, Mapping[str, Any]] = {}
    for raw in members.values():
        by_name[str((raw.get("metadata") or {}).get("name") or "")] = raw
    for name in sorted(set(by_name) | set(live)):
        rows.append(member_row(by_name.get(name), live.get(name), now))
    ready = sum(1 for r in rows if r["status"] == "Ready")
    totals = [r["gpus"] for r in rows if r["gpus"]["total"] is not None]
    return {
        "members": rows,
        "summary": {
            "members": len(rows),
            "ready": ready,
            "gpus": sum(g["total"] for g in totals),
            "free": sum(g["free"] or 0 for g in totals),
        },
        "problems": dict(problems or {}),
    }
