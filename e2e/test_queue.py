"""Kube Queue on real API servers: an ElasticQuotaTree on the fleet, its Queues in kube-queue,
one QueueUnit per queued job, and jobs released to gang placement only within their quota.

Each test applies its own tree (the one honoured: `kube-system/elasticquotatree`) whose leaves
hold the test's namespace, and confines its jobs to fake nodes it adds, so what a test reasons
about is exactly the quota and capacity it created. The controllers run with a 10 s placement
timeout and an 8 s backoff (e2e/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.api import constants as c
from fleet.testing.kube import job_condition, wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import Fleet

TREE = (c.ELASTIC_QUOTA_API_VERSION, "ElasticQuotaTree")
TREE_NAME = "elasticquotatree"
QUEUE = (c.QUEUE_API_VERSION, "Queue")
UNIT = (c.QUEUE_API_VERSION, "QueueUnit")
QUOTA_LABEL = "quota.scheduling.alibabacloud.com/name"
SEED_TREE = Path(__file__).parents[1] / "policies" / "elasticquotatree-seed.yaml"
GPU = "nvidia.com/gpu"


# -- helpers -------------------------------------------------------------------------------------


def _tree(namespace: str, *leaves: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A tree whose first leaf holds `namespace`; the others are reached by the quota label."""
    children = [{"name": name, "max": limits} for name, limits in leaves]
    children[0]["namespaces"] = [namespace]
    return {
        "apiVersion": TREE[0],
        "kind": TREE[1],
        "metadata": {"name": TREE_NAME, "namespace": c.QUOTA_TREE_NAMESPACE},
        "spec": {
            "root": {
                "name": "root",
                "max": {GPU: 1000, "kube-queue/max-jobs": 1000},
                "children": children,
            }
        },
    }


@pytest.fixture
def tree(live: Fleet) -> Iterator[Any]:
    """`tree(obj)` applies the honoured ElasticQuotaTree (again, to edit it); removed after."""

    def apply(obj: dict[str, Any]) -> dict[str, Any]:
        return live.api.apply(obj)

    yield apply
    live.api.delete(*TREE, TREE_NAME, c.QUOTA_TREE_NAMESPACE)


def _policy(namespace: str) -> dict[str, Any]:
    policy = gang_policy("queued", namespace)
    policy["spec"]["suspension"] = {"scheduling": True}
    return policy


def _job(namespace: str, name: str, *, quota: str | None = None, **kw: Any) -> dict[str, Any]:
    job = pytorchjob(name, namespace=namespace, node_selector={"test": namespace}, **kw)
    if quota:
        job["metadata"]["labels"] = {QUOTA_LABEL: quota}
    return job


def _unit(live: Fleet, namespace: str, name: str) -> dict[str, Any]:
    return live.api.get(*UNIT, f"pytorchjob-{name}", namespace) or {}


def _phase(live: Fleet, namespace: str, name: str) -> str | None:
    return (_unit(live, namespace, name).get("status") or {}).get("phase")


def _wait_phase(live: Fleet, namespace: str, name: str, phase: str, timeout: float = 60) -> None:
    wait_until(
        lambda: _phase(live, namespace, name) == phase,
        timeout=timeout,
        what=f"QueueUnit of {name} {phase} (is {_phase(live, namespace, name)})",
    )


def _scheduled(live: Fleet, namespace: str, name: str) -> dict[str, Any]:
    conditions = ((live.job(namespace, name) or {}).get("status") or {}).get("conditions") or []
    return next((x for x in conditions if x["type"] == "Scheduled"), {})


def _wait_held(live: Fleet, namespace: str, name: str, reason: str, text: str) -> str:
    """Wait until the job's Scheduled condition holds it for `reason` with `text` in it."""

    def held() -> str | None:
        cond = _scheduled(live, namespace, name)
        ok = cond.get("status") == "False" and cond.get("reason") == reason
        return cond["message"] if ok and text in cond.get("message", "") else None

    return wait_until(held, timeout=60, what=f"{name} held: {reason} ({text})")


def _wait_running(live: Fleet, namespace: str, name: str) -> str:
    _wait_phase(live, namespace, name, "Running")
    member = wait_until(lambda: live.target(namespace, name), what=f"{name} placed")
    live.wait_running(namespace, name, member)
    return member


def _queue(live: Fleet, path: str) -> dict[str, Any] | None:
    for queue in live.api.items(*QUEUE, c.QUEUE_NAMESPACE):
        if (queue["metadata"].get("annotations") or {}).get(c.QUOTA_FULLNAME_ANNOTATION) == path:
            return queue
    return None


def _table(live: Fleet, kind: tuple[str, str], namespace: str) -> list[list[tuple[str, Any]]]:
    """`kubectl get` (the columns of priority 0), row by row as (column, cell) pairs."""
    table = live.api.api.table(live.api.resource(*kind), namespace) or {}
    columns = [
        (i, d["name"]) for i, d in enumerate(table["columnDefinitions"]) if not d["priority"]
    ]
    return [[(name, row["cells"][i]) for i, name in columns] for row in table.get("rows") or []]


def _finish(live: Fleet, namespace: str, name: str, member: str) -> None:
    live.mark(member, namespace, name, "Succeeded")
    _wait_phase(live, namespace, name, "Succeed", timeout=90)


# -- the seeds' step ----------------------------------------------------------------------------


def test_seeds_tree_and_policy_max_jobs_1_second_job_waits_until_first_finishes(
    live: Fleet, namespace, add_nodes, tree
):
    seed = yaml.safe_load(SEED_TREE.read_text())
    seed["spec"]["root"]["children"][0]["namespaces"] = [namespace]
    tree(seed)
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace))

    wait_until(lambda: _queue(live, "root/child-2"), what="the Queue of root/child-2")
    assert _queue(live, "root/child-2")["metadata"]["name"].startswith("root-child-2-")
    assert _queue(live, "root")["metadata"]["name"].startswith("root-")
    status = live.api.get(*TREE, TREE_NAME, c.QUOTA_TREE_NAMESPACE)["status"]
    assert (status["state"], status["valid"]) == ("Active", True)
    assert [p["rule"] for p in status["problems"]] == ["RootMinEqualsMax"]

    live.api.create(_job(namespace, "first"))
    _wait_phase(live, namespace, "first", "Running")
    live.api.create(_job(namespace, "second"))
    message = _wait_held(live, namespace, "second", c.REASON_QUEUED, "1 of max 1 jobs")
    assert "root/child-2" in message
    assert _phase(live, namespace, "second") == "Enqueued"
    assert live.target(namespace, "second") is None
    unit = _unit(live, namespace, "second")
    assert unit["spec"]["queue"] == _queue(live, "root/child-2")["metadata"]["name"]
    assert unit["spec"]["resource"][GPU] == "3"
    assert unit["metadata"]["ownerReferences"][0]["name"] == "second"

    # What `kubectl get queue -n kube-queue` and `kubectl get queueunit` print (server-side).
    queues = _table(live, QUEUE, c.QUEUE_NAMESPACE)
    assert [column for column, _ in queues[0]] == ["Name", "AGE"]
    assert sorted(dict(row)["Name"].rsplit("-", 1)[0] for row in queues) == [
        "root",
        "root-child-2",
    ]
    units = {dict(row)["Name"]: dict(row) for row in _table(live, UNIT, namespace)}
    assert units["pytorchjob-second"]["PHASE"] == "Enqueued"
    assert units["pytorchjob-second"]["QUEUE"].startswith("root-child-2-")
    assert "nvidia.com/gpu" in units["pytorchjob-second"]["RESOURCE"]

    member = _wait_running(live, namespace, "first")
    _finish(live, namespace, "first", member)
    _wait_running(live, namespace, "second")
    reasons = [r for r, _, _ in live.events(namespace, "second")]
    assert "Dequeued" in reasons and "ScheduleBindingSucceed" in reasons


# -- quota ---------------------------------------------------------------------------------------


def test_gpu_quota_holds_a_job_a_member_could_run_and_deletion_releases_it(
    live: Fleet, namespace, add_nodes, tree
):
    tree(_tree(namespace, ("team", {GPU: 4})))
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace))
    live.api.create(_job(namespace, "big"))  # 3 GPUs
    _wait_running(live, namespace, "big")

    live.api.create(_job(namespace, "small", workers=1))  # 2 GPUs: 5 > 4, though 5 are free
    _wait_held(live, namespace, "small", c.REASON_QUEUED, "3 GPUs of max 4 GPUs in use")
    assert live.target(namespace, "small") is None

    live.api.delete(*("kubeflow.org/v1", "PyTorchJob"), "big", namespace)
    _wait_running(live, namespace, "small")


def test_priority_order(live: Fleet, namespace, add_nodes, tree):
    tree(_tree(namespace, ("team", {"kube-queue/max-jobs": 1})))
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace))
    live.api.create(_job(namespace, "running"))
    member = _wait_running(live, namespace, "running")
    live.api.create(_job(namespace, "low"))
    _wait_phase(live, namespace, "low", "Enqueued")
    live.api.create(_job(namespace, "high"))
    _wait_phase(live, namespace, "high", "Enqueued")
    # The unit's priority (a PriorityClass value would land here too) puts it first.
    live.api.patch(*UNIT, "pytorchjob-high", {"spec": {"priority": 100}}, namespace)

    _finish(live, namespace, "running", member)
    _wait_phase(live, namespace, "high", "Running")
    assert _phase(live, namespace, "low") == "Enqueued"


def test_block_holds_small_jobs_behind_a_large_head_priority_lets_them_pass(
    live: Fleet, namespace, add_nodes, tree
):
    tree(_tree(namespace, ("team", {GPU: 4})))
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace))
    queue = wait_until(lambda: _queue(live, "root/team"), what="the Queue of root/team")
    name = queue["metadata"]["name"]
    live.api.patch(*QUEUE, name, {"spec": {"queuePolicy": "Block"}}, c.QUEUE_NAMESPACE)
    live.api.create(_job(namespace, "running"))  # 3 of the 4 GPUs
    _wait_running(live, namespace, "running")

    live.api.create(_job(namespace, "head", workers=3))  # 4 GPUs: waits for all of them
    _wait_phase(live, namespace, "head", "Enqueued")
    live.api.create(_job(namespace, "small", workers=0))  # 1 GPU: would fit
    _wait_held(live, namespace, "small", c.REASON_QUEUED, "waits behind")
    assert _phase(live, namespace, "small") == "Enqueued"

    live.api.patch(*QUEUE, name, {"spec": {"queuePolicy": "Priority"}}, c.QUEUE_NAMESPACE)
    _wait_running(live, namespace, "small")
    assert _phase(live, namespace, "head") == "Enqueued"


def test_an_edit_that_shrinks_a_max_releases_nothing_and_holds_new_jobs(
    live: Fleet, namespace, add_nodes, tree
):
    tree(_tree(namespace, ("team", {GPU: 8})))
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace))
    live.api.create(_job(namespace, "a"))
    live.api.create(_job(namespace, "b"))
    member_a = _wait_running(live, namespace, "a")
    _wait_running(live, namespace, "b")

    tree(_tree(namespace, ("team", {GPU: 4})))  # 6 GPUs held, max now 4
    wait_until(
        lambda: (
            ((live.api.get(*TREE, TREE_NAME, c.QUOTA_TREE_NAMESPACE) or {}).get("status") or {})
            .get("inForce", {})
            .get("generation")
            == 2
        ),
        what="the edit in force",
    )
    live.api.create(_job(namespace, "c", workers=0))  # 1 GPU
    _wait_held(live, namespace, "c", c.REASON_QUEUED, "6 GPUs of max 4 GPUs in use")
    assert _phase(live, namespace, "a") == "Running" and _phase(live, namespace, "b") == "Running"

    _finish(live, namespace, "a", member_a)  # 3 held: 3 + 1 fits 4
    _wait_running(live, namespace, "c")


def test_an_invalid_tree_edit_keeps_the_old_tree(live: Fleet, namespace, add_nodes, tree):
    tree(_tree(namespace, ("team", {"kube-queue/max-jobs": 1})))
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace))
    live.api.create(_job(namespace, "first"))
    _wait_running(live, namespace, "first")

    bad = _tree(namespace, ("team", {"kube-queue/max-jobs": 5}))
    bad["spec"]["root"]["children"][0]["min"] = {GPU: 2}  # min 2 GPUs above max 1: invalid
    bad["spec"]["root"]["children"][0]["max"][GPU] = 1
    tree(bad)

    def invalid() -> dict[str, Any] | None:
        status = live.api.get(*TREE, TREE_NAME, c.QUOTA_TREE_NAMESPACE).get("status") or {}
        return status if status.get("state") == "Invalid" else None

    status = wait_until(invalid, what="the edit reported Invalid")
    assert status["inForce"]["generation"] == 1 and status["observedGeneration"] == 2
    assert {(p["node"], p["rule"]) for p in status["problems"]} >= {("root/team", "MinWithinMax")}
    (event,) = [
        e
        for e in live.api.events(c.QUOTA_TREE_NAMESPACE, TREE_NAME)
        if e["reason"] == "QuotaTreeInvalid"
    ]
    assert "root/team" in event["message"] and "MinWithinMax" in event["message"]

    # The old tree (max-jobs 1) still holds the second job; the invalid one would let it go.
    live.api.create(_job(namespace, "second"))
    _wait_held(live, namespace, "second", c.REASON_QUEUED, "1 of max 1 jobs")


def test_a_namespace_outside_the_tree_waits_with_a_condition_and_event(
    live: Fleet, namespace, add_nodes, tree
):
    tree(_tree("somewhere-else", ("team", {GPU: 8})))
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace))
    live.api.create(_job(namespace, "homeless"))

    message = _wait_held(live, namespace, "homeless", "NoQuota", "is in no quota node")
    assert namespace in message
    wait_until(
        lambda: "NoQuota" in [r for r, _, _ in live.events(namespace, "homeless")],
        what="a NoQuota event",
    )
    assert _phase(live, namespace, "homeless") == "Enqueued"
    assert live.target(namespace, "homeless") is None


def test_timeout_backoff_when_no_member_can_hold_a_released_job(
    live: Fleet, namespace, add_nodes, tree
):
    tree(_tree(namespace, ("team", {GPU: 64})))
    live.api.create(_policy(namespace))
    live.api.create(_job(namespace, "lost"))  # no node carries the test's label yet

    _wait_phase(live, namespace, "lost", "Dequeued")
    _wait_phase(live, namespace, "lost", "TimeoutBackoff", timeout=60)
    message = _unit(live, namespace, "lost")["status"]["message"]
    assert "not placed within 10 s" in message and "no member cluster could hold" in message
    _wait_held(live, namespace, "lost", "TimeoutBackoff", "TimeoutBackoff after attempt 1")
    assert "TimeoutBackoff" in [r for r, _, _ in live.events(namespace, "lost")]

    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    member = _wait_running(live, namespace, "lost")
    assert member == "member-2"
    assert _unit(live, namespace, "lost")["status"]["attempts"] >= 2


def test_a_controller_restart_with_jobs_queued_and_dequeued(
    live: Fleet, namespace, add_nodes, tree
):
    tree(_tree(namespace, ("team", {"kube-queue/max-jobs": 1}), ("other", {GPU: 64})))
    add_nodes("member-1", count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace))
    live.api.create(_job(namespace, "running"))
    member = _wait_running(live, namespace, "running")
    live.api.create(_job(namespace, "waiting"))
    _wait_phase(live, namespace, "waiting", "Enqueued")

    for replica in live.replicas:
        replica.kill()
    live.ensure_running()

    # A job of the other leaf proves the new leader rebuilt the queue and ran a pass...
    live.api.create(_job(namespace, "probe", quota="other", workers=0))
    _wait_running(live, namespace, "probe")
    # ...and that pass kept the job of the full leaf waiting: its quota was not lost.
    assert _phase(live, namespace, "waiting") == "Enqueued"
    assert _phase(live, namespace, "running") == "Running"
    held = _queue(live, "root/team")
    wait_until(
        lambda: ((_queue(live, "root/team") or {}).get("status") or {}).get("dequeued") == 1,
        what="root/team's Queue counting one dequeued job",
    )
    assert held is not None

    _finish(live, namespace, "running", member)
    _wait_running(live, namespace, "waiting")
    assert job_condition(live.job(namespace, "waiting"), "Running")
