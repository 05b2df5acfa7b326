"""The rules the shell used to hold: when a job's unit ends, how a unit is read back after a
restart, which reason a held job carries."""

from __future__ import annotations

import pytest

from fleet.core.admission import (
    DEQUEUED,
    ENQUEUED,
    FAILED,
    RUNNING,
    SUCCEED,
    TIMEOUT_BACKOFF,
    UnitState,
    restored_state,
    unit_end,
    waiting_reason,
)


@pytest.mark.parametrize(
    ("phase", "gave_up", "retried", "end"),
    [
        ("Succeeded", False, False, SUCCEED),
        ("Succeeded", False, True, SUCCEED),
        ("Failed", False, False, FAILED),
        ("Failed", False, True, None),  # failed over on a job failure: keeps its quota
        ("Running", True, True, FAILED),  # gave up after too many failovers
        ("Running", False, False, None),
        (None, False, False, None),
    ],
)
def test_a_unit_ends_when_its_job_succeeded_gave_up_or_failed_for_good(
    phase: str | None, gave_up: bool, retried: bool, end: str | None
) -> None:
    assert unit_end(phase, gave_up=gave_up, retried_on_failure=retried) == end


def test_restore_leaves_out_a_unit_whose_job_is_gone() -> None:
    state = UnitState(RUNNING, 10.0, None, 1)
    assert restored_state(state, job_present=False, placed=True, now=50.0) is None


def test_restore_counts_a_unit_whose_binding_names_a_cluster_as_running() -> None:
    for phase in (ENQUEUED, DEQUEUED, TIMEOUT_BACKOFF):
        state = UnitState(phase, 10.0 if phase == DEQUEUED else None, None, 0)
        got = restored_state(state, job_present=True, placed=True, now=50.0)
        assert got == UnitState(RUNNING, state.dequeued_at, None, 1)
    ended = UnitState(SUCCEED, 10.0, None, 1)
    assert restored_state(ended, job_present=True, placed=True, now=50.0) == ended


def test_restore_starts_the_placement_clock_of_a_dequeued_unit_without_one() -> None:
    state = UnitState(DEQUEUED, None, None, 2)
    assert restored_state(state, job_present=True, placed=False, now=50.0) == UnitState(
        DEQUEUED, 50.0, None, 2
    )


def test_reasons() -> None:
    assert waiting_reason(TIMEOUT_BACKOFF, "Backoff") == "TimeoutBackoff"
    assert waiting_reason(ENQUEUED, "NoQuota") == "NoQuota"
    assert waiting_reason(ENQUEUED, "NeverFits") == "NeverFits"
    assert waiting_reason(ENQUEUED, "Quota") == "SchedulingSuspended"
    assert waiting_reason(ENQUEUED, None) == "SchedulingSuspended"
