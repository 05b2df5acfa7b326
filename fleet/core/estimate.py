"""Does a gang fit in one member cluster? Two estimators, chosen per fleet, overridable per policy.

* `sum` is ACK One's rule when the member has no resource reservation: the gang fits when, for
  every resource, the free amounts summed over schedulable (not cordoned) nodes cover the
  minimum set's total. Cheap, but blind to fragmentation: 8 free GPUs spread over 8 nodes
  "fit" a pod that needs 8 GPUs on one node.
* `nodes` (the default) fits only when every pod of the minimum set gets a real node, honouring
  resources, nodeSelector, required node affinity, taints and cordons (`packing.pack`). It never
  claims a fit without the assignment that proves it.

Both answer in two steps so placement can scan many clusters quickly: `screen` rejects from
per-cluster aggregates in O(distinct free amounts) and must never reject a gang that `check`
would accept; `check` is the full answer: an `Assignment`, or a sentence saying why not.
"""

from __future__ import annotations

from typing import Protocol

from fleet.core import domains
from fleet.core.assignment import Assignment, Slot
from fleet.core.explain import (
    Reason,
    Sentence,
    amount,
    clip,
    constraint_sentence,
    pods_needing,
    roster,
)
from fleet.core.fragmentation import WorkloadMix
from fleet.core.packing import Item, Unplaced, items_of, pack
from fleet.core.resources import ACCELERATORS, PODS, Resources, display_rank
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang


class Estimator(Protocol):
    name: str

    def screen(self, gang: Gang, snapshot: ClusterSnapshot) -> Reason | None:
        """A reason the gang surely does not fit, from aggregates only; None when it may fit."""

    def check(self, gang: Gang, snapshot: ClusterSnapshot) -> Assignment | Reason:
        """The assignment that makes the gang fit, or the reason it does not."""


def _total_shortfall(gang: Gang, snapshot: ClusterSnapshot, *, cordoned: bool) -> Reason | None:
    """The resource the cluster as a whole is shortest of (relative gap), as a sentence."""
    need = gang.minimum_requests
    gaps = []
    for name, wanted in need.items():
        have = max(snapshot.total_free(name, cordoned=cordoned), 0)
        if have < wanted:
            gaps.append(((have - wanted) / wanted, display_rank(name), name, have))
    if not gaps:
        return None
    _, _, name, have = min(gaps)
    return Sentence(
        _total_sentence,
        gang.minimum_parts,
        name,
        need[name],
        have,
        facts={"resource": name, "needed": need[name], "free": have},
    )


def _total_sentence(parts: tuple[tuple[str, int], ...], name: str, need: int, have: int) -> str:
    return clip(
        f"needs {amount(name, need)} in total ({roster(parts)}); only {amount(name, have)} free"
    )


class SumEstimator:
    """ACK One's rule: summed free resources of schedulable nodes cover the gang's total."""

    name = "sum"

    def screen(self, gang: Gang, snapshot: ClusterSnapshot) -> Reason | None:
        return _total_shortfall(gang, snapshot, cordoned=False)

    def check(self, gang: Gang, snapshot: ClusterSnapshot) -> Assignment | Reason:
        reason = self.screen(gang, snapshot)
        if reason is not None:
            return reason
        return Assignment(tuple(Slot(c.name, None, n, c.requests) for c, n in gang.minimum))


class NodesEstimator:
    """Fits only with a real node for every pod of the minimum set."""

    name = "nodes"

    def screen(self, gang: Gang, snapshot: ClusterSnapshot) -> Reason | None:
        # Aggregates over *all* nodes: a pod tolerating cordons may use cordoned nodes, and a
        # screen must never reject what `check` would accept. Strongest statement first: no node
        # can hold even one pod, then the cluster is short in total, then the holes are too few.
        # A gang with a required topology is then sized domain by domain (`domains`).
        return (
            _block_shortfall(gang, snapshot)
            or _total_shortfall(gang, snapshot, cordoned=True)
            or _accelerator_shortfall(gang, snapshot)
            or (domains.screen(gang, snapshot) if gang.topology else None)
        )

    def check(
        self,
        gang: Gang,
        snapshot: ClusterSnapshot,
        mix: WorkloadMix | None = None,
        *,
        preferred: bool = False,
    ) -> Assignment | Reason:
        """With `mix`, nodes are chosen by least fragmentation (`packing.pack`). A required
        topology rule is always kept (each rule's pods in one domain); a preferred one only
        with `preferred` (placement's first pass)."""
        rules = domains.applicable(gang, preferred) if gang.topology else ()
        if rules:
            if preferred:
                short = domains.screen(gang, snapshot, preferred=True)
                if short is not None:
                    return short
            found = domains.pack_in_domains(snapshot, gang, rules, mix)
            if isinstance(found, domains.DomainMiss):
                return domains.miss_sentence(found)
            result: Assignment | Unplaced = found
        else:
            result = pack(snapshot, gang, mix)
        if isinstance(result, Assignment):
            return result
        # Diagnosing walks every node group: do it only if someone reads the sentence.
        return Sentence(
            _diagnosis,
            snapshot,
            snapshot.version,
            gang,
            result,
            facts={
                "components": ",".join(name for name, _ in result.item.parts),
                "unplacedPods": result.missing,
            },
        )


SUM = SumEstimator()
NODES = NodesEstimator()
ESTIMATORS: dict[str, Estimator] = {SUM.name: SUM, NODES.name: NODES}


def estimator_named(name: str) -> Estimator:
    """`sum` or `nodes`; raises ValueError naming the choices otherwise."""
    try:
        return ESTIMATORS[name]
    except KeyError:
        raise ValueError(
            f"unknown estimator {name!r} (expected one of {sorted(ESTIMATORS)})"
        ) from None


def _accelerator_shortfall(gang: Gang, snapshot: ClusterSnapshot) -> Reason | None:
    """Pods needing >= t accelerators each need a node with >= t free; a node with v free holds
    at most v // t of them. Checked for every distinct per-pod size t (a necessary condition)."""
    accel = snapshot.accelerator
    demands = gang.accelerator_demands(accel)
    if not demands:
        return None
    hist = snapshot.histogram(accel)
    needed = 0
    for size, pods in demands:
        needed += pods  # pods needing `size` or more
        capacity = hist.capacity(size) if hist is not None else 0
        if needed > capacity:
            free = max(snapshot.total_free(accel), 0)
            return Sentence(
                _holes_sentence,
                gang,
                accel,
                size,
                free,
                capacity,
                facts={
                    "resource": accel,
                    "perPod": size,
                    "pods": needed,
                    "free": free,
                    "podsThatFit": capacity,
                },
            )
    return None


def _holes_sentence(gang: Gang, accel: str, size: int, free: int, capacity: int) -> str:
    parts = [(c.name, n) for c, n in gang.minimum if c.requests.get(accel, 0) >= size]
    biggest = next(c for c, _ in gang.minimum if c.requests.get(accel, 0) >= size)
    what = pods_needing(parts, biggest.requests, [accel])
    if len(parts) > 1:
        what = f"{roster(parts)} x {amount(accel, size)} or more"
    return clip(
        f"needs {what}; {amount(accel, free)} free but the free blocks hold only "
        f"{capacity} pods of {amount(accel, size)}"
    )


def _block_shortfall(gang: Gang, snapshot: ClusterSnapshot) -> Reason | None:
    """Some pod needs more of a resource than any single node has free."""
    for name, wanted, component, count in gang.peak_requests:
        largest = snapshot.max_free(name)
        if largest < wanted:
            return Sentence(
                _largest_block_sentence,
                [(component.name, count)],
                component.requests,
                name,
                max(snapshot.total_free(name), 0),
                largest,
                facts={
                    "resource": name,
                    "perPod": wanted,
                    "pods": count,
                    "free": max(snapshot.total_free(name), 0),
                    "largestFree": largest,
                },
            )
    return None


def _largest_block_sentence(
    parts: list[tuple[str, int]], requests: Resources, name: str, free: int, largest: int
) -> str:
    needs = pods_needing(parts, requests, [name])
    if free <= 0:
        return clip(f"needs {needs}; none free")
    block = str(largest) if name in ACCELERATORS else amount(name, largest)
    return clip(
        f"needs {needs}; {amount(name, free)} free but the largest free block on one node is "
        f"{block}"
    )


def _diagnosis(snapshot: ClusterSnapshot, version: int, gang: Gang, failure: Unplaced) -> str:
    """The diagnosis, if the snapshot is still the one packing failed on."""
    if snapshot.version != version:
        return clip(
            f"no node-by-node assignment for {roster(gang.minimum_parts)} "
            "(the cluster changed before this was explained)"
        )
    return diagnose(snapshot, gang, failure)


def diagnose(snapshot: ClusterSnapshot, gang: Gang, failure: Unplaced) -> str:
    """One sentence, with numbers, on why packing stopped at `failure.item`."""
    item = failure.item
    requests = item.requests
    constraints = item.constraints
    identity = constraints.needs_node_identity(snapshot.per_node_label_keys)
    reasons: dict[str, int] = {}
    nodes = capacity = 0
    totals: dict[str, int] = {}
    largest: dict[str, int] = {}
    for sig in snapshot.signatures():
        if not identity:
            why = sig.rejection(constraints)
            if why is not None:
                reasons[why] = reasons.get(why, 0) + sig.nodes
                continue
        for bucket in sig.buckets.values():
            for free, group in bucket.items():
                count = len(group)
                if identity:
                    count = 0
                    for name in group.nodes:
                        info = snapshot.node(name)
                        assert info is not None
                        why = constraints.rejection(
                            info.labels, info.taints, info.unschedulable, name
                        )
                        if why is None:
                            count += 1
                        else:
                            reasons[why] = reasons.get(why, 0) + 1
                if not count:
                    continue
                nodes += count
                capacity += count * requests.copies_in(free)
                for name in requests:
                    totals[name] = totals.get(name, 0) + count * free.get(name, 0)
                    largest[name] = max(largest.get(name, 0), free.get(name, 0))
    role_text = " and ".join(
        name if name.endswith("s") else f"{name}s" if n != 1 else name for name, n in item.parts
    )
    if nodes == 0:
        return constraint_sentence(role_text, reasons)
    count = item.count
    if capacity >= count:
        return clip(
            f"needs {_minimum_text(gang)} at once; each role fits alone but not together "
            f"({failure.missing} of {roster(item.parts)} left without a node)"
        )
    ranked = sorted(requests, key=display_rank)
    for name in ranked:
        if largest.get(name, 0) < requests[name]:
            return _largest_block_sentence(
                list(item.parts), requests, name, totals.get(name, 0), largest.get(name, 0)
            )
    for name in ranked:
        if totals.get(name, 0) < requests[name] * count:
            return clip(
                f"needs {pods_needing(item.parts, requests, [name])}; only "
                f"{amount(name, totals.get(name, 0))} free on the {nodes} nodes they may use"
            )
    free_text = ", ".join(amount(n, totals[n]) for n in ranked if n != PODS)
    return clip(
        f"needs {pods_needing(item.parts, requests)}; only {capacity} fit: the free "
        f"{free_text} are spread over different nodes"
    )


def _minimum_text(gang: Gang) -> str:
    return " + ".join(
        pods_needing(
            [(c.name, n)], c.requests, [r for r in sorted(c.requests, key=display_rank)[:1]]
        )
        for c, n in gang.minimum
    )


__all__ = [
    "ESTIMATORS",
    "NODES",
    "SUM",
    "Estimator",
    "Item",
    "NodesEstimator",
    "SumEstimator",
    "diagnose",
    "estimator_named",
    "items_of",
]
