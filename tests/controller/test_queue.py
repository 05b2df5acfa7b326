"""Kube Queue's shell, one step at a time, on in-memory API servers and a fake clock: the tree
in force, the Queues, the units and the gate's transitions (enqueued, dequeued, running,
released, backed off, failed over), and a restart that rebuilds the queue from the objects.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from fleet.api import constants as c
from fleet.controller import placing
from fleet.controller.keys import WorkloadKey
from fleet.controller.queue import gate
from fleet.controller.queue.units import key_of_job
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, World, conditions

SEED_TREE = Path(__file__).parents[2] / "policies" / "elasticquotatree-seed.yaml"
TREE = ("scheduling.sigs.k8s.io/v1beta1", "ElasticQuotaTree")
QUEUE = ("scheduling.x-k8s.io/v1alpha1", "Queue")
UNIT = ("scheduling.x-k8s.io/v1alpha1", "QueueUnit")


def seed_tree(namespace: str = NAMESPACE) -> dict[str, Any]:
    """The seeds' tree, with its leaf holding the tests' namespace."""
    tree = yaml.safe_load(SEED_TREE.read_text())
    tree["spec"]["root"]["children"][0]["namespaces"] = [namespace]
    return tree


def gpu_tree(leaf_gpus: int, *, namespace: str = NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": TREE[0],
        "kind": TREE[1],
        "metadata": {"name": "tree", "namespace": "kube-system"},
        "spec": {
            "root": {
                "name": "root",
                "min": {"nvidia.com/gpu": 64},
                "max": {"nvidia.com/gpu": 64},
                "children": [
                    {
                        "name": "team_a",
                        "min": {"nvidia.com/gpu": leaf_gpus},
                        "max": {"nvidia.com/gpu": leaf_gpus},
                        "namespaces": [namespace],
                    }
                ],
            }
        },
    }


def queued_policy() -> dict[str, Any]:
    policy = gang_policy("queued", NAMESPACE)
    policy["spec"]["suspension"] = {"scheduling": True}
    return policy


async def work(world: World) -> None:
    """Run the queue's own work items (tree, queues, passes) until none is left, as its one
    worker would."""
    kq = world.kube_queue
    for _ in range(20):
        if not kq.work._queued:
            return
        item = kq.work._ready.get_nowait()
        kq.work._queued.discard(item)
        await kq.process(item)
    raise AssertionError("the queue's work never settles")


async def queue_world(tree: dict[str, Any] | None, **member: Any) -> World:
    world = World()
    world.add_member("member-1", **member)
    world.apply_policy(queued_policy())
    if tree is not None:
        world.fleet_api.put(copy.deepcopy(tree))
    world.kube_queue.lead()
    await work(world)
    return world


def unit(world: World, key: WorkloadKey) -> dict[str, Any]:
    found = world.fleet_api.get(*UNIT, f"pytorchjob-{key.name}", key.namespace)
    assert found is not None, f"no QueueUnit for {key}"
    return found


def phase(world: World, key: WorkloadKey) -> str | None:
    return (unit(world, key).get("status") or {}).get("phase")


def placed_on(world: World, key: WorkloadKey) -> str | None:
    clusters = ((world.binding(key) or {}).get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


async def submit_and_admit(world: World, name: str, **kw: Any) -> WorkloadKey:
    """Submit a job and run the reconcile and the pass a new queued job goes through."""
    key = world.submit(pytorchjob(name, **kw))
    await world.reconcile(key)
    await work(world)
    await world.reconcile(key)
    return key


# -- the tree and its Queues -----------------------------------------------------------------


async def test_the_seeds_tree_is_put_in_force_with_one_queue_per_node_named_as_ack():
    world = await queue_world(seed_tree())

    tree = world.fleet_api.get(*TREE, "elasticquotatree", "kube-system")
    status = tree["status"]
    assert (status["state"], status["valid"], status["inForce"]["generation"]) == (
        "Active",
        True,
        1,
    )
    # The seeds' root min differs from its max: a warning, not an error.
    assert [p["rule"] for p in status["problems"]] == ["RootMinEqualsMax"]
    assert world.fleet_api.events("QuotaTreeWarning", about="elasticquotatree")
    queues = world.fleet_api.list(*QUEUE, c.QUEUE_NAMESPACE)
    paths = {q["metadata"]["annotations"][c.QUOTA_FULLNAME_ANNOTATION]: q for q in queues}
    assert sorted(paths) == ["root", "root/child-2"]
    assert paths["root/child-2"]["metadata"]["name"].startswith("root-child-2-")
    assert paths["root"]["metadata"]["name"].startswith("root-")


async def test_an_invalid_edit_keeps_the_last_valid_tree_and_names_the_node_and_rule():
    world = await queue_world(gpu_tree(8))
    bad = gpu_tree(8)
    bad["spec"]["root"]["children"][0]["min"] = {"nvidia.com/gpu": 16}  # above its max
    world.fleet_api.put(bad)
    await work(world)

    status = world.fleet_api.get(*TREE, "tree", "kube-system")["status"]
    assert (status["state"], status["valid"]) == ("Invalid", False)
    assert status["inForce"]["generation"] == 1 and status["observedGeneration"] == 2
    (problem,) = status["problems"]
    assert (problem["node"], problem["rule"]) == ("root/team_a", "MinWithinMax")
    (event,) = world.fleet_api.events("QuotaTreeInvalid", about="tree")
    assert "root/team_a" in event["message"] and "MinWithinMax" in event["message"]
    assert event["type"] == "Warning"
    assert world.kube_queue.admission.usage("root/team_a").max["nvidia.com/gpu"] == 8

    # A restarted controller keeps the last valid tree too.
    restarted = world.new_kube_queue()
    await restarted.process(restarted.RESTORE)
    assert restarted.admission.usage("root/team_a").max["nvidia.com/gpu"] == 8


async def test_a_tree_outside_kube_system_is_ignored_with_an_event():
    elsewhere = gpu_tree(8)
    elsewhere["metadata"]["namespace"] = "default"
    world = await queue_world(elsewhere)

    status = world.fleet_api.get(*TREE, "tree", "default")["status"]
    assert status["state"] == "Ignored" and "kube-system" in status["message"]
    assert world.fleet_api.events("QuotaTreeIgnored", about="tree")
    assert world.kube_queue.admission.tree is None


# -- the gate ----------------------------------------------------------------------------------


async def test_max_jobs_1_the_second_job_waits_until_the_first_finishes():
    world = await queue_world(seed_tree(), gpus=8)
    first = await submit_and_admit(world, "first")
    second = await submit_and_admit(world, "second")

    assert placed_on(world, first) == "member-1" and phase(world, first) == "Running"
    assert placed_on(world, second) is None and phase(world, second) == "Enqueued"
    held = conditions(world.workload(second))["Scheduled"]
    assert (held["status"], held["reason"]) == ("False", c.REASON_QUEUED)
    assert "1 of max 1 jobs" in held["message"]
    assert (world.binding(second) or {})["status"]["phase"] == "Queued"
    spec = unit(world, second)["spec"]
    assert spec["queue"].startswith("root-child-2-")
    assert spec["resource"]["nvidia.com/gpu"] == "3"
    assert spec["consumerRef"]["uid"] == world.workload(second)["metadata"]["uid"]

    world.members["member-1"].set_job_state("first", "Succeeded")
    await world.reconcile(first)
    assert phase(world, first) == "Succeed"
    await work(world)
    assert phase(world, second) == "Dequeued"
    # Each first dequeue reports its wait: the first job, then the second.
    assert world.metrics.queue_wait_seconds.count == 2
    assert second in world.queue.added
    await world.reconcile(second)
    assert placed_on(world, second) == "member-1" and phase(world, second) == "Running"


async def test_quota_holds_a_job_a_member_could_run_and_deletion_releases_at_once():
    world = await queue_world(gpu_tree(4), gpus=8)
    big = await submit_and_admit(world, "big")  # 3 GPUs of the 4
    small = await submit_and_admit(world, "small", workers=1)  # 2 more: over the quota

    assert phase(world, big) == "Running" and phase(world, small) == "Enqueued"
    assert world.members["member-1"].member.snapshot.total_free("nvidia.com/gpu") >= 2
    message = unit(world, small)["status"]["message"]
    assert "quota root/team_a: 3 GPUs of max 4 GPUs in use" in message

    await world.delete(big)
    await world.reconcile(big)
    assert not world.kube_queue.admission.holds(key_of_job(big))
    await work(world)
    assert phase(world, small) == "Dequeued"


async def test_priority_order_then_submission():
    world = await queue_world(gpu_tree(3), gpus=8)
    world.fleet_api.put(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    running = await submit_and_admit(world, "running")
    low = await submit_and_admit(world, "low")
    high_job = pytorchjob("high")
    for replica in high_job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["priorityClassName"] = "high"
    high = world.submit(high_job)
    await world.reconcile(high)
    assert unit(world, high)["spec"]["priority"] == 1000

    world.members["member-1"].set_job_state("running", "Succeeded")
    await world.reconcile(running)
    await work(world)
    assert phase(world, high) == "Dequeued" and phase(world, low) == "Enqueued"


async def test_a_namespace_in_no_leaf_waits_with_a_condition_and_an_event():
    world = await queue_world(seed_tree("somewhere-else"))
    key = await submit_and_admit(world, "homeless")

    assert phase(world, key) == "Enqueued"
    held = conditions(world.workload(key))["Scheduled"]
    assert (held["status"], held["reason"]) == ("False", "NoQuota")
    assert f"namespace '{NAMESPACE}' is in no quota node" in held["message"]
    (event,) = world.events("NoQuota", key)
    assert event["type"] == "Warning"


async def test_timeout_backoff_when_no_member_can_hold_a_released_job():
    world = await queue_world(gpu_tree(16), gpus=2)  # quota allows it, no member fits it
    key = await submit_and_admit(world, "too-big", workers=3, gpus=2)
    assert phase(world, key) == "Dequeued" and placed_on(world, key) is None
    assert world.kube_queue.admission.holds(key_of_job(key))

    world.clock.advance(world.settings.queue_placement_timeout + 1)
    world.kube_queue.request_pass()
    await work(world)
    status = unit(world, key)["status"]
    assert status["phase"] == "TimeoutBackoff"
    assert "not placed within 300 s" in status["message"]
    assert not world.kube_queue.admission.holds(key_of_job(key))
    assert world.events("TimeoutBackoff", key)
    await world.reconcile(key)
    held = conditions(world.workload(key))["Scheduled"]
    assert held["reason"] == "TimeoutBackoff"
    assert "not placed within 300 s" in unit(world, key)["status"]["message"]
    assert key not in world.triggers.pending

    world.clock.advance(world.settings.queue_backoff_seconds + 1)
    world.kube_queue.request_pass()
    await work(world)
    assert unit(world, key)["status"]["phase"] == "Dequeued"
    assert unit(world, key)["status"]["attempts"] == 2


async def test_a_failover_keeps_the_quota_and_is_placed_again_at_once():
    world = await queue_world(seed_tree(), gpus=8)
    world.add_member("member-2", gpus=8)
    policy = queued_policy()
    policy["spec"]["failover"]["application"]["decisionConditions"]["tolerationSeconds"] = 0
    world.apply_policy(policy)
    key = await submit_and_admit(world, "job")
    waiting = await submit_and_admit(world, "waiting")
    first = placed_on(world, key)
    assert first is not None and phase(world, key) == "Running"

    world.members[first].set_job_state("job", "Failed")
    await world.reconcile(key)

    assert placed_on(world, key) not in (None, first)
    assert phase(world, key) == "Running"
    assert world.kube_queue.admission.holds(key_of_job(key))
    await work(world)
    assert phase(world, waiting) == "Enqueued"


async def test_a_restart_rebuilds_usage_from_the_units_and_releases_nothing_twice():
    world = await queue_world(gpu_tree(6), gpus=16)
    running = await submit_and_admit(world, "running")  # 3 GPUs, Running
    dequeued = world.submit(pytorchjob("dequeued"))  # 3 GPUs, Dequeued but not placed yet
    await world.reconcile(dequeued)
    await work(world)
    waiting = await submit_and_admit(world, "waiting")  # no room left
    assert [phase(world, k) for k in (running, dequeued, waiting)] == [
        "Running",
        "Dequeued",
        "Enqueued",
    ]

    restarted = world.new_kube_queue()
    await restarted.process(restarted.RESTORE)
    admission = restarted.admission
    assert admission.usage("root/team_a").used["nvidia.com/gpu"] == 6
    assert [admission.phase(key_of_job(k)) for k in (running, dequeued, waiting)] == [
        "Running",
        "Dequeued",
        "Enqueued",
    ]
    await restarted.run_pass()
    assert admission.phase(key_of_job(waiting)) == "Enqueued"
    # The running job ends: released once; a second finish changes nothing.
    assert admission.finished(key_of_job(running), True, world.clock.now())
    assert not admission.finished(key_of_job(running), True, world.clock.now())
    assert admission.usage("root/team_a").used["nvidia.com/gpu"] == 3


async def test_a_unit_deleted_by_hand_is_made_again_with_its_place_in_the_queue():
    world = await queue_world(seed_tree(), gpus=8)
    first = await submit_and_admit(world, "first")
    second = await submit_and_admit(world, "second")
    uid = unit(world, second)["metadata"]["uid"]

    world.fleet_api.remove(*UNIT, f"pytorchjob-{second.name}", NAMESPACE)
    assert second in world.queue.added  # the deletion reconciles its job
    await world.reconcile(second)

    again = unit(world, second)
    assert again["metadata"]["uid"] != uid and again["status"]["phase"] == "Enqueued"
    assert phase(world, first) == "Running"


async def test_a_policy_that_stops_queueing_releases_the_unit_and_places_the_job():
    world = await queue_world(seed_tree(), gpus=8)
    await submit_and_admit(world, "first")
    second = await submit_and_admit(world, "second")
    assert phase(world, second) == "Enqueued"

    world.apply_policy(gang_policy("queued", NAMESPACE))  # no suspension any more
    await world.reconcile(second)

    assert placed_on(world, second) == "member-1"
    assert world.fleet_api.get(*UNIT, f"pytorchjob-{second.name}", NAMESPACE) is None
    assert key_of_job(second) not in world.kube_queue.admission


def time_out_while_placing(world: World, monkeypatch: Any) -> None:
    """The pass times the unit out while the next reconcile that places a job is in placement
    (they run concurrently in the controller)."""
    real = placing.schedule

    async def schedule(shell: Any, job: Any) -> str | None:
        monkeypatch.setattr(placing, "schedule", real)  # once
        cluster = await real(shell, job)
        world.clock.advance(world.settings.queue_placement_timeout + 1)
        world.kube_queue.request_pass()
        await work(world)
        return cluster

    monkeypatch.setattr(placing, "schedule", schedule)


async def test_a_job_placed_as_its_placement_timed_out_holds_its_quota_again(monkeypatch):
    world = await queue_world(gpu_tree(3), gpus=8)
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)  # enqueued
    await work(world)  # dequeued
    time_out_while_placing(world, monkeypatch)

    await world.reconcile(key)  # placed; its unit timed out meanwhile: the core charges it

    assert phase(world, key) == "Running"
    assert world.kube_queue.admission.holds(key_of_job(key))
    assert placed_on(world, key) == "member-1"
    assert world.members["member-1"].copy("job") is not None


async def test_a_late_placement_with_no_room_left_is_not_charged_nor_sent(monkeypatch):
    world = await queue_world(gpu_tree(3), gpus=8)  # room for one 3-GPU job
    late = world.submit(pytorchjob("late"))
    await world.reconcile(late)
    await work(world)  # dequeued
    other = world.submit(pytorchjob("other"))
    await world.reconcile(other)  # waits behind it

    time_out_while_placing(world, monkeypatch)  # the pass backs `late` off, dequeues `other`
    await world.reconcile(late)

    admission = world.kube_queue.admission
    assert admission.phase(key_of_job(other)) == "Dequeued"
    assert phase(world, late) == "TimeoutBackoff"
    assert not admission.holds(key_of_job(late))
    assert admission.usage("root/team_a").used["nvidia.com/gpu"] == 3  # never above max
    # Nothing was sent: the binding names no cluster, the member has no copy, the job says why.
    assert placed_on(world, late) is None
    assert world.members["member-1"].copy("late") is None
    assert conditions(world.workload(late))["Scheduled"]["reason"] == "TimeoutBackoff"
    assert world.events(gate.REASON_NOT_CHARGED, late)
    # The gang that got the quota is placed.
    await world.reconcile(other)
    assert placed_on(world, other) == "member-1"


async def test_a_job_made_again_under_the_same_name_gets_a_new_unit():
    world = await queue_world(seed_tree(), gpus=8)
    key = await submit_and_admit(world, "job")
    old = unit(world, key)
    # The job and its binding vanish while the controller is away (its old unit lingers until
    # the garbage collector gets to it), and a job of the same name is made again.
    world.fleet_api.remove(key.api_version, key.kind, key.name, key.namespace)
    world.fleet_api.remove(c.FLEET_API_VERSION, "GangBinding", f"pytorchjob-{key.name}", NAMESPACE)
    world.kube_queue.admission.remove(key_of_job(key))
    again = world.submit(pytorchjob("job"))
    await world.reconcile(again)

    new = unit(world, again)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["consumerRef"]["uid"] == world.workload(again)["metadata"]["uid"]
