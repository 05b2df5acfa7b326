"""The workload mix the fragmentation score expects, learned from the gangs that recently arrived.

Why learned and not configured: the mix FGD needs is the distribution of the pods that will
come next, which the recent past predicts better than a number an operator wrote down once
(teams, models and sweeps change week to week; a configured mix goes stale silently). A window
of the last `window` gangs follows that drift; a configured mix can still be passed to
`place` directly (`WorkloadMix`) where an operator knows better.

Determinism and reuse: the mix is rebuilt only every `refresh` arrivals (at first after 1, 2,
4, 8, ... arrivals, so it is soon representative), so between rebuilds it is one unchanging
value: placement can reuse per-cluster answers computed for it, and the same arrivals always
give the same mix. Every pod counts once (FGD's tasks are
pods), so a 16-worker gang weighs 16 times a single-pod job. Only the `shapes` most common pod
shapes are kept; the rest are rare enough not to move the expectation.
"""

from __future__ import annotations

from collections import deque

from fleet.core.fragmentation import WorkloadMix
from fleet.core.resources import Resources
from fleet.core.workload import Gang

DEFAULT_WINDOW = 2000
DEFAULT_REFRESH = 100
DEFAULT_SHAPES = 32


def mix_of(gang: Gang) -> WorkloadMix:
    """The mix of one gang's own pods: what the score expects before anything arrived."""
    return WorkloadMix.of_counts((c.requests, n) for c, n in gang.minimum)


class RecentArrivals:
    """Pod shapes of the last `window` gangs; `mix()` is their distribution."""

    def __init__(
        self,
        window: int = DEFAULT_WINDOW,
        refresh: int = DEFAULT_REFRESH,
        shapes: int = DEFAULT_SHAPES,
    ) -> None:
        if window < 1 or refresh < 1 or shapes < 1:
            raise ValueError("window, refresh and shapes must be at least 1")
        self.window = window
        self.refresh = refresh
        self.shapes = shapes
        self._recent: deque[tuple[tuple[Resources, int], ...]] = deque()
        self._counts: dict[Resources, int] = {}
        self._since = 0
        self._next = 1
        self._mix: WorkloadMix | None = None
        self.observed = 0

    def observe(self, gang: Gang) -> None:
        """One gang arrived."""
        pods = tuple((c.requests, n) for c, n in gang.minimum if n)
        self._recent.append(pods)
        self._count(pods, +1)
        if len(self._recent) > self.window:
            self._count(self._recent.popleft(), -1)
        self.observed += 1
        self._since += 1
        if self._since >= self._next:
            self._rebuild()

    def mix(self) -> WorkloadMix | None:
        """The mix as of the last rebuild; None before the first arrival."""
        return self._mix

    def _count(self, pods: tuple[tuple[Resources, int], ...], sign: int) -> None:
        counts = self._counts
        for requests, n in pods:
            left = counts.get(requests, 0) + sign * n
            if left:
                counts[requests] = left
            else:
                del counts[requests]

    def _rebuild(self) -> None:
        self._since = 0
        self._next = min(self.refresh, self.observed)
        common = sorted(self._counts.items(), key=lambda rn: (-rn[1], repr(rn[0])))
        self._mix = WorkloadMix.of_counts(common[: self.shapes]) if common else None
