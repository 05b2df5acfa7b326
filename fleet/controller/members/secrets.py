"""Watch the kubeconfig Secrets that MemberClusters name, so an edited one reconnects at once.

Only the namespaces configured to hold member kubeconfigs are watched (the controller's
--secrets-namespaces; the registry refuses a MemberCluster naming a Secret elsewhere), one
namespaced informer each, started the first time a MemberCluster names it. The controller may
list and watch Secrets there only (a Role in each, fleet.api.access.fleet_secrets_rules); its
one cluster-wide right on Secrets is `get`, which propagateDeps needs to read what it copies.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from fleet.kube import Informer, KubeClient, Obj

SecretChanged = Callable[[str, str], None]


class SecretWatch:
    """Informers on Secrets, one per namespace, started the first time a namespace is needed."""

    def __init__(self, fleet: KubeClient, on_change: SecretChanged) -> None:
        self.fleet = fleet
        self.on_change = on_change
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def watch(self, namespace: str) -> None:
        if not namespace or namespace in self._tasks:
            return
        informer = Informer(self.fleet, "v1", "Secret", self._event, namespace=namespace)
        self._tasks[namespace] = asyncio.create_task(informer.run(), name=f"secrets-{namespace}")

    def _event(self, _event: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        self.on_change(str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    async def stop(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = {}
