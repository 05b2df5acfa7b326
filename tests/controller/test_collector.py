"""The collector: every copy of this fleet's in a member that no binding wants is deleted
(its fleet object gone, or its job bound elsewhere with no eviction keeping it), nothing else
is; a member that (re)connected takes nothing new before a whole pass has run there."""

from __future__ import annotations

from typing import Any

from fleet.api import constants as c
from fleet.controller.collector import collect, collect_all
from fleet.controller.members.status import MemberStatusWriter
from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, FakeMember, World, conditions


def ready_of(world: World, name: str) -> tuple[str, str]:
    """The MemberCluster's Ready condition: (status, reason)."""
    ready = conditions(world.fleet_api.get(c.FLEET_API_VERSION, "MemberCluster", name))["Ready"]
    return ready["status"], ready["reason"]


def copy_in(member: FakeMember, name: str, *, uid: str, fleet_id: str) -> None:
    """A copy in the member as a fleet with `fleet_id` would have made it for `uid`."""
    job: dict[str, Any] = pytorchjob(name, namespace=NAMESPACE)
    job["metadata"]["labels"] = {c.MANAGED_BY_LABEL: fleet_id, c.FLEET_UID_LABEL: uid}
    member.api.put(job)


async def test_collector_deletes_copies_whose_fleet_object_is_gone_or_was_recreated():
    world = World()
    member = world.add_member("member-1")
    ours = world.settings.fleet_id
    live = world.submit(pytorchjob("live"))
    live_uid = world.workload(live)["metadata"]["uid"]
    copy_in(member, "live", uid=live_uid, fleet_id=ours)
    copy_in(member, "gone", uid="uid-of-a-deleted-job", fleet_id=ours)
    world.submit(pytorchjob("recreated"))  # same name, a new object: a new UID
    copy_in(member, "recreated", uid="uid-of-the-first-recreated", fleet_id=ours)
    copy_in(member, "theirs", uid="uid-in-another-fleet", fleet_id="fleet-other")

    deleted = await collect_all(world.shell)

    assert deleted == 2
    assert member.copy("gone") is None and member.copy("recreated") is None
    assert member.copy("live") is not None  # its fleet object exists
    assert member.copy("theirs") is not None  # another fleet's copy is not ours to judge
    assert world.metrics.orphans.values == {"member-1": 2}
    # The copy is deleted with a UID precondition: a newer copy of that name would be kept.
    deletes = member.api.asked("DELETE")
    assert len(deletes) == 2 and all(b'"preconditions"' in r.content for r in deletes)
    # In the foreground: the copy goes only once the garbage collector removed its pods.
    assert all(b'"Foreground"' in r.content for r in deletes)


async def test_collector_keeps_a_copy_when_the_fleet_cannot_be_asked():
    world = World()
    member = world.add_member("member-1")
    copy_in(member, "maybe-gone", uid="uid-unknown-to-the-cache", fleet_id=world.settings.fleet_id)
    world.fleet_api.reachable = False

    assert await collect_all(world.shell) == 0

    assert member.copy("maybe-gone") is not None
    assert world.metrics.orphans.values == {}


async def test_collector_skips_a_member_that_is_not_ready():
    world = World()
    member = world.add_member("member-1")
    copy_in(member, "gone", uid="uid-of-a-deleted-job", fleet_id=world.settings.fleet_id)
    member.set_ready(False)

    assert await collect_all(world.shell) == 0

    member.api.reachable = True
    assert member.copy("gone") is not None
    assert not member.api.asked("DELETE")


async def test_a_member_that_reconnects_is_fenced_before_anything_is_placed_there():
    """A copy of a job bound to another member, with no eviction keeping it (the binding lost
    its record, or the cluster came back under another name): deleted by the first pass, and
    the member is placeable only once a whole pass has run."""
    world = World()
    home = world.add_member("member-1")
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job", namespace=NAMESPACE, workers=1, gpus=1))
    await world.reconcile(key)
    assert home.copy("job") is not None
    stale = world.add_member("member-2")
    stale.api.put(home.copy("job") or {})  # a copy of the same job there, not wanted
    stale.member.fenced = False  # just (re)connected
    assert "member-2" in world.registry.not_ready()

    world.fleet_api.reachable = False  # the fleet cannot be asked: nothing deleted, not fenced
    assert await collect(world.shell, stale.member) == 0
    assert stale.copy("job") is not None and not stale.member.fenced

    # Ready means placeable: the MemberCluster says Fencing until the pass is complete.
    world.fleet_api.reachable = True
    world.fleet_api.put(
        {
            "apiVersion": c.FLEET_API_VERSION,
            "kind": "MemberCluster",
            "metadata": {"name": "member-2"},
        }
    )
    writer = MemberStatusWriter(world.fleet, world.clock)
    await writer.write(stale.member)
    assert ready_of(world, "member-2") == ("False", c.REASON_FENCING)

    assert await collect(world.shell, stale.member) == 1
    assert stale.copy("job") is None and home.copy("job") is not None
    assert stale.member.fenced and "member-2" not in world.registry.not_ready()
    await writer.write(stale.member)
    assert ready_of(world, "member-2") == ("True", c.REASON_CLUSTER_READY)
    assert world.metrics.purges.values == {"member-2": 1}
    assert world.events("StaleCopyDeleted", key)


async def test_a_pass_over_copies_the_bindings_want_sends_no_request_to_the_fleet():
    """Decided from the watch-fed caches: only a copy they call unwanted is read again from the
    fleet API server before it is deleted."""
    world = World()
    home = world.add_member("member-1")
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job", namespace=NAMESPACE, workers=1, gpus=1))
    await world.reconcile(key)
    assert home.copy("job") is not None
    asked = len(world.fleet_api.requests)

    assert await collect_all(world.shell) == 0

    assert len(world.fleet_api.requests) == asked
    assert home.copy("job") is not None


async def test_a_trainjob_copy_is_deleted_in_the_background_and_waited_for_by_its_pods():
    """Trainer applies a deleted TrainJob's JobSet again, so a foreground delete would never
    end: its copy goes in the background, and fleet still waits for the pods it marked."""
    from fleet.controller.keys import WorkloadKey
    from fleet.controller.member_copy import copy_gone, delete_copy
    from fleet.core.inventory import PodInfo
    from fleet.core.resources import Resources
    from fleet.testing.workloads import trainjob

    world = World()
    member = world.add_member("member-1", kinds=[("trainer.kubeflow.org/v1alpha1", "TrainJob")])
    job: dict[str, Any] = trainjob("tj", "torch", namespace=NAMESPACE, nodes=1)
    job["metadata"]["labels"] = {
        c.MANAGED_BY_LABEL: world.settings.fleet_id,
        c.FLEET_UID_LABEL: "uid-tj",
    }
    member.api.put(job)
    key = WorkloadKey("trainer.kubeflow.org/v1alpha1", "TrainJob", NAMESPACE, "tj")

    assert await delete_copy(member.member, key, "uid-tj")

    (delete,) = member.api.asked("DELETE")
    assert b'"Background"' in delete.content and b'"preconditions"' in delete.content
    assert member.copy("tj") is None
    pod = PodInfo("p-1", NAMESPACE, "tj-node-0-0", "node-0", Resources(), owner_key="uid-tj")
    member.member.snapshot.upsert_pod(pod)  # its pod, still terminating
    assert not copy_gone(member.member, key, "uid-tj")
    member.member.snapshot.remove_pod("p-1")
    assert copy_gone(member.member, key, "uid-tj")
