"""The one door through which the controller changes anything in a member cluster.

Every create, apply, patch and delete the controller sends to a member (copies, PodGroups,
dependencies, runtimes, namespaces, Reservations, token requests) goes through a
`MemberWriter`; `tests/controller/test_one_writer.py` holds the rest of the shell to it. What may
be written is decided elsewhere (the ledger, `fleet.core.ledger`, and the bindings it lives in);
this is where it is carried out, counted per verb and kind (`Member.writes`) and logged with the
cluster's identity, so what fleet did in a cluster can be told from one place.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from fleet.kube import KubeClient, Obj

if TYPE_CHECKING:
    from fleet.controller.members.member import Member

log = logging.getLogger(__name__)


class MemberWriter:
    """Writes into one member through its current connection's client."""

    def __init__(self, member: Member, client: KubeClient) -> None:
        self.member = member
        self.client = client

    def _count(self, verb: str, kind: str, name: str, namespace: str | None) -> None:
        self.member.writes[(verb, kind)] += 1
        where = f"{namespace}/{name}" if namespace else name
        log.debug(
            "member %s (cluster %s): %s %s %s",
            self.member.name,
            self.member.cluster_id or "unrecorded",
            verb,
            kind,
            where,
        )

    async def create(
        self, obj: Mapping[str, Any], namespace: str | None = None, *, dry_run: bool = False
    ) -> Obj:
        """`dry_run`: admitted and answered as a real create, never stored (the guard probe)."""
        meta = obj.get("metadata") or {}
        verb = "create (dry run)" if dry_run else "create"
        self._count(verb, str(obj.get("kind")), meta.get("name", ""), meta.get("namespace"))
        return await self.client.create(obj, namespace, dry_run=dry_run)

    async def create_subresource(
        self,
        api_version: str,
        kind: str,
        name: str,
        subresource: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        auth: httpx.Auth | None = None,
    ) -> Obj:
        """`auth`: sent as that identity instead of the connection's (the token renewer)."""
        self._count(f"create {subresource}", kind, name, namespace)
        return await self.client.create_subresource(
            api_version, kind, name, subresource, body, namespace, auth=auth
        )

    async def apply(self, obj: Mapping[str, Any], *, field_manager: str) -> Obj:
        meta = obj.get("metadata") or {}
        self._count("apply", str(obj.get("kind")), meta.get("name", ""), meta.get("namespace"))
        return await self.client.apply(obj, field_manager=field_manager)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any] | builtins.list[Any],
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
    ) -> Obj:
        self._count("patch", kind, name, namespace)
        return await self.client.patch(
            api_version, kind, name, patch, namespace, patch_type=patch_type
        )

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        uid: str | None = None,
    ) -> bool:
        self._count("delete", kind, name, namespace)
        return await self.client.delete(
            api_version, kind, name, namespace, propagation=propagation, uid=uid
        )


__all__ = ["MemberWriter"]
