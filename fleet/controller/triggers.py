"""Which workloads to reconcile when something changes, and the indexes that answer that.

Every event the controller hears (a fleet workload, a binding, a policy, a member's job, a
member's capacity or health) ends here and becomes at most a few keys on the work queue; no
handler decides anything. The indexes (which workloads wait for capacity, which are bound to a
member, which left copies in one) are updated by each reconcile from the binding it wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from fleet.controller.cache import Newest
from fleet.controller.keys import WorkloadKey
from fleet.controller.workqueue import WorkQueue
from fleet.core.kinds import adapter_for
from fleet.kube import Obj

#: How long a burst of capacity events is gathered into one retry of the waiting workloads.
CAPACITY_COALESCE_SECONDS = 0.2
#: How long a member copy's status changes are gathered into one reconcile (one mirror write):
#: an operator writes a starting job's status several times within a second or two (Created,
#: replica counts as pods appear, Running), and each would be a write of the fleet job and of
#: its binding. Failover's tolerationSeconds dwarf it.
STATUS_COALESCE_SECONDS = 1.0


class Triggers:
    """Event routing for one controller replica (also the member registry's listener)."""

    def __init__(self, queue: WorkQueue[WorkloadKey]) -> None:
        self.queue = queue
        #: Every workload seen on the fleet, so a new policy can pick up existing jobs.
        self.known: set[WorkloadKey] = set()
        #: Workloads waiting for capacity, with when they started waiting (retried oldest first).
        self.pending: dict[WorkloadKey, float] = {}
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

    def health_changed(self, member: str, ready: bool) -> None:
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
        self.retry_pending()

    def capacity_changed(self, member: str) -> None:
        """Coalesce a burst of pod and node events into one retry of the waiting workloads."""
        if self._capacity_scheduled or not self.pending:
            return
        self._capacity_scheduled = True

        def fire() -> None:
            self._capacity_scheduled = False
            self.retry_pending()

        asyncio.get_running_loop().call_later(CAPACITY_COALESCE_SECONDS, fire)

    def retry_pending(self) -> None:
        for key, _ in sorted(self.pending.items(), key=lambda kv: kv[1]):
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
    ) -> None:
        """Record where a workload stands after a reconcile."""
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
            self.pending.setdefault(key, waiting_since)

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
