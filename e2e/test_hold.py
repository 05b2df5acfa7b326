"""The claimant's hold on real API servers: the room a reclaim frees is the claimant's.

As in e2e/test_reclaim.py: a tree of two teams over 8 GPUs of the test's own fake nodes (team `a`:
the test's namespace, team `b`: by the quota label; each min 4, max 8), jobs of 4 GPUs (a master
and a worker of 2 GPUs) confined to those nodes, the victim's copy deleted 8 s after its eviction
is recorded (`--queue-reclaim-grace`, e2e/conftest.py). Two competitors for the freed room:

* fleet's own placement: a gang outside the queue (a namespace no queued policy covers) that
  would fit the room, created while the victim's copy is still there;
* on the Koordinator member (member-4, joined as e2e/test_reservation.py does), a member-local
  pod created within the grace period.

Neither takes it: the claimant runs there (docs/queue.md, "The hold").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import PYTORCHJOB, Fleet
from .test_reclaim import (
    _eviction,
    _job,
    _phase,
    _policy,
    _reasons,
    _start,
    _victim,
    _wait_phase,
    teams,
)
from .test_reservation import TAINT, _ours, _uid, koordinator

__all__ = ["koordinator", "teams"]  # fixtures used here

GPU = "nvidia.com/gpu"


@pytest.fixture
def outside(live: Fleet, namespace: str) -> Iterator[str]:
    """A second namespace, in the fleet and every member, that no queued policy covers."""
    name = f"{namespace}-x"[:63]
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    for client in live.clusters.values():
        client.create(body)
    live.api.create(body)
    yield name
    live.api.delete("v1", "Namespace", name)
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

    # The room the outsider waits for comes back when b1 ends: then it runs.
    live.api.delete(*PYTORCHJOB, "b1", namespace)
    wait_until(lambda: live.target(outside, "x1") is not None, timeout=90, what="x1 placed")


def _koordinator_policy(namespace: str) -> dict[str, Any]:
    """Queued, tolerating member-4's taint, confined to member-4."""
    policy = _policy(namespace)
    placement = policy["spec"]["placement"]
    placement["clusterTolerations"] = [
        {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
    ]
    placement["clusterAffinity"] = {"clusterNames": [KOORDINATOR_MEMBER]}
    return policy


def _local_pod(namespace: str, gpus: int) -> dict[str, Any]:
    """A member-local pod (not fleet's) asking for `gpus` GPUs on the test's nodes."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "local", "namespace": namespace},
        "spec": {
            "nodeSelector": {"test": namespace},
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "local",
                    "image": "registry.k8s.io/pause:3.9",
                    "resources": {"requests": {GPU: gpus}, "limits": {GPU: gpus}},
                }
            ],
        },
    }


def test_on_koordinator_a_local_pod_made_in_the_grace_period_does_not_take_the_room(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes, teams
):
    teams()
    add_nodes(KOORDINATOR_MEMBER, count=2, gpu=4, labels={"test": namespace})
    live.api.create(_koordinator_policy(namespace))
    _start(live, namespace, "a1", "a")
    _start(live, namespace, "a2", "a")

    live.api.create(_job(namespace, "b1", "b"))
    victim = _victim(live, namespace)
    uid = _uid(live, namespace, "b1")
    # The hold reserves b1's room in member-4 at once: its Reservations wait for the victim.
    wait_until(lambda: len(_ours(koordinator, uid)) == 2, what="b1's 2 Reservations made")
    assert koordinator.get(*PYTORCHJOB, victim, namespace) is not None  # still in its grace
    koordinator.create(_local_pod(namespace, gpus=2))
    try:
        wait_until(lambda: not live.copies(namespace, victim), timeout=90, what="copy deleted")
        _wait_phase(live, namespace, "b1", "Running", timeout=120)
        assert live.target(namespace, "b1") == KOORDINATOR_MEMBER
        live.wait_running(namespace, "b1", KOORDINATOR_MEMBER, timeout=120)
        local = koordinator.get("v1", "Pod", "local", namespace) or {}
        assert not (local.get("spec") or {}).get("nodeName")  # it waits: the room was b1's
        assert "HoldReleased" in {r for r, _m, _c in live.events(namespace, "b1")}
        assert not _reasons(live, namespace, "b1", "ReservationFailed")
    finally:
        koordinator.delete("v1", "Pod", "local", namespace)
