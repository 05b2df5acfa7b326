"""A queue unit's phases, and what the shell tells the core about a unit (its spec) and
persists for it (its state), so that a restart rebuilds the same queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from fleet.core.resources import Resources

Phase = Literal["Enqueued", "Dequeued", "Running", "Succeed", "Failed", "TimeoutBackoff"]
ENQUEUED: Final = "Enqueued"
DEQUEUED: Final = "Dequeued"
RUNNING: Final = "Running"
SUCCEED: Final = "Succeed"
FAILED: Final = "Failed"
TIMEOUT_BACKOFF: Final = "TimeoutBackoff"
PHASES: Final[tuple[Phase, ...]] = (ENQUEUED, DEQUEUED, RUNNING, SUCCEED, FAILED, TIMEOUT_BACKOFF)
HOLDING: Final = frozenset({DEQUEUED, RUNNING})
"""Phases that hold quota."""
TERMINAL: Final = frozenset({SUCCEED, FAILED})


@dataclass(frozen=True, slots=True)
class UnitSpec:
    """What the queue needs to know about one queued job (a QueueUnit's spec, resolved)."""

    key: str
    """Unique id chosen by the caller (e.g. `<namespace>/<unit name>` or the job's UID)."""
    namespace: str
    """The job's namespace: picks the quota node when no quota label is set."""
    resources: Resources
    """The whole gang's total (every replica of every role)."""
    submitted: float
    """Submission time, seconds; the order's tie breaker after priority."""
    priority: int = 0
    """Higher goes first (the PriorityClass value, or the unit's own priority)."""
    quota_label: str | None = None
    """Value of the job's `quota.scheduling.alibabacloud.com/name` label, if any."""
    borrows: bool = True
    """False: its policy or namespace opted out of being reclaimed, so it never borrows either:
    it is dequeued only while its quota node stays within its min, and never evicted."""


@dataclass(frozen=True, slots=True)
class UnitState:
    """What the shell persists on the QueueUnit's status, so a restart rebuilds the queue."""

    phase: Phase = ENQUEUED
    dequeued_at: float | None = None
    """When the unit was last dequeued (or failed over); starts the placement timeout.
    Required with phase Dequeued."""
    backoff_until: float | None = None
    """With phase TimeoutBackoff: when the unit returns to its queue (absent = at once)."""
    attempts: int = 0
    """How many times the unit was dequeued; the backoff doubles with each."""
