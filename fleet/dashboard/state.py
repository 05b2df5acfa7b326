"""What the dashboard's watches have seen: the fleet's objects and, per member, its capacity,
fleet's pods and its Reservations. Folding an event in is pure (no I/O); every change bumps
`version` and wakes the event streams, which tell the pages to fetch their view again.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from fleet.api import constants as c
from fleet.core.errors import ObjectError
from fleet.core.inventory import node_from_k8s, pod_from_k8s
from fleet.core.snapshot import ClusterSnapshot

Obj = dict[str, Any]

#: The fleet kinds the dashboard shows, by the name its views use.
MEMBER_CLUSTER = (c.FLEET_API_VERSION, "MemberCluster")
GANG_BINDING = (c.FLEET_API_VERSION, "GangBinding")
QUOTA_TREE = (c.ELASTIC_QUOTA_API_VERSION, "ElasticQuotaTree")
QUEUE = (c.QUEUE_API_VERSION, "Queue")
QUEUE_UNIT = (c.QUEUE_API_VERSION, "QueueUnit")
FLEET_KINDS = (MEMBER_CLUSTER, GANG_BINDING, QUOTA_TREE, QUEUE, QUEUE_UNIT)
RESERVATION = ("scheduling.koordinator.sh/v1alpha1", "Reservation")
#: The member watches whose failure makes the member unreachable on the page.
CAPACITY_RESOURCES = ("Node", "Pod")


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


@dataclass
class MemberLive:
    """One member as the dashboard's own watches see it (with the user's credentials)."""

    name: str
    snapshot: ClusterSnapshot
    #: None until the first list answered or failed; then whether the member answers.
    reachable: bool | None = None
    problem: str = ""
    #: Nodes that could not be read, by name: why.
    node_errors: dict[str, str] = field(default_factory=dict)
    #: Pods of fleet's copies (they carry the fleet-UID label), by namespace/name.
    pods: dict[str, Obj] = field(default_factory=dict)
    #: Reservations by name; None where they are not watched (not a Koordinator member).
    reservations: dict[str, Obj] | None = None
    #: Resources (Node, Pod, Reservation) whose watch fails, refusals included: why.
    watch_problems: dict[str, str] = field(default_factory=dict)

    @classmethod
    def new(cls, name: str) -> MemberLive:
        return cls(name, ClusterSnapshot(name))


class State:
    """Every object the pages are built from; one per dashboard process."""

    def __init__(self) -> None:
        self.fleet: dict[tuple[str, str], dict[str, Obj]] = {kind: {} for kind in FLEET_KINDS}
        #: Fleet kinds whose watch fails (not served, forbidden): why.
        self.fleet_problems: dict[tuple[str, str], str] = {}
        self.members: dict[str, MemberLive] = {}
        self.version = 0
        #: Set (and replaced) on every change: what an event stream waits on.
        self._changed = asyncio.Event()

    # -- folding events in ------------------------------------------------------------------

    def fleet_event(self, kind: tuple[str, str], event: str, obj: Obj) -> None:
        store = self.fleet.setdefault(kind, {})
        if event == "DELETED":
            store.pop(object_key(obj), None)
        else:
            store[object_key(obj)] = obj
        self.bump()

    def fleet_health(self, kind: tuple[str, str], ok: bool, why: str) -> None:
        if ok:
            self.fleet_problems.pop(kind, None)
        else:
            self.fleet_problems[kind] = why
        self.bump()

    def member(self, name: str) -> MemberLive:
        live = self.members.get(name)
        if live is None:
            live = self.members[name] = MemberLive.new(name)
        return live

    def reset_member(self, name: str) -> MemberLive:
        """A member's watched state from scratch (its watches start over)."""
        live = self.members[name] = MemberLive.new(name)
        self.bump()
        return live

    def forget_member(self, name: str) -> None:
        self.members.pop(name, None)
        self.bump()

    def node_event(self, member: str, event: str, obj: Obj) -> None:
        live = self.member(member)
        name = str((obj.get("metadata") or {}).get("name") or "")
        live.node_errors.pop(name, None)
        if event == "DELETED":
            live.snapshot.remove_node(name)
        else:
            try:
                live.snapshot.upsert_node(node_from_k8s(obj))
            except ObjectError as e:
                live.snapshot.remove_node(name)
                live.node_errors[name] = str(e)
        self.bump()

    def pod_event(self, member: str, event: str, obj: Obj) -> None:
        live = self.member(member)
        meta = obj.get("metadata") or {}
        key = object_key(obj)
        if event == "DELETED":
            live.snapshot.remove_pod(str(meta.get("uid") or ""))
            live.pods.pop(key, None)
        else:
            try:
                live.snapshot.upsert_pod(pod_from_k8s(obj, owner_label=c.FLEET_UID_LABEL))
            except ObjectError:
                live.snapshot.remove_pod(str(meta.get("uid") or ""))
            if c.FLEET_UID_LABEL in (meta.get("labels") or {}):
                live.pods[key] = obj
        self.bump()

    def reservation_event(self, member: str, event: str, obj: Obj) -> None:
        live = self.member(member)
        if live.reservations is None:
            live.reservations = {}
        if event == "DELETED":
            live.reservations.pop(object_key(obj), None)
        else:
            live.reservations[object_key(obj)] = obj
        self.bump()

    def watch_health(self, member: str, resource: str, ok: bool, why: str) -> None:
        """One of a member's watches (`resource`: Node, Pod, Reservation) works or not (a
        refusal says "refused: 403 ..."). The member is reachable while its Node and Pod
        watches work; a refused Reservation watch is shown on its own."""
        live = self.member(member)
        before = live.watch_problems.get(resource)
        if ok:
            live.watch_problems.pop(resource, None)
        else:
            live.watch_problems[resource] = why
        if resource in CAPACITY_RESOURCES:
            problems = [
                live.watch_problems[r] for r in CAPACITY_RESOURCES if r in live.watch_problems
            ]
            self.member_health(member, not problems, "; ".join(f"{member}: {p}" for p in problems))
        if live.watch_problems.get(resource) != before:
            self.bump()

    def member_health(self, member: str, ok: bool, why: str) -> None:
        live = self.member(member)
        if (live.reachable, live.problem) != (ok, why):
            live.reachable, live.problem = ok, why
            self.bump()

    # -- telling the pages ---------------------------------------------------------------------

    def bump(self) -> None:
        self.version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_past(self, version: int, timeout: float) -> int:
        """The version once it is past `version` (or the same one after `timeout` seconds)."""
        if self.version <= version:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
        return self.version
