"""Assign a gang's minimum set to concrete nodes of one snapshot, greedily, on shape groups.

The rule of the `nodes` estimator: a gang fits only if this produces a real assignment, so a
"fits" always comes with the proof. The search is first-fit-decreasing on groups of identical
nodes:

* pods with equal requests and constraints are packed as one item; items go largest first
  (accelerator, then CPU, then memory);
* an item looks only at signatures its constraints admit, and at groups whose free accelerator
  amount could hold one pod, smallest such amount first (best fit: big holes stay whole for big
  pods; CPU-only pods prefer nodes with no free GPUs); inside one amount, tightest CPU/memory
  first;
* each chosen node takes as many pods of the item as fit; the node's remaining free is kept in
  an overlay, so later items see it, and the snapshot itself is never modified;
* if the first order fails, the items are retried most-constrained-first.

Given a `WorkloadMix`, pools are chosen by fragmentation instead (FGD, see `fragmentation`):
each step puts the item's pods on the node where they least increase the expected
fragmentation per pod, filling a node as far as the item allows; best-fit order breaks ties.

Bin packing is NP-hard, so this can miss an assignment an exhaustive search would find; the
property tests measure how often (see docs/placement.md). It never claims a fit it cannot show.
Constraints that look at per-node facts (node name, hostname label, or an indexed topology label
such as a rack, which signatures leave out: `ClusterSnapshot.topology_label_keys`) are judged node
by node; an exact nodeSelector on an indexed topology label (the pin of a copy) looks only at that
domain's nodes. A topology domain of an indexed level is given to `place` as `NodesIn`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from fleet.core.assignment import Assignment, Slot
from fleet.core.constraints import PodConstraints
from fleet.core.fragmentation import WorkloadMix
from fleet.core.resources import CPU, MEMORY, PODS, Resources
from fleet.core.shapes import ShapeGroup, Signature
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang


@dataclass(frozen=True, slots=True)
class Item:
    """Interchangeable pods of a gang: same requests, same constraints."""

    requests: Resources
    constraints: PodConstraints
    parts: tuple[tuple[str, int], ...]  # (component name, pods), in role order

    @property
    def count(self) -> int:
        return sum(n for _, n in self.parts)


def items_of(gang: Gang) -> list[Item]:
    """The minimum set as items, merging components that are indistinguishable to a node."""
    merged: dict[tuple[Resources, PodConstraints], list[tuple[str, int]]] = {}
    for component, count in gang.minimum:
        merged.setdefault((component.requests, component.constraints), []).append(
            (component.name, count)
        )
    return [Item(req, cons, tuple(parts)) for (req, cons), parts in merged.items()]


@dataclass(frozen=True, slots=True)
class NodesIn:
    """A topology domain of an indexed level, as `_Packer.place` restricts to: its nodes."""

    names: Mapping[str, None]


#: Where `place` may put pods: anywhere (None), on the nodes of some signatures (a domain of a
#: signature label), or on the nodes of an indexed domain.
Within = Collection[Signature] | NodesIn | None


def selector_domain(
    snapshot: ClusterSnapshot, constraints: PodConstraints
) -> Mapping[str, None] | None:
    """The nodes of the indexed topology domain an exact nodeSelector names (a pinned copy's
    pods), or None when the selector names none: only they can take the pods."""
    for key, value in constraints.node_selector:
        if snapshot.indexed(key):
            return snapshot.domain_nodes(key).get(value, {})
    return None


@dataclass(frozen=True, slots=True)
class Unplaced:
    """Packing stopped at `item` with `missing` of its pods still without a node."""

    item: Item
    missing: int


def pack(
    snapshot: ClusterSnapshot, gang: Gang, mix: WorkloadMix | None = None
) -> Assignment | Unplaced:
    """An assignment of the minimum set to nodes, or the item that could not be placed; with
    `mix`, nodes are chosen by least fragmentation instead of best fit."""
    items = items_of(gang)
    if not items:
        return Assignment()
    accel = snapshot.accelerator

    def size(item: Item) -> tuple[int, int, int]:
        r = item.requests
        return (r.get(accel, 0), r.get(CPU, 0), r.get(MEMORY, 0))

    by_size = sorted(items, key=size, reverse=True)
    orders = [by_size]
    if len(items) > 1:
        admitted = {id(item): _admitted_nodes(snapshot, item.constraints) for item in items}
        by_constraint = sorted(by_size, key=lambda item: admitted[id(item)])
        if by_constraint != by_size:
            orders.append(by_constraint)
    first_failure: Unplaced | None = None
    for order in orders:
        packer = _Packer(snapshot, mix)
        failure = None
        for item in order:
            missing = packer.place(item)
            if missing:
                failure = Unplaced(item, missing)
                break
        if failure is None:
            return Assignment(tuple(packer.slots))
        first_failure = first_failure or failure
    assert first_failure is not None
    return first_failure


def _admitted_nodes(snapshot: ClusterSnapshot, constraints: PodConstraints) -> int:
    if constraints.needs_node_identity(snapshot.per_node_label_keys):
        domain = selector_domain(snapshot, constraints)
        return len(domain) if domain is not None else len(snapshot)  # an upper bound: ordering
    return sum(sig.nodes for sig in snapshot.signatures() if sig.rejection(constraints) is None)


def _tightness(free: Resources) -> tuple[int, int]:
    return (free.get(CPU, 0), free.get(MEMORY, 0))


class _Pool:
    """Candidate nodes sharing one free vector: a whole shape group (minus nodes already used in
    this attempt) or an explicit list (nodes already used, or a node judged individually)."""

    __slots__ = ("free", "group", "names", "sig", "source")

    def __init__(
        self,
        free: Resources,
        sig: Signature,
        group: ShapeGroup | None,
        names: list[str] | None,
        source: list[str] | None = None,
    ) -> None:
        self.free = free
        self.sig = sig
        self.group = group
        self.names = names
        #: For a moved node judged individually: the overlay list it must leave when taken.
        self.source = source


class _Packer:
    """One attempt: the overlay of tentative changes plus the slots chosen so far."""

    def __init__(self, snapshot: ClusterSnapshot, mix: WorkloadMix | None = None) -> None:
        self.snapshot = snapshot
        self.mix = mix
        self.accel = snapshot.accelerator
        self.taken: dict[ShapeGroup, set[str]] = {}
        self.moved: dict[Signature, dict[Resources, list[str]]] = {}
        self.slots: list[Slot] = []

    def fork(self) -> _Packer:
        """An independent copy of this attempt (to try one domain and keep the rest)."""
        twin = _Packer(self.snapshot, self.mix)
        twin.taken = {group: set(names) for group, names in self.taken.items()}
        twin.moved = {
            sig: {free: list(names) for free, names in by_free.items()}
            for sig, by_free in self.moved.items()
        }
        twin.slots = list(self.slots)
        return twin

    def place(self, item: Item, within: Within = None) -> int:
        """Place every pod of `item` (only on nodes of the signatures `within`, when given: one
        topology domain); returns how many could not be placed."""
        if self.mix is not None:
            return self._place_by_fragmentation(item, self.mix, within)
        requests = item.requests
        need = item.count
        parts = list(item.parts)
        for pool in self._pools(item, within):
            per_node = requests.copies_in(pool.free)
            if per_node <= 0:
                continue
            available = self._available(pool)
            if not available:
                continue
            wanted = min(available, -(-need // per_node))
            for name in self._take(pool, wanted):
                pods = min(per_node, need)
                need -= pods
                self._move(pool.sig, name, pool.free - requests * pods)
                self._record(parts, name, pods, requests)
            if need == 0:
                return 0
        return need

    def _place_by_fragmentation(self, item: Item, mix: WorkloadMix, within: Within = None) -> int:
        """FGD: each step takes the pool whose nodes the item's pods fragment least (per pod,
        filling each node as far as the item allows); ties go to the smaller free accelerator
        amount, then the tighter CPU and memory, then the first found."""
        requests, accel = item.requests, self.accel
        demand_accel = requests.get(accel, 0)
        identity = isinstance(within, NodesIn) or item.constraints.needs_node_identity(
            self.snapshot.per_node_label_keys
        )
        sigs = (
            []
            if identity
            else [s for s in self._signatures(within) if s.rejection(item.constraints) is None]
        )
        need = item.count
        parts = list(item.parts)
        delta = mix.delta
        while need:
            best: _Pool | None = None
            best_key = (0.0, 0)
            best_pods = 0
            pools = (
                self._pools_per_node(item, demand_accel, within)
                if identity
                else self._fragmentation_pools(sigs, demand_accel)
            )
            for pool in pools:
                free = pool.free
                per_node = requests.copies_in(free)
                if per_node <= 0 or not self._available(pool):
                    continue
                pods = min(per_node, need)
                key = (round(delta(free, requests, pods, accel) / pods, 9), free.get(accel, 0))
                if (
                    best is None
                    or key < best_key
                    or (key == best_key and _tightness(free) < _tightness(best.free))
                ):
                    best, best_key, best_pods = pool, key, pods
            if best is None:
                return need
            wanted = min(self._available(best), need // best_pods)
            for name in self._take(best, wanted):
                need -= best_pods
                self._move(best.sig, name, best.free - requests * best_pods)
                self._record(parts, name, best_pods, requests)
        return 0

    def _fragmentation_pools(self, sigs: list[Signature], demand_accel: int) -> Iterator[_Pool]:
        """Every pool that could hold one pod by its accelerator amount, in no ranked order."""
        accel = self.accel
        for sig in sigs:
            for value, bucket in sig.buckets.items():
                if value >= demand_accel:
                    for free, group in bucket.items():
                        yield _Pool(free, sig, group, None)
            moved = self.moved.get(sig)
            if moved:
                for free, names in moved.items():
                    if names and free.get(accel, 0) >= demand_accel:
                        yield _Pool(free, sig, None, names)

    def _signatures(self, within: Within) -> Iterable[Signature]:
        if within is None or isinstance(within, NodesIn):
            return self.snapshot.signatures()
        return within

    def _pools(self, item: Item, within: Within = None) -> Iterator[_Pool]:
        snapshot, accel = self.snapshot, self.accel
        demand_accel = item.requests.get(accel, 0)
        order = [r for r in (CPU, MEMORY) if r in item.requests] + sorted(
            r for r in item.requests if r not in (CPU, MEMORY, PODS, accel)
        )

        def tightness(pool: _Pool) -> tuple[int, ...]:
            free = pool.free
            return tuple(free.get(r, 0) for r in order)

        if isinstance(within, NodesIn) or item.constraints.needs_node_identity(
            snapshot.per_node_label_keys
        ):
            pools = self._pools_per_node(item, demand_accel, within)
            pools.sort(key=lambda p: (p.free.get(accel, 0), tightness(p)))
            yield from pools
            return

        sigs = [s for s in self._signatures(within) if s.rejection(item.constraints) is None]
        values: set[int] = set()
        for sig in sigs:
            values.update(v for v in sig.buckets if v >= demand_accel)
            for free in self.moved.get(sig, ()):
                if free.get(accel, 0) >= demand_accel:
                    values.add(free.get(accel, 0))
        for value in sorted(values):
            batch: list[_Pool] = []
            for sig in sigs:
                bucket = sig.buckets.get(value)
                if bucket:
                    batch.extend(_Pool(free, sig, group, None) for free, group in bucket.items())
                moved = self.moved.get(sig)
                if moved:
                    batch.extend(
                        _Pool(free, sig, None, names)
                        for free, names in moved.items()
                        if names and free.get(accel, 0) == value
                    )
            if len(batch) > 1:
                batch.sort(key=tightness)
            yield from batch

    def _pools_per_node(self, item: Item, demand_accel: int, within: Within = None) -> list[_Pool]:
        snapshot, constraints = self.snapshot, item.constraints
        per_node = constraints.needs_node_identity(snapshot.per_node_label_keys)

        def admits(name: str, sig: Signature) -> bool:
            if not per_node:
                return sig.rejection(constraints) is None
            info = snapshot.node(name)
            return info is not None and (
                constraints.rejection(info.labels, info.taints, info.unschedulable, name) is None
            )

        names = within.names if isinstance(within, NodesIn) else None
        if per_node:
            pinned = selector_domain(snapshot, constraints)
            if pinned is not None and (names is None or len(pinned) < len(names)):
                names = pinned
        if names is not None:
            return self._pools_in(names, demand_accel, admits)
        pools: list[_Pool] = []

        for sig in self._signatures(within):
            for value, bucket in sig.buckets.items():
                if value < demand_accel:
                    continue
                for free, group in bucket.items():
                    taken = self.taken.get(group, ())
                    pools.extend(
                        _Pool(free, sig, group, [name])
                        for name in group.nodes
                        if name not in taken and admits(name, sig)
                    )
            for free, moved in self.moved.get(sig, {}).items():
                if free.get(self.accel, 0) >= demand_accel:
                    pools.extend(
                        _Pool(free, sig, None, [n], source=moved) for n in moved if admits(n, sig)
                    )
        return pools

    def _pools_in(
        self,
        names: Mapping[str, None],
        demand_accel: int,
        admits: Callable[[str, Signature], bool],
    ) -> list[_Pool]:
        """One pool per node of `names` (a domain: few nodes) that could hold one pod: its
        base free vector, or the overlay's when this attempt already used it."""
        snapshot, accel = self.snapshot, self.accel
        pools: list[_Pool] = []
        for name in names:
            group = snapshot.group_of(name)
            if group is None or name in self.taken.get(group, ()):
                continue  # gone, or used in this attempt: among the moved nodes below
            if group.free.get(accel, 0) >= demand_accel and admits(name, group.signature):
                pools.append(_Pool(group.free, group.signature, group, [name]))
        for sig, by_free in self.moved.items():
            for free, moved in by_free.items():
                if free.get(accel, 0) < demand_accel:
                    continue
                pools.extend(
                    _Pool(free, sig, None, [n], source=moved)
                    for n in moved
                    if n in names and admits(n, sig)
                )
        return pools

    def _available(self, pool: _Pool) -> int:
        if pool.names is not None:
            return len(pool.names)
        assert pool.group is not None
        return len(pool.group.nodes) - len(self.taken.get(pool.group, ()))

    def _take(self, pool: _Pool, count: int) -> list[str]:
        if pool.names is not None:
            chosen = [pool.names.pop() for _ in range(count)]
            if pool.group is not None:  # a node judged individually, still in its base group
                self.taken.setdefault(pool.group, set()).update(chosen)
            if pool.source is not None:  # a moved node judged individually
                for name in chosen:
                    pool.source.remove(name)
            return chosen
        assert pool.group is not None
        taken = self.taken.setdefault(pool.group, set())
        snapshot = self.snapshot
        if snapshot.has_topology and len(pool.group.nodes) - len(taken) > count:
            # A group spans racks (topology labels are not in signatures): take its nodes rack
            # by rack, so a gang's pods land together as they did when each rack was a
            # signature of its own (and as a member's scheduler would rather).
            free = (name for name in pool.group.nodes if name not in taken)
            chosen = heapq.nsmallest(count, free, key=snapshot.topology_key)
        else:
            chosen = []
            for name in pool.group.nodes:
                if name not in taken:
                    chosen.append(name)
                    if len(chosen) == count:
                        break
        taken.update(chosen)
        return chosen

    def _move(self, sig: Signature, name: str, free: Resources) -> None:
        self.moved.setdefault(sig, {}).setdefault(free, []).append(name)

    def _record(
        self, parts: list[tuple[str, int]], node: str, pods: int, requests: Resources
    ) -> None:
        while pods:
            component, left = parts[0]
            n = min(left, pods)
            self.slots.append(Slot(component, node, n, requests))
            pods -= n
            if n == left:
                parts.pop(0)
            else:
                parts[0] = (component, left - n)
