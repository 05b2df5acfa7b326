"""A QueueUnit's priority and opt-out of reclaim follow the job's PriorityClass and Namespace as
they are: a failed read is retried (the reconcile fails and runs again), never stored as a
default, and a later change reaches the unit and the admission."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from fleet.api import constants as c
from fleet.controller.queue.units import key_of_job
from fleet.kube import ApiError
from fleet.testing.workloads import pytorchjob
from tests.controller.harness import NAMESPACE, World
from tests.controller.test_queue import gpu_tree, phase, queue_world, unit, work

PRIORITY_CLASS = ("scheduling.k8s.io/v1", "PriorityClass")
UNIT = ("scheduling.x-k8s.io/v1alpha1", "QueueUnit")


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": PRIORITY_CLASS[0],
        "kind": PRIORITY_CLASS[1],
        "metadata": {"name": name},
        "value": value,
    }


def naming(name: str, job: str) -> dict[str, Any]:
    obj = pytorchjob(job)
    for replica in obj["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["priorityClassName"] = name
    return obj


def fail_reads(world: World, path_part: str) -> list[httpx.Request]:
    """Every GET whose path has `path_part` fails (403: not retried by the client) until the
    returned list's owner clears the interceptors; the failed requests are collected."""
    failed: list[httpx.Request] = []

    def intercept(request: httpx.Request) -> httpx.Response | None:
        if request.method == "GET" and path_part in request.url.path:
            failed.append(request)
            return httpx.Response(
                403,
                json={"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403},
            )
        return None

    world.fleet_api.interceptors.append(intercept)
    return failed


async def test_a_priority_class_read_failing_once_is_retried_and_gives_the_right_priority():
    world = await queue_world(gpu_tree(3), gpus=8)
    world.fleet_api.put(priority_class("high", 1000))
    world.kube_queue._priorities.clear()  # not seen by the watch yet: the gate reads it
    key = world.submit(naming("high", "job"))

    failed = fail_reads(world, "/priorityclasses/high")
    with pytest.raises(ApiError):
        await world.reconcile(key)  # the work queue retries it (ApiError is expected there)
    assert failed
    assert world.fleet_api.get(*UNIT, f"pytorchjob-{key.name}", NAMESPACE) is None

    world.fleet_api.interceptors.clear()
    await world.reconcile(key)

    assert unit(world, key)["spec"]["priority"] == 1000
    assert world.kube_queue.admission._units[key_of_job(key)].spec.priority == 1000


async def test_a_changed_priority_class_value_reaches_the_unit_and_the_order():
    world = await queue_world(gpu_tree(3), gpus=8)  # room for one 3-GPU job
    world.fleet_api.put(priority_class("team", 10))
    running = world.submit(pytorchjob("running"))
    await world.reconcile(running)
    await work(world)
    await world.reconcile(running)
    first = world.submit(pytorchjob("first"))  # priority 0, submitted first
    await world.reconcile(first)
    second = world.submit(naming("team", "second"))
    await world.reconcile(second)
    assert unit(world, second)["spec"]["priority"] == 10

    # The class is lowered below the other job's priority: the watch reconciles its jobs.
    world.queue.added.clear()
    world.fleet_api.put(priority_class("team", -5))
    assert second in world.queue.added
    await world.reconcile(second)
    assert unit(world, second)["spec"]["priority"] == -5

    world.members["member-1"].set_job_state("running", "Succeeded")
    await world.reconcile(running)
    await work(world)
    assert phase(world, first) == "Dequeued" and phase(world, second) == "Enqueued"


async def test_a_namespace_read_failing_is_retried_never_taken_for_reclaimable():
    world = await queue_world(gpu_tree(3), gpus=8)
    world.fleet_api.merge(
        "v1", "Namespace", NAMESPACE, None, {"metadata": {"labels": {c.RECLAIMABLE_LABEL: "false"}}}
    )
    world.kube_queue._namespaces.clear()  # not seen by the watch yet: the gate reads it
    key = world.submit(pytorchjob("job"))

    fail_reads(world, f"/namespaces/{NAMESPACE}")
    with pytest.raises(ApiError):
        await world.reconcile(key)
    world.fleet_api.interceptors.clear()
    await world.reconcile(key)

    labels = unit(world, key)["metadata"].get("labels") or {}
    assert labels.get(c.RECLAIMABLE_LABEL) == "false"


async def test_a_namespace_that_opts_out_later_protects_its_running_gang():
    world = await queue_world(gpu_tree(3), gpus=8)
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    await work(world)
    await world.reconcile(key)
    assert phase(world, key) == "Running"
    assert world.kube_queue.admission._units[key_of_job(key)].spec.borrows

    world.queue.added.clear()
    world.fleet_api.merge(
        "v1", "Namespace", NAMESPACE, None, {"metadata": {"labels": {c.RECLAIMABLE_LABEL: "false"}}}
    )
    assert key in world.queue.added  # the watch reconciles its jobs
    await world.reconcile(key)

    assert (unit(world, key)["metadata"].get("labels") or {}).get(c.RECLAIMABLE_LABEL) == "false"
    held = world.kube_queue.admission._units[key_of_job(key)]
    assert not held.spec.borrows and held.phase == "Running"
    assert world.kube_queue.admission.holds(key_of_job(key))
