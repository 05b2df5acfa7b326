"""The waiting units of one quota node (its queue), kept so that a pass finds the best unit
that fits without looking at every unit."""

from __future__ import annotations

import bisect
import heapq
from typing import Any

from fleet.core.admission.phases import UnitSpec
from fleet.core.admission.policies import FIFO
from fleet.core.admission.unit import OrderKey, Unit
from fleet.core.resources import Resources


def order_key(policy: str, spec: UnitSpec) -> OrderKey:
    """A unit's place in its queue: priority (higher first; ignored by FIFO), then submission
    time, then key. Sorting waiting units by it gives the order the queue takes them in (the
    dashboard shows each queue's units in this order)."""
    priority = 0 if policy == FIFO else -spec.priority
    return (priority, spec.submitted, spec.key)


class Line:
    """The waiting units of one quota node, grouped by demand, each group sorted by order; the
    groups' heads are kept sorted too, so the best unit that fits is the first fitting head."""

    __slots__ = (
        "_amounts",
        "_askers",
        "_lows",
        "count",
        "heads",
        "lineage",
        "path",
        "policy",
        "priority",
        "shapes",
        "wake",
    )

    def __init__(self, path: str, lineage: tuple[str, ...], policy: str, priority: int) -> None:
        self.path = path
        self.lineage = lineage
        self.policy = policy
        self.priority = priority
        self.count = 0
        #: Demand -> sorted order keys of the units asking exactly that.
        self.shapes: dict[Resources, list[OrderKey]] = {}
        #: (order key, demand) of every group's first unit, sorted: heads[0] is the line's head.
        self.heads: list[tuple[OrderKey, Resources]] = []
        #: After a fruitless look: per resource, the least headroom at which some unit could fit
        #: (each waiting demand was short in at least one resource; the smallest amount short
        #: per resource). Below every threshold nothing here fits. None: look again.
        self.wake: dict[str, int] | None = None
        #: Per resource: how many groups ask each amount, and a min-heap of those amounts
        #: (entries whose count fell to zero are dropped lazily), for the floor.
        self._amounts: dict[str, dict[int, int]] = {}
        self._lows: dict[str, list[int]] = {}
        #: Per resource, how many groups ask some of it.
        self._askers: dict[str, int] = {}

    def floor(self) -> dict[str, int]:
        """The least any waiting unit asks, per resource every group asks: when the headroom is
        below it in any resource, nothing here fits, whatever the groups. O(resources)."""
        groups = len(self.shapes)
        out: dict[str, int] = {}
        for resource, counts in self._amounts.items():
            if self._askers[resource] != groups:
                continue  # some group asks none of it
            low = self._lows[resource]
            while not counts.get(low[0]):
                heapq.heappop(low)
            out[resource] = low[0]
        return out

    def _count(self, demand: Resources, step: int) -> None:
        for resource, amount in demand.items():
            self._askers[resource] = self._askers.get(resource, 0) + step
            counts = self._amounts.setdefault(resource, {})
            now = counts.get(amount, 0) + step
            if now:
                if not counts.get(amount):
                    heapq.heappush(self._lows.setdefault(resource, []), amount)
                counts[amount] = now
            else:
                del counts[amount]
                if not counts:
                    del self._amounts[resource]
                    del self._lows[resource]

    def order_of(self, spec: UnitSpec) -> OrderKey:
        return order_key(self.policy, spec)

    def add(self, unit: Unit) -> None:
        key = self.order_of(unit.spec)
        unit.order = key
        demand = unit.demand
        group = self.shapes.get(demand)
        if group is None:
            self.shapes[demand] = [key]
            bisect.insort(self.heads, (key, demand))
            self._count(demand, 1)
        else:
            if key < group[0]:
                remove_sorted(self.heads, (group[0], demand))
                bisect.insort(self.heads, (key, demand))
            bisect.insort(group, key)
        self.count += 1
        self.wake = None

    def discard(self, unit: Unit) -> None:
        key = unit.order
        if key is None:
            return
        unit.order = None
        demand = unit.demand
        group = self.shapes[demand]
        if group[0] == key:
            remove_sorted(self.heads, (key, demand))
            del group[0]
            if group:
                bisect.insort(self.heads, (group[0], demand))
            else:
                del self.shapes[demand]
                self._count(demand, -1)
        else:
            remove_sorted(group, key)
        self.count -= 1
        self.wake = None

    def head(self) -> OrderKey | None:
        return self.heads[0][0] if self.heads else None

    def units(self) -> list[str]:
        """Keys of every waiting unit, in order."""
        return [k[2] for k in sorted(k for group in self.shapes.values() for k in group)]

    def __len__(self) -> int:
        return self.count


def remove_sorted(items: list[Any], key: Any) -> None:
    i = bisect.bisect_left(items, key)
    if i < len(items) and items[i] == key:
        del items[i]
