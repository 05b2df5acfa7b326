"""The simulator's model on hand-made traces whose answers are worked out in the comments."""

from __future__ import annotations

import math

import pytest

from fleet.core.failover import FailoverSettings
from fleet.simulate import (
    Faults,
    FifoQueue,
    Outage,
    SimConfig,
    Simulation,
    make_policy,
    simulate,
    summarize,
)
from fleet.simulate.jobs import State
from fleet.simulate.metrics import percentile, utilization
from fleet.simulate.queueing import ShapeFifo

from .helpers import by_id, fleet_of, job

POLICIES = ("sum", "nodes", "random", "first")


def run(fleet, trace, policy, config=None, **kw):
    return simulate(
        fleet, trace, make_policy(policy, [m.name for m in fleet.members], 3), config, **kw
    )


# Fragmentation: sum mis-dispatches, nodes does not ------------------------------------------------
#
# a: two 8-GPU nodes; b: one 4-GPU node. At t=0, bg1 and bg2 (7 GPUs each, 1000 s) can only go to
# a, one per node (1 GPU left on each); bg3 (4 GPUs, 100 s) only fits b. At t=1, J asks for one
# pod of 2 GPUs: a has 2 GPUs free *in total* but no node with 2, b has none.
#   sum:   sends J to a, where it sits until bg1/bg2 end at t=1000 (a mis-dispatch of 999 s),
#          even though b frees at t=100;
#   nodes: keeps J on the fleet and places it on b when bg3 ends at t=100.
FRAG_FLEET = {"a": [8, 8], "b": [4]}
FRAG_TRACE = [
    job("bg1", 0, 1000, 1, 7),
    job("bg2", 0, 1000, 1, 7),
    job("bg3", 0, 100, 1, 4),
    job("J", 1, 10, 1, 2),
]


def test_fragmentation_sum_misdispatches_and_nodes_does_not():
    fleet = fleet_of(FRAG_FLEET)
    summed = run(fleet, FRAG_TRACE, "sum")
    j = by_id(summed)["J"]
    assert (j.member, j.first_start, j.mis_dispatches, j.sat) == ("a", 1000, 1, 999)
    assert summed.counters["mis_dispatches"] == 1

    nodes = run(fleet, FRAG_TRACE, "nodes")
    j = by_id(nodes)["J"]
    assert (j.member, j.first_start, j.mis_dispatches) == ("b", 100, 0)
    assert j.pending_total == 99  # waited on the fleet, not in a member

    s, n = summarize(summed), summarize(nodes)
    assert s["mis_dispatches"] == 1 and n["mis_dispatches"] == 0
    assert s["wait_s"]["max"] == 999 and n["wait_s"]["max"] == 99
    assert s["mis_dispatch_sat_s"]["max"] == 999


def test_a_gang_sum_sends_where_no_node_can_ever_hold_it_never_starts():
    # b's nodes hold 2 GPUs each: the 4-GPU pod fits b's total (4) but no node of it, ever.
    # a is busy when J arrives. sum dispatches to b for good; nodes waits for a.
    fleet = fleet_of({"a": [4], "b": [2, 2]})
    trace = [job("bg", 0, 50, 1, 4), job("J", 1, 10, 1, 4)]
    summed = summarize(run(fleet, trace, "sum"))
    assert summed["never_started"] == 1 and summed["never_started_stuck_in_member"] == 1
    assert summed["wait_s"]["max"] == 49  # censored at the run's end (t=50)
    nodes = run(fleet, trace, "nodes")
    assert by_id(nodes)["J"].first_start == 50 and summarize(nodes)["never_started"] == 0


# No contention: every policy agrees -------------------------------------------------------------
def test_without_contention_all_policies_agree():
    fleet = fleet_of({"a": [8, 8, 8], "b": [8, 8], "c": [4, 4]})
    trace = [job(f"j{i}", i * 10.0, 25.0, 1 + i % 2, (1, 2, 4, 8)[i % 4]) for i in range(12)]
    summaries = {}
    for policy in POLICIES:
        sim = Simulation(fleet, trace, make_policy(policy, ["a", "b", "c"], 1), SimConfig())
        result = sim.run()
        summaries[policy] = summarize(result)
        assert all(v.reservations() == {} for v in sim.views.values())  # every one consumed
        assert all(len(m.snapshot.reservations()) == 0 for m in sim.members.values())
    for s in summaries.values():
        assert s["completed"] == 12 and s["never_started"] == 0 and s["mis_dispatches"] == 0
        assert s["wait_s"]["max"] == 0
    keys = ("jct_s", "makespan_s", "gpu_utilization_mean", "wait_s")
    assert len({tuple(str(s[k]) for k in keys) for s in summaries.values()}) == 1


# Member model: FIFO, no partial starts, backfill vs strict ---------------------------------------
#
# One member of three 8-GPU nodes. bg1 (5 GPUs, 100 s) and bg2 (5 GPUs, 200 s) leave 3, 3 and 8
# free. G1 (t=1) and G3 (t=2) each want 2 pods x 6 GPUs: 14 free in total, so `sum` dispatches
# both (reservations expire at once, TTL 0), but only one 6-GPU block exists. When bg1 ends
# (t=100) there are blocks 8 and 8: exactly one gang fits, and it must be G1, the older. G3 starts
# when G1 ends (t=110).
FIFO_FLEET = {"m": [8, 8, 8]}
FIFO_TRACE = [
    job("bg1", 0, 100, 1, 5),
    job("bg2", 0, 200, 1, 5),
    job("G1", 1, 10, 2, 6),
    job("G3", 2, 10, 2, 6),
]


def test_member_starts_waiting_gangs_in_order_and_never_partially():
    result = run(fleet_of(FIFO_FLEET), FIFO_TRACE, "sum", SimConfig(reservation_ttl=0))
    jobs = by_id(result)
    assert jobs["G1"].first_start == 100 and jobs["G3"].first_start == 110
    assert jobs["G1"].mis_dispatches == jobs["G3"].mis_dispatches == 1
    # Until t=100 only bg1 and bg2 hold GPUs: no pod of a waiting gang ever started.
    assert all(value == 10 for t, value in result.samples if 0 <= t < 100)
    assert max(v for _, v in result.samples) <= 24


def test_backfill_lets_a_small_gang_pass_and_strict_does_not():
    trace = [*FIFO_TRACE, job("small", 3, 10, 1, 2)]
    backfill = by_id(run(fleet_of(FIFO_FLEET), trace, "sum", SimConfig(reservation_ttl=0)))
    assert backfill["small"].first_start == 3  # fits the free 8-GPU node at once
    strict = by_id(
        run(fleet_of(FIFO_FLEET), trace, "sum", SimConfig(reservation_ttl=0, member_order="strict"))
    )
    assert strict["small"].first_start >= strict["G3"].first_start >= strict["G1"].first_start


def test_shape_fifo_offers_oldest_first_and_skips_blocked_shapes():
    fifo: ShapeFifo[str] = ShapeFifo()
    for seq, (item, key) in enumerate([("a1", "A"), ("b1", "B"), ("a2", "A"), ("c1", "C")]):
        fifo.push(item, key, seq)
    offered: list[str] = []
    fifo.drain(lambda item: offered.append(item) or item.startswith("c"))
    assert offered == ["a1", "b1", "c1"]  # a2 not offered: a1 of the same shape failed
    offered.clear()
    fifo.drain(lambda item: offered.append(item) or True)
    assert offered == []  # nothing freed since: nothing retried
    fifo.reopen()
    fifo.drain(lambda item: offered.append(item) or True)
    assert offered == ["a1", "b1", "a2"] and len(fifo) == 0


def test_the_reservation_holds_capacity_until_the_pods_show_up():
    # m has nodes of 8, 2 and 2 GPUs; bg (4 GPUs, 100 s) can only take the 8, leaving blocks of
    # 4, 2 and 2. `sum` sends G (2 pods x 4 GPUs: 8 in total) there at t=0, but only one 4-block
    # exists, so G waits. The fleet reserved G's 8 GPUs: `small` (t=1, 2 GPUs) finds 0 free on the
    # fleet's view and waits until the reservation expires, although the member has two free
    # 2-GPU nodes all along.
    fleet = fleet_of({"m": [8, 2, 2]})
    trace = [job("bg", 0, 100, 1, 4), job("G", 0, 10, 2, 4), job("small", 1, 10, 1, 2)]
    jobs = by_id(run(fleet, trace, "sum", SimConfig(reservation_ttl=60)))
    assert jobs["G"].mis_dispatches == 1 and jobs["G"].first_start == 100
    assert jobs["small"].first_start == 60
    jobs = by_id(run(fleet, trace, "sum", SimConfig(reservation_ttl=0)))
    assert jobs["small"].first_start == 1


# Determinism -----------------------------------------------------------------------------------
def _random_trace(n: int) -> list:
    trace = []
    for i in range(n):
        size = (1, 1, 1, 2, 4, 8, 16)[(i * 7) % 7]
        trace.append(job(f"j{i}", i * 3.0, 50.0 + (i * 37) % 400, -(-size // 8), min(size, 8)))
    return trace


@pytest.mark.parametrize("policy", ["random", "sum"])
def test_same_seed_same_results(policy):
    fleet = fleet_of({"a": [8] * 4, "b": [8, 8, 4, 4], "c": [2] * 6})
    trace = _random_trace(300)
    faults = Faults(
        failure_probability=0.1,
        seed=5,
        settings=FailoverSettings(toleration_seconds=20, max_failovers=2),
    )

    def once(seed: int) -> dict:
        policy_obj = make_policy(policy, ["a", "b", "c"], seed)
        result = simulate(fleet, trace, policy_obj, SimConfig(faults=faults))
        summary = summarize(result)
        summary.pop("replay_seconds")
        return {"summary": repr(summary), "members": [j.member for j in result.jobs]}

    first = once(11)
    assert first == once(11)
    if policy == "random":
        assert first["members"] != once(12)["members"]


# Failover ---------------------------------------------------------------------------------------
def test_an_outage_moves_the_job_after_the_toleration_and_purges_the_copy_on_return():
    # J runs in a (first in list order). a is lost from t=10 to t=1010; after 300 s of tolerance
    # the job fails over to b (a excluded) and starts again from scratch at t=310. Gracefully:
    # the stale copy in a is deleted when a comes back, since its successor runs.
    fleet = fleet_of({"a": [8], "b": [8]})
    faults = Faults(
        outages=(Outage("a", 10, 1000),),
        settings=FailoverSettings(toleration_seconds=300, purge_mode="Gracefully"),
    )
    sim = Simulation(
        fleet, [job("J", 0, 2000, 1, 8)], make_policy("first", ["a", "b"]), SimConfig(faults=faults)
    )
    result = sim.run()
    j = by_id(result)["J"]
    assert j.failovers == 1 and j.member == "b" and "a" in j.life.excluded(result.end)
    assert j.life.excluded(result.end)["a"] == "ClusterLost"
    # The same record the controller keeps in the GangBinding:
    assert [(f.from_cluster, f.reason, f.at) for f in j.life.failovers] == [
        ("a", "ClusterLost", 310)
    ]
    assert [(s.cluster, s.removed_at) for s in j.life.stays] == [("a", 310), ("b", None)]
    assert j.life.evictions == ()  # the old copy was purged when the outage ended
    assert j.first_start == 0 and j.end == 310 + 2000
    assert j.lost_gpu_seconds == 310 * 8
    assert result.counters["purged"] == 1
    assert sim.members["a"].copies == {}
    # While the old copy lived (310..1010) both copies held GPUs.
    assert dict(result.samples)[310] == 16 and dict(result.samples)[1010] == 8


def test_an_outage_shorter_than_the_toleration_changes_nothing():
    fleet = fleet_of({"a": [8], "b": [8]})
    faults = Faults(outages=(Outage("a", 10, 100),))  # 100 s < 300 s tolerance
    result = run(fleet, [job("J", 0, 500, 1, 8)], "first", SimConfig(faults=faults))
    j = by_id(result)["J"]
    assert (j.failovers, j.member, j.end) == (0, "a", 500)


def test_a_job_that_keeps_failing_gives_up_after_max_failovers():
    fleet = fleet_of({"a": [8], "b": [8], "c": [8]})
    faults = Faults(
        failure_probability=1.0,
        settings=FailoverSettings(toleration_seconds=30, max_failovers=1),
    )
    result = run(fleet, [job("J", 0, 100, 1, 8)], "first", SimConfig(faults=faults))
    j = by_id(result)["J"]
    assert j.state is State.GAVE_UP and j.failovers == 1 and set(j.life.excluded(100)) == {"a"}
    assert j.life.phase == "Failed" and "maxFailovers 1" in (j.life.gave_up or "")
    assert j.member == "b"
    s = summarize(result)
    assert s["gave_up"] == 1 and s["failures"] == 2 and s["completed"] == 0


def test_failures_are_the_same_for_every_policy():
    faults = Faults(failure_probability=0.3, seed=9)
    picks = {(i, a) for i in range(50) for a in range(3) if faults.failure_point(f"j{i}", a)}
    assert picks == {
        (i, a)
        for i in range(50)
        for a in range(3)
        if Faults(failure_probability=0.3, seed=9).failure_point(f"j{i}", a)
    }
    assert 0 < len(picks) < 150


# The queue plug point -----------------------------------------------------------------------------
class NewestFirst(FifoQueue):
    """A different queue order, to show a queue module plugs in without touching the engine."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list = []

    def push(self, queued, now):
        self.pending.append(queued)

    def remove(self, queued):
        self.pending.remove(queued)

    def __len__(self):
        return len(self.pending)

    def drain(self, attempt, now):
        for queued in sorted(self.pending, key=lambda j: -j.seq):
            if attempt(queued):
                self.pending.remove(queued)


def test_a_queue_module_decides_the_order():
    fleet = fleet_of({"a": [8]})
    trace = [job("busy", 0, 100, 1, 8), job("old", 1, 10, 1, 8), job("new", 2, 10, 1, 8)]
    fifo = by_id(run(fleet, trace, "nodes"))
    assert fifo["old"].first_start == 100 and fifo["new"].first_start == 110
    lifo = by_id(run(fleet, trace, "nodes", queue=NewestFirst()))
    assert lifo["new"].first_start == 100 and lifo["old"].first_start == 110


# Metrics ------------------------------------------------------------------------------------------
def test_percentile_and_utilization():
    assert percentile([1, 2, 3, 4], 50) == 2.5 and math.isnan(percentile([], 90))
    samples = [(0.0, 0), (10.0, 4), (20.0, 0)]
    assert utilization(samples, 8, 0.0, 40.0) == pytest.approx(40 / 320)
