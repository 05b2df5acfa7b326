"""The Quotas view: the ElasticQuotaTree in force as a tree, each node with its min, max, what
it holds and what it borrows, and each node's queue: its units in the order the queue takes
them, each waiting one with the controller's reason.

The tree is built by the core's `check_tree` (the same rules the controller enforces), what a
node holds is what the controller wrote on its Queue (`status.used`), borrowing is the core's
`QuotaUsage.borrowed`, the order is the core's `order_key`, and a unit's reason is the message
the controller wrote on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.api import ElasticQuotaTree, Queue, QueueUnit
from fleet.api import constants as c
from fleet.controller.queue.units import spec_of
from fleet.core.admission import HOLDING, TERMINAL, QuotaUsage, order_key
from fleet.core.errors import FieldError
from fleet.core.quota import QuotaNode, check_tree, describe_amount
from fleet.core.resources import Resources, display_rank
from fleet.dashboard.views.parse import age, key_of, read

Obj = Mapping[str, Any]


def _tree_in_force(trees: Mapping[str, Obj]) -> tuple[Obj | None, Mapping[str, Any] | None]:
    """The tree fleet honours (in kube-system) and the spec in force: the one its status says
    is in force (the last valid one), else its spec."""
    for raw in trees.values():
        meta = raw.get("metadata") or {}
        if meta.get("namespace") != c.QUOTA_TREE_NAMESPACE:
            continue
        in_force = ((raw.get("status") or {}).get("inForce") or {}).get("spec")
        return raw, in_force if isinstance(in_force, Mapping) else raw.get("spec")
    return None, None


def _bars(node: QuotaNode, used: Resources) -> list[dict[str, Any]]:
    usage = QuotaUsage(node.path, used, node.min, node.max)
    borrowed = usage.borrowed
    names = sorted(set(node.min) | set(node.max) | set(used), key=display_rank)
    bars = []
    for name in names:
        cap = node.max.get(name)
        bars.append(
            {
                "resource": name,
                "used": used.get(name),
                "min": node.min.get(name),
                "max": cap,
                "borrowed": borrowed.get(name),
                "text": {
                    "used": describe_amount(name, used.get(name)),
                    "min": describe_amount(name, node.min.get(name)),
                    "max": describe_amount(name, cap) if cap is not None else "no cap",
                    "borrowed": describe_amount(name, borrowed.get(name)),
                },
            }
        )
    return bars


def _unit_row(raw: Obj, position: int | None, now: float) -> dict[str, Any]:
    unit, error = read(QueueUnit, raw)
    meta = raw.get("metadata") or {}
    if unit is None:
        return {"name": meta.get("name"), "namespace": meta.get("namespace"), "error": error}
    status = unit.status
    return {
        "name": unit.metadata.name,
        "namespace": unit.metadata.namespace,
        "job": unit.spec.consumer_ref.name,
        "kind": unit.spec.consumer_ref.kind,
        "phase": (status.phase if status else None) or "Enqueued",
        "message": (status.message or "") if status else "",
        "priority": unit.spec.priority or 0,
        "resource": dict(unit.spec.resource or {}),
        "position": position,
        "age": age(raw, now),
        "error": "",
    }


def _ordered_units(units: list[Obj], policy: str, now: float) -> list[dict[str, Any]]:
    """Units holding quota first (oldest dequeue first), then the waiting ones in queue order;
    finished ones are left out."""
    holding, waiting, broken = [], [], []
    for raw in units:
        phase = (raw.get("status") or {}).get("phase") or "Enqueued"
        if phase in TERMINAL:
            continue
        try:
            spec = spec_of(raw)
        except (FieldError, TypeError, ValueError, AttributeError):
            broken.append(_unit_row(raw, None, now))
            continue
        if phase in HOLDING:
            holding.append((str((raw.get("status") or {}).get("dequeuedAt") or ""), raw))
        else:
            waiting.append((order_key(policy, spec), raw))
    rows = [_unit_row(raw, None, now) for _, raw in sorted(holding, key=lambda h: h[0])]
    rows += [
        _unit_row(raw, i + 1, now) for i, (_, raw) in enumerate(sorted(waiting, key=lambda w: w[0]))
    ]
    return rows + broken


def quotas_view(
    trees: Mapping[str, Obj], queues: Mapping[str, Obj], units: Mapping[str, Obj], now: float
) -> dict[str, Any]:
    raw_tree, spec = _tree_in_force(trees)
    others = [
        {
            "object": key_of(raw),
            "state": (raw.get("status") or {}).get("state"),
            "message": (raw.get("status") or {}).get("message") or "",
        }
        for raw in trees.values()
        if raw is not raw_tree
    ]
    if raw_tree is None:
        return {"tree": None, "nodes": [], "others": others, "problems": [], "error": ""}
    parsed, error = read(ElasticQuotaTree, raw_tree)
    status = (raw_tree.get("status") or {}) if isinstance(raw_tree.get("status"), Mapping) else {}
    check = check_tree(spec)
    problems = [
        {
            "node": p.path,
            "field": p.field,
            "rule": p.rule,
            "severity": p.severity,
            "message": p.message,
        }
        for p in check.problems
    ]
    head = {
        "tree": key_of(raw_tree),
        "state": status.get("state"),
        "message": status.get("message") or "",
        "inForce": (status.get("inForce") or {}).get("generation"),
        "generation": (raw_tree.get("metadata") or {}).get("generation"),
        "error": error if parsed is None else "",
        "others": others,
        "problems": problems,
    }
    if check.tree is None:
        return {**head, "nodes": []}
    # Queues by quota path, and units by the path they are charged to (else their queue's).
    queue_by_path: dict[str, Queue] = {}
    queue_errors: list[str] = []
    for raw in queues.values():
        queue, why = read(Queue, raw)
        if queue is None:
            queue_errors.append(why)
            continue
        path = queue.quota_path or (queue.status.quota if queue.status else None)
        if path:
            queue_by_path[path] = queue
    path_of_queue = {q.metadata.name: p for p, q in queue_by_path.items()}
    units_by_path: dict[str, list[Obj]] = {}
    for raw in units.values():
        status_quota = (raw.get("status") or {}).get("quota")
        path = status_quota or path_of_queue.get(str((raw.get("spec") or {}).get("queue")))
        units_by_path.setdefault(str(path or ""), []).append(raw)
    nodes = []
    for node in check.tree:
        queue = queue_by_path.get(node.path)
        qstatus = queue.status if queue else None
        try:
            used = Resources.parse((qstatus.used if qstatus else None) or {}, field="status.used")
        except FieldError:
            used = Resources()
        policy = queue.spec.queue_policy if queue else "Priority"
        nodes.append(
            {
                "path": node.path,
                "name": node.name,
                "depth": len(node.lineage) - 1,
                "leaf": node.is_leaf,
                "namespaces": list(node.namespaces),
                "bars": _bars(node, used),
                "queue": queue.metadata.name if queue else None,
                "policy": policy,
                "waiting": qstatus.waiting if qstatus else None,
                "dequeued": qstatus.dequeued if qstatus else None,
                "units": _ordered_units(units_by_path.get(node.path, []), policy, now),
            }
        )
    return {**head, "nodes": nodes, "queueErrors": queue_errors}
