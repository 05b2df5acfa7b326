"""Idempotent condition bookkeeping, shared by every controller that writes status.

Writing the same condition twice must not move lastTransitionTime; otherwise every resync would
look like a transition and the restart-safe timers in status would be meaningless.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from fleet.api._meta import Condition, ConditionStatus

__all__ = ["find_condition", "is_true", "set_condition"]


def find_condition(conditions: Sequence[Condition] | None, type_: str) -> Condition | None:
    """The condition of that type, if present."""
    for c in conditions or ():
        if c.type == type_:
            return c
    return None


def is_true(conditions: Sequence[Condition] | None, type_: str) -> bool:
    c = find_condition(conditions, type_)
    return c is not None and c.status == "True"


def set_condition(
    conditions: Sequence[Condition] | None,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None = None,
) -> list[Condition]:
    """A new list with the condition set; lastTransitionTime changes only when status does,
    and an unchanged condition comes back equal, so callers can skip the write."""
    previous = find_condition(conditions, type_)
    updated = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        observed_generation=observed_generation,
        last_transition_time=(
            previous.last_transition_time
            if previous is not None and previous.status == status
            else now
        ),
    )
    if previous is None:
        return [*(conditions or ()), updated]
    return [updated if c.type == type_ else c for c in conditions or ()]
