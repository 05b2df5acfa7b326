"""Work lost: how much of the fleet a gang holds, every resource counted, as the quota sees it.

An eviction throws away what the victims computed since their last checkpoint (since their start
when they report none): their *size* times those hours (`Runner.lost`). The size counts every
resource the gang holds, not its GPUs alone, so a CPU-only gang that has run for days is not a
free victim:

* each resource is weighed as a share of the quota tree's **root** (its `max`, else its `min`,
  for that resource): the root is the whole of what the queue gives out, and each resource is
  capped there on its own, as every node of the tree caps it;
* a gang's size is its **dominant share**: the largest of its shares, as DRF (and Kueue's fair
  sharing) weighs a workload. Adding the shares up would charge a GPU gang twice for the CPUs
  and memory that come with its GPUs;
* the size is given in **GPU-equivalents**: the dominant share times the root's GPUs. A gang
  whose largest share is its GPUs weighs exactly its GPUs (every GPU-only figure is what it was);
  a gang of 64 CPUs under a root of 1,000 CPUs and 100 GPUs weighs 6.4. Where the root lists no
  GPUs, the unit is one CPU core of the root (one "GPU-hour" there is a CPU core-hour), and where
  it lists neither, the whole root;
* `kube-queue/max-jobs` is a count of jobs, not work: it weighs nothing; a resource the root
  lists neither in `max` nor in `min` (or lists as 0) has no share to weigh and counts for
  nothing either, except GPUs, which always weigh one each.

The loss budget (module `budget`) and the worth rule (module `worth`) weigh the claimant's size by
the same rule. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from fleet.core.quota import MAX_JOBS, QuotaTree
from fleet.core.resources import CPU, GPU

#: Millicores in a CPU core (the unit where the root lists no GPUs).
_MILLI = 1000.0


@dataclass(frozen=True, slots=True)
class WorkWeights:
    """GPU-equivalents per unit of each resource (kube-scheduler's integer units: millicores,
    bytes, devices); a resource absent here weighs nothing."""

    per_unit: Mapping[str, float]

    @classmethod
    def of(cls, tree: QuotaTree | None) -> WorkWeights:
        """The weights of `tree`'s root (see the module docstring); GPUs alone without a tree."""
        if tree is None:
            return GPUS_ONLY
        root = tree.nodes[tree.root]
        caps: dict[str, float] = {r: float(a) for r, a in root.min.items() if a > 0}
        caps.update((r, float(a)) for r, a in root.max.items() if a > 0)
        caps.pop(MAX_JOBS, None)
        if GPU in caps:
            unit = caps[GPU]
        elif CPU in caps:
            unit = caps[CPU] / _MILLI
        else:
            unit = 1.0
        weights = {resource: unit / cap for resource, cap in caps.items()}
        weights[GPU] = 1.0  # its own share times the root's GPUs, or one where none are listed
        return cls(MappingProxyType(weights))

    def size(self, demand: Mapping[str, int]) -> float:
        """The gang's dominant share of the root, in GPU-equivalents."""
        weights = self.per_unit
        return max((amount * weights.get(r, 0.0) for r, amount in demand.items()), default=0.0)


GPUS_ONLY = WorkWeights(MappingProxyType({GPU: 1.0}))
"""A GPU weighs one, nothing else weighs (no tree in force)."""


__all__ = ["GPUS_ONLY", "WorkWeights"]
