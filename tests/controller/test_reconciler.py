"""The reconciler's transitions, one reconcile at a time, on in-memory API servers and a fake
clock: what each step writes (the GangBinding, the fleet job, the member copies), the events it
posts, the counters it moves and what it puts back on the work queue.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fleet.api import binding_name, format_time
from fleet.api import constants as c
from fleet.controller import collector
from fleet.controller.bindings import BindingGone
from fleet.controller.claims import CLEANUP_RETRY_SECONDS
from fleet.controller.triggers import STATUS_COALESCE_SECONDS
from fleet.core import lifecycle
from fleet.core.placement import AFFINITY, INSUFFICIENT, TAINTED
from fleet.core.resources import Resources
from fleet.core.taints import Taint
from fleet.core.workload import Component, Gang
from fleet.kube import ApiError
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, FakeMember, World, conditions
from tests.kube.fakes import status

# The gang every test submits: a Master and two Workers, one GPU each.
GPUS_NEEDED = 3


def policy(name: str = "gang", **kw: Any) -> dict[str, Any]:
    return gang_policy(name, NAMESPACE, **kw)


def placed_on(world: World, key: Any) -> str | None:
    binding = world.binding(key) or {}
    clusters = (binding.get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


def status_of(world: World, key: Any) -> dict[str, Any]:
    return (world.binding(key) or {}).get("status") or {}


def the_other(world: World, name: str) -> FakeMember:
    (other,) = [m for m in world.members.values() if m.name != name]
    return other


# -- bind --------------------------------------------------------------------------------------


async def test_bind_writes_the_binding_with_the_policys_terms_and_a_finalizer_on_the_job():
    world = World()
    world.add_member("member-1")
    gang = policy(max_failovers=2, cluster_names=["member-1"])
    world.apply_policy(gang)
    key = world.submit(pytorchjob("job"))
    uid = world.workload(key)["metadata"]["uid"]

    await world.reconcile(key)

    binding = world.binding(key)
    assert binding is not None
    spec = binding["spec"]
    assert (spec["resource"]["name"], spec["resource"]["uid"]) == ("job", uid)
    assert [o["uid"] for o in binding["metadata"]["ownerReferences"]] == [uid]
    assert spec["policy"] == {"kind": "PropagationPolicy", "namespace": NAMESPACE, "name": "gang"}
    # The failover settings are a snapshot (ACK's Immediately is Karmada's Directly).
    assert spec["failover"] == {"tolerationSeconds": 30, "purgeMode": "Directly", "maxFailovers": 2}
    assert spec["placement"] == gang["spec"]["placement"]
    assert spec["gang"]["minMember"] == 3
    assert [(x["name"], x["replicas"]) for x in spec["gang"]["components"]] == [
        ("master", 1),
        ("worker", 2),
    ]
    assert c.FINALIZER in world.workload(key)["metadata"]["finalizers"]
    assert world.metrics.reconciles.values["ok"] == 1


async def test_a_job_no_gang_policy_governs_is_left_alone():
    world = World()
    world.add_member("member-1")
    not_gang = policy()
    del not_gang["spec"]["placement"]["replicaScheduling"]["customSchedulingType"]
    world.apply_policy(not_gang)
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert world.binding(key) is None
    assert not world.workload(key)["metadata"].get("finalizers")
    assert world.members["member-1"].copy("job") is None


# -- place -------------------------------------------------------------------------------------


async def test_place_writes_the_decision_first_then_creates_the_member_copy():
    world = World()
    member = world.add_member("member-1")
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    uid = world.workload(key)["metadata"]["uid"]

    await world.reconcile(key)

    binding = world.binding(key)
    assert placed_on(world, key) == "member-1"
    assert binding["spec"]["clusters"][0]["components"] == [
        {"name": "master", "replicas": 1},
        {"name": "worker", "replicas": 2},
    ]
    scheduled = conditions(binding)[c.CONDITION_SCHEDULED]
    assert (scheduled["status"], scheduled["reason"]) == ("True", c.REASON_SCHEDULED)
    assert scheduled["message"].startswith(lifecycle.SCHEDULED_PREFIX)
    assert status_of(world, key)["placementHistory"] == [
        {"cluster": "member-1", "placedAt": format_time(world.clock.now())}
    ]
    (event,) = world.events("ScheduleBindingSucceed", key)
    assert event["type"] == "Normal" and event["source"]["component"] == "default-scheduler"
    assert event["message"] == scheduled["message"]
    # The placement holds its GPUs in the snapshot until the member shows the pods.
    reservation = member.member.snapshot.reservations()[uid]
    assert reservation is not None
    assert member.member.snapshot.total_free("nvidia.com/gpu") == 4 - GPUS_NEEDED
    assert world.metrics.dispatches.values == {"member-1": 1}
    # First placement and first copy: each wait from creation observed once.
    assert world.metrics.placement_seconds.count == 1
    assert world.metrics.dispatch_seconds.count == 1
    # The copy: this fleet's, of this job.
    copy = member.copy("job")
    assert copy is not None
    assert copy["metadata"]["labels"][c.MANAGED_BY_LABEL] == world.settings.fleet_id
    assert copy["metadata"]["labels"][c.FLEET_UID_LABEL] == uid
    assert copy["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3
    assert member.api.get("v1", "Namespace", NAMESPACE) is not None
    # The binding shows the dispatch; the fleet job's status waits for the copy's first word,
    # then shows fleet's Scheduled condition before the member's.
    assert status_of(world, key)["phase"] == "Dispatched"
    assert conditions(binding)[c.CONDITION_FULLY_APPLIED]["status"] == "True"
    assert not (world.workload(key).get("status") or {}).get("conditions")
    member.set_job_state("job", "Created")
    await world.reconcile(key)
    assert [x["type"] for x in world.workload(key)["status"]["conditions"]] == [
        "Scheduled",
        "Created",
    ]
    assert conditions(world.workload(key))["Scheduled"]["status"] == "True"


async def test_a_new_binding_is_created_once_with_its_first_decision():
    world = World()
    world.add_member("member-1")
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    (create,) = world.fleet_api.asked("POST", "/gangbindings")
    sent = json.loads(create.content)
    assert sent["spec"]["clusters"][0]["name"] == "member-1"  # the decision, in the create
    assert not [
        r for r in world.fleet_api.asked("PATCH", "/gangbindings/") if "/status" not in r.url.path
    ]
    assert placed_on(world, key) == "member-1"


async def test_a_binding_that_exists_after_all_is_not_overwritten_and_the_gang_starts_over():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    earlier = world.binding(key)
    assert earlier is not None
    # The binding is there, but this reconcile's cache does not show it yet (a watch lagging).
    world.shell.bindings.cache.drop(key)
    world.shell.bindings.complete = True

    with pytest.raises(BindingGone):
        await world.reconcile(key)

    assert world.binding(key)["spec"]["clusters"] == earlier["spec"]["clusters"]
    assert world.shell.bindings.cache.get(key) is not None  # the next reconcile starts from it
    await world.reconcile(key)
    assert placed_on(world, key) == earlier["spec"]["clusters"][0]["name"]


async def test_a_job_recreated_under_its_name_removes_the_binding_its_predecessor_left():
    """The garbage collector takes its time with the old job's binding; the new job neither
    adopts it nor waits for it."""
    world = World()
    world.add_member("member-1", gpus=2 * GPUS_NEEDED)  # the old copy keeps its share
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    old_uid = world.workload(key)["metadata"]["uid"]
    stale = world.binding(key)
    # The old job is gone (deleted outright), its binding not yet collected; a new one arrives.
    world.fleet_api.remove(key.api_version, key.kind, key.name, key.namespace)
    key = world.submit(pytorchjob("job"))
    assert world.workload(key)["metadata"]["uid"] != old_uid
    world.shell.bindings.cache.drop(key)  # as if the watch had not shown the old one yet

    with pytest.raises(BindingGone):
        await world.reconcile(key)
    assert world.binding(key) is None  # removed, by its UID
    await world.reconcile(key)

    fresh = world.binding(key)
    assert fresh["metadata"]["uid"] != stale["metadata"]["uid"]
    assert fresh["spec"]["resource"]["uid"] == world.workload(key)["metadata"]["uid"]
    assert placed_on(world, key) == "member-1"


async def test_a_second_reconcile_of_a_placed_job_writes_nothing():
    world = World()
    world.add_member("member-1")
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    writes = len(world.fleet_api.requests) - len(world.fleet_api.asked("GET"))
    member_writes = len(world.members["member-1"].api.requests)

    await world.reconcile(key)

    assert len(world.fleet_api.requests) - len(world.fleet_api.asked("GET")) == writes
    assert len(world.members["member-1"].api.requests) == member_writes


async def test_the_placement_records_the_generation_it_was_decided_for_in_the_same_write():
    world = World()
    world.add_member("member-1")
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    binding = world.binding(key)
    generation = binding["metadata"]["generation"]
    assert binding["status"]["observedGeneration"] == generation
    # Carried by the write that says Scheduled, not by one more.
    (scheduled_write,) = [w for w in world.binding_writes(key) if "observedGeneration" in w]
    assert conditions({"status": scheduled_write})[c.CONDITION_SCHEDULED]["status"] == "True"


async def test_a_policy_change_to_a_waiting_gang_is_observed_even_when_it_still_waits():
    """observedGeneration is how a reader knows fleet acted on a change that changed nothing."""
    world = World()
    world.add_member("member-1", gpus=2)
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    before = world.binding(key)
    assert before["status"]["observedGeneration"] == before["metadata"]["generation"]

    edited = policy()
    edited["spec"]["placement"]["clusterTolerations"] = [
        {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}
    ]
    world.apply_policy(edited)
    await world.reconcile(key)

    after = world.binding(key)
    assert after["spec"]["placement"]["clusterTolerations"][0]["key"] == "maintenance"
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert after["status"]["observedGeneration"] == after["metadata"]["generation"]
    assert after["status"]["phase"] == "Pending"


# -- status ------------------------------------------------------------------------------------


def job_status_writes(world: World, key: Any) -> list[dict[str, Any]]:
    """Every status the fleet job was written with, in order (PATCH bodies to /status)."""
    path = f"/pytorchjobs/{key.name}/status"
    return [
        json.loads(r.content)["status"]
        for r in world.fleet_api.requests
        if r.method == "PATCH" and r.url.path.endswith(path)
    ]


async def test_the_fleet_jobs_status_is_written_once_per_change_the_mirror_observes():
    world = World()
    member = world.add_member("member-1", gpus=4)
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    # The copy has said nothing yet: nothing to write (the binding says it is dispatched).
    assert job_status_writes(world, key) == []
    member.set_job_state("job", "Created")
    await world.reconcile(key)
    assert len(job_status_writes(world, key)) == 1  # Scheduled with the copy's Created

    # Reconciles later, with nothing new in the member: no write (fleet's condition kept as
    # it is, timestamps included).
    for _ in range(3):
        world.clock.advance(5)
        await world.reconcile(key)
    assert len(job_status_writes(world, key)) == 1

    member.set_job_state("job", "Running")
    world.clock.advance(5)
    await world.reconcile(key)
    await world.reconcile(key)
    writes = job_status_writes(world, key)
    assert len(writes) == 2
    assert [x["type"] for x in writes[-1]["conditions"]] == ["Scheduled", "Running"]
    assert writes[-1]["conditions"][0] == writes[0]["conditions"][0]  # the same Scheduled


async def test_a_first_dispatch_writes_the_binding_status_once():
    world = World()
    world.add_member("member-1", gpus=4)
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    # The decision went into the binding's create; its status, with the dispatch's, in one write.
    (written,) = world.binding_writes(key)
    assert written["phase"] == "Dispatched"
    assert [x["type"] for x in written["conditions"]] == ["Scheduled", "FullyApplied", "Healthy"]
    assert written["placementHistory"][0]["cluster"] == "member-1"


async def test_a_dispatch_whose_status_write_was_lost_is_recorded_by_the_next_reconcile():
    world = World()
    member = world.add_member("member-1", gpus=4)
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    path = f"/gangbindings/{binding_name(key.kind, key.name)}/status"

    def lost(request: httpx.Request) -> httpx.Response | None:
        """The controller stops after the member copy's create, before the status write."""
        if request.method == "PATCH" and request.url.path.endswith(path):
            return status(422, "Invalid", "the controller stopped here")
        return None

    world.fleet_api.interceptors.append(lost)
    with pytest.raises(ApiError):
        await world.reconcile(key)
    world.fleet_api.interceptors.remove(lost)
    copy = member.copy("job")
    assert copy is not None
    assert placed_on(world, key) == "member-1" and not status_of(world, key)

    await world.reconcile(key)
    recorded = status_of(world, key)
    assert recorded["phase"] == "Dispatched"
    assert [x["cluster"] for x in recorded["placementHistory"]] == ["member-1"]
    assert conditions(world.binding(key))["Scheduled"]["status"] == "True"
    assert member.copy("job")["metadata"]["uid"] == copy["metadata"]["uid"]  # the same copy


async def test_a_member_copys_status_changes_are_gathered_into_one_reconcile():
    world = World()
    member = world.add_member("member-1", gpus=4)
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    before = len(world.queue.added)

    # The operator writes a starting job's status twice within the window.
    member.set_job_state("job", "Created")
    member.set_job_state("job", "Running")
    assert key not in world.queue.added[before:]  # not at once
    assert world.queue.later[-2:] == [(key, STATUS_COALESCE_SECONDS)] * 2
    await world.until_queued(key, after=before)
    assert world.queue.added[before:].count(key) == 1  # one reconcile, when the window ends


# -- wait --------------------------------------------------------------------------------------


async def test_wait_when_no_member_fits_says_why_per_cluster_and_retries_when_capacity_appears():
    world = World()
    small = world.add_member("member-1", gpus=2)
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) is None
    status = status_of(world, key)
    assert status["phase"] == "Pending"
    (reason,) = status["pendingReasons"]
    assert (reason["cluster"], reason["code"]) == ("member-1", INSUFFICIENT)
    assert reason["reason"]
    # The numbers behind the sentence, so no reader parses it.
    assert reason["facts"]["resource"] == "nvidia.com/gpu"
    assert reason["facts"]["free"] == 2
    scheduled = conditions(world.binding(key))[c.CONDITION_SCHEDULED]
    assert (scheduled["status"], scheduled["reason"]) == ("False", c.REASON_NO_CLUSTER_FIT)
    (event,) = world.events("ScheduleBindingFailed", key)
    assert event["type"] == "Warning" and event["message"] == scheduled["message"]
    fleet_side = conditions(world.workload(key))["Scheduled"]
    assert (fleet_side["status"], fleet_side["reason"]) == ("False", c.REASON_NO_CLUSTER_FIT)
    assert key in world.triggers.pending and world.metrics.pending.value == 1
    assert small.copy("job") is None

    # A node joins the member: its watch reports capacity, and the waiting job is retried.
    mark = len(world.queue.added)
    small.add_node("member-1-n1", gpus=4)
    world.triggers.capacity_changed("member-1")
    await world.until_queued(key, after=mark)
    await world.reconcile(key)

    assert placed_on(world, key) == "member-1"
    assert "pendingReasons" not in status_of(world, key)
    assert key not in world.triggers.pending and world.metrics.pending.value == 0
    assert small.copy("job") is not None


# -- fail over ------------------------------------------------------------------------------------


async def placed_and_failed(world: World, key: Any) -> FakeMember:
    """Place the job, then have its copy fail; the member it failed in."""
    await world.reconcile(key)
    first = world.members[placed_on(world, key) or ""]
    first.set_job_state("job", "Failed")
    await world.reconcile(key)
    return first


@pytest.mark.parametrize("purge_mode", ["Immediately", "Gracefully"])
async def test_fail_over_after_toleration_seconds_excludes_the_cluster_and_places_elsewhere(
    purge_mode: str,
):
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(policy(toleration_seconds=30, purge_mode=purge_mode))
    key = world.submit(pytorchjob("job"))
    first = await placed_and_failed(world, key)
    other = the_other(world, first.name)
    failed_at = world.clock.now()

    # Within tolerationSeconds the job stays, the window is persisted, and it is looked at
    # again when the window ends.
    assert placed_on(world, key) == first.name
    assert status_of(world, key)["unhealthySince"] == format_time(failed_at)
    assert world.events("FailoverPending", key)
    assert [d for k, d in world.queue.later if k == key and 30 <= d <= 31]
    world.clock.advance(20)
    await world.reconcile(key)
    assert placed_on(world, key) == first.name

    world.clock.advance(11)
    await world.reconcile(key)

    moved_at = format_time(world.clock.now())
    status = status_of(world, key)
    assert status["failoverHistory"] == [
        {"fromCluster": first.name, "reason": "ApplicationFailure", "time": moved_at}
    ]
    assert status["failoverCount"] == 1
    assert status["excludedClusters"] == [{"name": first.name, "reason": "ApplicationFailure"}]
    assert "unhealthySince" not in status
    # Written in that order: the failover, then the new placement, then the new copy.
    assert [w["phase"] for w in world.binding_writes(key) if "phase" in w][-3:] == [
        "FailingOver",
        "Scheduled",
        "Dispatched",
    ]
    assert placed_on(world, key) == other.name
    assert [(s["cluster"], s.get("reason")) for s in status["placementHistory"]] == [
        (first.name, "ApplicationFailure"),
        (other.name, None),
    ]
    assert other.copy("job") is not None
    assert world.events("FailoverTriggered", key)
    assert world.metrics.failovers.values == {"ApplicationFailure": 1}
    assert first.member.snapshot.reservations().get(world.workload(key)["metadata"]["uid"]) is None

    if purge_mode == "Immediately":
        # Deleted before the job was placed again.
        assert first.copy("job") is None
        assert "gracefulEvictionTasks" not in world.binding(key)["spec"]
        return
    # Gracefully: the old copy stays until the new one runs.
    assert first.copy("job") is not None
    (task,) = world.binding(key)["spec"]["gracefulEvictionTasks"]
    assert (task["fromCluster"], task["purgeMode"], task["reason"]) == (
        first.name,
        "Gracefully",
        "ApplicationFailure",
    )
    other.set_job_state("job", "Running")
    await world.reconcile(key)
    assert first.copy("job") is None
    assert "gracefulEvictionTasks" not in world.binding(key)["spec"]
    assert world.events("OldCopyDeleted", key)
    assert world.metrics.purges.values == {first.name: 1}
    assert status_of(world, key)["phase"] == "Running"


async def test_a_member_not_heard_of_yet_is_not_taken_for_one_that_left():
    """A controller that just started reconciles before its member registry has every member:
    an old copy there stays recorded (purged once the member is heard of), and the gang's own
    cluster gets no verdict. Only a member missing from the listed MemberClusters has left."""
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(policy(toleration_seconds=0, purge_mode="Gracefully"))
    key = world.submit(pytorchjob("job"))
    first = await placed_and_failed(world, key)
    await world.reconcile(key)
    other = the_other(world, first.name)
    assert placed_on(world, key) == other.name
    (task,) = world.binding(key)["spec"]["gracefulEvictionTasks"]
    assert task["fromCluster"] == first.name

    # Restarted: neither member is heard of yet.
    world.registry.listed = False
    world.registry.members.clear()
    other.set_job_state("job", "Running")
    await world.reconcile(key)
    assert [t["fromCluster"] for t in world.binding(key)["spec"]["gracefulEvictionTasks"]] == [
        first.name
    ]
    assert placed_on(world, key) == other.name
    assert status_of(world, key)["failoverCount"] == 1

    # Heard of: the old copy is purged.
    world.registry.members.update({first.name: first.member, other.name: other.member})
    world.registry.listed = True
    await world.reconcile(key)
    assert first.copy("job") is None
    assert "gracefulEvictionTasks" not in world.binding(key)["spec"]


async def test_an_old_copy_in_a_member_that_left_the_fleet_stays_unfenced_until_it_answers():
    """A member removed while it holds an old copy: the eviction is the only record of that
    copy, so it stays (shown as unfenced) until the cluster answers again, under any name, and
    the collector deletes the copy; only then does the eviction end."""
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(policy(toleration_seconds=0, purge_mode="Gracefully"))
    key = world.submit(pytorchjob("job"))
    first = await placed_and_failed(world, key)
    await world.reconcile(key)
    del world.registry.members[first.name]  # its MemberCluster deleted
    await world.reconcile(key)
    (task,) = world.binding(key)["spec"]["gracefulEvictionTasks"]
    assert (task["fromCluster"], task["clusterId"]) == (first.name, "uid-member-1")
    shown = conditions(world.binding(key))[c.CONDITION_OLD_COPIES_REMOVED]
    assert (shown["status"], shown["reason"]) == ("False", c.REASON_COPY_UNFENCED)
    assert "member-1 (cluster uid-member-1)" in shown["message"]
    assert world.events(c.REASON_COPY_UNFENCED, key)
    assert world.metrics.outside_copies.totals == {(first.name, "Unreachable"): 1}
    assert first.copy("job") is not None  # not reachable through the fleet any more

    # The same cluster joins again as "west", once the new copy runs (purgeMode Gracefully
    # keeps the old one until then): found by its identity, the copy on record is purged by
    # the reconcile, and the eviction ends once the copy is observed gone.
    the_other(world, first.name).set_job_state("job", "Running")
    west = world.rejoin(first, "west")
    assert "west" in world.registry.not_ready()  # nothing is placed there before the collector
    assert await collector.collect(world.shell, west.member) == 0  # on record: the purge's
    assert west.member.fenced and "west" not in world.registry.not_ready()
    await world.reconcile(key)
    assert first.copy("job") is None
    assert world.events("OldCopyDeleted", key)
    assert "gracefulEvictionTasks" not in world.binding(key)["spec"]
    shown = conditions(world.binding(key))[c.CONDITION_OLD_COPIES_REMOVED]
    assert (shown["status"], shown["reason"]) == ("True", c.REASON_OLD_COPIES_GONE)
    assert world.metrics.outside_copies.totals == {}


async def test_a_gang_placed_again_in_a_cluster_it_left_under_another_name_keeps_its_copy():
    """The eviction of a cluster that joined again under another name, and the gang is placed
    in it again under that name: the copy there is the gang's current one, so the eviction ends
    and nothing deletes it, whatever its grace period says."""
    world = World()
    world.add_member("member-1", nodes=2)
    world.add_member("member-2")
    world.apply_policy(policy(toleration_seconds=0, purge_mode="Gracefully"))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    first = world.members[placed_on(world, key) or ""]
    first.set_ready(False)  # lost: the gang fails over, its copy there is kept on record
    await world.reconcile(key)
    await world.reconcile(key)
    second = the_other(world, first.name)
    assert placed_on(world, key) == second.name
    del world.registry.members[first.name]  # its MemberCluster deleted
    first.set_ready(True)
    west = world.rejoin(first, "west")
    for i in range(2):
        west.add_node(f"west-n{i}")
    west.member.fenced = True
    await world.reconcile(key)  # the old copy in west stays: Gracefully, the new one not running
    assert first.copy("job") is not None

    second.set_job_state("job", "Failed")  # the gang fails again, and only west can take it
    await world.reconcile(key)
    assert placed_on(world, key) == "west"
    adopted = (first.copy("job") or {})["metadata"]["uid"]
    world.clock.advance(700)  # past the grace period of the first eviction
    await world.reconcile(key)

    assert (first.copy("job") or {})["metadata"]["uid"] == adopted  # the gang's copy, in west
    assert not first.api.asked("DELETE")
    tasks = world.binding(key)["spec"].get("gracefulEvictionTasks") or []
    assert first.name not in [t["fromCluster"] for t in tasks]  # its eviction ended


async def test_give_up_after_max_failovers_marks_the_job_failed_on_the_fleet():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(policy(toleration_seconds=30, max_failovers=0))
    key = world.submit(pytorchjob("job"))
    first = await placed_and_failed(world, key)

    world.clock.advance(31)
    await world.reconcile(key)

    status = status_of(world, key)
    assert status["phase"] == "Failed"
    healthy = conditions(world.binding(key))[c.CONDITION_HEALTHY]
    assert (healthy["status"], healthy["reason"]) == ("False", lifecycle.GAVE_UP_REASON)
    assert "maxFailovers 0" in healthy["message"]
    failed = conditions(world.workload(key))["Failed"]
    assert (failed["status"], failed["reason"]) == ("True", lifecycle.GAVE_UP_REASON)
    (event,) = world.events(lifecycle.GAVE_UP_REASON, key)
    assert event["type"] == "Warning"
    assert "failoverHistory" not in status
    assert placed_on(world, key) == first.name
    assert the_other(world, first.name).copy("job") is None
    assert world.metrics.failovers.values == {}

    # Failed for good: later reconciles do not move it.
    world.clock.advance(3600)
    await world.reconcile(key)
    assert placed_on(world, key) == first.name and status_of(world, key)["phase"] == "Failed"


# -- delete ------------------------------------------------------------------------------------


async def test_delete_removes_the_copy_in_every_member_holding_one_then_the_finalizer():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(policy(toleration_seconds=30, purge_mode="Gracefully"))
    key = world.submit(pytorchjob("job"))
    first = await placed_and_failed(world, key)
    world.clock.advance(31)
    await world.reconcile(key)
    other = the_other(world, first.name)
    assert first.copy("job") is not None and other.copy("job") is not None
    uid = world.workload(key)["metadata"]["uid"]

    await world.delete(key)
    assert world.workload(key)["metadata"]["deletionTimestamp"]
    await world.reconcile(key)

    assert first.copy("job") is None and other.copy("job") is None
    assert world.workload(key) is None  # the finalizer was the last thing holding it
    assert all(uid not in m.member.snapshot.reservations() for m in world.members.values())
    assert key not in world.triggers.known


async def test_delete_waits_for_an_unreachable_member_and_says_so():
    world = World()
    member = world.add_member("member-1")
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    member.set_ready(False)

    await world.delete(key)
    await world.reconcile(key)

    assert c.FINALIZER in world.workload(key)["metadata"]["finalizers"]
    (event,) = world.events("CleanupPending", key)
    assert event["type"] == "Warning" and "member-1" in event["message"]
    assert (key, CLEANUP_RETRY_SECONDS) in world.queue.later

    member.set_ready(True)
    await world.reconcile(key)
    assert member.copy("job") is None
    assert world.workload(key) is None


async def test_delete_waits_for_a_member_not_heard_of_yet():
    world = World()
    member = world.add_member("member-1")
    world.apply_policy(policy())
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    world.registry.listed = False  # restarted: member-1 not heard of yet
    del world.registry.members["member-1"]

    await world.delete(key)
    await world.reconcile(key)
    assert world.events("CleanupPending", key)
    assert member.copy("job") is not None

    world.registry.members["member-1"] = member.member
    world.registry.listed = True
    await world.reconcile(key)
    assert member.copy("job") is None
    assert world.workload(key) is None


# -- placement rules -----------------------------------------------------------------------------


async def test_cluster_affinities_fall_back_to_the_next_group_and_record_it():
    world = World()
    world.add_member("member-1", gpus=2)
    world.add_member("member-2")
    groups = policy()
    groups["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "primary", "clusterNames": ["member-1"]},
        {"affinityName": "backup", "clusterNames": ["member-2"]},
    ]
    world.apply_policy(groups)
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) == "member-2"
    assert status_of(world, key)["schedulerObservedAffinityName"] == "backup"


async def test_cluster_affinities_use_the_first_group_that_fits():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    groups = policy()
    groups["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "primary", "clusterNames": ["member-1"]},
        {"affinityName": "backup", "clusterNames": ["member-2"]},
    ]
    world.apply_policy(groups)
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) == "member-1"
    assert status_of(world, key)["schedulerObservedAffinityName"] == "primary"


async def test_a_no_schedule_cluster_taint_keeps_the_gang_off_unless_tolerated():
    world = World()
    world.add_member("member-1", taints=[Taint("dedicated", "NoSchedule", "inference")])
    untolerated = policy()
    world.apply_policy(untolerated)
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) is None
    (reason,) = status_of(world, key)["pendingReasons"]
    assert (reason["cluster"], reason["code"]) == ("member-1", TAINTED)

    tolerated = policy()
    tolerated["spec"]["placement"]["clusterTolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}
    ]
    mark = len(world.queue.added)
    world.apply_policy(tolerated)
    assert key in world.queue.added[mark:]
    await world.reconcile(key)

    assert placed_on(world, key) == "member-1"
    assert (
        world.binding(key)["spec"]["placement"]["clusterTolerations"]
        == (tolerated["spec"]["placement"]["clusterTolerations"])
    )


async def test_a_no_execute_cluster_taint_moves_a_placed_gang_after_its_toleration_seconds():
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    tolerating = policy()
    tolerating["spec"]["placement"]["clusterTolerations"] = [
        {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
    ]
    world.apply_policy(tolerating)
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    first = world.members[placed_on(world, key) or ""]
    other = the_other(world, first.name)

    first.member.taints = (Taint("maintenance", "NoExecute"),)
    await world.reconcile(key)
    assert status_of(world, key)["taintedSince"] == format_time(world.clock.now())
    world.clock.advance(59)
    await world.reconcile(key)
    assert placed_on(world, key) == first.name

    world.clock.advance(2)
    await world.reconcile(key)

    assert placed_on(world, key) == other.name
    (record,) = status_of(world, key)["failoverHistory"]
    assert (record["fromCluster"], record["reason"]) == (first.name, "TaintUntolerated")
    assert first.copy("job") is None and other.copy("job") is not None


async def test_a_cluster_affinity_that_excludes_every_member_says_so():
    world = World()
    world.add_member("member-1")
    world.apply_policy(policy(cluster_names=["member-9"]))
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    (reason,) = status_of(world, key)["pendingReasons"]
    assert (reason["cluster"], reason["code"]) == ("member-1", AFFINITY)


# -- claims --------------------------------------------------------------------------------------


async def test_preemption_always_moves_the_claim_to_a_higher_priority_gang_policy():
    world = World()
    world.add_member("member-1")
    world.apply_policy(policy("low"))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    assert world.binding(key)["spec"]["policy"]["name"] == "low"

    high = policy("high", toleration_seconds=90)
    high["spec"]["priority"] = 10
    world.apply_policy(high)
    await world.reconcile(key)
    assert world.binding(key)["spec"]["policy"]["name"] == "low"  # a claim is kept...

    high["spec"]["preemption"] = "Always"
    world.apply_policy(high)
    await world.reconcile(key)

    spec = world.binding(key)["spec"]  # ...unless the higher policy preempts
    assert spec["policy"]["name"] == "high"
    assert spec["failover"]["tolerationSeconds"] == 90
    (event,) = world.events("PolicyClaimChanged", key)
    assert "high" in event["message"]
    assert placed_on(world, key) == "member-1"


async def test_a_policy_edit_that_drops_a_placement_field_drops_it_from_the_bindings_copy():
    """The binding's copy follows the policy field by field: a restriction the policy no
    longer has does not stay behind in the binding (a merge patch alone would keep it)."""
    world = World()
    world.add_member("member-1")
    world.add_member("member-2", gpus=2)
    narrow = policy(cluster_names=["member-2"])
    narrow["spec"]["placement"]["clusterTolerations"] = [
        {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}
    ]
    world.apply_policy(narrow)
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    assert placed_on(world, key) is None  # member-2 is too small

    world.apply_policy(policy())
    await world.reconcile(key)

    placement = world.binding(key)["spec"]["placement"]
    assert placement == policy()["spec"]["placement"]
    assert placed_on(world, key) == "member-1"


async def test_preemption_drops_the_terms_the_new_policy_does_not_set():
    world = World()
    world.add_member("member-1")
    world.apply_policy(policy("low", max_failovers=2))
    key = world.submit(pytorchjob("job"))
    await world.reconcile(key)
    assert world.binding(key)["spec"]["failover"]["maxFailovers"] == 2

    high = policy("high", toleration_seconds=90)
    high["spec"]["priority"] = 10
    high["spec"]["preemption"] = "Always"
    world.apply_policy(high)
    await world.reconcile(key)

    spec = world.binding(key)["spec"]
    assert spec["policy"]["name"] == "high"
    assert spec["failover"] == {"tolerationSeconds": 90, "purgeMode": "Directly"}


# -- suspension ------------------------------------------------------------------------------------


async def test_suspension_dispatching_places_the_gang_but_creates_no_member_copy():
    world = World()
    member = world.add_member("member-1")
    held = policy()
    held["spec"]["suspension"] = {"dispatching": True}
    world.apply_policy(held)
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    assert placed_on(world, key) == "member-1"
    assert member.copy("job") is None
    applied = conditions(world.binding(key))[c.CONDITION_FULLY_APPLIED]
    assert (applied["status"], applied["reason"]) == ("False", "DispatchingSuspended")
    assert world.events("DispatchingSuspended", key)

    del held["spec"]["suspension"]
    world.apply_policy(held)
    await world.reconcile(key)
    assert member.copy("job") is not None
    assert conditions(world.binding(key))[c.CONDITION_FULLY_APPLIED]["status"] == "True"


async def test_the_fragmentation_score_says_in_numbers_why_the_member_won():
    """gangScoring: fragmentation. Lately 4-GPU jobs arrived: a 2-GPU job goes where it leaves
    4-GPU holes whole (member-2's 6-GPU node) rather than into member-1's 4-GPU node."""
    world = World()
    world.add_member("member-1", gpus=4)
    world.add_member("member-2", gpus=6)
    world.apply_policy(policy(scoring="fragmentation"))
    for _ in range(3):
        world.shell.arrivals.observe(
            Gang.of(Component("w", 1, Resources({"nvidia.com/gpu": 4, "pods": 1})))
        )
    key = world.submit(pytorchjob("job", workers=1, gpus=1))

    await world.reconcile(key)

    assert placed_on(world, key) == "member-2"
    message = conditions(world.binding(key))[c.CONDITION_SCHEDULED]["message"]
    assert "; chosen: fragmentation -" in message and "GPU on member-1" in message, message


async def test_a_crash_before_a_move_is_saved_never_recreates_the_copy_where_it_failed():
    """Directly (Immediately): the move is saved before the old copy is deleted, so a controller
    that dies while saving it has deleted nothing, and the next one moves the gang again; it
    never finds the gang bound to a cluster whose copy it already deleted (and makes a new copy
    there, where the gang failed)."""
    world = World()
    world.add_member("member-1")
    world.add_member("member-2")
    world.apply_policy(policy(toleration_seconds=30, purge_mode="Immediately"))
    key = world.submit(pytorchjob("job"))
    first = await placed_and_failed(world, key)
    other = the_other(world, first.name)
    dispatched = len(first.api.asked("POST", "pytorchjobs"))  # the gang's first dispatch

    def crash(request: httpx.Request) -> httpx.Response | None:
        if request.method == "PATCH" and "gangbindings" in request.url.path:
            raise httpx.ConnectError("the controller died here", request=request)
        return None

    world.fleet_api.interceptors.append(crash)
    world.clock.advance(31)  # past tolerationSeconds: this reconcile moves the gang
    with pytest.raises(Exception):  # noqa: B017 (whatever the crash looks like)
        await world.reconcile(key)
    world.fleet_api.interceptors.remove(crash)  # "restarted"
    assert first.copy("job") is not None  # nothing was deleted before the move was saved

    for _ in range(3):
        await world.reconcile(key)

    assert first.copy("job") is None
    assert other.copy("job") is not None and placed_on(world, key) == other.name
    assert not world.binding(key)["spec"].get("gracefulEvictionTasks")
    # Nothing was created again where the gang failed.
    assert len(first.api.asked("POST", "pytorchjobs")) == dispatched
