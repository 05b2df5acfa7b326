"""Which reason a job held by its queue carries on its `Scheduled=False` condition.

`TimeoutBackoff` while its unit backs off; `NoQuota` and `NeverFits` (loud: a Warning Event
too, the user must act) when the core says so; `SchedulingSuspended` (Karmada's reason for a
binding held by `suspension.scheduling`) for every other wait.
"""

from __future__ import annotations

from typing import Final

from fleet.core.admission.phases import TIMEOUT_BACKOFF

REASON_QUEUED: Final = "SchedulingSuspended"
REASON_TIMEOUT_BACKOFF: Final = "TimeoutBackoff"
#: Why-kinds that get their own condition reason and a Warning Event.
LOUD_REASONS: Final = frozenset({"NoQuota", "NeverFits"})


def waiting_reason(phase: str | None, why_kind: str | None) -> str:
    """The condition reason of a job whose unit is in `phase` and waits for `why_kind`."""
    if phase == TIMEOUT_BACKOFF:
        return REASON_TIMEOUT_BACKOFF
    if why_kind in LOUD_REASONS:
        return why_kind
    return REASON_QUEUED


__all__ = ["LOUD_REASONS", "REASON_QUEUED", "REASON_TIMEOUT_BACKOFF", "waiting_reason"]
