"""Topology domains of a member, kept event by event: per level (a node label such as
`topology.kubernetes.io/rack`), per domain (one value of it), what placement sizes a domain by.

Why this shape. A decision over a hundred members of 625 racks each cannot look at every rack:
it asks "which rack could hold 4 pods of 8 GPUs", "how many at most does the best rack hold",
"which is the tightest rack that may hold them". Every answer here is kept up to date as nodes
and pods change, one domain at a time, so none of these questions walks the domains:

* per domain: its nodes, its free accelerators, its free vector (every resource summed over
  its nodes), how many of its nodes have each free accelerator amount (`slots`);
* per domain and per per-pod accelerator amount `p` (asked for once, then kept): how many pods
  of `p` its nodes' free amounts hold, each node a separate bin (`capacity`), with a histogram
  of these over the level's domains (the best domain's, `best`) and the domains by capacity
  (`at_least`: those holding `k` or more, without a scan);
* the domains ordered by (free accelerators, value), the order packing tries them in (best fit
  first), kept sorted as they change (`order`);
* per domain, a version that changes whenever one of its nodes does: what caches of a domain's
  contents (the `_Domain` of `fleet.core.domains`) are checked against, so a change invalidates
  one domain, not the snapshot.

Every update is O(levels x tracked per-pod amounts + log domains) for the node it touches.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping

from fleet.core.histogram import Histogram

#: Per-pod accelerator amounts whose capacities every level keeps from its first node (the
#: amounts GPU pods ask for); another amount is counted the first time a gang asks for it.
TRACKED_PER_POD = (1, 2, 4, 8)


class PodCapacity:
    """For one per-pod accelerator amount: per domain, how many such pods its nodes' free
    amounts hold (domains holding none are left out), a histogram of these, and the domains
    by what they hold."""

    __slots__ = ("by_capacity", "histogram", "of", "per_pod")

    def __init__(self, per_pod: int) -> None:
        self.per_pod = per_pod
        self.of: dict[str, int] = {}
        self.histogram = Histogram()
        #: capacity -> the domains holding exactly that many (insertion-ordered set).
        self.by_capacity: dict[int, dict[str, None]] = {}

    def change(self, value: str, delta: int) -> None:
        if not delta:
            return
        old = self.of.get(value, 0)
        new = old + delta
        if old:
            self.histogram.remove(old)
            members = self.by_capacity[old]
            del members[value]
            if not members:
                del self.by_capacity[old]
        if new:
            self.of[value] = new
            self.histogram.add(new)
            self.by_capacity.setdefault(new, {})[value] = None
        else:
            del self.of[value]

    def best(self) -> int:
        """The most pods any one domain holds."""
        return self.histogram.max()

    def count_at_least(self, pods: int) -> int:
        """How many domains hold `pods` or more (O(distinct capacities))."""
        return sum(n for cap, n in self.histogram.items() if cap >= pods)

    def at_least(self, pods: int) -> Iterator[str]:
        """The domains holding `pods` or more, those holding most first (in no particular order
        among equals)."""
        for cap in sorted(self.by_capacity, reverse=True):
            if cap < pods:
                return
            yield from self.by_capacity[cap]


class Level:
    """One topology level's domains; see the module docstring."""

    __slots__ = (
        "_tick",
        "accelerators",
        "capacities",
        "free",
        "memo",
        "nodes",
        "order",
        "slots",
        "versions",
    )

    def __init__(self) -> None:
        #: value -> the domain's nodes (an insertion-ordered set of names).
        self.nodes: dict[str, dict[str, None]] = {}
        #: value -> free accelerators of the domain's nodes (cordoned ones included).
        self.accelerators: dict[str, int] = {}
        #: value -> its nodes' free vectors summed (resources summing to 0 left out).
        self.free: dict[str, dict[str, int]] = {}
        #: value -> free accelerator amount -> how many of its nodes have it (none: left out).
        self.slots: dict[str, dict[int, int]] = {}
        #: per-pod accelerator amount -> its capacities: the usual amounts from the start,
        #: any other from the first time it is asked for.
        self.capacities: dict[int, PodCapacity] = {p: PodCapacity(p) for p in TRACKED_PER_POD}
        #: (free accelerators, value) of every domain, sorted: best fit first.
        self.order: list[tuple[int, str]] = []
        #: value -> a number that changes whenever the domain's contents do.
        self.versions: dict[str, int] = {}
        #: value -> (its version, what a reader derived from its contents then): kept until the
        #: domain changes (placement keeps a domain's sizing here, `fleet.core.domains`).
        self.memo: dict[str, tuple[int, object]] = {}
        self._tick = 0

    def _touch(self, value: str) -> None:
        self._tick += 1
        self.versions[value] = self._tick

    def add_node(self, value: str, name: str) -> None:
        members = self.nodes.get(value)
        if members is None:
            members = self.nodes[value] = {}
            self.accelerators[value] = 0
            self.free[value] = {}
            self.slots[value] = {}
            insort(self.order, (0, value))
        members[name] = None
        self._touch(value)

    def remove_node(self, value: str, name: str) -> None:
        """Take `name` out (its free accelerators already taken out with `account`)."""
        members = self.nodes[value]
        del members[name]
        if members:
            self._touch(value)
            return
        del self.nodes[value]
        free = self.accelerators.pop(value)
        self.free.pop(value, None)
        self.slots.pop(value, None)
        self.versions.pop(value, None)
        self.memo.pop(value, None)
        order = self.order
        del order[bisect_left(order, (free, value))]

    def account(self, value: str, free: Mapping[str, int], amount: int, sign: int) -> None:
        """A node of domain `value` with free vector `free`, of which `amount` free
        accelerators, comes (+1) or goes (-1)."""
        self._touch(value)
        totals = self.free[value]
        for name, held in free.items():
            total = totals.get(name, 0) + sign * held
            if total:
                totals[name] = total
            else:
                del totals[name]
        if not amount:
            return
        self._shift(value, sign * amount)
        self._count_slot(value, amount, sign)
        for per_pod, capacity in self.capacities.items():
            capacity.change(value, sign * (amount // per_pod))

    def move(
        self,
        value: str,
        old: Mapping[str, int],
        old_amount: int,
        new: Mapping[str, int],
        new_amount: int,
    ) -> None:
        """A node of domain `value` now has free vector `new` (`new_amount` accelerators)
        instead of `old`: `account` out and in, in one step (a pod bound or gone)."""
        self._touch(value)
        totals = self.free[value]
        for name in {*old, *new}:
            total = totals.get(name, 0) + new.get(name, 0) - old.get(name, 0)
            if total:
                totals[name] = total
            else:
                totals.pop(name, None)
        if old_amount == new_amount:
            return
        self._shift(value, new_amount - old_amount)
        for amount, sign in ((old_amount, -1), (new_amount, +1)):
            if amount:
                self._count_slot(value, amount, sign)
        for per_pod, capacity in self.capacities.items():
            capacity.change(value, new_amount // per_pod - old_amount // per_pod)

    def _shift(self, value: str, delta: int) -> None:
        """Domain `value`'s free accelerators change by `delta`; its place in `order` too."""
        before = self.accelerators[value]
        after = before + delta
        self.accelerators[value] = after
        order = self.order
        del order[bisect_left(order, (before, value))]
        insort(order, (after, value))

    def _count_slot(self, value: str, amount: int, sign: int) -> None:
        """One node of domain `value` with `amount` free accelerators comes (+1) or goes (-1)."""
        slots = self.slots[value]
        count = slots.get(amount, 0) + sign
        if count:
            slots[amount] = count
        else:
            del slots[amount]

    def capacity(self, per_pod: int) -> PodCapacity:
        """The capacities for pods of `per_pod` (> 0) accelerators: counted once from the
        slots the first time they are asked for, kept event by event after."""
        found = self.capacities.get(per_pod)
        if found is None:
            found = self.capacities[per_pod] = PodCapacity(per_pod)
            for value, slots in self.slots.items():
                found.change(value, sum(n * (a // per_pod) for a, n in slots.items()))
        return found


def recount(
    nodes: Mapping[str, Mapping[str, None]], free: Mapping[str, int], per_pod: int
) -> dict[str, int]:
    """Per domain, how many pods of `per_pod` accelerators its nodes hold, counted from each
    node's free amount (`free`: node -> free accelerators): the full recount `PodCapacity`
    keeps incrementally (domains holding none are left out)."""
    out = {}
    for value, names in nodes.items():
        held = sum(free.get(name, 0) // per_pod for name in names)
        if held:
            out[value] = held
    return out
