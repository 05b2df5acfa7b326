"""The Jobs view and a job's page, from its GangBinding (fleet's decision and memory), its
QueueUnit (its place in Kube Queue) and fleet's pods in the members.

Nothing is decided here: the phase, the member, the history, the failovers and the reasons per
member are what the controller wrote on the binding; the member's own word on the job is the
kind adapter's state word of the mirrored status, as `kubectl amc get` shows it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleet.amc.logs import replica_pods
from fleet.api import GangBinding, QueueUnit, binding_name
from fleet.api import constants as c
from fleet.core.kinds import adapter_for
from fleet.dashboard.views.parse import age, key_of, read

Obj = Mapping[str, Any]


def _unit_of(units: Mapping[str, Obj], namespace: str, kind: str, name: str) -> Obj | None:
    # A unit is named like the binding (`<kind>-<name>`), in the job's namespace.
    return units.get(f"{namespace}/{binding_name(kind, name)}")


def _queue_fields(unit: Obj | None) -> dict[str, Any]:
    if unit is None:
        return {"queue": None, "quota": None, "queuePhase": None, "queueMessage": ""}
    parsed, error = read(QueueUnit, unit)
    if parsed is None:
        return {"queue": None, "quota": None, "queuePhase": None, "queueMessage": error}
    status = parsed.status
    return {
        "queue": parsed.spec.queue,
        "quota": status.quota if status else None,
        "queuePhase": status.phase if status else None,
        "queueMessage": (status.message or "") if status else "",
    }


def _member_state(binding: GangBinding) -> str | None:
    target = binding.target_cluster
    resource = binding.spec.resource
    adapter = adapter_for(resource.api_version, resource.kind)
    if adapter is None:
        return None
    for item in (binding.status.aggregated_status if binding.status else None) or []:
        if item.cluster_name == target and item.status is not None:
            return str(adapter.state(item.status))
    return None


def _why(binding: GangBinding) -> str:
    """The Scheduled condition's message while the gang has no member (why it waits)."""
    scheduled = binding.condition(c.CONDITION_SCHEDULED)
    if binding.target_cluster is None and scheduled is not None and scheduled.status != "True":
        return scheduled.message or scheduled.reason or ""
    return ""


def job_row(raw: Obj, units: Mapping[str, Obj], now: float) -> dict[str, Any]:
    """One line of the Jobs table; a binding that cannot be read is a line with its error."""
    binding, error = read(GangBinding, raw)
    meta = raw.get("metadata") or {}
    if binding is None:
        return {
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "binding": meta.get("name"),
            "kind": None,
            "error": error,
            "age": age(raw, now),
        }
    ref = binding.spec.resource
    namespace = ref.namespace or binding.metadata.namespace or ""
    status = binding.status
    return {
        "namespace": namespace,
        "name": ref.name,
        "kind": ref.kind,
        "binding": binding.metadata.name,
        "error": "",
        "phase": (status.phase if status else None) or "Pending",
        "member": binding.target_cluster,
        "memberState": _member_state(binding),
        "failovers": (status.failover_count if status else None) or 0,
        "age": age(raw, now),
        "why": _why(binding),
        **_queue_fields(_unit_of(units, namespace, ref.kind, ref.name)),
    }


def jobs_view(bindings: Mapping[str, Obj], units: Mapping[str, Obj], now: float) -> dict[str, Any]:
    rows = [job_row(raw, units, now) for _, raw in sorted(bindings.items())]
    phases: dict[str, int] = {}
    for row in rows:
        phase = row.get("phase") or "Unreadable"
        phases[phase] = phases.get(phase, 0) + 1
    return {"jobs": rows, "phases": dict(sorted(phases.items()))}


def find_binding(bindings: Mapping[str, Obj], namespace: str, name: str) -> Obj | None:
    """The binding of job `name` in `namespace`, whatever its kind (names are per kind, so the
    first one whose workload has that name)."""
    for raw in bindings.values():
        spec = raw.get("spec") or {}
        resource = spec.get("resource") if isinstance(spec, Mapping) else None
        meta = raw.get("metadata") or {}
        if meta.get("namespace") != namespace:
            continue
        if isinstance(resource, Mapping) and resource.get("name") == name:
            return raw
        if meta.get("name") == name:  # an unreadable binding, asked for by its own name
            return raw
    return None


def pod_row(member: str, pod: Obj, now: float) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    ready = sum(1 for s in containers if s.get("ready"))
    return {
        "member": member,
        "name": meta.get("name"),
        "node": spec.get("nodeName"),
        "phase": status.get("phase") or "Pending",
        "ready": f"{ready}/{len(spec.get('containers') or containers)}",
        "restarts": sum(int(s.get("restartCount") or 0) for s in containers),
        "age": age(pod, now),
    }


def job_view(
    raw: Obj,
    units: Mapping[str, Obj],
    pods: Iterable[tuple[str, Obj]],
    now: float,
) -> dict[str, Any]:
    """A job's page: the row, the binding's conditions, placement history, failovers,
    exclusions, reasons per member (with their facts), per-member state, pods and replicas."""
    row = job_row(raw, units, now)
    binding, _ = read(GangBinding, raw)
    if binding is None:
        return {**row, "object": key_of(raw)}
    status = binding.status
    pending = [r.to_dict() for r in (status.pending_reasons if status else None) or []]
    fact_columns = sorted({k for r in pending for k in (r.get("facts") or {})})
    uid = binding.spec.resource.uid
    pod_rows = sorted(
        (
            pod_row(member, pod, now)
            for member, pod in pods
            if ((pod.get("metadata") or {}).get("labels") or {}).get(c.FLEET_UID_LABEL) == uid
        ),
        key=lambda p: (p["member"], str(p["name"])),
    )
    components = binding.spec.gang.components
    resource = binding.spec.resource
    adapter = adapter_for(resource.api_version, resource.kind)
    replicas = (
        [
            p.removeprefix(resource.name + "-")
            for p in replica_pods(adapter, resource.name, components)
        ]
        if adapter is not None and adapter.names_pods
        else [str(p["name"]) for p in pod_rows]
    )
    return {
        **row,
        "uid": uid,
        "gang": [
            {"name": comp.name, "replicas": comp.replicas, "requests": comp.requests or {}}
            for comp in components
        ],
        "minMember": binding.spec.gang.min_member,
        "conditions": [cond.to_dict() for cond in (status.conditions if status else None) or []],
        "placements": [p.to_dict() for p in (status.placement_history if status else None) or []],
        "failoverHistory": [
            f.to_dict() for f in (status.failover_history if status else None) or []
        ],
        "excluded": [e.to_dict() for e in (status.excluded_clusters if status else None) or []],
        "pendingReasons": pending,
        # Every member's code counted (pendingReasons names only the closest ones).
        "pendingReasonCounts": dict((status.pending_reason_counts if status else None) or {}),
        "factColumns": fact_columns,
        "members": [
            {
                "cluster": item.cluster_name,
                "applied": item.applied,
                "health": item.health,
                "state": (
                    adapter.state(item.status)
                    if adapter is not None and item.status is not None
                    else item.job_state
                ),
                "message": item.applied_message or "",
            }
            for item in (status.aggregated_status if status else None) or []
        ],
        "pods": pod_rows,
        "replicas": replicas,
    }
