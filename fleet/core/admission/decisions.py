"""What a pass decides, and why a unit waits: the values the core hands the shell to persist
and act on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from fleet.core.admission.hold import Hold, HoldEnd

WaitKind = Literal["NoQuota", "NeverFits", "Quota", "Behind", "Backoff", "Ready", "NoTree"]
NoticeKind = Literal["NoQuota", "NeverFits", "Queued"]


@dataclass(frozen=True, slots=True)
class Dequeue:
    """Release the unit's job to gang placement (phase Dequeued; it holds its quota now)."""

    key: str
    quota: str | None
    """Path of the quota node charged; None when a unit with no quota bypassed the queue."""
    message: str


@dataclass(frozen=True, slots=True)
class Backoff:
    """The unit was not placed in time: suspend its job again (phase TimeoutBackoff)."""

    key: str
    until: float
    message: str


@dataclass(frozen=True, slots=True)
class Requeue:
    """The unit's backoff ended: it is back in its queue (phase Enqueued)."""

    key: str
    message: str


@dataclass(frozen=True, slots=True)
class Notice:
    """A unit entered or left a state the user must hear about (a condition and an Event):
    `NoQuota` (its namespace or label matches no quota node), `NeverFits` (it asks more than a
    max on its path), `Queued` (back to normal: clear the condition)."""

    key: str
    kind: NoticeKind
    message: str


@dataclass(frozen=True, slots=True)
class WaitReason:
    """Why a unit is not dequeued (see `Admission.why`)."""

    kind: WaitKind
    message: str
    node: str | None = None
    """Path of the quota node that holds the unit back, when one does."""
    resource: str | None = None
    """The resource that is short there (`kube-queue/max-jobs` for the job count)."""


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict a running gang whole (reclaim or preemption): its quota is released now, it is
    back in its queue at its original place (phase Enqueued), and its member copy is to be
    deleted after the grace period. Not a failover."""

    key: str
    by: str
    """The unit it makes room for."""
    kind: Literal["Reclaim", "Preempt"]
    cluster: str
    message: str
    """For the victim's job and unit: who, why, in numbers."""
    lost_gpu_hours: float
    """Work it loses, in GPU-equivalent hours (module `work`): GPU-hours for a gang whose GPUs
    are its largest share of the quota tree's root."""


@dataclass
class Plan:
    """What one `plan(now)` decided. Already applied in memory; the shell persists each unit's new
    phase (and times) before acting on it, so a crash in between is replayed, never lost."""

    dequeue: list[Dequeue] = field(default_factory=list)
    backoff: list[Backoff] = field(default_factory=list)
    requeue: list[Requeue] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    evict: list[Evict] = field(default_factory=list)
    hold: list[Hold] = field(default_factory=list)
    """Room held for claimants from now on (module `hold`): the shell reserves each in its
    view of the member (and as Koordinator Reservations where the member takes them)."""
    unhold: list[tuple[Hold, HoldEnd]] = field(default_factory=list)
    """Holds that ended since the last plan, and why: the shell releases them."""
    wake_at: float | None = None
    """When to call `plan` again even if nothing happens (next timeout or backoff end)."""

    def __bool__(self) -> bool:
        return bool(
            self.dequeue
            or self.backoff
            or self.requeue
            or self.notices
            or self.evict
            or self.hold
            or self.unhold
        )
