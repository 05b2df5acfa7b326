"""A multiset of integers with a cheap maximum: per-resource "how many nodes have v free".

Placement screens read it to reject a cluster in O(distinct values) instead of O(nodes): the
largest free block of a resource, or how many pods of a size the free blocks could hold at most.
Updates are O(1) amortised; the maximum is kept in a lazily cleaned heap.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator


class Histogram:
    __slots__ = ("_counts", "_heap")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._heap: list[int] = []  # negated values; may hold stale entries

    def add(self, value: int) -> None:
        count = self._counts.get(value, 0)
        self._counts[value] = count + 1
        if count == 0:
            heapq.heappush(self._heap, -value)
            if len(self._heap) > 2 * len(self._counts) + 32:
                self._heap = [-v for v in self._counts]
                heapq.heapify(self._heap)

    def remove(self, value: int) -> None:
        count = self._counts[value] - 1
        if count:
            self._counts[value] = count
        else:
            del self._counts[value]

    def max(self) -> int:
        """Largest value present, 0 when empty."""
        heap, counts = self._heap, self._counts
        while heap and -heap[0] not in counts:
            heapq.heappop(heap)
        return -heap[0] if heap else 0

    def items(self) -> Iterator[tuple[int, int]]:
        """(value, how many) pairs, in no particular order."""
        return iter(self._counts.items())

    def capacity(self, size: int) -> int:
        """How many items of `size` the values could hold at most, each value a separate bin."""
        return sum(n * (v // size) for v, n in self._counts.items())

    def __len__(self) -> int:
        return len(self._counts)

    def as_dict(self) -> dict[int, int]:
        return dict(self._counts)
