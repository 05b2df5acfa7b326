"""`kubectl amc describe`: a fleet job, its GangBinding and its member copy, in one view.

What a user otherwise pieces together from three `kubectl describe`s against two clusters:
the fleet object (its conditions and events), the binding fleet keeps for it (where it runs,
its phase, every placement and failover, the clusters it must avoid, old copies still to
remove, and why each other cluster was rejected), and the copy in the member (its state,
conditions, pods and recent events there).

Gathering asks the servers; rendering (`render`) is pure, with the time passed in.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from fleet.amc.adoption import managed_by
from fleet.amc.errors import EXIT_INCOMPLETE, EXIT_OK, AmcError, MemberUnavailable, warn
from fleet.amc.members import Fleet
from fleet.amc.output import NONE, age, cell, columns, fields
from fleet.api import GangBinding, GangBindingStatus, binding_name
from fleet.api import constants as c
from fleet.core.kinds import adapter_for
from fleet.kube import KubeError, NotFound, Obj, Resource, SyncKubeClient

#: Pod events shown at most (the newest): a large job's pods can have hundreds.
POD_EVENTS: Final = 15
INDENT: Final = "  "


@dataclass
class MemberSide:
    """What the member holding the job says about its copy."""

    cluster: str
    copy: Obj | None = None
    pods: Obj | None = None
    events: list[Obj] = field(default_factory=list)
    pod_events: list[Obj] = field(default_factory=list)
    #: Why (part of) this could not be read; the rest is shown.
    problem: str | None = None


@dataclass
class Description:
    """Everything `describe` shows, gathered."""

    resource: Resource
    obj: Obj
    events: list[Obj] = field(default_factory=list)
    binding_name: str = ""
    binding: GangBinding | None = None
    #: Why there is no binding to show (none yet, or it does not parse).
    binding_note: str | None = None
    member: MemberSide | None = None


# -- gathering --------------------------------------------------------------------------------


def _events(client: SyncKubeClient, namespace: str | None, selector: str) -> list[Obj]:
    listing = client.list("v1", "Event", namespace, field_selector=selector)
    return list(listing.get("items") or [])


def _owned_by(row: Mapping[str, Any], uid: str) -> bool:
    refs = ((row.get("object") or {}).get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


def _fill_member_side(
    side: MemberSide, client: SyncKubeClient, res: Resource, name: str, ns: str | None
) -> None:
    """The copy, its events, its pods and theirs, as far as the member answers (the caller
    records why it stopped)."""
    side.copy = client.get(res.api_version, res.kind, name, ns)
    if side.copy is None:
        return
    uid = side.copy["metadata"]["uid"]
    side.events = _events(client, ns, f"involvedObject.uid={uid}")
    pods = client.table(client.resource("v1", "Pod"), ns)
    rows = [row for row in (pods or {}).get("rows") or [] if _owned_by(row, uid)]
    side.pods = {**(pods or {}), "rows": rows}
    pod_uids = {((row.get("object") or {}).get("metadata") or {}).get("uid") for row in rows}
    if pod_uids:
        side.pod_events = [
            e
            for e in _events(client, ns, "involvedObject.kind=Pod")
            if (e.get("involvedObject") or {}).get("uid") in pod_uids
        ]


def gather(fleet: Fleet, word: str, name: str, namespace: str) -> Description:
    api = fleet.client
    try:
        res = api.lookup(word)
    except NotFound:
        raise AmcError(f"the fleet serves no resource type {word!r}") from None
    ns = namespace if res.namespaced else None
    obj = api.get(res.api_version, res.kind, name, ns)
    if obj is None:
        where = f" in namespace {ns}" if ns else ""
        raise AmcError(f'{res.kind} "{name}"{where} not found on the fleet')
    view = Description(res, obj, binding_name=binding_name(res.kind, name))
    view.events = _events(api, ns, f"involvedObject.uid={obj['metadata']['uid']}")
    try:
        raw = api.get(c.FLEET_API_VERSION, "GangBinding", view.binding_name, ns)
    except NotFound:
        raw = None  # fleet's CRDs are not installed: nothing was ever bound
    if raw is None:
        view.binding_note = "none: no Gang PropagationPolicy has claimed the job yet"
        return view
    try:
        view.binding = GangBinding.from_dict(raw)
    except ValidationError as e:
        view.binding_note = f"cannot be read: {e.errors()[0]['msg']}"
        return view
    target = view.binding.target_cluster
    if target is None:
        return view
    view.member = side = MemberSide(target)
    try:
        _fill_member_side(side, fleet.connect(target), res, name, ns)
    except MemberUnavailable as e:
        side.problem = e.problem.message
    except KubeError as e:
        side.problem = str(e)
    return view


# -- rendering (pure) -------------------------------------------------------------------------


def _section(title: str, header: Sequence[str], rows: list[list[str]], indent: str) -> str:
    if not rows:
        return f"{indent}{title}:  {NONE}"
    return f"{indent}{title}:\n" + columns(header, rows, indent + INDENT)


def _pending_title(status: GangBindingStatus) -> str:
    """`Pending reasons`, and when the binding names only the closest clusters, how many it
    counted per code: `Pending reasons (10 closest of 1000: Insufficient 700, ...)`."""
    listed = len(status.pending_reasons or [])
    counts = status.pending_reason_counts or {}
    total = sum(counts.values())
    if total <= listed:
        return "Pending reasons"
    per_code = ", ".join(f"{code} {n}" for code, n in counts.items())
    return f"Pending reasons ({listed} closest of {total}: {per_code})"


def _conditions(conditions: Iterable[Mapping[str, Any]], now: datetime, indent: str) -> str:
    rows = [
        [
            str(cond.get("type") or ""),
            str(cond.get("status") or ""),
            str(cond.get("reason") or ""),
            age(cond.get("lastTransitionTime") or cond.get("lastUpdateTime"), now),
            str(cond.get("message") or ""),
        ]
        for cond in conditions
    ]
    return _section("Conditions", ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], rows, indent)


def _event_age(event: Mapping[str, Any], now: datetime) -> str:
    last = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
    count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
    if count > 1:
        first = event.get("firstTimestamp") or event.get("eventTime") or last
        return f"{age(last, now)} (x{count} over {age(first, now)})"
    return age(last, now)


def _event_time(event: Mapping[str, Any]) -> str:
    return str(
        event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or ""
    )


def _event_source(event: Mapping[str, Any]) -> str:
    source = event.get("source") or {}
    return str(
        source.get("component")
        or event.get("reportingComponent")
        or event.get("reportingController")
        or ""
    )


def _events_section(
    title: str, events: Iterable[Mapping[str, Any]], now: datetime, indent: str, *, objects: bool
) -> str:
    ordered = sorted(events, key=_event_time)
    rows = []
    for e in ordered:
        row = [str(e.get("type") or ""), str(e.get("reason") or ""), _event_age(e, now)]
        if objects:
            row.append(str((e.get("involvedObject") or {}).get("name") or ""))
        row += [_event_source(e), " ".join(str(e.get("message") or "").split())]
        rows.append(row)
    header = ["TYPE", "REASON", "AGE", *(["OBJECT"] if objects else []), "FROM", "MESSAGE"]
    return _section(title, header, rows, indent)


def _fleet_part(view: Description, now: datetime) -> list[str]:
    meta = view.obj.get("metadata") or {}
    status = view.obj.get("status") or {}
    res = view.resource
    created = meta.get("creationTimestamp")
    claimed = (meta.get("annotations") or {}).get(c.POLICY_ANNOTATION)
    out = [
        fields(
            [
                ("Name", meta.get("name")),
                ("Namespace", meta.get("namespace")),
                ("Kind", f"{res.kind} ({res.api_version})"),
                ("Created", f"{created} ({age(created, now)} ago)" if created else None),
                ("Claimed by", claimed),
                ("State (fleet)", _state(res, status)),
            ]
        ),
        _conditions(status.get("conditions") or [], now, ""),
        _events_section("Events (fleet)", view.events, now, "", objects=False),
    ]
    return out


def _failover_settings(binding: GangBinding) -> str | None:
    failover = binding.spec.failover
    if failover is None:
        return "off (the policy sets no failover)"
    parts = [f"after {failover.toleration_seconds}s", f"purge {failover.purge_mode}"]
    if failover.max_failovers is not None:
        parts.append(f"at most {failover.max_failovers}")
    if failover.cluster_exclusion_seconds is not None:
        parts.append(f"clusters excluded for {failover.cluster_exclusion_seconds}s")
    return ", ".join(parts)


def _timers(binding: GangBinding, now: datetime) -> list[tuple[str, str]]:
    """The failover clocks that are running: how long the copy has been unhealthy, its
    cluster lost or tainted (the binding keeps them so a restart does not reset them)."""
    status = binding.status
    if status is None:
        return []
    running = [
        ("Unhealthy since", status.unhealthy_since),
        ("Cluster lost since", status.cluster_lost_since),
        ("Tainted since", status.tainted_since),
    ]
    return [(label, f"{age(since, now)} ago") for label, since in running if since is not None]


def _requests(requests: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((requests or {}).items())) or NONE


def _binding_part(view: Description, now: datetime) -> list[str]:
    head = f"GangBinding:  {view.binding_name}"
    binding = view.binding
    if binding is None:
        return [f"{head} ({view.binding_note})"]
    status = binding.status
    spec = binding.spec
    policy = spec.policy
    failovers = (status.failover_count if status else None) or 0
    out = [
        head,
        fields(
            [
                ("Cluster", binding.target_cluster),
                ("Phase", status.phase if status else None),
                (
                    "Policy",
                    f"{policy.kind} "
                    + (f"{policy.namespace}/{policy.name}" if policy.namespace else policy.name),
                ),
                ("Affinity group", status.scheduler_observed_affinity_name if status else None),
                ("Failovers", failovers),
                ("Failover", _failover_settings(binding)),
                *_timers(binding, now),
            ],
            INDENT,
        ),
        _section(
            f"Gang (minMember {spec.gang.min_member})",
            ["ROLE", "PODS", "REQUESTS EACH"],
            [[g.name, str(g.replicas), _requests(g.requests)] for g in spec.gang.components],
            INDENT,
        ),
    ]
    if status is None:
        return out
    out += [
        _section(
            "Placement history",
            ["CLUSTER", "PLACED", "LEFT", "REASON"],
            [
                [
                    p.cluster,
                    f"{age(p.placed_at, now)} ago",
                    f"{age(p.removed_at, now)} ago" if p.removed_at else "-",
                    p.reason or "",
                ]
                for p in status.placement_history or []
            ],
            INDENT,
        ),
        _section(
            "Failover history",
            ["FROM", "REASON", "WHEN"],
            [
                [f.from_cluster, f.reason, f"{age(f.time, now)} ago"]
                for f in status.failover_history or []
            ],
            INDENT,
        ),
        _section(
            "Excluded clusters",
            ["CLUSTER", "UNTIL", "REASON"],
            [
                [
                    e.name,
                    e.until.strftime("%Y-%m-%dT%H:%M:%SZ") if e.until else "for good",
                    e.reason or "",
                ]
                for e in status.excluded_clusters or []
            ],
            INDENT,
        ),
        _section(
            "Evictions pending",
            ["FROM", "REASON", "PURGE", "SINCE", "GRACE", "MESSAGE"],
            [
                [
                    t.from_cluster,
                    t.reason,
                    t.purge_mode or "",
                    f"{age(t.creation_timestamp, now)} ago" if t.creation_timestamp else "-",
                    f"{t.grace_period_seconds}s" if t.grace_period_seconds is not None else "-",
                    t.message or "",
                ]
                for t in spec.graceful_eviction_tasks or []
            ],
            INDENT,
        ),
        _section(
            _pending_title(status),
            ["CLUSTER", "CODE", "REASON"],
            [[p.cluster, p.code or "", p.reason] for p in status.pending_reasons or []],
            INDENT,
        ),
        _section(
            "Member status",
            ["CLUSTER", "APPLIED", "HEALTH", "STATE", "MESSAGE"],
            [
                [
                    a.cluster_name,
                    {True: "True", False: "False", None: "-"}[a.applied],
                    a.health or "-",
                    a.job_state or "-",
                    a.applied_message or "",
                ]
                for a in status.aggregated_status or []
            ],
            INDENT,
        ),
        _conditions((cond.to_dict() for cond in status.conditions or []), now, INDENT),
    ]
    return out


def _state(res: Resource, status: Mapping[str, Any]) -> str:
    """The state word the kind's adapter reads from a status (`-` for a kind fleet does not
    dispatch)."""
    adapter = adapter_for(res.api_version, res.kind)
    return adapter.state(status) if adapter is not None else "-"


def _replica_statuses(status: Mapping[str, Any]) -> str | None:
    replicas = status.get("replicaStatuses") or {}
    parts = []
    for role, counts in replicas.items():
        numbers = [f"{k} {v}" for k, v in (counts or {}).items() if isinstance(v, int) and v]
        parts.append(f"{role}: {', '.join(numbers) or '-'}")
    return "; ".join(parts) or None


def _member_part(view: Description, now: datetime) -> list[str]:
    binding = view.binding
    if binding is None:
        return []
    side = view.member
    if side is None:
        phase = binding.status.phase if binding.status else None
        return [f"Member copy:  {NONE} (not placed yet; phase {phase or 'Pending'})"]
    head = f"Member copy:  {side.cluster}"
    if side.copy is None:
        if side.problem:
            return [f"{head} (cannot be read: {side.problem})"]
        return [f"{head} (not there yet)"]
    meta = side.copy.get("metadata") or {}
    status = side.copy.get("status") or {}
    out = [
        head,
        fields(
            [
                ("Managed by", managed_by(meta) or "nobody (not a fleet's copy)"),
                ("State", _state(view.resource, status)),
                ("Replicas", _replica_statuses(status)),
                ("Started", status.get("startTime")),
                ("Completed", status.get("completionTime")),
            ],
            INDENT,
        ),
        _conditions(status.get("conditions") or [], now, INDENT),
    ]
    pods = side.pods or {}
    definitions = list(pods.get("columnDefinitions") or [])
    keep = [i for i, col in enumerate(definitions) if col.get("name") in _POD_COLUMNS]
    rows = [
        [cell((row.get("cells") or [])[i], definitions[i], now) for i in keep]
        for row in pods.get("rows") or []
    ]
    header = [str(definitions[i].get("name") or "").upper() for i in keep]
    out.append(_section("Pods", header, rows, INDENT))
    out.append(_events_section("Events", side.events, now, INDENT, objects=False))
    newest = sorted(side.pod_events, key=_event_time)[-POD_EVENTS:]
    title = "Pod events" + (f" (newest {POD_EVENTS})" if len(side.pod_events) > POD_EVENTS else "")
    out.append(_events_section(title, newest, now, INDENT, objects=True))
    if side.problem:
        out.append(f"{INDENT}(incomplete: {side.problem})")
    return out


#: Columns of the member's pod table worth a place in describe (kubectl's names).
_POD_COLUMNS: Final = ("Name", "Ready", "Status", "Restarts", "Age", "Node")


def render(view: Description, now: datetime) -> str:
    parts = [*_fleet_part(view, now), "", *_binding_part(view, now)]
    member = _member_part(view, now)
    if member:
        parts += ["", *member]
    return "\n".join(parts)


def run(fleet: Fleet, word: str, name: str, namespace: str, now: datetime) -> int:
    view = gather(fleet, word, name, namespace)
    sys.stdout.write(render(view, now) + "\n")
    if view.member is not None and view.member.problem:
        warn(view.member.problem)
        return EXIT_INCOMPLETE
    return EXIT_OK
