"""Reclaim and preemption on real API servers: whole gangs evicted so that a team gets its min
back, recorded on the victim's binding before anything is deleted in a member.

Each test applies a tree of two teams over 8 GPUs of its own fake nodes (team `a`: the test's
namespace, team `b`: reached by the quota label; each min 4, max 8, unless the test says
otherwise) and jobs of 4 GPUs (a master and a worker of 2 GPUs) confined to those nodes. The
e2e controllers delete a victim's copy 8 s after its eviction is recorded
(`--queue-reclaim-grace`, e2e/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleet.api import constants as c
from fleet.testing.kube import wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import Fleet

TREE = (c.ELASTIC_QUOTA_API_VERSION, "ElasticQuotaTree")
TREE_NAME = "elasticquotatree"
UNIT = (c.QUEUE_API_VERSION, "QueueUnit")
QUOTA_LABEL = "quota.scheduling.alibabacloud.com/name"
GPU = "nvidia.com/gpu"


@pytest.fixture
def teams(live: Fleet, namespace: str) -> Iterator[Any]:
    """`teams(a_min=4)`: the two teams' tree, in force until the test ends. `c_min`: a third
    team `c` (reached by the quota label) with that much quota of its own (min and max) on top
    of the 8 GPUs, which no node gives."""

    def apply(a_min: int = 4, c_min: int = 0) -> None:
        children: list[dict[str, Any]] = [
            {"name": "a", "min": {GPU: a_min}, "max": {GPU: 8}, "namespaces": [namespace]},
            {"name": "b", "min": {GPU: 8 - a_min}, "max": {GPU: 8}},
        ]
        if c_min:
            children.append({"name": "c", "min": {GPU: c_min}, "max": {GPU: c_min}})
        total = {GPU: 8 + c_min}
        live.api.apply(
            {
                "apiVersion": TREE[0],
                "kind": TREE[1],
                "metadata": {"name": TREE_NAME, "namespace": c.QUOTA_TREE_NAMESPACE},
                "spec": {
                    "root": {"name": "root", "min": total, "max": total, "children": children}
                },
            }
        )

    yield apply
    live.api.delete(*TREE, TREE_NAME, c.QUOTA_TREE_NAMESPACE)


def _policy(namespace: str, **labels: str) -> dict[str, Any]:
    policy = gang_policy("queued", namespace)
    policy["spec"]["suspension"] = {"scheduling": True}
    if labels:
        policy["metadata"]["labels"] = labels
    return policy


def _job(namespace: str, name: str, team: str, **kw: Any) -> dict[str, Any]:
    job = pytorchjob(
        name, namespace=namespace, workers=1, gpus=2, node_selector={"test": namespace}, **kw
    )
    if team == "b":
        job["metadata"]["labels"] = {QUOTA_LABEL: "b"}
    return job


def _unit(live: Fleet, namespace: str, name: str) -> dict[str, Any]:
    return live.api.get(*UNIT, f"pytorchjob-{name}", namespace) or {}


def _phase(live: Fleet, namespace: str, name: str) -> str | None:
    return (_unit(live, namespace, name).get("status") or {}).get("phase")


def _wait_phase(live: Fleet, namespace: str, name: str, phase: str, timeout: float = 90) -> None:
    wait_until(
        lambda: _phase(live, namespace, name) == phase,
        timeout=timeout,
        what=f"QueueUnit of {name} {phase} (is {_phase(live, namespace, name)})",
    )


def _start(live: Fleet, namespace: str, name: str, team: str, **kw: Any) -> str:
    live.api.create(_job(namespace, name, team, **kw))
    _wait_phase(live, namespace, name, "Running")
    member = wait_until(lambda: live.target(namespace, name), what=f"{name} placed")
    live.wait_running(namespace, name, member)
    return member


def _eviction(live: Fleet, namespace: str, name: str) -> dict[str, Any] | None:
    binding = live.binding(namespace, name) or {}
    tasks = (binding.get("spec") or {}).get("gracefulEvictionTasks") or []
    return next((t for t in tasks if t.get("evictedFor")), None)


def _victim(live: Fleet, namespace: str) -> str:
    """The gang of team a whose eviction is recorded: the most recent start, or (placements
    recorded in the same second) the first by name."""
    return wait_until(
        lambda: next((n for n in ("a2", "a1") if _eviction(live, namespace, n)), None),
        what="an eviction of a's gangs recorded on its binding",
    )


def _reasons(live: Fleet, namespace: str, name: str, reason: str) -> list[str]:
    return [m for r, m, _ in live.events(namespace, name) if r == reason]


def test_a_controller_killed_between_the_record_and_the_delete_finishes_it_once(
    live: Fleet, namespace, add_nodes, teams
):
    # Team a has no min here: both its gangs borrow, so only the record keeps the second from
    # being evicted as well while b waits for the first victim's copy to go.
    teams(a_min=0)
    add_nodes("member-1", count=2, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace))
    first = _start(live, namespace, "a1", "a")
    second = _start(live, namespace, "a2", "a")

    live.api.create(_job(namespace, "b1", "b"))
    victim = _victim(live, namespace)
    for replica in live.replicas:  # within the 8 s grace: nothing is deleted yet
        replica.kill()
    task = _eviction(live, namespace, victim)
    assert task is not None
    assert task["evictedFor"] == f"{namespace}/pytorchjob-b1" and task["reason"] == "Reclaimed"
    kept = "a1" if victim == "a2" else "a2"
    where = {"a1": first, "a2": second}
    assert live.copies(namespace, victim) == [where[victim]]
    live.ensure_running()

    # The restarted controller finishes the eviction: the copy goes, b runs, the other gang of
    # team a (borrowing too) is untouched: nothing is evicted twice.
    wait_until(lambda: not live.copies(namespace, victim), timeout=90, what="the copy deleted")
    _wait_phase(live, namespace, "b1", "Running")
    live.wait_running(namespace, "b1", wait_until(lambda: live.target(namespace, "b1")))
    assert _phase(live, namespace, victim) == "Enqueued"
    assert _phase(live, namespace, kept) == "Running"
    assert live.copies(namespace, kept) == [where[kept]]
    assert len(_reasons(live, namespace, victim, "Reclaimed")) == 1
    assert not _reasons(live, namespace, kept, "Reclaimed")
    binding = live.binding(namespace, victim) or {}
    assert not (binding.get("status") or {}).get("failoverHistory")  # not a failover


def test_reclaim_with_the_victims_member_unreachable_waits_and_fences(
    live: Fleet, namespace, add_nodes, teams
):
    teams()
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    add_nodes("member-3", count=1, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace))
    first = _start(live, namespace, "a1", "a")
    second = _start(live, namespace, "a2", "a")
    assert first != second

    live.api.create(_job(namespace, "b1", "b"))
    victim = _victim(live, namespace)
    kept = "a1" if victim == "a2" else "a2"
    lost = second if victim == "a2" else first
    live.sandbox.stop_cluster(lost, abrupt=True)
    try:
        # The eviction waits for the member: its record stays, b1 is not placed there.
        wait_until(
            lambda: _reasons(live, namespace, victim, "Reclaimed"),
            what=f"a Reclaimed event on {victim}",
        )
        assert _eviction(live, namespace, victim) is not None
        assert live.target(namespace, "b1") is None
    finally:
        live.sandbox.start_cluster(lost)
    # Back: the old copy is fenced (deleted), then b1 runs in its place.
    wait_until(lambda: not live.copies(namespace, victim), timeout=120, what="the copy fenced")
    wait_until(lambda: _eviction(live, namespace, victim) is None, what="the eviction done")
    _wait_phase(live, namespace, "b1", "Running", timeout=120)
    assert live.target(namespace, "b1") == lost
    assert _phase(live, namespace, kept) == "Running"


def test_a_policy_that_opts_out_is_never_reclaimed_and_never_borrows(
    live: Fleet, namespace, add_nodes, teams
):
    teams()
    add_nodes("member-1", count=2, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace, **{"kube-queue.fleet.dev/reclaimable": "false"}))
    _start(live, namespace, "a1", "a")
    live.api.create(_job(namespace, "a2", "a"))
    _wait_phase(live, namespace, "a2", "Enqueued")
    wait_until(
        lambda: "opted out of reclaim" in str(_unit(live, namespace, "a2").get("status")),
        what="a2 held by its min: opted out of reclaim",
    )
    labels = _unit(live, namespace, "a1")["metadata"]["labels"]
    assert labels["kube-queue.fleet.dev/reclaimable"] == "false"


@pytest.mark.parametrize("preemption", ["on", "off"])
def test_priority_preemption_within_a_queue_only_when_turned_on(
    live: Fleet, namespace, add_nodes, teams, preemption
):
    teams(a_min=8)
    add_nodes("member-1", count=2, gpu=4, labels={"test": namespace})
    live.api.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "e2e-high"},
            "value": 1000,
        }
    )
    for replica in live.replicas:
        replica.kill()
        replica.argv += ["--queue-preemption", preemption]
    try:
        live.ensure_running()
        live.api.create(_policy(namespace))
        _start(live, namespace, "low1", "a")
        _start(live, namespace, "low2", "a")
        urgent = _job(namespace, "urgent", "a")
        urgent["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "e2e-high"}}
        live.api.create(urgent)
        if preemption == "on":
            _wait_phase(live, namespace, "urgent", "Running", timeout=120)
            messages = [
                m for n in ("low1", "low2") for m in _reasons(live, namespace, n, "Preempted")
            ]
            assert len(messages) == 1 and "priority 1000 over 0" in messages[0]
            phases = sorted(_phase(live, namespace, n) or "" for n in ("low1", "low2"))
            assert phases == ["Enqueued", "Running"]
        else:
            _wait_phase(live, namespace, "urgent", "Enqueued")
            live.settle(namespace)  # the controller caught up: still nothing evicted
            assert _phase(live, namespace, "low1") == _phase(live, namespace, "low2") == "Running"
            assert not any(_reasons(live, namespace, n, "Preempted") for n in ("low1", "low2"))
    finally:
        for replica in live.replicas:
            replica.kill()
            del replica.argv[-2:]
        live.ensure_running()
