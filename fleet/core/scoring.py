"""Which fitting cluster to prefer: best fit, so large holes stay whole for large gangs.

A score is computed from a cluster's aggregates alone (no packing), which lets placement rank
every cluster cheaply and run the full check only on the best ones, in rank order.

* `hole_fit` (first): simulate best-fit-decreasing of the minimum set's accelerator demands on
  the cluster's histogram of free accelerators per node; the score is the demand divided by the
  free accelerators of the nodes it would touch. 1.0 means the gang fills its holes exactly
  (a 1-GPU job goes where a single GPU is free, not into an empty 8-GPU node). Gangs without
  accelerators score 1.0 everywhere.
* `share` (second): the gang's dominant share of the cluster's free capacity (max over
  resources of needed / free on schedulable nodes). Higher means a fuller cluster, so emptier
  clusters are kept for bigger gangs.
* cluster name (last): a deterministic tie break.

With a workload mix (`fragmentation`), placement ranks by `Score.fragmentation` first: how
much the gang's real node assignment in the cluster changes the cluster's expected
fragmentation (computed by placement from the packing, not from aggregates), then as above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fleet.core.histogram import Histogram
from fleet.core.resources import PODS
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang


@dataclass(frozen=True, slots=True, order=True)
class Score:
    hole_fit: float
    share: float
    #: With a workload mix: the change in expected fragmentation the gang's assignment makes,
    #: in accelerators (lower is better); ranked before the rest by placement.
    fragmentation: float | None = field(default=None, compare=False)

    def __str__(self) -> str:
        best = f"hole fit {self.hole_fit:.0%}, share {self.share:.0%}"
        if self.fragmentation is None:
            return best
        return f"fragmentation {fragmentation_text(self.fragmentation)}, {best}"


def fragmentation_text(value: float) -> str:
    """`+0.8 GPU`, `-1.0 GPU`: a change in expected fragmentation, in accelerators."""
    shown = round(value, 1) + 0.0  # no "-0.0"
    return f"{shown:+.1f} GPU"


Scorer = Callable[[Gang, ClusterSnapshot], Score]


def best_fit(gang: Gang, snapshot: ClusterSnapshot) -> Score:
    accel = snapshot.accelerator
    demands = gang.accelerator_demands(accel)
    hole_fit = 1.0
    if demands:
        hist = snapshot.histogram(accel)
        hole_fit = _hole_fit(demands, hist) if hist is not None else 0.0
    share = 0.0
    for name, needed in gang.minimum_requests.items():
        if name == PODS:
            continue
        free = snapshot.total_free(name, cordoned=False)
        share = max(share, needed / free if free > 0 else 1.0)
    return Score(round(hole_fit, 6), round(min(share, 1.0), 6))


def _hole_fit(demands: tuple[tuple[int, int], ...], hist: Histogram) -> float:
    """Demand / free accelerators of the nodes best-fit-decreasing touches (0.0 if it fails)."""
    fresh = hist.as_dict()  # untouched nodes: free amount -> how many
    touched: dict[int, int] = {}  # leftovers of nodes already used
    opened = 0  # free amount of the untouched nodes opened so far
    placed = 0
    for size, count in demands:
        need = count
        while need:
            candidates = [v for v in fresh if v >= size and fresh[v]]
            candidates += [v for v in touched if v >= size and touched[v]]
            if not candidates:
                return 0.0
            value = min(candidates)
            pool, is_fresh = (touched, False) if touched.get(value) else (fresh, True)
            per_node = value // size
            nodes = min(pool[value], -(-need // per_node))
            for _ in range(nodes):
                pods = min(per_node, need)
                need -= pods
                pool[value] -= 1
                left = value - pods * size
                touched[left] = touched.get(left, 0) + 1
                if is_fresh:
                    opened += value
                placed += pods * size
    return placed / opened if opened else 1.0
