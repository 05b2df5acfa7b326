"""statePreservation in the shell, on in-memory API servers and a fake clock: before a gang
leaves a cluster (an application failover, a cluster failover, an eviction by reclaim) the
policy's rules read the old copy's status; the binding records the values (Karmada's
`preservedLabelState`, and fleet's `preservedLabels`) and the next copy carries them as labels,
on itself and on its pods' templates. A path that is not there gives an Event, and the move
goes on.
"""

from __future__ import annotations

import copy
from typing import Any

from fleet.api import GangBinding
from fleet.controller.bindings import lifecycle_of
from fleet.controller.preservation import REASON_FAILED
from fleet.controller.settings import Settings
from fleet.core import lifecycle
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import FLEET_ID, NAMESPACE, PYTORCH, FakeMember, World
from tests.controller.test_queue import phase, placed_on, work
from tests.controller.test_reclaim import borrowed_fleet, pods_gone, run_pods, start, two_teams

ALIAS = "ckpt.example.com/step"
RULES = {"rules": [{"aliasLabelName": ALIAS, "jsonPath": "{ .checkpoint.step }"}]}


def preserving_policy(*, where: str = "application", **kw: Any) -> dict[str, Any]:
    """The tests' gang policy, with the rule under `failover.<where>.statePreservation`."""
    policy = gang_policy("gang", NAMESPACE, **kw)
    failover = policy["spec"]["failover"]
    failover.setdefault(where, {})["statePreservation"] = copy.deepcopy(RULES)
    return policy


def labels_of(obj: dict[str, Any] | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def pod_labels_of(obj: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    """Replica type -> the labels of its pods' template."""
    specs = ((obj or {}).get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return {
        name: dict(((spec.get("template") or {}).get("metadata") or {}).get("labels") or {})
        for name, spec in specs.items()
    }


def other_than(world: World, name: str) -> FakeMember:
    (other,) = [m for m in world.members.values() if m.name != name]
    return other


async def placed_with_checkpoint(world: World, step: str | None) -> tuple[Any, FakeMember]:
    """A job placed and running, its copy reporting `step` as its last checkpoint."""
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    first = world.members[placed_on(world, key) or ""]
    status: dict[str, Any] = {"conditions": [{"type": "Running", "status": "True"}]}
    if step is not None:
        status["checkpoint"] = {"step": step}
    first.set_status(PYTORCH, "job", status)
    await world.reconcile(key)
    return key, first


async def fail_and_move(world: World, key: Any, member: FakeMember) -> None:
    member.set_job_state("job", "Failed")
    await world.reconcile(key)  # the failure is tolerated for 30 s
    world.clock.advance(31)
    await world.reconcile(key)


async def test_an_application_failover_carries_the_old_copys_checkpoint_to_the_new_copy():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(preserving_policy(purge_mode="Gracefully"))
    key, first = await placed_with_checkpoint(world, "1200")
    other = other_than(world, first.name)

    await fail_and_move(world, key, first)

    assert placed_on(world, key) == other.name
    binding = world.binding(key) or {}
    (task,) = binding["spec"]["gracefulEvictionTasks"]
    assert task["fromCluster"] == first.name and task["preservedLabelState"] == {ALIAS: "1200"}
    assert binding["spec"]["preservedLabels"] == {ALIAS: "1200"}
    new = other.copy("job")
    assert labels_of(new)[ALIAS] == "1200"
    # On every pod template too, with fleet's own labels beside it.
    assert {name: labels[ALIAS] for name, labels in pod_labels_of(new).items()} == {
        "Master": "1200",
        "Worker": "1200",
    }
    assert not labels_of(first.copy("job")).get(ALIAS)  # the old copy is left as it was
    assert not world.events(REASON_FAILED, key)

    # The eviction ends (the new copy runs, the old one is purged); the labels stay with the
    # binding, read back from its stored form as a restarted controller reads it.
    other.set_job_state("job", "Running")
    await world.reconcile(key)
    assert first.copy("job") is None
    stored = world.binding(key) or {}
    assert "gracefulEvictionTasks" not in stored["spec"]
    restored = lifecycle_of(GangBinding.from_dict(stored), world.clock.now())
    assert lifecycle.carried_labels(restored) == {ALIAS: "1200"}
    # The copy is recreated with them if it disappears.
    other.api.remove(*PYTORCH, "job", NAMESPACE)
    await world.reconcile(key)
    assert labels_of(other.copy("job"))[ALIAS] == "1200"


async def test_a_path_the_old_copy_does_not_report_gives_an_event_and_the_move_goes_on():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(preserving_policy())
    key, first = await placed_with_checkpoint(world, None)  # it never checkpointed

    await fail_and_move(world, key, first)

    other = other_than(world, first.name)
    assert placed_on(world, key) == other.name  # moved regardless
    (event,) = world.events(REASON_FAILED, key)
    assert event["type"] == "Warning"
    assert ALIAS in event["message"] and ".checkpoint" in event["message"]
    assert first.name in event["message"]
    assert ALIAS not in labels_of(other.copy("job"))
    assert not (world.binding(key) or {})["spec"].get("preservedLabels")


async def test_a_rule_that_reads_nothing_keeps_what_an_earlier_move_carried():
    world = World()
    for name in ("member-1", "member-2", "member-3"):
        world.add_member(name)
    world.apply_policy(preserving_policy())
    key, first = await placed_with_checkpoint(world, "1200")
    await fail_and_move(world, key, first)
    second = world.members[placed_on(world, key) or ""]
    assert labels_of(second.copy("job"))[ALIAS] == "1200"

    # The new copy dies before it reports a checkpoint of its own.
    await fail_and_move(world, key, second)

    third = world.members[placed_on(world, key) or ""]
    assert third.name not in (first.name, second.name)
    assert labels_of(third.copy("job"))[ALIAS] == "1200"
    (event,) = world.events(REASON_FAILED, key)
    assert "kept the earlier value" in event["message"]


async def test_a_lost_cluster_uses_the_cluster_rules_and_the_last_status_the_binding_recorded():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(preserving_policy(where="cluster"))
    key, first = await placed_with_checkpoint(world, "800")
    # The mirror keeps the copy's raw status in the binding (Karmada's aggregatedStatus).
    (item,) = (world.binding(key) or {})["status"]["aggregatedStatus"]
    assert item["clusterName"] == first.name and item["status"]["checkpoint"] == {"step": "800"}

    # The member is lost, and its watch holds nothing (a controller started since).
    first.set_ready(False)
    connection = first.member.connection
    assert connection is not None
    connection.jobs[PYTORCH].store.clear()
    await world.reconcile(key)
    world.clock.advance(31)
    await world.reconcile(key)

    other = other_than(world, first.name)
    assert placed_on(world, key) == other.name
    assert labels_of(other.copy("job"))[ALIAS] == "800"
    assert not world.events(REASON_FAILED, key)


async def test_an_application_failure_does_not_use_the_cluster_rules():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(preserving_policy(where="cluster"))
    key, first = await placed_with_checkpoint(world, "800")

    await fail_and_move(world, key, first)

    other = other_than(world, first.name)
    assert placed_on(world, key) == other.name
    assert ALIAS not in labels_of(other.copy("job"))
    assert not world.events(REASON_FAILED, key)


async def test_a_gang_evicted_by_reclaim_carries_its_checkpoint_to_its_next_copy():
    world = World(settings=Settings(fleet_id=FLEET_ID))
    world.add_member("member-1", gpus=4, nodes=2)
    policy = preserving_policy()
    policy["metadata"]["name"] = "queued"
    policy["spec"]["suspension"] = {"scheduling": True}
    world.apply_policy(policy)
    world.fleet_api.put(copy.deepcopy(two_teams()))
    world.kube_queue.lead()
    await work(world)
    first, second = await borrowed_fleet(world)
    member = world.members["member-1"]
    member.set_status(
        PYTORCH,
        second.name,
        {"conditions": [{"type": "Running", "status": "True"}], "checkpoint": {"step": "300"}},
    )
    await world.reconcile(second)
    world.clock.advance(3600)

    b = await start(world, "b1", "b")
    await world.reconcile(second)  # the victim records its eviction, and what it preserves

    binding = world.binding(second) or {}
    (task,) = binding["spec"]["gracefulEvictionTasks"]
    assert task["reason"] == "Reclaimed" and task["preservedLabelState"] == {ALIAS: "300"}
    assert binding["spec"]["preservedLabels"] == {ALIAS: "300"}

    # The copy goes after the grace period; B runs, ends, and A's gang runs again.
    await work(world)
    world.clock.advance(31)
    await world.reconcile(second)
    assert member.copy(second.name) is None
    pods_gone(world, second)
    await world.reconcile(b)
    assert placed_on(world, b) == "member-1"
    run_pods(world, b)
    await world.reconcile(second)
    assert phase(world, second) == "Enqueued"
    member.set_job_state("b1", "Succeeded")
    await world.reconcile(b)
    pods_gone(world, b)
    await work(world)
    await world.reconcile(second)
    assert phase(world, second) == "Running" and placed_on(world, second) == "member-1"
    again = member.copy(second.name)
    assert labels_of(again)[ALIAS] == "300"
    assert all(labels[ALIAS] == "300" for labels in pod_labels_of(again).values())
    assert phase(world, first) == "Running"
