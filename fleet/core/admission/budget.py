"""How much work one eviction may destroy: a budget per GPU the claimant asks.

An eviction throws away the victims' work since their last checkpoint (`Runner.lost`); what it
gives is room for the claimant. The work lost by reclaim is heavy-tailed: on the Philly replay a
dozen of some 3,000 evictions (a 1- or 2-GPU claimant taking back an 8-GPU gang that had run for
130-190 hours) lost more than half of it. So one eviction may destroy at most
`reclaim_loss_per_gpu` of work per GPU the claimant asks: the claimant's size (module `work`:
every resource counted, in GPU-equivalents; at least one) x that many hours. A runner that alone
would lose more is no candidate, and a set of victims that would lose more is not chosen (module
`reclaim`, `choose`). The claimant then waits for other room, or for the runners to end, and is
tried again later.

It is judged only with what the controller knows at that moment: the victims' sizes and their
time since their start or their last reported checkpoint, and the claimant's demand (never how
long a job will really run). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LossBudget:
    """The work an eviction for one claimant may destroy at most, with its reason."""

    size: float
    """The claimant's size in GPU-equivalents (module `work`): its GPUs, for a GPU gang."""
    per_gpu: float
    """Seconds of work an eviction may destroy per GPU-equivalent the claimant asks (inf: no
    limit)."""

    @classmethod
    def of(cls, size: float, per_gpu: float) -> LossBudget:
        return cls(size, per_gpu)

    @property
    def gpu_hours(self) -> float:
        """GPU-equivalent hours the victims may lose at most (inf: no limit)."""
        if math.isinf(self.per_gpu):
            return math.inf
        return max(self.size, 1.0) * self.per_gpu / 3600.0

    def allows(self, lost: float) -> bool:
        """Whether victims losing `lost` GPU-equivalent hours fit the budget."""
        return lost <= self.gpu_hours

    def describe(self, spared: Sequence[float]) -> str:
        """Why a claim evicted nothing, in numbers: `spared`, the GPU-hours each runner it
        could have evicted would have lost beyond the budget."""
        return (
            f"reclaim spares {len(spared)} gang(s) that would lose more than its budget of "
            f"{self.gpu_hours:.1f} GPU-hours of work ({self.per_gpu / 3600:g} h for each of its "
            f"{max(self.size, 1.0):g} GPU(s)), up to {max(spared, default=0.0):.1f} GPU-hours; "
            "it waits for room that costs less"
        )


__all__ = ["LossBudget"]
