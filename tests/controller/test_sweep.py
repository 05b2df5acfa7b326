"""The orphan sweep: member copies whose fleet object is gone are deleted, nothing else is."""

from __future__ import annotations

from typing import Any

from fleet.api import constants as c
from fleet.controller.sweep import sweep_once
from fleet.testing.workloads import pytorchjob
from tests.controller.harness import NAMESPACE, FakeMember, World


def copy_in(member: FakeMember, name: str, *, uid: str, fleet_id: str) -> None:
    """A copy in the member as a fleet with `fleet_id` would have made it for `uid`."""
    job: dict[str, Any] = pytorchjob(name, namespace=NAMESPACE)
    job["metadata"]["labels"] = {c.MANAGED_BY_LABEL: fleet_id, c.FLEET_UID_LABEL: uid}
    member.api.put(job)


async def test_sweep_deletes_copies_whose_fleet_object_is_gone_or_was_recreated():
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

    deleted = await sweep_once(world.shell)

    assert deleted == 2
    assert member.copy("gone") is None and member.copy("recreated") is None
    assert member.copy("live") is not None  # its fleet object exists
    assert member.copy("theirs") is not None  # another fleet's copy is not ours to judge
    assert world.metrics.orphans.values == {"member-1": 2}
    # The copy is deleted with a UID precondition: a newer copy of that name would be kept.
    deletes = member.api.asked("DELETE")
    assert len(deletes) == 2 and all(b'"preconditions"' in r.content for r in deletes)


async def test_sweep_keeps_a_copy_when_the_fleet_cannot_be_asked():
    world = World()
    member = world.add_member("member-1")
    copy_in(member, "maybe-gone", uid="uid-unknown-to-the-cache", fleet_id=world.settings.fleet_id)
    world.fleet_api.reachable = False

    assert await sweep_once(world.shell) == 0

    assert member.copy("maybe-gone") is not None
    assert world.metrics.orphans.values == {}


async def test_sweep_skips_a_member_that_is_not_ready():
    world = World()
    member = world.add_member("member-1")
    copy_in(member, "gone", uid="uid-of-a-deleted-job", fleet_id=world.settings.fleet_id)
    member.set_ready(False)

    assert await sweep_once(world.shell) == 0

    member.api.reachable = True
    assert member.copy("gone") is not None
    assert not member.api.asked("DELETE")
