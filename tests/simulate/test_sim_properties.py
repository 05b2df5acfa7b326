"""Invariants on random small fleets and traces (moderate example counts: the machine is shared)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.failover import FailoverSettings
from fleet.simulate import Faults, Outage, SimConfig, Simulation, make_policy
from fleet.simulate.jobs import State

from .helpers import fleet_of, job

NODE_GPUS = st.sampled_from([1, 2, 4, 8])
FLEETS = st.dictionaries(
    st.sampled_from(["a", "b", "c"]), st.lists(NODE_GPUS, min_size=1, max_size=4), min_size=1
)
JOBS = st.lists(
    st.tuples(
        st.integers(0, 200),  # submit
        st.integers(1, 300),  # duration
        st.integers(1, 3),  # workers
        st.sampled_from([1, 2, 4, 8]),  # GPUs per worker
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(
    members=FLEETS,
    rows=JOBS,
    policy=st.sampled_from(["sum", "nodes", "random", "first", "random@sum"]),
    order=st.sampled_from(["backfill", "strict"]),
    ttl=st.sampled_from([0.0, 30.0]),
    faults=st.booleans(),
)
def test_runs_are_consistent(members, rows, policy, order, ttl, faults):
    fleet = fleet_of(members)
    trace = [job(f"j{i}", *row) for i, row in enumerate(rows)]
    injected = Faults(
        failure_probability=0.3 if faults else 0.0,
        outages=(Outage(sorted(members)[0], 50, 100),) if faults else (),
        settings=FailoverSettings(toleration_seconds=20, max_failovers=2),
        seed=1,
    )
    sim = Simulation(
        fleet, trace, make_policy(policy, list(members), 2), SimConfig(ttl, order, injected)
    )
    result = sim.run()
    total = fleet.total()
    assert all(0 <= value <= total for _, value in result.samples)
    # Every copy ends (durations are finite; stale copies end too), every reservation is
    # consumed or expired: at the end members and the fleet's view are empty again.
    assert result.samples[-1][1] == 0
    for name, member in sim.members.items():
        assert not list(member.snapshot.pods()) and not member.copies
        assert not list(sim.views[name].pods()) and not sim.views[name].reservations()
    for j in result.jobs:
        assert j.state is not State.RUNNING  # every duration is finite
        if j.state is State.DONE:
            assert j.first_start is not None and j.end is not None
            assert j.first_start >= j.spec.submit
            assert j.end - j.spec.submit >= j.spec.duration
        if j.first_start is None:
            assert j.state in (State.PENDING, State.WAITING, State.GAVE_UP)
        assert j.sat >= 0 and j.pending_total >= 0
    if not faults:
        assert all(j.state in (State.DONE, State.PENDING, State.WAITING) for j in result.jobs)
        # A gang that fits no member's whole capacity can never start; all others finish.
        for j in result.jobs:
            if j.state is not State.DONE:
                assert j.first_start is None
        if policy in ("nodes", "random", "first") and order == "backfill":
            # The node-level rule never sends a gang where it cannot start at once.
            assert result.counters["mis_dispatches"] == 0
