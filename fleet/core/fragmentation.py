"""How fragmented free capacity is, given the mix of pods that arrive (after FGD, ATC '23).

Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", USENIX ATC '23) places
each task where it least increases the *expected* fragmentation of the cluster: free GPUs that
the tasks likely to come next cannot use. This module is that measure, for whole devices:

* For one node with free vector `v` and one pod shape `m` (per-pod requests, `g` accelerators):
  the accelerators `m` cannot use are `v[accel] - g * copies(m, v)`, where `copies` counts how
  many pods of `m` fit in `v` at once on every resource. So a node whose CPU is gone strands all
  its GPUs (`copies` is 0), and 6 free GPUs strand 2 for a 4-GPU pod. Shapes asking no
  accelerator strand nothing (they could not use one anyway).
* The node's fragmentation is the expectation over the mix: `sum(weight_m * stranded_m)`, in
  accelerators. A cluster's is the sum over its nodes.
* A placement's cost is how much it changes that sum: `F(v - k * r) - F(v)` on each node it
  touches. Negative means it fills a hole the mix could not use anyway.

At fleet scale a cluster is first ranked by `estimated_delta`, the same measure read off its
histogram of free accelerators (no node visited); placement then packs only the most promising
clusters and compares their exact figures.

The mix is a value (`WorkloadMix`), learned from recent arrivals (`arrivals.RecentArrivals`) or
built by hand; the measure is a pure function of a free vector and the mix, memoised per mix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang

#: Free vectors (and deltas) a mix remembers; cleared, not evicted, when full.
_CACHE_LIMIT = 1 << 16


class WorkloadMix:
    """A distribution of per-pod requests: (requests, weight) pairs, weights summing to 1.

    Equal requests are merged; the order is canonical (heaviest first, then by the requests'
    text), so two mixes built from the same counts are equal, hash equal, and measure the same.
    """

    __slots__ = ("_delta", "_devices", "_frag", "_hash", "shapes")

    def __init__(self, shapes: Iterable[tuple[Resources, float]]) -> None:
        merged: dict[Resources, float] = {}
        for requests, weight in shapes:
            if weight < 0:
                raise ValueError(f"weight of {requests} must not be negative, got {weight}")
            if weight > 0:
                merged[requests] = merged.get(requests, 0.0) + weight
        total = sum(merged.values())
        self.shapes: tuple[tuple[Resources, float], ...] = tuple(
            sorted(
                ((r, w / total) for r, w in merged.items()),
                key=lambda rw: (-rw[1], repr(rw[0])),
            )
        )
        self._hash = hash(tuple((r, round(w, 12)) for r, w in self.shapes))
        self._frag: dict[tuple[Resources, str], float] = {}
        self._delta: dict[tuple[Resources, Resources, int, str], float] = {}
        self._devices: dict[tuple[int, str], float] = {}

    @classmethod
    def of_counts(cls, counts: Iterable[tuple[Resources, int]]) -> WorkloadMix:
        """A mix from how many pods of each shape were seen."""
        return cls((r, float(n)) for r, n in counts)

    def __bool__(self) -> bool:
        return bool(self.shapes)

    def __len__(self) -> int:
        return len(self.shapes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WorkloadMix):
            return NotImplemented
        return self.shapes == other.shapes

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{w:.3f} x {r.describe()}" for r, w in self.shapes[:4])
        more = f", +{len(self.shapes) - 4} more" if len(self.shapes) > 4 else ""
        return f"WorkloadMix({inner}{more})"

    def fragmentation(self, free: Resources, accelerator: str) -> float:
        """Expected accelerators of a node with `free` that the mix's next pod cannot use."""
        key = (free, accelerator)
        found = self._frag.get(key)
        if found is not None:
            return found
        devices = free.get(accelerator, 0)
        value = 0.0
        if devices > 0:
            for requests, weight in self.shapes:
                size = requests.get(accelerator, 0)
                if size > 0:
                    value += weight * (devices - size * requests.copies_in(free))
        if len(self._frag) >= _CACHE_LIMIT:
            self._frag.clear()
        self._frag[key] = value
        return value

    def device_fragmentation(self, devices: int, accelerator: str) -> float:
        """`fragmentation` of a node seen by its free accelerators alone (CPU and memory taken
        as plentiful): what a cluster's histogram of free accelerators can tell."""
        key = (devices, accelerator)
        found = self._devices.get(key)
        if found is None:
            found = 0.0
            for requests, weight in self.shapes:
                size = requests.get(accelerator, 0)
                if size > 0:
                    found += weight * (devices % size)
            if len(self._devices) >= _CACHE_LIMIT:
                self._devices.clear()
            self._devices[key] = found
        return found

    def delta(self, free: Resources, requests: Resources, pods: int, accelerator: str) -> float:
        """How much placing `pods` pods of `requests` on a node with `free` changes its
        fragmentation (the caller has checked they fit)."""
        key = (free, requests, pods, accelerator)
        found = self._delta.get(key)
        if found is not None:
            return found
        value = self.fragmentation(free - requests * pods, accelerator) - self.fragmentation(
            free, accelerator
        )
        if len(self._delta) >= _CACHE_LIMIT:
            self._delta.clear()
        self._delta[key] = value
        return value


def assignment_delta(
    mix: WorkloadMix,
    frees: Iterable[tuple[Resources, Resources]],
    accelerator: str,
) -> float:
    """The change in fragmentation of an assignment, given each touched node's free vector
    before and after it (`(before, after)` pairs)."""
    return sum(
        mix.fragmentation(after, accelerator) - mix.fragmentation(before, accelerator)
        for before, after in frees
    )


def device_fragmentation(mix: WorkloadMix, devices: int, accelerator: str) -> float:
    """`fragmentation` of a node seen by its free accelerators alone (CPU and memory taken as
    plentiful): what a cluster's histogram of free accelerators can tell."""
    return mix.device_fragmentation(devices, accelerator)


def estimated_delta(gang: Gang, snapshot: ClusterSnapshot, mix: WorkloadMix) -> float:
    """The fragmentation a gang would add to a cluster, estimated from its histogram of free
    accelerators only (no nodes visited, constraints and CPU ignored): the same greedy as the
    packing, pod size by pod size, on free amounts with counts. Ranks clusters so that only
    the most promising are packed; 0.0 for gangs without accelerators."""
    accel = snapshot.accelerator
    demands = gang.accelerator_demands(accel)
    hist = snapshot.histogram(accel)
    if not demands or hist is None:
        return 0.0
    counts = hist.as_dict()
    cache = mix._devices

    def f(devices: int) -> float:
        found = cache.get((devices, accel))
        return found if found is not None else mix.device_fragmentation(devices, accel)

    total = 0.0
    for size, pods in demands:
        need = pods
        while need:
            best: tuple[float, int] | None = None
            for value, nodes in counts.items():
                if nodes > 0 and value >= size:
                    take = min(value // size, need)
                    candidate = ((f(value - take * size) - f(value)) / take, value)
                    if best is None or candidate < best:
                        best = candidate
            if best is None:
                return math.inf
            value = best[1]
            take = min(value // size, need)
            nodes = min(counts[value], need // take)
            left = value - take * size
            counts[value] -= nodes
            counts[left] = counts.get(left, 0) + nodes
            total += nodes * (f(left) - f(value))
            need -= nodes * take
    return total
