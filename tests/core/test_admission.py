"""Admission: max and max-jobs up the tree, order, policies, borrowing, TimeoutBackoff, release,
no-quota jobs, tree changes and restarts, each with an answer worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.core.admission import (
    DEQUEUED,
    ENQUEUED,
    FAILED,
    RUNNING,
    SUCCEED,
    TIMEOUT_BACKOFF,
    Admission,
    AdmissionSettings,
    UnitSpec,
    UnitState,
)
from fleet.core.quota import MAX_JOBS, check_tree
from fleet.core.resources import GPU, Resources

from .test_quota import SEED_SPEC


def unit(key: str, ns: str = "default", gpus: int = 1, *, at: float = 0.0, prio: int = 0,
         label: str | None = None) -> UnitSpec:  # fmt: skip
    return UnitSpec(key, ns, Resources({GPU: gpus, "cpu": 1000 * gpus}), at, prio, label)


def teams(root_gpus: int = 8, **leaves: Any) -> dict[str, Any]:
    """`teams(8, a=(min, max), b=(min, max, max_jobs))`: one leaf per team, namespace = name."""
    children = []
    for name, limits in leaves.items():
        node: dict[str, Any] = {"name": name, "namespaces": [name], "min": {GPU: limits[0]}}
        node["max"] = {GPU: limits[1]}
        if len(limits) > 2:
            node["max"][MAX_JOBS] = limits[2]
        children.append(node)
    return {
        "root": {
            "name": "root",
            "min": {GPU: root_gpus},
            "max": {GPU: root_gpus},
            "children": children,
        }
    }


def admission(spec: dict[str, Any], **settings: Any) -> Admission:
    a = Admission(AdmissionSettings(**settings))
    check = a.apply_tree_spec(spec)
    assert check.valid, check.problems
    return a


def dequeued(a: Admission, now: float = 0.0) -> list[str]:
    return [d.key for d in a.plan(now).dequeue]


# --- The seeds' example -------------------------------------------------------------------


def test_seeds_max_jobs_one_runs_one_job_at_a_time():
    a = admission(SEED_SPEC)
    a.upsert(unit("default/first", at=1))
    a.upsert(unit("default/second", at=2))
    assert dequeued(a, 10) == ["default/first"]
    reason = a.why("default/second", 10)
    assert reason is not None and reason.kind == "Quota"
    assert reason.node == "root/child-2" and reason.resource == MAX_JOBS
    assert "1 of max 1 jobs already dequeued" in reason.message
    assert a.placed("default/first", 11)
    assert dequeued(a, 12) == []
    assert a.finished("default/first", True, 20)
    assert dequeued(a, 20) == ["default/second"]
    assert a.phase("default/first") == SUCCEED


# --- Max on every node up to the root -----------------------------------------------------


def test_leaf_max_holds_a_job_the_root_could_take():
    a = admission(teams(8, a=(0, 4), b=(0, 8)))
    a.upsert(unit("a1", "a", 3))
    a.upsert(unit("a2", "a", 2, at=1))
    assert dequeued(a) == ["a1"]
    reason = a.why("a2", 0)
    assert reason is not None and reason.node == "root/a" and reason.resource == GPU
    assert "3 GPUs of max 4 GPUs in use, needs 2 GPUs more" in reason.message


def test_root_max_holds_jobs_of_leaves_with_room():
    a = admission(teams(8, a=(4, 8), b=(4, 8)))
    a.upsert(unit("a1", "a", 6))
    assert dequeued(a) == ["a1"]
    a.upsert(unit("b1", "b", 4, at=1))
    assert dequeued(a) == []
    reason = a.why("b1", 0)
    assert reason is not None and reason.node == "root"
    a.finished("a1", False, 5)
    assert a.phase("a1") == FAILED
    assert dequeued(a, 5) == ["b1"]


def test_max_jobs_counts_at_a_parent_too():
    spec = {
        "root": {
            "name": "root",
            "children": [
                {
                    "name": "dept",
                    "max": {MAX_JOBS: 2},
                    "children": [
                        {"name": "a", "namespaces": ["a"]},
                        {"name": "b", "namespaces": ["b"]},
                    ],
                }
            ],
        }
    }
    a = admission(spec)
    for i, ns in enumerate(("a", "b", "a")):
        a.upsert(unit(f"{ns}{i}", ns, at=i))
    assert dequeued(a) == ["a0", "b1"]
    assert a.usage("root/dept").jobs == 2
    reason = a.why("a2", 0)
    assert reason is not None and reason.node == "root/dept"


def test_uncapped_resources_never_hold_a_job():
    a = admission(teams(8, a=(0, 8)))
    a.upsert(UnitSpec("a1", "a", Resources({GPU: 1, "memory": 10**15, "pods": 9}), 0.0))
    assert dequeued(a) == ["a1"]


def test_a_max_of_zero_is_a_cap_not_no_cap():
    """`max: {gpu: 0}` admits no GPU job and `max-jobs: 0` no job at all: both can never be
    dequeued while the tree says so (a missing resource, by contrast, is uncapped)."""
    a = admission(teams(8, a=(0, 0), b=(0, 8, 0)))
    a.upsert(unit("a1", "a"))
    a.upsert(unit("b1", "b"))
    plan = a.plan(0.0)
    assert [d.key for d in plan.dequeue] == []
    assert sorted((n.key, n.kind) for n in plan.notices) == [
        ("a1", "NeverFits"),
        ("b1", "NeverFits"),
    ]
    assert a.usage("root/a").max == {GPU: 0}


# --- Order and policies -----------------------------------------------------------------


def test_priority_then_submission_time():
    a = admission(teams(8, a=(0, 1, 1)))
    a.upsert(unit("old-low", "a", at=1, prio=0))
    a.upsert(unit("new-high", "a", at=5, prio=10))
    a.upsert(unit("older-high", "a", at=3, prio=10))
    order = []
    for now in range(3):
        (key,) = dequeued(a, now)
        order.append(key)
        a.finished(key, True, now)
    assert order == ["older-high", "new-high", "old-low"]


def test_priority_policy_lets_small_jobs_pass_a_large_head():
    a = admission(teams(8, a=(0, 8)))
    a.upsert(unit("running", "a", 6))
    assert dequeued(a) == ["running"]
    a.upsert(unit("large", "a", 4, at=1))
    a.upsert(unit("small", "a", 2, at=2))
    assert dequeued(a, 1) == ["small"]


def test_block_policy_lets_nothing_pass_the_head():
    a = admission(teams(8, a=(0, 8)))
    a.configure_queue("root/a", "Block")
    a.upsert(unit("running", "a", 6))
    assert dequeued(a) == ["running"]
    a.upsert(unit("large", "a", 4, at=1))
    a.upsert(unit("small", "a", 2, at=2))
    assert dequeued(a, 1) == []
    reason = a.why("small", 1)
    assert reason is not None and reason.kind == "Behind" and "behind large" in reason.message
    a.finished("running", True, 2)
    assert dequeued(a, 2) == ["large", "small"]


def test_block_sets_aside_a_head_that_can_never_fit():
    a = admission(teams(8, a=(0, 4)))
    a.configure_queue("root/a", "Block")
    a.upsert(unit("huge", "a", 6, at=0))
    a.upsert(unit("small", "a", 1, at=1))
    plan = a.plan(0)
    assert [d.key for d in plan.dequeue] == ["small"]
    assert [(n.key, n.kind) for n in plan.notices] == [("huge", "NeverFits")]
    assert "asks 6 GPUs but the max of quota root/a is 4 GPUs" in plan.notices[0].message
    reason = a.why("huge", 0)
    assert reason is not None and reason.kind == "NeverFits"


def test_switching_a_queue_to_block_and_back():
    a = admission(teams(8, a=(0, 8)))
    a.upsert(unit("running", "a", 6))
    dequeued(a)
    a.configure_queue("root/a", "Block")
    a.upsert(unit("large", "a", 4, at=1))
    a.upsert(unit("small", "a", 2, at=2))
    assert dequeued(a, 1) == []
    a.configure_queue("root/a", "Priority")
    assert dequeued(a, 2) == ["small"]


def test_fifo_ignores_priority():
    a = admission(teams(8, a=(0, 1, 1)))
    a.configure_queue("root/a", "FIFO")
    a.upsert(unit("early", "a", at=1, prio=0))
    a.upsert(unit("late-high", "a", at=2, prio=100))
    assert dequeued(a) == ["early"]


def test_unknown_policy_is_refused_with_the_queue_named():
    a = admission(teams(8, a=(0, 8)))
    with pytest.raises(ValueError, match="root/a: queuePolicy 'Strict'"):
        a.configure_queue("root/a", "Strict")


def test_queue_priority_orders_queues():
    a = admission(teams(4, a=(0, 4), b=(0, 4)))
    a.configure_queue("root/b", "Priority", priority=5)
    a.upsert(unit("a1", "a", 4, at=0))
    a.upsert(unit("b1", "b", 4, at=1))
    assert dequeued(a) == ["b1"]


# --- Borrowing ---------------------------------------------------------------------------


def test_borrowing_idle_min_up_to_max_and_no_reclaim():
    a = admission(teams(8, a=(4, 8), b=(4, 8)))
    for i in range(8):
        a.upsert(unit(f"a{i}", "a", 1, at=i))
    assert len(dequeued(a)) == 8  # a borrows all of b's idle min
    usage = a.usage("root/a")
    assert usage.used[GPU] == 8 and usage.borrowed == Resources(
        {GPU: 4, "cpu": 8000}
    )  # min lists no CPU
    a.upsert(unit("b1", "b", 1, at=10))
    assert dequeued(a, 10) == []  # not reclaimed: b waits for a borrower to end
    a.finished("a7", True, 11)
    assert dequeued(a, 11) == ["b1"]


def test_a_team_within_its_min_goes_before_a_borrower():
    a = admission(teams(8, a=(4, 8), b=(4, 8)))
    for i in range(6):
        a.upsert(unit(f"a{i}", "a", 1, at=i))
    a.upsert(unit("b0", "b", 2, at=0))
    assert len(dequeued(a)) == 7
    # Now a holds 6 (2 borrowed), b holds 2: full. Both queue more; b0's 2 GPUs free.
    a.upsert(unit("a-next", "a", 2, at=20))
    a.upsert(unit("b-next", "b", 2, at=30))
    a.finished("b0", True, 40)
    # b stays within its min with 2 more, a would not: b goes first although a's job is older.
    assert dequeued(a, 40) == ["b-next"]


# --- TimeoutBackoff and failover ------------------------------------------------------------


def test_unplaced_unit_backs_off_releases_and_returns_in_its_place():
    a = admission(teams(8, a=(0, 4)), placement_timeout=100, backoff_seconds=10)
    a.upsert(unit("first", "a", 4, at=0))
    a.upsert(unit("second", "a", 4, at=1))
    plan = a.plan(0)
    assert [d.key for d in plan.dequeue] == ["first"] and plan.wake_at == 100
    plan = a.plan(100)
    assert [b.key for b in plan.backoff] == ["first"]
    assert "not placed within 100 s" in plan.backoff[0].message
    assert [d.key for d in plan.dequeue] == ["second"]  # the released quota is used at once
    assert a.phase("first") == TIMEOUT_BACKOFF and not a.holds("first")
    assert plan.wake_at == 110
    reason = a.why("first", 105)
    assert reason is not None and reason.kind == "Backoff" and "in 5 s" in reason.message
    plan = a.plan(110)
    assert [r.key for r in plan.requeue] == ["first"] and a.phase("first") == ENQUEUED
    a.finished("second", True, 120)
    assert dequeued(a, 120) == ["first"]
    state = a.state("first")
    assert state is not None and state.attempts == 2
    # The second timeout backs off twice as long.
    plan = a.plan(220)
    assert plan.backoff[0].until == 240


def test_placed_in_time_never_times_out():
    a = admission(teams(8, a=(0, 4)), placement_timeout=100)
    a.upsert(unit("job", "a", 4))
    dequeued(a)
    assert a.placed("job", 50)
    plan = a.plan(1000)
    assert not plan.backoff and plan.wake_at is None and a.phase("job") == RUNNING


def test_failover_keeps_quota_and_restarts_the_placement_clock():
    a = admission(teams(8, a=(0, 4)), placement_timeout=100)
    a.upsert(unit("job", "a", 4))
    dequeued(a)
    a.placed("job", 10)
    a.upsert(unit("newer", "a", 4, at=50))
    assert a.unplaced("job", 500)
    assert a.phase("job") == DEQUEUED and a.holds("job")
    assert dequeued(a, 501) == []  # the newer job does not jump the failed-over one
    assert a.placed("job", 550)
    assert not a.unplaced("newer", 551)


def test_release_happens_once():
    a = admission(teams(8, a=(0, 8)))
    a.upsert(unit("job", "a", 4))
    dequeued(a)
    assert a.finished("job", True, 1)
    assert not a.finished("job", False, 2)
    assert a.remove("job")
    assert not a.remove("job")
    assert a.usage("root").used == Resources()


def test_deleting_a_waiting_or_dequeued_unit_frees_its_place():
    a = admission(teams(8, a=(0, 4, 1)))
    a.upsert(unit("d", "a", 1, at=0))
    a.upsert(unit("w", "a", 1, at=1))
    assert dequeued(a) == ["d"]
    a.remove("w")
    a.remove("d")
    a.upsert(unit("next", "a", 1, at=2))
    assert dequeued(a, 2) == ["next"]


# --- Jobs with no quota ------------------------------------------------------------------


def test_no_quota_waits_with_a_notice_until_the_tree_lists_the_namespace():
    a = admission(teams(8, a=(0, 8)))
    a.upsert(unit("x1", "x"))
    plan = a.plan(0)
    assert plan.dequeue == []
    assert [(n.key, n.kind) for n in plan.notices] == [("x1", "NoQuota")]
    assert "namespace 'x' is in no quota node" in plan.notices[0].message
    assert a.plan(1).notices == []  # said once
    a.apply_tree_spec(teams(8, a=(0, 8), x=(0, 8)))
    plan = a.plan(2)
    assert [d.key for d in plan.dequeue] == ["x1"]
    assert [(n.key, n.kind) for n in plan.notices] == [("x1", "Queued")]


def test_no_quota_bypass_dequeues_without_charging():
    a = admission(teams(8, a=(0, 8)), no_quota="bypass")
    a.upsert(unit("x1", "x", 100))
    plan = a.plan(0)
    assert [(d.key, d.quota) for d in plan.dequeue] == [("x1", None)]
    assert "bypasses the queue" in plan.dequeue[0].message
    assert a.usage("root").used == Resources()


def test_unknown_quota_label_is_no_quota():
    a = admission(teams(8, a=(0, 8)))
    a.upsert(unit("j", "a", label="nope"))
    reason = a.why("j", 0)
    assert reason is not None and reason.kind == "NoQuota" and "'nope'" in reason.message
    a.upsert(unit("k", "x", label="a"))
    assert dequeued(a) == ["k"]


def test_nothing_is_dequeued_before_the_tree_is_known():
    a = Admission(AdmissionSettings(no_quota="bypass"))
    a.upsert(unit("j", "a"))
    plan = a.plan(0)
    assert not plan.dequeue and not plan.notices
    reason = a.why("j", 0)
    assert reason is not None and reason.kind == "NoTree"
    a.set_tree(None)
    assert [d.key for d in a.plan(1).dequeue] == ["j"]


# --- Tree changes ----------------------------------------------------------------------------


def test_shrinking_a_max_keeps_running_jobs_and_holds_new_ones():
    a = admission(teams(8, a=(0, 8)))
    a.upsert(unit("r1", "a", 4))
    a.upsert(unit("r2", "a", 4, at=1))
    assert dequeued(a) == ["r1", "r2"]
    a.placed("r1", 1)
    moved = a.set_tree(check_tree(teams(8, a=(0, 2))).tree)
    assert moved == {}
    assert a.phase("r1") == RUNNING and a.phase("r2") == DEQUEUED
    assert a.usage("root/a").used[GPU] == 8  # over the new max, nothing released
    a.upsert(unit("new", "a", 1, at=2))
    assert dequeued(a, 2) == []
    a.finished("r1", True, 3)
    a.finished("r2", True, 3)
    assert dequeued(a, 3) == ["new"]


def test_an_invalid_tree_is_refused_and_the_last_valid_one_stays():
    a = admission(teams(8, a=(0, 4)))
    a.upsert(unit("job", "a", 4))
    dequeued(a)
    bad = teams(8, a=(6, 4))
    check = a.apply_tree_spec(bad)
    assert not check.valid and check.errors[0].rule == "MinWithinMax"
    assert a.tree is not None and a.tree.node("root/a").max[GPU] == 4
    assert a.holds("job") and a.usage("root/a").used[GPU] == 4


def test_moving_a_namespace_moves_waiting_and_running_units():
    a = admission(teams(8, a=(0, 8), b=(0, 8)))
    a.upsert(unit("run", "x", 2, label="a"))
    a.upsert(unit("wait", "b", 20))
    dequeued(a)
    spec = teams(32, a=(0, 8), b=(0, 8))
    spec["root"]["children"][0]["name"] = "team-a"
    moved = a.set_tree(check_tree(spec).tree)
    assert moved == {"run": None}  # its label names a node that is gone
    assert not a.holds("run") and a.phase("run") == DEQUEUED  # uncharged, not lost


# --- Restart ---------------------------------------------------------------------------------


def test_restart_rebuilds_the_same_usage_and_timers():
    spec = teams(8, a=(0, 8))
    a = admission(spec, placement_timeout=100, backoff_seconds=10)
    specs = [unit(f"j{i}", "a", 3, at=i) for i in range(4)]
    for s in specs:
        a.upsert(s)
    dequeued(a, 0)  # j0, j1 (6 of 8 GPUs)
    a.placed("j0", 5)
    a.plan(100)  # j1 times out, backs off until 110; j2 dequeued
    states = {s.key: a.state(s.key) for s in specs}
    assert [states[k].phase for k in ("j0", "j1", "j2", "j3")] == [  # type: ignore[union-attr]
        RUNNING,
        TIMEOUT_BACKOFF,
        DEQUEUED,
        ENQUEUED,
    ]
    b = Admission(AdmissionSettings(placement_timeout=100, backoff_seconds=10))
    for s in reversed(specs):  # any order
        b.upsert(s, states[s.key])
    b.apply_tree_spec(spec)
    assert b.usage("root").used == a.usage("root").used
    for x in (a, b):
        plan = x.plan(110)
        assert [r.key for r in plan.requeue] == ["j1"] and plan.dequeue == []
        assert plan.wake_at == 200  # j2's placement deadline survived
        x.finished("j0", True, 111)
        assert [d.key for d in x.plan(111).dequeue] == ["j1"]


def test_restoring_dequeued_without_a_time_is_refused():
    a = Admission()
    with pytest.raises(ValueError, match="unit j: phase Dequeued needs dequeued_at"):
        a.upsert(unit("j"), UnitState(DEQUEUED))


def test_a_known_unit_keeps_its_phase_on_upsert_and_is_recharged():
    a = admission(teams(8, a=(0, 8)))
    a.upsert(unit("j", "a", 2))
    dequeued(a)
    a.upsert(unit("j", "a", 5), UnitState(ENQUEUED))
    assert a.phase("j") == DEQUEUED and a.usage("root/a").used[GPU] == 5
