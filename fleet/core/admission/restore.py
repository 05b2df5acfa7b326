"""How a persisted unit is read back when a controller starts leading (the restore rules).

The unit's status holds its phase and times; a crash between two writes can leave it behind
what happened, and these rules correct it:

* a unit whose job is gone, being deleted, or is another job of the same name is left out: its
  quota was released when the job went;
* a unit whose binding already names a cluster counts as Running (placement was written, the
  unit's status not yet), at least one attempt made;
* a unit whose binding records that the queue evicted it (a reclaim or a preemption: the
  record is written before anything else) is back in its queue, Enqueued, whatever its own
  status still says: the eviction is finished, never made again;
* a Dequeued unit with no `dequeuedAt` (written by hand or by an older controller) starts its
  placement clock now.
"""

from __future__ import annotations

from fleet.core.admission.phases import (
    DEQUEUED,
    ENQUEUED,
    HOLDING,
    RUNNING,
    TERMINAL,
    UnitState,
)


def restored_state(
    state: UnitState, *, job_present: bool, placed: bool, now: float, evicted: bool = False
) -> UnitState | None:
    """The state to upsert the unit with after a restart (None: leave it out). `evicted`: its
    binding has no cluster and records a queue eviction not yet finished."""
    if not job_present:
        return None
    if evicted and not placed and state.phase in HOLDING:
        return UnitState(ENQUEUED, None, None, state.attempts)
    if placed and state.phase != RUNNING and state.phase not in TERMINAL:
        return UnitState(RUNNING, state.dequeued_at, None, max(state.attempts, 1))
    if state.phase == DEQUEUED and state.dequeued_at is None:
        return UnitState(DEQUEUED, now, None, state.attempts)
    return state


__all__ = ["restored_state"]
