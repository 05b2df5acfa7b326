"""When a queued job's unit ends: the one rule the controller and the simulator share.

A unit ends (and releases its quota at once) when its job succeeded, when it gave up (too many
failovers), or when it failed and its policy does not fail it over on a job failure (a job
retried elsewhere keeps its quota: that is a failover, not an end). Anything else runs on.
"""

from __future__ import annotations

from typing import Literal

from fleet.core.admission.phases import FAILED, SUCCEED

JobEnd = Literal["Succeed", "Failed"]


def unit_end(job_phase: str | None, *, gave_up: bool, retried_on_failure: bool) -> JobEnd | None:
    """The unit's terminal phase for a job in `job_phase` (the binding's: `Succeeded`,
    `Failed`, ...), or None while it has not ended."""
    if job_phase == "Succeeded":
        return SUCCEED
    if job_phase == "Released":
        return FAILED  # let go with its cluster: fleet no longer runs it, its quota is free
    if gave_up or (job_phase == "Failed" and not retried_on_failure):
        return FAILED
    return None


__all__ = ["JobEnd", "unit_end"]
