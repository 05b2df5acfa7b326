"""The Karmada placement fields fleet acts on, end to end on the sandbox (docs/api.md):
ordered `clusterAffinities`, `clusterTolerations` against MemberCluster taints, `preemption:
Always`, the Event on a policy that sets fields fleet does not act on, the Event and condition
on one whose customSchedulingType fleet does not know, and fleet's `gangScoring: fragmentation`.

As in test_dispatch, each test confines its gangs to fake GPU nodes labelled with its namespace.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleet.testing.kube import wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import MEMBER_CLUSTER, POLICY, Fleet

TAINT_KEY = "e2e.fleet.dev/maintenance"


def _job(namespace: str, name: str) -> dict[str, Any]:
    # restartPolicy Never: a failing pod fails the job, as the training operator rules.
    return pytorchjob(
        name,
        namespace=namespace,
        node_selector={"test": namespace},
        workers=1,
        gpus=1,
        restart_policy="Never",
    )


def _status(live: Fleet, namespace: str, name: str) -> dict[str, Any]:
    return (live.binding(namespace, name) or {}).get("status") or {}


def _observed_affinity(live: Fleet, namespace: str, name: str) -> str:
    """The affinity group the binding's status names; waited for, as the status is its own
    write, after the spec that names the cluster."""
    return str(
        wait_until(
            lambda: _status(live, namespace, name).get("schedulerObservedAffinityName"),
            what=f"{name}'s schedulerObservedAffinityName",
        )
    )


def _after_failover(live: Fleet, namespace: str, name: str) -> dict[str, Any]:
    """The binding's status once it records the failover (its own write, after the spec)."""
    return wait_until(
        lambda: (status := _status(live, namespace, name)).get("failoverHistory") and status,
        what=f"{name}'s failoverHistory",
    )


def _moved(live: Fleet, namespace: str, name: str, away_from: str) -> str | None:
    target = live.target(namespace, name)
    return target if target and target != away_from else None


def _utc(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@pytest.fixture
def taint(live: Fleet) -> Iterator[Callable[..., None]]:
    """`taint("member-2", {...})`: set a MemberCluster's taints, once the controller has taken
    them in; every tainted member is untainted after the test."""
    tainted: list[str] = []

    def apply(member: str, *taints: dict[str, Any]) -> None:
        tainted.append(member)
        live.api.patch(*MEMBER_CLUSTER, member, {"spec": {"taints": list(taints)}})
        live.member_taken_in(member)

    yield apply
    for member in tainted:
        live.api.patch(*MEMBER_CLUSTER, member, {"spec": {"taints": None}})
        live.member_taken_in(member)


# -- clusterAffinities ---------------------------------------------------------------------------


def test_cluster_affinities_are_ordered_groups_and_a_failover_searches_from_the_one_used(
    live: Fleet, namespace, add_nodes
):
    policy = gang_policy("gang", namespace, toleration_seconds=1, purge_mode="Immediately")
    policy["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "first", "clusterNames": ["member-1"]},
        {"affinityName": "second", "clusterNames": ["member-2", "member-3"]},
    ]
    live.api.create(policy)
    # Nothing fits in the first group: the second one is used, and recorded.
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    add_nodes("member-3", count=1, gpu=4, labels={"test": namespace})
    live.api.create(_job(namespace, "fallback"))
    placed = wait_until(lambda: live.target(namespace, "fallback"), what="a placement")
    assert placed in ("member-2", "member-3")
    assert _observed_affinity(live, namespace, "fallback") == "second"
    live.wait_running(namespace, "fallback", placed)

    # Once the first group can take a gang, a new one goes there.
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_job(namespace, "preferred"))
    wait_until(lambda: live.target(namespace, "preferred"), what="a placement")
    assert live.target(namespace, "preferred") == "member-1"
    assert _observed_affinity(live, namespace, "preferred") == "first"

    # A failover searches from the group the placement used: the other member of the second
    # group, though member-1 in the first group has room (Karmada's rule).
    live.mark(placed, namespace, "fallback", "Failed")
    moved = wait_until(
        lambda: _moved(live, namespace, "fallback", placed), timeout=90, what="failover"
    )
    assert moved == ({"member-2", "member-3"} - {placed}).pop()
    status = _after_failover(live, namespace, "fallback")
    assert status["schedulerObservedAffinityName"] == "second"
    assert [(h["fromCluster"], h["reason"]) for h in status["failoverHistory"]] == [
        (placed, "ApplicationFailure")
    ]
    live.wait_running(namespace, "fallback", moved)


# -- clusterTolerations against MemberCluster taints -----------------------------------------------


def test_a_no_schedule_taint_keeps_new_gangs_off_until_the_policy_tolerates_it(
    live: Fleet, namespace, add_nodes, taint
):
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    taint("member-2", {"key": TAINT_KEY, "value": namespace, "effect": "NoSchedule"})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "job"))

    def reasons() -> dict[str, str] | None:
        pending = _status(live, namespace, "job").get("pendingReasons")
        return {r["cluster"]: r["code"] for r in pending} if pending else None

    codes = wait_until(reasons, what="pending reasons")
    assert codes["member-2"] == "TaintUntolerated", codes
    assert live.copies(namespace, "job") == []

    # The policy tolerates it: the binding's copy of the placement follows, and the gang goes.
    toleration = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    live.api.patch(
        *POLICY, "gang", {"spec": {"placement": {"clusterTolerations": [toleration]}}}, namespace
    )
    wait_until(lambda: live.target(namespace, "job"), what="placement once tolerated")
    assert live.target(namespace, "job") == "member-2"
    live.wait_running(namespace, "job", "member-2")


def test_a_no_execute_taint_moves_a_running_gang_after_its_toleration_seconds(
    live: Fleet, namespace, add_nodes, taint
):
    tolerated = 5
    for member in ("member-1", "member-2"):
        add_nodes(member, count=1, gpu=4, labels={"test": namespace})
    policy = gang_policy("gang", namespace, toleration_seconds=300, purge_mode="Immediately")
    policy["spec"]["placement"]["clusterTolerations"] = [
        {
            "key": TAINT_KEY,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": tolerated,
        }
    ]
    live.api.create(policy)
    live.api.create(_job(namespace, "job"))
    first = wait_until(lambda: live.target(namespace, "job"), what="placement")
    live.wait_running(namespace, "job", first)

    taint(first, {"key": TAINT_KEY, "value": namespace, "effect": "NoExecute"})

    def tainted_since() -> str | None:
        stamp = _status(live, namespace, "job").get("taintedSince")
        assert stamp or not _moved(live, namespace, "job", first), "moved with no taintedSince"
        return stamp

    since = _utc(wait_until(tainted_since, what="taintedSince recorded"))
    second = wait_until(
        lambda: _moved(live, namespace, "job", first), timeout=90, what="failover off the taint"
    )
    live.wait_running(namespace, "job", second)
    (record,) = _after_failover(live, namespace, "job")["failoverHistory"]
    assert (record["fromCluster"], record["reason"]) == (first, "TaintUntolerated")
    # Not before the toleration ran out (both stamps are whole seconds).
    assert (_utc(record["time"]) - since).total_seconds() >= tolerated
    assert live.copies(namespace, "job") == [second]
    assert any(r == "FailoverTriggered" for r, _, _ in live.events(namespace, "job"))


# -- preemption ----------------------------------------------------------------------------------


def _claimer(live: Fleet, namespace: str, name: str) -> str | None:
    spec = (live.binding(namespace, name) or {}).get("spec") or {}
    return (spec.get("policy") or {}).get("name")


def test_preemption_always_takes_a_placed_gang_from_a_lower_priority_policy(
    live: Fleet, namespace, add_nodes
):
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    low = gang_policy("low", namespace, toleration_seconds=30)
    low["spec"]["priority"] = 1
    live.api.create(low)
    live.api.create(_job(namespace, "job"))
    wait_until(lambda: live.target(namespace, "job"), what="placement")
    assert _claimer(live, namespace, "job") == "low"

    # A higher priority alone does not take a claimed gang (preemption Never): fleet acts on an
    # edit of the claiming policy with the other one there, and the claim stays.
    mid = gang_policy("mid", namespace, toleration_seconds=40)
    mid["spec"]["priority"] = 5
    live.api.create(mid)
    generation = live.binding(namespace, "job")["metadata"]["generation"]
    toleration = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
    live.api.patch(
        *POLICY, "low", {"spec": {"placement": {"clusterTolerations": [toleration]}}}, namespace
    )
    binding = live.observed(namespace, "job", after=generation)
    assert binding["spec"]["policy"]["name"] == "low"
    assert binding["spec"]["placement"]["clusterTolerations"] == [toleration]

    # preemption Always, from a higher priority: the claim and the terms move, the gang stays.
    high = gang_policy("high", namespace, toleration_seconds=50)
    high["spec"]["priority"] = 10
    high["spec"]["preemption"] = "Always"
    live.api.create(high)
    wait_until(lambda: _claimer(live, namespace, "job") == "high", what="the claim to move")
    binding = live.binding(namespace, "job")
    assert binding["spec"]["failover"]["tolerationSeconds"] == 50
    assert "clusterTolerations" not in binding["spec"]["placement"]
    assert live.target(namespace, "job") == "member-1"
    wait_until(
        lambda: any(r == "PolicyClaimChanged" for r, _, _ in live.events(namespace, "job")),
        what="the PolicyClaimChanged event (posted after the binding's write)",
    )
    wait_until(
        lambda: (
            (live.job(namespace, "job")["metadata"].get("annotations") or {}).get(
                "fleet.dev/policy"
            )
            == f"PropagationPolicy/{namespace}/high"
        ),
        what="the claim annotation on the job",
    )


# -- fields fleet does not act on ------------------------------------------------------------------


def test_a_policy_setting_fields_fleet_does_not_act_on_gets_an_event_naming_them(
    live: Fleet, namespace
):
    policy = gang_policy("from-karmada", namespace)
    policy["spec"]["placement"]["spreadConstraints"] = [
        {"spreadByField": "cluster", "maxGroups": 2, "minGroups": 1}
    ]
    policy["spec"]["schedulerName"] = "my-scheduler"
    live.api.create(policy)

    def warned() -> dict[str, Any] | None:
        return next(
            (
                e
                for e in live.api.events(namespace, "from-karmada")
                if e["reason"] == "FieldsNotActedOn"
            ),
            None,
        )

    event = wait_until(warned, what="the FieldsNotActedOn event on the policy")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "PropagationPolicy"
    assert "spec.placement.spreadConstraints" in event["message"]
    assert "spec.schedulerName" in event["message"]


def test_a_lower_case_gang_is_told_it_is_not_fleets_and_fixing_it_says_so(
    live: Fleet, namespace: str
) -> None:
    policy = gang_policy("typo", namespace)
    policy["spec"]["placement"]["replicaScheduling"]["customSchedulingType"] = "gang"
    live.api.create(policy)

    def recognized() -> dict[str, Any] | None:
        found = live.api.get(*POLICY, "typo", namespace) or {}
        conditions = (found.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Recognized"), None)

    condition = wait_until(recognized, what="the Recognized condition on the policy")
    assert (condition["status"], condition["reason"]) == ("False", "UnknownSchedulingType")
    assert "the accepted value is 'Gang'" in condition["message"]
    events = [
        e for e in live.api.events(namespace, "typo") if e["reason"] == "UnknownSchedulingType"
    ]  # posted before the condition is written
    assert events and all(e["type"] == "Warning" for e in events)
    assert events[0]["message"] == condition["message"]

    live.api.patch(
        *POLICY,
        "typo",
        {"spec": {"placement": {"replicaScheduling": {"customSchedulingType": "Gang"}}}},
        namespace,
    )
    wait_until(
        lambda: (recognized() or {}).get("status") == "True",
        what="Recognized=True once the policy says Gang",
    )


# -- gangScoring: fragmentation -------------------------------------------------------------------


def test_the_fragmentation_score_says_in_numbers_why_the_member_won(
    live: Fleet, namespace, add_nodes
):
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    add_nodes("member-2", count=1, gpu=8, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace, scoring="fragmentation"))
    live.api.create(_job(namespace, "job"))
    placed = wait_until(lambda: live.target(namespace, "job"), what="a placement")
    assert placed in ("member-1", "member-2")
    # The binding's decision is in its spec at once; its Scheduled condition, a write later.
    scheduled = wait_until(
        lambda: next(
            (
                c
                for c in _status(live, namespace, "job").get("conditions") or []
                if c["type"] == "Scheduled"
            ),
            None,
        ),
        what="the binding's Scheduled condition",
    )
    # Which member wins depends on the mix the controller learned from this session's gangs;
    # that it says why, with the numbers, does not.
    other = "member-2" if placed == "member-1" else "member-1"
    assert re.search(r"; chosen: fragmentation [+-]\d+\.\d+ GPU", scheduled["message"]), scheduled
    assert f"{other}: fits too, but {placed} fits better (fragmentation" in scheduled["message"]
    live.wait_running(namespace, "job", placed)
