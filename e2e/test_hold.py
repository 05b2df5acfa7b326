"""The claimant's hold on real API servers: the room a reclaim frees is the claimant's.

As in e2e/test_reclaim.py: a tree of two teams over 8 GPUs of the test's own fake nodes (team `a`:
the test's namespace, team `b`: by the quota label; each min 4, max 8), jobs of 4 GPUs (a master
and a worker of 2 GPUs) confined to those nodes, the victim's copy deleted 8 s after its eviction
is recorded (`--queue-reclaim-grace`, e2e/conftest.py). The competitor for the freed room is
fleet's own placement: a gang outside the queue (a namespace no queued policy covers) that would
fit the room, created while the victim's copy is still there. It does not take it: the claimant
runs there (docs/queue.md, "The hold"; what a member's own scheduler does with it is said there).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fleet.api import parse_time, to_epoch
from fleet.api.guard import open_label
from fleet.kube import KubeError
from fleet.testing.kube import wait_until
from fleet.testing.workloads import JOB_NAME_LABEL, gang_policy, pytorchjob

from .conftest import FLEET_ID, PYTORCHJOB, QUEUE_PLACEMENT_TIMEOUT, Fleet
from .test_reclaim import (
    QUOTA_LABEL,
    _eviction,
    _job,
    _phase,
    _policy,
    _start,
    _victim,
    _wait_phase,
    teams,
)

__all__ = ["teams"]  # fixtures used here


@pytest.fixture
def outside(live: Fleet, namespace: str) -> Iterator[str]:
    """A second namespace, in the fleet and every member, that no queued policy covers; opened
    to the fleet in the members, as the `namespace` fixture's is (docs/security.md)."""
    name = f"{namespace}-x"[:63]
    for cluster, client in live.clusters.items():  # the fleet's API server is one of them
        labels = {} if cluster == "fleet" else {open_label(FLEET_ID): "true"}
        client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )
    yield name
    for client in live.clusters.values():
        client.delete("v1", "Namespace", name)


def _outsider(namespace: str, nodes: str) -> dict[str, Any]:
    """4 GPUs, like the claimant, on the test's nodes; placed by fleet with no queue."""
    return pytorchjob("x1", namespace=namespace, workers=1, gpus=2, node_selector={"test": nodes})


def test_the_claimant_not_another_gang_that_fits_gets_the_room_it_freed(
    live: Fleet, namespace, outside, add_nodes, teams
):
    teams()
    add_nodes("member-1", count=2, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace))
    _start(live, namespace, "a1", "a")
    _start(live, namespace, "a2", "a")

    live.api.create(_job(namespace, "b1", "b"))
    victim = _victim(live, namespace)
    wait_until(
        lambda: [m for r, m, _ in live.events(namespace, "b1") if r == "RoomHeld"],
        what="b1 told its room is held",
    )
    # Within the grace period, a gang that would fit the victim's room arrives, outside the
    # queue: fleet's placement tries it at once, and again when the victim's pods go.
    live.api.create(gang_policy("outside", outside))
    live.api.create(_outsider(outside, namespace))

    wait_until(lambda: not live.copies(namespace, victim), timeout=90, what="the copy deleted")
    _wait_phase(live, namespace, "b1", "Running", timeout=90)
    assert live.target(namespace, "b1") == "member-1"
    live.wait_running(namespace, "b1", "member-1")
    assert live.target(outside, "x1") is None  # refused the held room, waits for capacity
    assert live.copies(outside, "x1") == []
    released = [m for r, m, _ in live.events(namespace, "b1") if r == "HoldReleased"]
    assert released and "the claimant was placed" in released[-1]
    assert _eviction(live, namespace, victim) is None
    assert _phase(live, namespace, victim) == "Enqueued"

    # The room the outsider waits for comes back when b1 ends: then it runs. The victim, queued
    # again, would race it for that room (team a may borrow again once b1 is gone): it leaves
    # first, so that the outsider is the one gang waiting.
    live.api.delete(*PYTORCHJOB, victim, namespace)
    wait_until(lambda: live.job(namespace, victim) is None, what="the victim gone")
    live.api.delete(*PYTORCHJOB, "b1", namespace)
    wait_until(lambda: live.target(outside, "x1") is not None, timeout=90, what="x1 placed")


def test_the_claimant_not_a_queued_gang_that_fits_gets_the_room_it_freed(
    live: Fleet, namespace, add_nodes, teams
):
    """The competitor is a queued gang: team `c` (min 4) has quota for it, so the queue lets it
    go, but the 8 GPUs are a's, 4 of them borrowed; it waits for room. Team `b` (min 4) gets
    its min back by reclaim. When the victim's copy goes, both would fit the room it frees: the
    claimant, b1, gets it; c1 goes on waiting."""
    teams(c_min=4)
    add_nodes("member-1", count=2, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace))
    _start(live, namespace, "a1", "a")
    _start(live, namespace, "a2", "a")

    competitor = _job(namespace, "c1", "a")
    competitor["metadata"]["labels"] = {QUOTA_LABEL: "c"}
    live.api.create(competitor)
    # Let go by its quota (within c's min), and waiting for room: no member can place it.
    wait_until(
        lambda: _phase(live, namespace, "c1") not in (None, "Enqueued"),
        what="c1 let go by the queue",
    )
    assert live.target(namespace, "c1") is None

    live.api.create(_job(namespace, "b1", "b"))
    victim = _victim(live, namespace)
    wait_until(
        lambda: [m for r, m, _ in live.events(namespace, "b1") if r == "RoomHeld"],
        what="b1 told its room is held",
    )
    wait_until(lambda: not live.copies(namespace, victim), timeout=90, what="the copy deleted")
    _wait_phase(live, namespace, "b1", "Running", timeout=90)
    assert live.target(namespace, "b1") == "member-1"
    live.wait_running(namespace, "b1", "member-1")
    assert live.target(namespace, "c1") is None  # the queued gang did not take the room
    assert live.copies(namespace, "c1") == []
    released = [m for r, m, _ in live.events(namespace, "b1") if r == "HoldReleased"]
    assert released and "the claimant was placed" in released[-1]


#: Holds a deleted pod of the victim, as a long `terminationGracePeriodSeconds` would: kwok has
#: no kubelet and removes a deleted pod at once.
SLOW_STOP = "e2e.fleet.dev/slow-stop"


def test_the_hold_outlasts_a_victim_whose_pods_stop_slower_than_the_claimants_timeout(
    live: Fleet, namespace, add_nodes, teams
):
    """The victim's pods take three times the claimant's placement timeout (10 s here) to stop
    after its copy is deleted. The claimant's timeout counts from when they are gone, so the
    hold stands meanwhile, no second victim is taken, and the claimant gets the room."""
    teams()
    add_nodes("member-1", count=2, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace))
    _start(live, namespace, "a1", "a")
    _start(live, namespace, "a2", "a")
    member = live.clusters["member-1"]
    a_pods = {name: member.pods(namespace, f"{JOB_NAME_LABEL}={name}") for name in ("a1", "a2")}
    assert all(len(pods) == 2 for pods in a_pods.values()), a_pods
    for pods in a_pods.values():
        for pod in pods:
            patch = {"metadata": {"finalizers": [SLOW_STOP]}}
            member.patch("v1", "Pod", pod["metadata"]["name"], patch, namespace)
    try:
        live.api.create(_job(namespace, "b1", "b"))
        victim = _victim(live, namespace)
        survivor = "a1" if victim == "a2" else "a2"

        def stopping_for(seconds: float) -> bool:
            """Every pod of the victim deleted, and the first of them `seconds` ago or more."""
            pods = member.pods(namespace, f"{JOB_NAME_LABEL}={victim}")
            stamps = [p["metadata"].get("deletionTimestamp") for p in pods]
            if len(pods) != 2 or not all(stamps):
                return False
            return time.time() - min(to_epoch(parse_time(str(s))) for s in stamps) >= seconds

        wait_until(lambda: stopping_for(0), timeout=90, what=f"{victim}'s pods deleted")
        wait_until(
            lambda: stopping_for(3 * QUEUE_PLACEMENT_TIMEOUT),
            timeout=90,
            what=f"{victim}'s pods stopping for 3 times the claimant's timeout",
        )
        assert live.target(namespace, "b1") is None  # the room is not free yet
    finally:
        for pods in a_pods.values():
            for pod in pods:
                name = pod["metadata"]["name"]
                with contextlib.suppress(KubeError):
                    member.patch("v1", "Pod", name, {"metadata": {"finalizers": None}}, namespace)

    _wait_phase(live, namespace, "b1", "Running", timeout=90)
    live.wait_running(namespace, "b1", "member-1")
    # One hold, ended by the placement, not by the timeout; the other gang of a kept its room.
    released = [m for r, m, _ in live.events(namespace, "b1") if r == "HoldReleased"]
    assert len(released) == 1 and "the claimant was placed" in released[0], released
    assert _eviction(live, namespace, survivor) is None
    live.wait_running(namespace, survivor, "member-1")
