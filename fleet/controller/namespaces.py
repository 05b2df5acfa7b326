"""A job's namespace in a member: created by fleet when a write says it is missing, carrying the
hub namespace's PodSecurity level (never below baseline), and the ServiceAccounts fleet copies
there listed on it, so the member's admission policy lets its pods run as them; opened to the
people's read-only identity the first time fleet dispatches there."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fleet.api import constants as c
from fleet.api.guard import member_pod_security
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
    """The namespace, fleet's, with the PodSecurity labels of the fleet's namespace of that name
    (`member_pod_security`: the member's admission policy refuses any Namespace of fleet's
    below baseline)."""
    client = member.client
    assert client is not None
    hub = await shell.fleet.get("v1", "Namespace", namespace)
    hub_labels = ((hub or {}).get("metadata") or {}).get("labels") or {}
    labels = {**member_pod_security(hub_labels), c.MANAGED_BY_LABEL: shell.settings.fleet_id}
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": labels},
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


async def list_service_account(shell: Shell, member: Member, namespace: str, name: str) -> None:
    """List the ServiceAccount `name` fleet copied into `namespace` in the namespace's
    `fleet.dev/service-accounts` annotation, if fleet created the namespace (in one its admins
    opened, the list is theirs to write). A namespace changed meanwhile is read again."""
    client = member.client
    assert client is not None
    for _ in range(3):
        found = await client.get("v1", "Namespace", namespace)
        meta = (found or {}).get("metadata") or {}
        if (meta.get("labels") or {}).get(c.MANAGED_BY_LABEL) != shell.settings.fleet_id:
            return
        listed = (meta.get("annotations") or {}).get(c.SERVICE_ACCOUNTS_ANNOTATION) or ""
        names = [n.strip() for n in listed.split(",") if n.strip()]
        if name in names:
            return
        patch = {
            "metadata": {
                "resourceVersion": meta.get("resourceVersion"),
                "annotations": {c.SERVICE_ACCOUNTS_ANNOTATION: ",".join([*names, name])},
            }
        }
        try:
            await member.writer.patch("v1", "Namespace", namespace, patch)
        except Conflict:
            continue
        return
