"""A job's namespace in a member: created by fleet when a write says it is missing."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fleet.api import constants as c
from fleet.controller.context import Shell
from fleet.controller.members import Member
from fleet.kube import Conflict, NotFound

T = TypeVar("T")


async def in_namespace(
    shell: Shell, member: Member, namespace: str, write: Callable[[], Awaitable[T]]
) -> T:
    """Run `write`; if the member has no such namespace yet, create it and run `write` again.
    Namespaces are created only when a write says they are missing: no read per dispatch."""
    try:
        return await write()
    except NotFound:
        if not namespace or namespace in member.namespaces:
            raise
    await create_namespace(shell, member, namespace)
    return await write()


async def create_namespace(shell: Shell, member: Member, namespace: str) -> None:
    client = member.client
    assert client is not None
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {c.MANAGED_BY_LABEL: shell.settings.fleet_id}},
    }
    with contextlib.suppress(Conflict):  # created meanwhile: as good
        await member.writer.create(body)
    member.namespaces.add(namespace)
