"""Which workloads to reconcile when something changes, and the indexes that answer that.

Every event the controller hears (a fleet workload, a binding, a policy, a member's job, a
member's capacity or health) ends here and becomes at most a few keys on the work queue; no
handler decides anything. The indexes (which workloads wait for capacity and what each needs,
which are bound to a member, which left copies in one) are updated by each reconcile from the
binding it wrote.

Each event wakes only what it can help (docs/controller.md, "What wakes what"): a MemberCluster
event only when something placement reads changed (`member_changed`), a member's capacity only
the waiting gangs that member could now hold by its estimator's screen (`capacity_changed`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from fleet.controller.cache import Newest
from fleet.controller.keys import WorkloadKey
from fleet.controller.workqueue import WorkQueue
from fleet.core.estimate import Estimator
from fleet.core.kinds import adapter_for
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang
from fleet.kube import Obj

#: How long a burst of capacity events is gathered into one retry of the waiting workloads.
CAPACITY_COALESCE_SECONDS = 0.2
#: How long a member copy's status changes are gathered into one reconcile (one mirror write):
#: an operator writes a starting job's status several times within a second or two (Created,
#: replica counts as pods appear, Running), and each would be a write of the fleet job and of
#: its binding. Failover's tolerationSeconds dwarf it.
STATUS_COALESCE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Demand:
    """What a waiting gang needs of a member, as its last placement screened members: the gang
    (with its policy's default topology) and the estimator that placed it."""

    gang: Gang
    estimator: Estimator

    def may_fit(self, snapshot: ClusterSnapshot) -> bool:
        """Whether `snapshot` could hold the gang: the estimator's screen, which never rejects
        a member its full check would accept, so a member it rejects cannot take the gang."""
        return self.estimator.screen(self.gang, snapshot) is None

    @property
    def key(self) -> tuple[object, ...]:
        """What the screen's verdict depends on (as placement memoizes it): gangs with equal
        keys get equal verdicts on a member."""
        gang = self.gang
        return (self.estimator.name, gang.demand_key, gang.topology)


class Waiting(NamedTuple):
    """A workload waiting for capacity: since when (monotonic), and what it needs (None: not
    known, or not only capacity; any member's news wakes it)."""

    since: float
    demand: Demand | None


class Triggers:
    """Event routing for one controller replica (also the member registry's listener)."""

    def __init__(self, queue: WorkQueue[WorkloadKey]) -> None:
        self.queue = queue
        #: Every workload seen on the fleet, so a new policy can pick up existing jobs.
        self.known: set[WorkloadKey] = set()
        #: Workloads waiting for capacity, with when they started waiting (retried oldest first)
        #: and what they need (a member's capacity wakes only those it could now hold).
        self.pending: dict[WorkloadKey, Waiting] = {}
        #: Workload -> the member it is bound to, so a member's news reaches its workloads.
        self.placed: dict[WorkloadKey, str] = {}
        #: Workload -> members holding a copy it left behind that is still to be purged.
        self.evicting: dict[WorkloadKey, frozenset[str]] = {}
        #: Newest copies of workloads and their bindings (watch events and our own writes).
        self.workloads: Newest[WorkloadKey] = Newest()
        self.bindings: Newest[WorkloadKey] = Newest()
        #: Told when a member goes NotReady or leaves (the queue gives up room held there).
        self.member_lost: Callable[[str], None] | None = None
        #: Told when a member turns Ready (the collector fences it before anything is placed).
        self.member_ready: Callable[[str], None] | None = None
        #: A member's snapshot as placement would read it now (its expired reservations
        #: dropped); None: no such member. Unset: every waiting gang is woken.
        self.room: Callable[[str], ClusterSnapshot | None] | None = None
        #: What placement reads of each MemberCluster, as last seen (see member_changed).
        self._members: dict[str, str] = {}
        #: Members whose capacity changed since the coalesced wake was scheduled.
        self._capacity_changed: set[str] = set()
        #: News that may let a waiting gang in, numbered: the number of the last (`news`),
        #: of each member's last capacity change, and of the last news about any member (one
        #: joined, turned Ready, changed what placement reads). A decision that found no room
        #: remembers the number it started at; news in between, which found the gang not yet
        #: waiting and so woke nothing, wakes it when it is recorded as waiting (`track`).
        self.news = 0
        self._capacity_news: dict[str, int] = {}
        self._any_news = 0
        #: What each workload's decision-relevant fields last were (see workload_changed).
        self._fingerprints: dict[WorkloadKey, tuple[object, ...]] = {}
        self._capacity_scheduled = False

    # -- fleet events ---------------------------------------------------------------------------

    def workload_changed(self, obj: Obj, *, deleted: bool = False) -> None:
        """A fleet workload event. A change to its status alone is fleet's own mirror write and
        needs no reconcile; everything a decision reads (spec, labels, annotations, finalizers,
        deletion) does."""
        key = WorkloadKey.of(obj)
        if deleted:
            self.workloads.drop(key)
            self.queue.add(key)
            return
        self.workloads.offer(key, obj)
        self.known.add(key)
        fingerprint = _fingerprint(obj)
        deleting = (obj.get("metadata") or {}).get("deletionTimestamp")
        if self._fingerprints.get(key) == fingerprint and not deleting:
            return
        self._fingerprints[key] = fingerprint
        self.queue.add(key)

    def wrote_workload(self, obj: Obj) -> None:
        """fleet itself wrote this version (its finalizer, its claim): the echo of that write
        needs no reconcile."""
        key = WorkloadKey.of(obj)
        self.workloads.offer(key, obj)
        self._fingerprints[key] = _fingerprint(obj)

    def binding_changed(self, key: WorkloadKey, obj: Obj, *, deleted: bool = False) -> None:
        """Keep the binding cache current (another replica, or a person, may write bindings)."""
        if deleted:
            self.bindings.drop(key)
        else:
            self.bindings.offer(key, obj)

    def needed_changed(self, api_version: str, kind: str, namespace: str | None) -> None:
        """An object some kind reads its gang from changed (a TrainJob's runtime): that kind's
        workloads in its namespace (all, for a cluster-scoped one) are looked at again, so a
        workload refused for want of it goes on once it exists."""
        for key in list(self.known):
            adapter = adapter_for(key.api_version, key.kind)
            if adapter is None or (api_version, kind) not in adapter.needs_kinds:
                continue
            if namespace is None or key.namespace == namespace:
                self.queue.add(key)

    def policies_changed(self, keys: Iterable[WorkloadKey] | None = None) -> None:
        """A policy changed: every workload it may govern is looked at again (binding, claim,
        preemption and the placement kept in its binding all follow the policy)."""
        for key in self.known if keys is None else keys:
            self.queue.add(key)

    # -- member events (MemberListener) ----------------------------------------------------------

    def job_changed(self, member: str, event: str, obj: Obj) -> None:
        """A member copy changed: a deleted copy is seen to at once, status changes are
        gathered for `STATUS_COALESCE_SECONDS` first (the mirror reads the newest copy)."""
        key = WorkloadKey.of(obj)
        if event == "MODIFIED":
            self.queue.add_after(key, STATUS_COALESCE_SECONDS)
        else:
            self.queue.add(key)

    def gang_pods_refused(self, member: str, uid: str) -> None:
        """The member's scheduler began (or ceased) refusing pods of the gang whose fleet UID is
        `uid`: the workload bound there with that UID is judged again, gathered like a copy's
        status change (its gang-start clock starts or clears, `failover.judge`)."""
        for key in self.placed_on(member):
            workload = self.workloads.get(key)
            if workload is not None and (workload.get("metadata") or {}).get("uid") == uid:
                self.queue.add_after(key, STATUS_COALESCE_SECONDS)
                return

    def member_changed(self, obj: Obj, *, deleted: bool = False) -> None:
        """A MemberCluster event (after the registry synced it). Only a change to what placement
        reads (its labels, its spec: taints, id, gangScheduler, schedulerName, reservation,
        kubeconfigSecretRef; the gang scheduler its status records; its deletion) or a new
        member wakes anything: the gangs bound there are judged again (taints) and every
        waiting gang is retried (labels, taints, a new member may let any of them in). fleet's
        own status writes change none of it and wake nothing."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if deleted:
            self._members.pop(name, None)
            self._capacity_news.pop(name, None)
        else:
            fingerprint = _member_fingerprint(obj)
            if self._members.get(name) == fingerprint:
                return
            self._members[name] = fingerprint
        for key in self.placed_on(name):
            self.queue.add(key)
        self.retry_pending()

    def health_changed(self, member: str, ready: bool) -> None:
        """The gangs bound to `member` or leaving copies there are looked at again; when it
        turns Ready, every waiting gang too (it may hold any of them). A member that goes
        NotReady (or leaves) can take no gang, so it wakes no waiting one."""
        if not ready and self.member_lost is not None:
            self.member_lost(member)
        if ready and self.member_ready is not None:
            self.member_ready(member)
        for key, cluster in list(self.placed.items()):
            if cluster == member:
                self.queue.add(key)
        for key, clusters in list(self.evicting.items()):
            if member in clusters:
                self.queue.add(key)
        if ready:
            self.retry_pending()

    def capacity_changed(self, member: str) -> None:
        """Coalesce a burst of a member's pod and node events (and its other news: a kind
        found, its gang scheduler detected, fenced) into one wake, `CAPACITY_COALESCE_SECONDS`
        later, of the waiting workloads one of the changed members could then hold."""
        self.news += 1
        self._capacity_news[member] = self.news
        if not self.pending:
            return
        self._capacity_changed.add(member)
        if self._capacity_scheduled:
            return
        self._capacity_scheduled = True

        def fire() -> None:
            self._capacity_scheduled = False
            changed, self._capacity_changed = self._capacity_changed, set()
            self.wake_for(changed)

        asyncio.get_running_loop().call_later(CAPACITY_COALESCE_SECONDS, fire)

    def wake_for(self, members: Iterable[str]) -> None:
        """Retry, oldest first, each waiting workload that one of `members` could now hold
        (`Demand.may_fit`): news of a member can place a gang only there. A workload whose
        demand is not known is retried whatever the members hold."""
        if self.room is None:
            self.retry_pending()
            return
        rooms = [room for name in sorted(set(members)) if (room := self.room(name)) is not None]
        # Waiting gangs of one demand get one verdict: a wake costs a screen per distinct
        # demand and member, and a lookup per waiting gang.
        verdicts: dict[tuple[object, ...], bool] = {}
        for key, waiting in sorted(self.pending.items(), key=lambda kv: kv[1].since):
            demand = waiting.demand
            if demand is None:
                self.queue.add(key)
                continue
            verdict = verdicts.get(demand.key)
            if verdict is None:
                verdict = verdicts[demand.key] = any(demand.may_fit(room) for room in rooms)
            if verdict:
                self.queue.add(key)

    def retry_pending(self) -> None:
        self.news += 1
        self._any_news = self.news
        for key, _ in sorted(self.pending.items(), key=lambda kv: kv[1].since):
            self.queue.add(key)

    def placed_on(self, member: str) -> list[WorkloadKey]:
        """Workloads bound to `member` (a member's taints changed, say)."""
        return [key for key, cluster in self.placed.items() if cluster == member]

    # -- indexes, from what each reconcile wrote ---------------------------------------------------

    def track(
        self,
        key: WorkloadKey,
        *,
        cluster: str | None,
        evicting: Iterable[str] = (),
        waiting_since: float | None = None,
        demand: Demand | None = None,
        news_seen: int | None = None,
    ) -> None:
        """Record where a workload stands after a reconcile: with `waiting_since`, it waits for
        capacity, needing `demand` (None: unknown, any member's capacity wakes it). `news_seen`:
        `news` when the decision that found no room began; what came since, and could hold the
        gang, wakes it (it came while the gang was not yet waiting), coalesced as that wake
        would have been."""
        if cluster is None:
            self.placed.pop(key, None)
        else:
            self.placed[key] = cluster
        left = frozenset(evicting)
        if left:
            self.evicting[key] = left
        else:
            self.evicting.pop(key, None)
        if waiting_since is None:
            self.pending.pop(key, None)
        else:
            before = self.pending.get(key)
            since = before.since if before is not None else waiting_since
            self.pending[key] = Waiting(since, demand)
            if news_seen is not None and self._missed(news_seen, demand):
                # As the wake it missed would have: after the same coalescing delay, so a
                # member whose capacity changes all the time cannot retry a gang back to back.
                self.queue.add_after(key, CAPACITY_COALESCE_SECONDS)

    def _missed(self, seen: int, demand: Demand | None) -> bool:
        """Whether news numbered after `seen` may let a gang of `demand` in."""
        if seen >= self.news:
            return False
        if self._any_news > seen or demand is None or self.room is None:
            return True
        changed = [m for m, at in self._capacity_news.items() if at > seen]
        rooms = [room for name in changed if (room := self.room(name)) is not None]
        return any(demand.may_fit(room) for room in rooms)

    def forget(self, key: WorkloadKey) -> None:
        """The workload is gone: drop it from every index and cache."""
        self.known.discard(key)
        self.pending.pop(key, None)
        self.placed.pop(key, None)
        self.evicting.pop(key, None)
        self._fingerprints.pop(key, None)
        self.workloads.drop(key)
        self.bindings.drop(key)
        self.queue.forget(key)


def _fingerprint(obj: Obj) -> tuple[object, ...]:
    """What a workload's decisions read besides its status."""
    meta = obj.get("metadata") or {}
    return (
        meta.get("uid"),
        meta.get("generation"),
        meta.get("deletionTimestamp"),
        tuple(meta.get("finalizers") or ()),
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted((meta.get("annotations") or {}).items())),
    )


def _member_fingerprint(obj: Obj) -> str:
    """What placement reads of a MemberCluster: its identity, labels, spec and deletion, and
    the gang scheduler its status records (read until the member's own probe answers). Not the
    rest of its status (fleet's own writes), nor its resourceVersion."""
    meta = obj.get("metadata") or {}
    return json.dumps(
        [
            meta.get("uid"),
            meta.get("deletionTimestamp"),
            meta.get("labels") or {},
            obj.get("spec") or {},
            (obj.get("status") or {}).get("gangScheduler"),
        ],
        sort_keys=True,
        default=str,
    )
