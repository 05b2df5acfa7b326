"""Queues: one per quota node of the tree in force, in namespace kube-queue.

Named as ACK names them: the node's path lowercased, `/` and `_` turned into `-`, and the API
server's generated suffix (`root-child-2-v5zxz`); the path is kept in the annotation
`kube-queue/quota-fullname`, which is how a Queue is found again. A node that appears gets its
Queue, a node that goes loses it, a second Queue for one node (a race with another writer) is
deleted. Admins edit `spec.queuePolicy` and `spec.priority`; each Queue's spec is handed to the
admission (`configure_queue`). Queues without the annotation are not fleet's and are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from fleet.api import Queue
from fleet.api import constants as c
from fleet.core.admission import Admission
from fleet.core.quota import queue_name_prefix
from fleet.kube import ApiError, KubeClient, Obj

log = logging.getLogger(__name__)

QUEUE = (c.QUEUE_API_VERSION, "Queue")


def path_of(queue: Obj) -> str | None:
    return ((queue.get("metadata") or {}).get("annotations") or {}).get(c.QUOTA_FULLNAME_ANNOTATION)


def by_path(queues: Iterable[Obj]) -> dict[str, list[Obj]]:
    """fleet's Queues by quota path, oldest first (the first is the one kept)."""
    out: dict[str, list[Obj]] = {}
    for queue in queues:
        path = path_of(queue)
        if path:
            out.setdefault(path, []).append(queue)
    for found in out.values():
        found.sort(
            key=lambda q: (q["metadata"].get("creationTimestamp") or "", q["metadata"]["name"])
        )
    return out


class Queues:
    """fleet's Queues in kube-queue (by name) and the Queue name of each quota path."""

    def __init__(self, fleet: KubeClient) -> None:
        self.fleet = fleet
        self.objects: dict[str, Obj] = {}
        self.queue_of: dict[str, str] = {}
        self.namespace_ready = False

    def event(self, obj: Obj, *, deleted: bool) -> bool:
        """Index a Queue; True when its spec changed (the admission must be configured again)."""
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != c.QUEUE_NAMESPACE:
            return False
        name = str(meta.get("name") or "")
        old = self.objects.get(name)
        if deleted:
            self.objects.pop(name, None)
        else:
            self.objects[name] = obj
        return deleted or old is None or old.get("spec") != obj.get("spec")

    def reset(self, listed: list[Obj]) -> None:
        """Start over from a fresh list (a restart)."""
        self.objects = {q["metadata"]["name"]: q for q in listed}

    def name_of(self, quota: str | None) -> str | None:
        """The Queue name of a quota path (None: no quota, or no Queue yet)."""
        return self.queue_of.get(quota or "")

    async def sync(self, admission: Admission) -> None:
        """Make the Queues match the tree in force and configure the admission from their specs."""
        tree = admission.tree
        wanted = list(tree.nodes) if tree is not None else []
        have = by_path(self.objects.values())
        if wanted:
            await self._ensure_namespace()
        for path in wanted:
            if path not in have:
                created = await self.fleet.create(
                    Queue.for_quota(path, queue_name_prefix(path)).to_dict()
                )
                self.objects[created["metadata"]["name"]] = created
                have[path] = [created]
                log.info(
                    "Queue %s/%s made for quota %s",
                    c.QUEUE_NAMESPACE,
                    created["metadata"]["name"],
                    path,
                )
        for path, found in have.items():
            extra = found[1:] if path in wanted else found
            for queue in extra:
                name = queue["metadata"]["name"]
                await self.fleet.delete(
                    *QUEUE, name, c.QUEUE_NAMESPACE, uid=queue["metadata"].get("uid")
                )
                self.objects.pop(name, None)
        self.queue_of = {path: have[path][0]["metadata"]["name"] for path in wanted}
        for path in wanted:
            spec = have[path][0].get("spec") or {}
            policy = str(spec.get("queuePolicy") or "Priority")
            try:
                admission.configure_queue(path, policy, int(spec.get("priority") or 0))
            except ValueError as err:
                log.warning("%s", err)

    async def _ensure_namespace(self) -> None:
        if self.namespace_ready:
            return
        if await self.fleet.get("v1", "Namespace", c.QUEUE_NAMESPACE) is None:
            try:
                await self.fleet.create(
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": c.QUEUE_NAMESPACE},
                    }
                )
            except ApiError as err:
                if not err.conflict:
                    raise
        self.namespace_ready = True

    async def write_status(self, admission: Admission, waiting: Mapping[str, int]) -> None:
        """Each Queue's status: its quota path, units waiting in it, units holding its quota, and
        what its node holds (written only when it changed)."""
        tree = admission.tree
        if tree is None:
            return
        for path, name in self.queue_of.items():
            queue = self.objects.get(name)
            if queue is None or path not in tree:
                continue
            usage = admission.usage(path)
            used = usage.used.quantities()
            status: dict[str, Any] = {
                "quota": path,
                "waiting": waiting.get(path, 0),
                "dequeued": usage.jobs,
                "used": used or None,
            }
            current = queue.get("status") or {}
            if all(current.get(k) == v for k, v in status.items()):
                continue
            updated = await self.fleet.patch(
                *QUEUE, name, {"status": status}, c.QUEUE_NAMESPACE, subresource="status"
            )
            self.objects[name] = updated
