"""Status conditions, set the one way every fleet writer sets them.

Two shapes share the rule: metav1.Condition (GangBinding, MemberCluster) and the Kubeflow
JobCondition that fleet adds to the jobs users submit (it also carries `lastUpdateTime`).
Writing the same condition twice must not move `lastTransitionTime`; otherwise every resync would
look like a transition and the restart-safe timers in status would be meaningless. An unchanged
condition comes back equal, so callers compare and skip the write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from fleet.api._meta import Condition, ConditionStatus
from fleet.api._time import format_time

__all__ = ["condition_of", "find_condition", "is_true", "set_condition", "upsert_condition"]

#: Longest message a condition may carry (metav1.Condition allows 32768 characters).
MAX_MESSAGE = 32000


def find_condition(conditions: Sequence[Condition] | None, type_: str) -> Condition | None:
    """The condition of that type, if present."""
    for c in conditions or ():
        if c.type == type_:
            return c
    return None


def is_true(conditions: Sequence[Condition] | None, type_: str) -> bool:
    c = find_condition(conditions, type_)
    return c is not None and c.status == "True"


def condition_of(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> dict[str, Any]:
    """The condition of that type as a dict, or an empty dict."""
    for c in conditions or ():
        if (c or {}).get("type") == type_:
            return dict(c)
    return {}


def upsert_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime | float,
    *,
    observed_generation: int | None = None,
    shape: Literal["metav1", "kubeflow"] = "metav1",
    first: bool = False,
) -> list[dict[str, Any]]:
    """The conditions (JSON form) with `type_` set.

    `lastTransitionTime` moves only when the status does; a condition whose status, reason,
    message and observed generation are unchanged is kept as it is, so an unchanged list comes
    back equal. `shape="kubeflow"` writes a JobCondition (with `lastUpdateTime`, no
    observedGeneration). `first` puts the condition in front of the others: the STATE column of
    a Kubeflow job shows its last condition, which must stay the job's own.
    """
    current = [dict(c) for c in conditions or () if c]
    previous = next((c for c in current if c.get("type") == type_), None)
    message = message[:MAX_MESSAGE]
    stamp = format_time(now)
    if previous is not None and _same(previous, status, reason, message, observed_generation):
        updated = previous
    else:
        transition = (
            previous.get("lastTransitionTime") or stamp
            if previous is not None and previous.get("status") == status
            else stamp
        )
        updated = {"type": type_, "status": status, "reason": reason, "message": message}
        if shape == "kubeflow":
            updated |= {"lastUpdateTime": stamp, "lastTransitionTime": transition}
        else:
            updated["lastTransitionTime"] = transition
            if observed_generation is not None:
                updated["observedGeneration"] = observed_generation
    others = [c for c in current if c.get("type") != type_]
    if first:
        return [updated, *others]
    if previous is None:
        return [*others, updated]
    return [updated if c.get("type") == type_ else c for c in current]


def _same(
    previous: Mapping[str, Any],
    status: str,
    reason: str,
    message: str,
    observed_generation: int | None,
) -> bool:
    return (
        previous.get("status") == status
        and previous.get("reason") == reason
        and previous.get("message") == message
        and previous.get("observedGeneration") == observed_generation
    )


def set_condition(
    conditions: Sequence[Condition] | None,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None = None,
) -> list[Condition]:
    """`upsert_condition` for metav1.Condition models."""
    raw = upsert_condition(
        [c.to_dict() for c in conditions or ()],
        type_,
        status,
        reason,
        message,
        now,
        observed_generation=observed_generation,
    )
    return [Condition.from_dict(c) for c in raw]
