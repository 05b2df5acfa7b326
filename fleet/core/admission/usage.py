"""What one quota node holds now (a Queue's status)."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.core.quota import MAX_JOBS, Caps
from fleet.core.resources import Resources


@dataclass(frozen=True, slots=True)
class QuotaUsage:
    """What one quota node holds now."""

    path: str
    used: Resources
    """Charged by Dequeued and Running units below it (max-jobs: how many of them)."""
    min: Resources
    max: Caps

    @property
    def jobs(self) -> int:
        return int(self.used.get(MAX_JOBS, 0))

    @property
    def borrowed(self) -> Resources:
        """What it holds beyond its min, per resource (a resource its min does not list is all
        borrowed; the job count is not a capacity and is left out)."""
        return Resources(
            {
                r: a - self.min.get(r, 0)
                for r, a in self.used.items()
                if r != MAX_JOBS and a > self.min.get(r, 0)
            }
        )
