"""A member cluster's free capacity, kept up to date event by event.

Why this shape. A decision must look at every member cluster in milliseconds, and a cluster can
have thousands of nodes. Nodes are therefore folded into *shape groups*: nodes with the same
scheduling signature (labels minus per-node identity labels, taints, cordon flag) and the same
free vector are interchangeable for placement, so the estimator reasons about a group once, with
a count. Groups are indexed per signature by the free amount of the cluster's accelerator
resource, so a gang of 8-GPU workers only ever looks at groups with 8 GPUs free. On top sit
per-cluster aggregates (total free, a histogram of free amounts per resource) that reject most
clusters without touching a group.

Where each concept lives: the signatures and shape groups in `fleet.core.shapes`; the topology
index (per level, per domain: nodes, free totals, per-pod capacities, best-fit order) in
`fleet.core.levels`; this module keeps them, the per-cluster aggregates and the in-flight
reservations up to date.

Every update (`upsert_node`, `remove_node`, `upsert_pod`, `remove_pod`) touches one node: O(1)
in the size of the cluster. Pods may arrive before their node; their usage waits under the
node's name.

Memory. A fleet of a thousand clusters of five thousand nodes is five million nodes, so nothing
is stored per node that look-alike nodes can share. A node is its name in two maps (name ->
its shape group, and the group's name -> allocatable); its labels and taints live in its
signature, its allocatable and its pods' requests are shared between equal vectors (`_share`),
and identity labels are kept apart only when they are not simply the node's name (a hostname
label equal to the name, the usual case, costs nothing). A pod is kept only while it holds
resources, as its node, its requests and its owner key. `node()` and `nodes()` rebuild the
`NodeInfo` from these parts.

In-flight placements. The fleet places a gang and only later sees its pods in the member. Until
then `reserve()` subtracts the assignment from the nodes it uses (or from the totals, for an
assignment without nodes), so two gangs placed a moment apart never count the same free GPUs
twice. A reservation shrinks pod by pod as the member shows pods bound that carry its owner key,
and disappears entirely at `expire(now)` after its deadline. Time is always passed in.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from fleet.core.assignment import Assignment
from fleet.core.histogram import Histogram
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.levels import Level
from fleet.core.resources import EMPTY, GPU, Resources
from fleet.core.shapes import ShapeGroup, Signature, _signature_key

#: Labels that are unique per node; kept out of signatures so look-alike nodes still group.
DEFAULT_IDENTITY_LABEL_KEYS = frozenset({"kubernetes.io/hostname"})

#: Topology labels with many values (a rack, an NVLink domain, a network block): kept out of
#: signatures too (with them, nodes of a rack of 8 would rarely share a signature with anyone)
#: and indexed per level instead (`domain_nodes`). A level not listed here still works: its
#: domains are then read from the signatures, at the cost of one signature per domain.
DEFAULT_TOPOLOGY_LABEL_KEYS = frozenset(
    {
        "topology.kubernetes.io/rack",
        "topology.kubernetes.io/block",
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host",
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "nvidia.com/gpu.clique",
    }
)

#: Distinct resource vectors a snapshot remembers for sharing; cleared (not evicted) when full.
_SHARE_LIMIT = 4096
#: Few demands are in flight at once (a sweep is one); a small table keeps the garbage
#: collector's work small at a thousand clusters.
_MEMO_LIMIT = 32


#: How long a placement holds its capacity in a snapshot before the member shows the gang's pods
#: bound (the controller's and the simulator's default in-flight reservation).
DEFAULT_RESERVATION_SECONDS = 120.0


class _Pod(NamedTuple):
    """A pod that holds resources, as placement needs it."""

    node: str
    requests: Resources
    owner: str | None


@dataclass(slots=True)
class Reservation:
    """An in-flight placement: per pod, the node (or None) and what it holds there."""

    key: str
    pods: list[tuple[str | None, Resources]]
    expires_at: float
    seq: int = field(default=0, repr=False)


def _pod_info(uid: str, pod: _Pod) -> PodInfo:
    return PodInfo(uid, "", "", pod.node, pod.requests, owner_key=pod.owner)


class ClusterSnapshot:
    """Free capacity of one member cluster; see the module docstring for the design."""

    def __init__(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        *,
        fields: Mapping[str, str] | None = None,
        accelerator: str = GPU,
        identity_label_keys: frozenset[str] = DEFAULT_IDENTITY_LABEL_KEYS,
        topology_label_keys: frozenset[str] = DEFAULT_TOPOLOGY_LABEL_KEYS,
    ) -> None:
        self.name = name
        self.labels: Mapping[str, str] = dict(labels or {})
        #: Cluster facts a Karmada fieldSelector may test: provider, region, zone.
        self.fields: Mapping[str, str] = dict(fields or {})
        #: The resource groups are indexed by (the scarce one; best fit is judged on it).
        self.accelerator = accelerator
        self.identity_label_keys = identity_label_keys
        self._identity_keys = tuple(sorted(identity_label_keys))
        self.topology_label_keys = topology_label_keys - identity_label_keys
        #: Label keys a signature does not carry: constraints that look at one of them are
        #: judged node by node (`PodConstraints.needs_node_identity`).
        self.per_node_label_keys = identity_label_keys | self.topology_label_keys
        #: Topology labels of the nodes that have any (one shared tuple per distinct set).
        self._topology: dict[str, tuple[tuple[str, str], ...]] = {}
        self._topology_shared: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        #: level -> its domains, kept event by event (`fleet.core.levels`), so domains too
        #: small for a gang are skipped without looking at their nodes.
        self._levels: dict[str, Level] = {}
        #: Bumped on every change that can alter a decision.
        self.version = 0
        self._nodes: dict[str, ShapeGroup] = {}
        #: Identity labels of the nodes whose identity labels are not all equal to their name.
        self._identity: dict[str, tuple[tuple[str, str], ...]] = {}
        self._pods: dict[str, _Pod] = {}
        self._used: dict[str, Resources] = {}
        self._reserved: dict[str, Resources] = {}
        self._unplaced: dict[str, int] = {}
        self._signatures: dict[tuple[object, ...], Signature] = {}
        self._shared: dict[Resources, Resources] = {}
        self._free_all: dict[str, int] = {}
        self._free_schedulable: dict[str, int] = {}
        self._hist: dict[str, Histogram] = {}
        self._reservations: dict[str, Reservation] = {}
        self._expiry: list[tuple[float, int, str]] = []
        self._seq = itertools.count(1)
        self._memo: dict[object, object] = {}
        self._memo_version = 0
        self._per_version: dict[object, object] = {}
        self._per_version_version = 0
        #: Bumped when a signature appears or goes: what the domain index depends on.
        self._signature_version = 0
        self._domains: dict[str, tuple[int, dict[str, list[Signature]]]] = {}

    @classmethod
    def build(
        cls,
        name: str,
        nodes: Iterable[NodeInfo],
        pods: Iterable[PodInfo] = (),
        labels: Mapping[str, str] | None = None,
        **options: object,
    ) -> ClusterSnapshot:
        """A snapshot from a full listing (what an informer's initial list gives)."""
        snap = cls(name, labels, **options)  # type: ignore[arg-type]
        for pod in pods:
            snap.upsert_pod(pod)
        for node in nodes:
            snap.upsert_node(node)
        return snap

    def copy(self) -> ClusterSnapshot:
        """An independent snapshot with the same nodes, bound pods and in-flight reservations:
        what a "what if" may change (a reclaim removes a victim's pods to prove the waiting gang
        then fits) without touching the one the caller keeps. O(nodes + pods)."""
        twin = ClusterSnapshot.build(
            self.name,
            self.nodes(),
            self.pods(),
            self.labels,
            fields=self.fields,
            accelerator=self.accelerator,
            identity_label_keys=self.identity_label_keys,
            topology_label_keys=self.topology_label_keys,
        )
        for res in self._reservations.values():
            twin.put_back(res)
        twin.version += 1
        return twin

    # Reading ----------------------------------------------------------------------------------
    def node(self, name: str) -> NodeInfo | None:
        group = self._nodes.get(name)
        return self._info(name, group) if group is not None else None

    def nodes(self) -> Iterator[NodeInfo]:
        return (self._info(name, group) for name, group in self._nodes.items())

    def pods(self) -> Iterator[PodInfo]:
        """The pods that hold resources (bound, not finished), as placement keeps them: uid,
        node, requests and owner key (namespace and name are not kept)."""
        return (_pod_info(uid, pod) for uid, pod in self._pods.items())

    def holds_pods_of(self, owner: str) -> bool:
        """Whether any pod that holds resources here carries owner key `owner` (a job's pods
        still running, or still terminating)."""
        return any(pod.owner == owner for pod in self._pods.values())

    def pods_on(self, node: str) -> Iterator[PodInfo]:
        """`pods()` bound to `node` (only theirs are built)."""
        return (_pod_info(uid, pod) for uid, pod in self._pods.items() if pod.node == node)

    def free(self, node: str) -> Resources | None:
        """What `node` has free now (allocatable - bound pods - reservations, floored at 0)."""
        group = self._nodes.get(node)
        return group.free if group is not None else None

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def free_total(self) -> Resources:
        """Free resources summed over nodes not cordoned, minus reservations without nodes."""
        return Resources(self._free_schedulable) - self._unplaced

    @property
    def free_total_all(self) -> Resources:
        """Free resources summed over every node, cordoned ones included."""
        return Resources(self._free_all) - self._unplaced

    @property
    def unplaced_reserved(self) -> Resources:
        return Resources(self._unplaced)

    def total_free(self, resource: str, *, cordoned: bool = True) -> int:
        """Free `resource` summed over nodes (cordoned ones only if `cordoned`), minus what
        reservations without nodes hold. Allocation-free: placement screens call it a lot."""
        table = self._free_all if cordoned else self._free_schedulable
        return table.get(resource, 0) - self._unplaced.get(resource, 0)

    def max_free(self, resource: str) -> int:
        """The largest free amount of `resource` on any single node."""
        hist = self._hist.get(resource)
        return hist.max() if hist is not None else 0

    def histogram(self, resource: str) -> Histogram | None:
        return self._hist.get(resource)

    def signatures(self) -> Iterable[Signature]:
        return self._signatures.values()

    def indexed(self, level: str) -> bool:
        """Whether `level` is a topology label indexed per level (`domain_nodes`) rather than
        a signature label (`domains`)."""
        return level in self.topology_label_keys

    def level(self, level: str) -> Level | None:
        """For an indexed level: its domains, kept event by event (`fleet.core.levels`); None
        when no node carries the label."""
        return self._levels.get(level)

    def domain_nodes(self, level: str) -> Mapping[str, Mapping[str, None]]:
        """For an indexed level: its value -> the names of the nodes that carry it. O(1)."""
        found = self._levels.get(level)
        return found.nodes if found is not None else {}

    def domain_accelerators(self, level: str) -> Mapping[str, int]:
        """For an indexed level: its value -> the free accelerators of its nodes (cordoned ones
        included; reservations on nodes subtracted). O(1)."""
        found = self._levels.get(level)
        return found.accelerators if found is not None else {}

    def domain_slots(self, level: str) -> Mapping[str, Mapping[int, int]]:
        """For an indexed level: its value -> free accelerator amount -> nodes with that much
        free (nodes with none are left out). O(1): bounds how many pods a domain could take
        without looking at its nodes."""
        found = self._levels.get(level)
        return found.slots if found is not None else {}

    def group_of(self, node: str) -> ShapeGroup | None:
        return self._nodes.get(node)

    def topology_of(self, node: str) -> Mapping[str, str]:
        return dict(self._topology.get(node, ()))

    def topology_key(self, node: str) -> tuple[tuple[str, str], ...]:
        """The node's topology labels as a sortable tuple (empty when it has none)."""
        return self._topology.get(node, ())

    @property
    def has_topology(self) -> bool:
        """Whether any node carries an indexed topology label."""
        return bool(self._topology)

    def domains(self, level: str) -> Mapping[str, list[Signature]]:
        """The topology domains of node label `level` when it is a signature label: its value
        -> the signatures of the nodes that carry it (nodes without the label are in none). An
        identity label such as the hostname is never a domain here, and an indexed topology
        label (`indexed`) is read with `domain_nodes` instead (this returns no domain for it).
        Rebuilt only when a signature appears or goes, so O(1) per decision otherwise."""
        cached = self._domains.get(level)
        if cached is not None and cached[0] == self._signature_version:
            return cached[1]
        index: dict[str, list[Signature]] = {}
        for sig in self._signatures.values():
            value = sig.labels.get(level)
            if value is not None:
                index.setdefault(value, []).append(sig)
        self._domains[level] = (self._signature_version, index)
        return index

    def groups(self) -> Iterator[ShapeGroup]:
        for sig in self._signatures.values():
            for bucket in sig.buckets.values():
                yield from bucket.values()

    def reservations(self) -> Mapping[str, Reservation]:
        return self._reservations

    def memo(self) -> dict[object, object]:
        """A table for answers that depend only on this snapshot's current contents (a
        screen's verdict for a gang's demand): emptied whenever the snapshot changes, so an
        answer is reused only while it is still true."""
        if self._memo_version != self.version or len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
            self._memo_version = self.version
        return self._memo

    def per_version(self) -> dict[object, object]:
        """Like `memo`, for answers per snapshot that many gangs share (per topology demand:
        whether a domain holds it, the tightest that does; the domains of a level that is not
        indexed): emptied whenever the snapshot changes, never for being full. The caller keeps
        its keys few. (What is kept per domain lives in the level index, `level`.)"""
        if self._per_version_version != self.version:
            self._per_version.clear()
            self._per_version_version = self.version
        return self._per_version

    # Nodes ------------------------------------------------------------------------------------
    def upsert_node(self, info: NodeInfo) -> None:
        name = info.name
        identity_keys = self.identity_label_keys
        topology_keys = self.topology_label_keys
        labels = {
            k: v
            for k, v in info.labels.items()
            if k not in identity_keys and k not in topology_keys
        }
        identity = self._identity_of(info)
        topology = tuple(sorted((k, v) for k, v in info.labels.items() if k in topology_keys))
        key = _signature_key(labels, info.taints, info.unschedulable)
        old = self._nodes.get(name)
        if (
            old is not None
            and old.signature.key == key
            and old.nodes[name] == info.allocatable
            and self._identity.get(name) == identity
            and self._topology.get(name, ()) == topology
        ):
            return
        sig = self._signatures.get(key)
        if sig is None:
            sig = self._signatures[key] = Signature(labels, info.taints, info.unschedulable)
            self._signature_version += 1
        sig.nodes += 1  # before releasing the old one, so a shared signature survives
        if old is not None:
            self._detach(name, old)
            self._release_signature(old.signature)
        if identity is None:
            self._identity.pop(name, None)
        else:
            self._identity[name] = identity
        self._set_topology(name, topology)
        allocatable = self._share(info.allocatable)
        self._attach(name, sig, allocatable, self._compute_free(name, allocatable))
        self.version += 1

    def remove_node(self, name: str) -> None:
        group = self._nodes.pop(name, None)
        if group is None:
            return
        self._detach(name, group)
        self._release_signature(group.signature)
        self._identity.pop(name, None)
        self._set_topology(name, ())
        self.version += 1

    # Pods -------------------------------------------------------------------------------------
    def upsert_pod(self, pod: PodInfo) -> None:
        old = self._pods.get(pod.uid)
        if not pod.holds_resources:
            # Pending or finished: it holds nothing, so nothing is kept (a later binding counts
            # as newly bound either way).
            if old is not None:
                del self._pods[pod.uid]
                self._apply_pod_change(old, None)
            return
        assert pod.node_name is not None
        new = _Pod(pod.node_name, self._share(pod.requests), pod.owner_key)
        if old == new:
            return
        self._pods[pod.uid] = new
        self._apply_pod_change(old, new)

    def remove_pod(self, uid: str) -> None:
        old = self._pods.pop(uid, None)
        if old is not None:
            self._apply_pod_change(old, None)

    def _apply_pod_change(self, old: _Pod | None, new: _Pod | None) -> None:
        touched = set()
        if old is not None:
            self._add_usage(self._used, old.node, old.requests, -1)
            touched.add(old.node)
        if new is not None:
            self._add_usage(self._used, new.node, new.requests, +1)
            touched.add(new.node)
            newly_bound = old is None or old.node != new.node
            if new.owner is not None and newly_bound:
                touched |= self._consume(new.owner, new.node)
        for name in touched:
            self._refresh(name)
        self.version += 1

    # In-flight placements ---------------------------------------------------------------------
    def reserve(self, key: str, assignment: Assignment, expires_at: float) -> None:
        """Hold `assignment` for placement `key` until its pods show up or `expires_at`."""
        self.release(key)
        pods = [(slot.node, slot.requests) for slot in assignment for _ in range(slot.pods)]
        seq = next(self._seq)
        self._reservations[key] = Reservation(key, pods, expires_at, seq)
        heapq.heappush(self._expiry, (expires_at, seq, key))
        touched = set()
        for node, requests in pods:
            self._hold(node, requests, +1)
            if node is not None:
                touched.add(node)
        for name in touched:
            self._refresh(name)
        self.version += 1

    def release(self, key: str) -> bool:
        """Drop reservation `key` (placement abandoned or confirmed); False if unknown."""
        res = self._reservations.pop(key, None)
        if res is None:
            return False
        touched = set()
        for node, requests in res.pods:
            self._hold(node, requests, -1)
            if node is not None:
                touched.add(node)
        for name in touched:
            self._refresh(name)
        self.version += 1
        return True

    def hold_back(self, key: str) -> Reservation | None:
        """Take reservation `key` out (a "what if" on a copy), to `put_back` later."""
        res = self._reservations.get(key)
        if res is None:
            return None
        held = Reservation(key, list(res.pods), res.expires_at, res.seq)
        self.release(key)
        return held

    def put_back(self, res: Reservation) -> None:
        """Hold again what `hold_back` took out."""
        seq = next(self._seq)
        self._reservations[res.key] = Reservation(res.key, list(res.pods), res.expires_at, seq)
        heapq.heappush(self._expiry, (res.expires_at, seq, res.key))
        touched = set()
        for node, requests in res.pods:
            self._hold(node, requests, +1)
            if node is not None:
                touched.add(node)
        for name in touched:
            self._refresh(name)
        self.version += 1

    def expire(self, now: float) -> list[str]:
        """Drop reservations whose deadline is at or before `now`; returns their keys."""
        dropped = []
        while self._expiry and self._expiry[0][0] <= now:
            _, seq, key = heapq.heappop(self._expiry)
            res = self._reservations.get(key)
            if res is not None and res.seq == seq:
                self.release(key)
                dropped.append(key)
        return dropped

    def _consume(self, key: str, node: str | None) -> set[str]:
        """A pod of placement `key` is now bound to `node`: its reserved slot is no longer
        needed (the pod's own requests count now). Prefer the slot planned on that node."""
        res = self._reservations.get(key)
        if res is None or not res.pods:
            return set()
        index = next((i for i, (n, _) in enumerate(res.pods) if n == node), None)
        if index is None:
            index = next((i for i, (n, _) in enumerate(res.pods) if n is None), 0)
        slot_node, requests = res.pods.pop(index)
        self._hold(slot_node, requests, -1)
        if not res.pods:
            del self._reservations[key]
        return {slot_node} if slot_node is not None else set()

    def _hold(self, node: str | None, requests: Resources, sign: int) -> None:
        if node is None:
            for name, amount in requests.items():
                value = self._unplaced.get(name, 0) + sign * amount
                if value:
                    self._unplaced[name] = value
                else:
                    self._unplaced.pop(name, None)
        else:
            self._add_usage(self._reserved, node, requests, sign)

    # Internals --------------------------------------------------------------------------------
    def _share(self, amounts: Resources) -> Resources:
        """One object for every equal vector (the same allocatable on a thousand nodes, the
        same requests on a thousand pods). Correctness never depends on it: when the table is
        full it starts over, and vectors already stored stay shared."""
        shared = self._shared.get(amounts)
        if shared is not None:
            return shared
        if len(self._shared) >= _SHARE_LIMIT:
            self._shared.clear()
        self._shared[amounts] = amounts
        return amounts

    def _add_usage(
        self, table: dict[str, Resources], node: str, requests: Resources, sign: int
    ) -> None:
        current = table.get(node)
        if current is None and sign > 0:
            table[node] = requests
            return
        base = current if current is not None else EMPTY
        usage = base + requests if sign > 0 else base - requests
        if usage:
            table[node] = self._share(usage)
        else:
            del table[node]

    def _identity_of(self, info: NodeInfo) -> tuple[tuple[str, str], ...] | None:
        """The node's identity labels, or None when each is present and equal to its name."""
        labels, name = info.labels, info.name
        if all(labels.get(key) == name for key in self._identity_keys):
            return None
        return tuple((key, labels[key]) for key in self._identity_keys if key in labels)

    def _set_topology(self, name: str, topology: tuple[tuple[str, str], ...]) -> None:
        """Record `name`'s topology labels and move it in the per-level index (the node is
        detached from its group while this runs, so the accelerator totals need no change)."""
        old = self._topology.get(name, ())
        if old == topology:
            return
        for level, value in old:
            index = self._levels[level]
            index.remove_node(value, name)
            if not index.nodes:
                del self._levels[level]
        for level, value in topology:
            added = self._levels.get(level)
            if added is None:
                added = self._levels[level] = Level()
            added.add_node(value, name)
        if topology:
            shared = self._topology_shared.get(topology)
            if shared is None:
                if len(self._topology_shared) >= _SHARE_LIMIT:
                    self._topology_shared.clear()
                shared = self._topology_shared[topology] = topology
            self._topology[name] = shared
        else:
            self._topology.pop(name, None)

    def _info(self, name: str, group: ShapeGroup) -> NodeInfo:
        sig = group.signature
        labels = dict(sig.labels)
        identity = self._identity.get(name)
        if identity is None:
            labels.update((key, name) for key in self._identity_keys)
        else:
            labels.update(identity)
        labels.update(self._topology.get(name, ()))
        return NodeInfo(name, group.nodes[name], labels, sig.taints, sig.unschedulable)

    def _release_signature(self, sig: Signature) -> None:
        sig.nodes -= 1
        if sig.nodes == 0:
            self._signatures.pop(sig.key, None)
            self._signature_version += 1

    def _compute_free(self, name: str, allocatable: Resources) -> Resources:
        used = self._used.get(name)
        reserved = self._reserved.get(name)
        if not used and not reserved:
            return allocatable.clamped()
        free = {}
        for res, amount in allocatable.items():
            if used:
                amount -= used.get(res, 0)
            if reserved:
                amount -= reserved.get(res, 0)
            if amount > 0:
                free[res] = amount
        return Resources._trusted(free)

    def _refresh(self, name: str) -> None:
        group = self._nodes.get(name)
        if group is None:
            return
        allocatable = group.nodes[name]
        free = self._compute_free(name, allocatable)
        if free == group.free:
            return
        old = group.free
        self._detach(name, group, domains=False)
        self._attach(name, group.signature, allocatable, free, domains=False)
        accel = self.accelerator
        for level, value in self._topology.get(name, ()):
            self._levels[level].move(value, old, old.get(accel, 0), free, free.get(accel, 0))

    def _attach(
        self,
        name: str,
        sig: Signature,
        allocatable: Resources,
        free: Resources,
        *,
        domains: bool = True,
    ) -> None:
        bucket_key = free.get(self.accelerator, 0)
        bucket = sig.buckets.get(bucket_key)
        if bucket is None:
            bucket = sig.buckets[bucket_key] = {}
        group = bucket.get(free)
        if group is None:
            group = bucket[free] = ShapeGroup(sig, free)
        group.nodes[name] = allocatable
        self._nodes[name] = group
        self._account(group.free, not sig.unschedulable, +1)
        if domains:
            self._account_domains(name, free, bucket_key, +1)

    def _detach(self, name: str, group: ShapeGroup, *, domains: bool = True) -> None:
        """Take `name` out of `group` (the caller rebinds or drops `_nodes[name]`); its
        domains too unless `domains` is False (the caller moves it there)."""
        del group.nodes[name]
        sig = group.signature
        if not group.nodes:
            bucket_key = group.free.get(self.accelerator, 0)
            bucket = sig.buckets[bucket_key]
            del bucket[group.free]
            if not bucket:
                del sig.buckets[bucket_key]
        self._account(group.free, not sig.unschedulable, -1)
        if domains:
            self._account_domains(name, group.free, group.free.get(self.accelerator, 0), -1)

    def _account_domains(self, name: str, free: Resources, amount: int, sign: int) -> None:
        """The node's free vector (`amount` free accelerators) comes (+1) or goes (-1): every
        domain it is in changes."""
        for level, value in self._topology.get(name, ()):
            self._levels[level].account(value, free, amount, sign)

    def _account(self, free: Resources, schedulable: bool, sign: int) -> None:
        totals, sched, hists = self._free_all, self._free_schedulable, self._hist
        for name, amount in free.items():
            totals[name] = totals.get(name, 0) + sign * amount
            if schedulable:
                sched[name] = sched.get(name, 0) + sign * amount
            hist = hists.get(name)
            if hist is None:
                hist = hists[name] = Histogram()
            if sign > 0:
                hist.add(amount)
            else:
                hist.remove(amount)
