"""One door into members: every write the controller sends to a member cluster goes through its
`MemberWriter` (fleet/controller/members/writer.py)."""

from __future__ import annotations

import re
from pathlib import Path

from fleet.controller.members import writer
from tests.controller.harness import World
from tests.controller.test_dependencies import CONFIGMAP, config_map, job_using, member, policy

SHELL = Path(writer.__file__).resolve().parents[1]
#: A write verb called on a client that is not the fleet's (`shell.fleet`, `self.fleet`) nor
#: the leader election's own (`self.client`, the fleet's Lease).
MEMBER_WRITE = re.compile(
    r"(?<!self\.)(?<!fleet\.)\bclient\.(create|create_subresource|apply|patch|replace|delete)\("
)
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def test_no_part_of_the_shell_but_the_writer_writes_with_a_member_client():
    offenders = [
        f"{path.relative_to(SHELL)}:{n}: {line.strip()}"
        for path in sorted(SHELL.rglob("*.py"))
        if path.name != "writer.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if MEMBER_WRITE.search(line)
    ]
    assert offenders == []


async def test_every_write_a_member_receives_went_through_its_writer():
    """A dispatch with a dependency, a failover and the purge of the old copy: each member's
    API server counts exactly the writes its writer counted."""
    world = World()
    first = member(world, "member-1", gpus=4)
    second = member(world, "member-2", gpus=8)
    world.fleet_api.put(config_map("cfg", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("cfg",)))
    await world.reconcile(key)
    first.set_job_state("job", "Failed")
    await world.reconcile(key)
    world.clock.advance(31)
    await world.reconcile(key)
    assert second.copy("job") is not None and first.copy("job") is None
    assert first.api.get(*CONFIGMAP, "cfg", "team-a") is None

    for fake in (first, second):
        received = sum(1 for r in fake.api.requests if r.method in WRITE_METHODS)
        assert received > 0
        assert sum(fake.member.writes.values()) == received, fake.name
