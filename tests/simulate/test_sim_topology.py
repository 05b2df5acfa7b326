"""The simulator's preferred gangs wait for a rack as the controller's do (`domainwait`): a gang
that fits only spread waits until its wait runs out, or until a rack that holds it frees."""

from __future__ import annotations

import pytest

from fleet.core.inventory import NodeInfo
from fleet.core.resources import GPU, PODS, Resources
from fleet.simulate import FleetSpec, MemberSpec
from fleet.simulate.fleets import RACK_LABEL
from fleet.simulate.policies import make_policy
from fleet.simulate.simulation import SimConfig, simulate

from .helpers import by_id, job


def racked_member() -> FleetSpec:
    """Racks x and y of one 8-GPU node each, rack z of two."""
    racks = {"a-0": "x", "a-1": "y", "a-2": "z", "a-3": "z"}
    nodes = tuple(
        NodeInfo(name, Resources({GPU: 8, PODS: 110}), {RACK_LABEL: rack})
        for name, rack in racks.items()
    )
    return FleetSpec((MemberSpec("a", nodes),))


@pytest.mark.parametrize(
    ("wait", "start", "racks"),
    [
        (0.0, 1.0, 2),  # placed spread at once (Kueue's preferred)
        (600.0, 601.0, 2),  # waited its 600 s, then spread
        (2000.0, 1000.0, 1),  # rack z freed within its wait: placed there
    ],
)
def test_a_preferred_gang_that_fits_only_spread_waits_for_a_rack(wait, start, racks):
    # big takes rack z (the tightest that holds it) until t=1000; small then fits only spread.
    trace = [job("big", 0.0, 1000.0, 2, 8), job("small", 1.0, 100.0, 2, 8)]
    policy = make_policy("nodes+preferred", ["a"], topology_wait=wait)
    result = simulate(racked_member(), trace, policy, SimConfig())
    small = by_id(result)["small"]
    assert small.first_start == start  # type: ignore[attr-defined]
    assert small.domains_used == racks  # type: ignore[attr-defined]


def test_gangs_of_one_shape_start_their_waits_together():
    # Both small gangs fit only spread from t=1 and t=2; each waits its own 600 s from then (as
    # the controller tries every pending gang), not one after the other.
    trace = [
        job("big", 0.0, 10_000.0, 2, 8),
        job("small-1", 1.0, 100.0, 2, 8),
        job("small-2", 2.0, 100.0, 2, 8),
    ]
    policy = make_policy("nodes+preferred", ["a"], topology_wait=600.0)
    result = simulate(racked_member(), trace, policy, SimConfig())
    jobs = by_id(result)
    assert jobs["small-1"].first_start == 601.0  # type: ignore[attr-defined]
    # small-2's wait ended at 602, but small-1 holds the spread nodes until 701.
    assert jobs["small-2"].first_start == 701.0  # type: ignore[attr-defined]
