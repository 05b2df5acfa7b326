"""One unit as the admission holds it in memory (mutable: its phase, charge and place)."""

from __future__ import annotations

from fleet.core.admission.decisions import NoticeKind
from fleet.core.admission.phases import Phase, UnitSpec, UnitState
from fleet.core.quota import MAX_JOBS
from fleet.core.resources import Resources

OrderKey = tuple[int, float, str]


class Unit:
    __slots__ = (
        "attempts",
        "backoff_until",
        "charged",
        "demand",
        "dequeued_at",
        "order",
        "phase",
        "quota",
        "spec",
        "stuck",
        "token",
    )

    def __init__(self, spec: UnitSpec, state: UnitState) -> None:
        self.spec = spec
        self.demand = demand_of(spec.resources)
        self.phase: Phase = state.phase
        self.dequeued_at = state.dequeued_at
        self.backoff_until = state.backoff_until
        self.attempts = state.attempts
        self.quota: str | None = None
        #: Path whose lineage holds this unit's charge (None: holds nothing).
        self.charged: str | None = None
        #: Key in its line while Enqueued there.
        self.order: OrderKey | None = None
        #: The last NoQuota/NeverFits notice given (None: none, or cleared).
        self.stuck: NoticeKind | None = None
        #: Bumped on every phase change; stale heap entries carry an old token.
        self.token = 0


def demand_of(resources: Resources) -> Resources:
    """What a unit holds while dequeued: its resources and one job."""
    amounts = {r: a for r, a in resources.items() if a > 0 and r != MAX_JOBS}
    amounts[MAX_JOBS] = 1
    return Resources(amounts)
