"""Reservations against member-local load, on a hand-made race whose answers are worked out.

Members a and b each have one 8-GPU node. J (one pod of 8 GPUs, 100 s) arrives at t=0; best
fit ties, so the fleet picks a. The gang's pods reach the member 2 s after dispatch. A local
pod of 8 GPUs, 1,000 s long, lands on a at t=1: inside that window.
"""

from __future__ import annotations

import math

import pytest

from fleet.core.resources import GPU, PODS, Resources
from fleet.core.workload import Component, Gang
from fleet.simulate import SimConfig, make_policy, simulate, summarize
from fleet.simulate.localload import LocalLoad, parse_local_load

from .helpers import by_id, fleet_of, job

FLEET = {"a": [8], "b": [8]}
TRACE = [job("J", 0, 100, 1, 8)]


class Script:
    """Local pods at fixed times: {member: [(at, gpus, seconds), ...]}."""

    def __init__(self, pods: dict[str, list[tuple[float, int, float]]]) -> None:
        self.pods = pods

    def stream(self, member: str) -> ScriptStream:
        return ScriptStream(member, self.pods.get(member, []))


class ScriptStream:
    def __init__(self, member: str, pods: list[tuple[float, int, float]]) -> None:
        self.member = member
        self.pods = list(pods)
        self.last = 0.0
        self.count = 0

    def gap(self) -> float:
        if not self.pods:
            return math.inf
        gap = self.pods[0][0] - self.last
        self.last = self.pods[0][0]
        return gap

    def next_pod(self) -> tuple[str, Gang, float]:
        _, gpus, seconds = self.pods.pop(0)
        self.count += 1
        gang = Gang.of(Component("local", 1, Resources({GPU: gpus, PODS: 1})))
        return f"{self.member}-local-{self.count}", gang, seconds


RACE = Script({"a": [(1.0, 8, 1000.0)]})


def run(policy: str, **config: float):
    fleet = fleet_of(FLEET)
    settings = SimConfig(dispatch_latency=2.0, local_load=RACE, **config)
    return simulate(fleet, TRACE, make_policy(policy, ["a", "b"]), settings)


def test_without_reservations_the_local_pod_wins_the_race_and_the_gang_waits_in_a():
    result = run("nodes")
    j = by_id(result)["J"]
    # Dispatched to a at 0, arrives at 2 to find the local pod there: waits until it ends at 1001.
    assert (j.member, j.first_start, j.mis_dispatches) == ("a", 1001, 1)
    assert result.counters["local_started"] == 1


def test_reserved_capacity_is_the_gangs_whatever_lands_meanwhile():
    result = run("nodes+reserve", reservation_latency=0.5)
    j = by_id(result)["J"]
    # Reserved on a at 0.5, before the local pod; the pod is turned away, the gang starts when
    # its pods arrive, 2 s after dispatch.
    assert (j.member, j.first_start, j.mis_dispatches) == ("a", 2.5, 0)
    assert result.counters["local_turned_away"] == 1
    assert result.time_to_available == [0.5]
    assert (result.counters["reservation_attempts"], result.counters["reservation_fallbacks"]) == (
        1,
        0,
    )


def test_a_reservation_that_loses_the_race_falls_back_to_the_next_member():
    result = run("nodes+reserve", reservation_latency=1.5, reservation_wait=10.0)
    j = by_id(result)["J"]
    # The local pod lands at 1, before a reserves at 1.5: the Reservations stay Pending until
    # the wait runs out at 10; a is avoided, b is chosen at 10, reserved at 11.5, and the gang
    # runs from 13.5.
    assert (j.member, j.first_start, j.mis_dispatches) == ("b", 13.5, 0)
    assert (result.counters["reservation_attempts"], result.counters["reservation_fallbacks"]) == (
        2,
        1,
    )
    (exclusion,) = j.life.exclusions
    assert exclusion.cluster == "a" and exclusion.reason.startswith("ReservationFailed")
    assert j.life.failover_count == 0  # nothing ran in a: not a failover
    figures = summarize(result)
    assert figures["decision_to_start_s"]["max"] == 13.5
    assert figures["started_within_30s"] == 1.0


@pytest.mark.parametrize("estimator", ["nodes", "sum"])
def test_with_reservations_no_gang_ever_waits_in_a_member(estimator):
    """Under random local load, a reserved gang starts when its pods arrive, never later; the
    same load without reservations leaves gangs waiting in members."""
    fleet = fleet_of({"a": [8, 8], "b": [8, 4], "c": [8]})
    sizes = (1, 2, 4, 8)
    trace = [job(f"j{i}", i * 7.0, 300.0 + 13 * i, 1 + i % 2, sizes[i % 4]) for i in range(40)]
    load = LocalLoad(per_hour=400.0, gpus=(2, 4, 8), mean_minutes=5.0, seed=1)
    settings = SimConfig(dispatch_latency=3.0, local_load=load, reservation_latency=1.0)
    members = ["a", "b", "c"]
    plain = simulate(fleet, trace, make_policy(estimator, members), settings)
    assert plain.counters["mis_dispatches"] > 0
    reserved = simulate(fleet, trace, make_policy(f"{estimator}+reserve", members), settings)
    assert reserved.counters["local_started"] > 0
    assert reserved.counters["mis_dispatches"] == 0
    assert all(j.first_start is not None for j in reserved.jobs)


def test_local_load_parses_and_names_bad_input():
    assert parse_local_load("") is None
    assert parse_local_load("20:1,2:45", seed=3) == LocalLoad(20.0, (1, 2), 45.0, 3)
    with pytest.raises(ValueError, match="--local-load 'x'"):
        parse_local_load("x")
    with pytest.raises(ValueError, match="at least 1 GPU"):
        parse_local_load("5:0")
    with pytest.raises(ValueError, match=r"\+reserve"):
        make_policy("nodes+fast", ["a"])
