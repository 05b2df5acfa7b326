"""A job's namespace in a member: created by fleet when a write says it is missing, and opened
to the people's read-only identity the first time fleet dispatches there."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fleet.api import constants as c
from fleet.api.membership import viewer_binding
from fleet.controller.context import Shell
from fleet.controller.members import Member
from fleet.kube import ApiError, Conflict, NotFound

log = logging.getLogger(__name__)

T = TypeVar("T")


async def in_namespace(
    shell: Shell, member: Member, namespace: str, write: Callable[[], Awaitable[T]]
) -> T:
    """Run `write`; if the member has no such namespace yet, create it and run `write` again.
    Namespaces are created only when a write says they are missing: no read per dispatch. Once
    written, the namespace is one fleet dispatches to: the viewer may read there (`bind_viewer`)."""
    try:
        result = await write()
    except NotFound:
        if not namespace or namespace in member.namespaces:
            raise
        await create_namespace(shell, member, namespace)
        result = await write()
    await bind_viewer(shell, member, namespace)
    return result


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


async def bind_viewer(shell: Shell, member: Member, namespace: str) -> None:
    """The RoleBinding that lets the people's identity (`kubectl amc`, the dashboard) read fleet's
    copies, their pods and logs in `namespace` of `member`, made once per namespace (a 409: it
    is there). A refusal does not hold the dispatch back (people then cannot read there yet); it
    is tried again with the next write into that namespace."""
    if not namespace or member.viewer is None or namespace in member.viewer_bound:
        return
    body = viewer_binding(member.viewer, namespace, shell.settings.fleet_id)
    try:
        await member.writer.create(body)
    except Conflict:
        pass
    except ApiError as e:
        log.warning(
            "member %s: the viewer's RoleBinding in namespace %s was refused: %s",
            member.name,
            namespace,
            e,
        )
        return
    member.viewer_bound.add(namespace)
