"""The bounded wait of a preferred topology: a gang that fits only spread waits for one domain
until its wait runs out, then is placed spread; a domain that holds it takes it at once; the
reasons say it waits, for what and until when."""

from __future__ import annotations

import pytest

from fleet.core import lifecycle
from fleet.core.domainwait import WAITING_FOR_DOMAIN, stamp, wait_at
from fleet.core.placement import (
    INSUFFICIENT,
    AffinityGroup,
    ClusterAffinity,
    place,
    place_in_groups,
)
from fleet.core.resources import Resources
from fleet.core.topology import PREFERRED, REQUIRED, TopologyRule
from fleet.core.workload import Component, Gang

from .builders import GiB, cluster, node, pod

RACK = "topology.kubernetes.io/rack"
GPU8 = Resources({"cpu": 8000, "memory": 32 * GiB, "nvidia.com/gpu": 8, "pods": 1})
WAIT = 600.0
T0 = 1_700_000_000.0


def rack_node(name: str, rack: str):
    return node(name, gpu=8, labels={RACK: rack})


def workers(n: int, wait: float = WAIT) -> Gang:
    rule = TopologyRule(RACK, PREFERRED, wait_seconds=wait)
    return Gang.of(Component("worker", n, GPU8)).with_topology(rule)


def spread_member():
    """Two free nodes, one per rack: holds 2 workers only spread."""
    return cluster("member-a", rack_node("a0", "r0"), rack_node("a1", "r1"))


def test_a_gang_that_fits_only_spread_waits_while_within_its_wait():
    decision = place(workers(2), [spread_member()], now=T0)
    assert decision.placement is None
    wait = decision.domain_wait
    assert wait is not None and (wait.since, wait.until) == (T0, T0 + WAIT)
    (rejection,) = decision.rejections
    assert rejection.category == WAITING_FOR_DOMAIN
    assert f"waiting for one rack until {stamp(T0 + WAIT)}" in rejection.reason
    assert "largest rack" in rejection.reason  # why no rack of this member holds it
    assert rejection.facts["waitingUntil"] == stamp(T0 + WAIT)
    assert rejection.facts["waitSeconds"] == 600
    assert "waiting for one rack" in decision.summary()
    # Later, still within the wait counted from its start: still waiting, same bound.
    later = place(workers(2), [spread_member()], now=T0 + WAIT - 1, domain_wait_since=T0)
    assert later.placement is None
    assert later.domain_wait is not None and later.domain_wait.until == T0 + WAIT


def test_when_its_wait_runs_out_it_is_placed_spread():
    decision = place(workers(2), [spread_member()], now=T0 + WAIT, domain_wait_since=T0)
    assert decision.placement is not None and decision.domain_wait is None
    assert decision.placement.assignment.domains == ()


def test_a_rack_that_holds_it_takes_it_at_once_within_the_wait():
    whole = cluster("member-b", rack_node("b0", "r9"), rack_node("b1", "r9"))
    for since in (None, T0):
        decision = place(workers(2), [spread_member(), whole], now=T0 + 1, domain_wait_since=since)
        assert decision.placement is not None and decision.placement.cluster == "member-b"
        assert [d.value for d in decision.placement.assignment.domains] == ["r9"]


def test_a_gang_that_does_not_fit_at_all_waits_for_capacity_not_for_a_rack():
    member = spread_member()
    member.upsert_pod(pod("busy", "a0", gpu=8))
    decision = place(workers(2), [member], now=T0)
    assert decision.placement is None and decision.domain_wait is None
    assert [r.category for r in decision.rejections] == [INSUFFICIENT]


@pytest.mark.parametrize("wait", [0.0, None])
def test_no_wait_or_no_clock_places_spread_at_once(wait):
    gang = workers(2, 0.0 if wait == 0.0 else WAIT)
    decision = place(gang, [spread_member()], now=None if wait is None else T0)
    assert decision.placement is not None


def test_a_one_pod_gang_never_waits():
    assert wait_at(workers(1), None, T0) is None
    assert wait_at(workers(2), None, T0) is not None


def test_a_required_rule_has_no_wait():
    with pytest.raises(ValueError, match="no wait"):
        TopologyRule(RACK, REQUIRED, wait_seconds=5)
    with pytest.raises(ValueError, match="negative"):
        TopologyRule(RACK, PREFERRED, wait_seconds=-1)


def test_affinity_groups_stop_at_a_group_where_the_gang_waits():
    whole = cluster("member-b", rack_node("b0", "r9"), rack_node("b1", "r9"))
    groups = [
        AffinityGroup("first", ClusterAffinity(cluster_names=("member-a",))),
        AffinityGroup("second", ClusterAffinity(cluster_names=("member-b",))),
    ]
    result = place_in_groups(workers(2), [spread_member(), whole], groups, now=T0)
    assert result.group == "first" and result.decision.domain_wait is not None


def test_the_binding_keeps_the_start_until_the_gang_is_placed():
    life = lifecycle.waiting_for_domain(lifecycle.Binding(), T0)
    assert (life.phase, life.domain_wait_since) == ("Pending", T0)
    assert lifecycle.waiting(life).domain_wait_since == T0
    placed = lifecycle.scheduled(life, "member-a", T0 + 5)
    assert placed.domain_wait_since is None
