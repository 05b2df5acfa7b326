"""A quota node's `min`, one home for every way the queue asks "within min".

The queue asks five different questions about a node's guarantee; they differ in what is
counted (before or after the unit, with or without the victims) and in how strict the bound is.
Each has one function here, named for its question, so that no two drift apart:

* `below_min` (order across queues): is the node *using its guarantee* now, not borrowing?
  used < min.
* `fits_within_min` (who claims; whether an opted-out unit may go): would the unit run *on
  the guarantee* once admitted? used + unit <= min.
* `holds_within_min` (a dequeued unit's node claim): does a unit that already holds its quota
  run on it? (used - unit) + unit <= min.
* `stays_at_min` (which victim sets are allowed): does evicting these gangs leave every node
  on their side of the tree at its min? used - released >= min.
* `fragile_depth` (victims ruled out before any set is tried): how far up does one gang's
  eviction alone take a node below its min? used - gang < min.

In every one, a resource the node's `min` does not list (or lists as 0 for the last two) is not
guaranteed and so not looked at, and `kube-queue/max-jobs` is never a guarantee (except in
`below_min`, which only looks at what the unit asks: a unit asks one job, and a `min` that lists
max-jobs counts them). The first two also ask that the unit ask at least one guaranteed resource:
a node with no min in what the unit asks guarantees it nothing.

Pure: `used` is per quota path, per resource (what the admission holds); nothing is changed.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from fleet.core.quota import MAX_JOBS, QuotaTree

#: Used (or released) per quota path, per resource.
Usage = Mapping[str, Mapping[str, int]]


def below_min(tree: QuotaTree, used: Usage, path: str, demand: Mapping[str, int]) -> bool:
    """Whether node `path` is still below its min in every resource its min lists and `demand`
    asks: it is using its guarantee, not borrowing. The unit's size does not matter, so a big
    gang of a team under its min is not ranked behind small jobs of teams over theirs."""
    minimum = tree.nodes[path].min
    have = used.get(path, {})
    asked = False
    for resource, amount in demand.items():
        low = minimum.get(resource, None)
        if low is None or amount <= 0:
            continue
        if have.get(resource, 0) >= low:
            return False
        asked = True
    return asked


def fits_within_min(tree: QuotaTree, used: Usage, path: str, demand: Mapping[str, int]) -> bool:
    """Whether node `path`, holding `used` plus `demand`, stays within its min in every
    resource its min lists and `demand` asks (and `demand` asks at least one): the unit would
    run on the node's guarantee, not on borrowed capacity."""
    minimum = tree.nodes[path].min
    have = used.get(path, {})
    asked = False
    for resource, amount in demand.items():
        low = minimum.get(resource, None)
        if resource == MAX_JOBS or low is None or amount <= 0:
            continue
        if have.get(resource, 0) + amount > low:
            return False
        asked = True
    return asked


def holds_within_min(tree: QuotaTree, used: Usage, path: str, demand: Mapping[str, int]) -> bool:
    """`fits_within_min` for a unit already charged to `path` (`used` counts it): whether,
    without it, it would fit the min. A dequeued unit runs on its node's guarantee."""
    without = {path: {r: a - demand.get(r, 0) for r, a in used.get(path, {}).items()}}
    return fits_within_min(tree, without, path, demand)


def stays_at_min(
    tree: QuotaTree, used: Usage, released: Usage, path: str, shared: Collection[str]
) -> bool:
    """Whether every node of `path`'s lineage up to (not including) the first in `shared` is
    still at or above its min, in every resource its min lists, once `released` is taken off:
    evicting the gangs that released it takes no node on their side of the tree below its min."""
    for node in tree.nodes[path].lineage:
        if node in shared:
            break
        have = used.get(node, {})
        gone = released.get(node, {})
        for resource, low in tree.nodes[node].min.items():
            if resource == MAX_JOBS or low <= 0:
                continue
            if have.get(resource, 0) - gone.get(resource, 0) < low:
                return False
    return True


def fragile_depth(tree: QuotaTree, used: Usage, path: str, demand: Mapping[str, int]) -> float:
    """How far up `path`'s lineage (0: the node itself) lies the first node that taking
    `demand` away alone would put below its min (inf: none)."""
    for depth, node in enumerate(tree.nodes[path].lineage):
        have = used.get(node, {})
        if any(
            resource != MAX_JOBS
            and low > 0
            and have.get(resource, 0) - demand.get(resource, 0) < low
            for resource, low in tree.nodes[node].min.items()
        ):
            return float(depth)
    return math.inf


__all__ = [
    "Usage",
    "below_min",
    "fits_within_min",
    "fragile_depth",
    "holds_within_min",
    "stays_at_min",
]
