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
#: A namespace's watch started or stopped working.
WatchHealth = Callable[[str], None]


class SecretWatch:
    """Informers on Secrets, one per namespace, started the first time a namespace is needed.

    Each namespace's watch says whether it works (`state`): one the controller is refused
    (its Role there is missing) shows on the MemberClusters naming a Secret there, instead of
    being retried in the log only."""

    def __init__(
        self,
        fleet: KubeClient,
        on_change: SecretChanged,
        on_health: WatchHealth = lambda _namespace: None,
    ) -> None:
        self.fleet = fleet
        self.on_change = on_change
        self.on_health = on_health
        self._tasks: dict[str, asyncio.Task[None]] = {}
        #: Per namespace: (works, why not); absent until its first list answered or failed.
        self._states: dict[str, tuple[bool, str]] = {}

    def watch(self, namespace: str) -> None:
        if not namespace or namespace in self._tasks:
            return
        informer = Informer(
            self.fleet,
            "v1",
            "Secret",
            self._event,
            namespace=namespace,
            on_health=lambda ok, why: self._health(namespace, ok, why),
        )
        self._tasks[namespace] = asyncio.create_task(informer.run(), name=f"secrets-{namespace}")

    def state(self, namespace: str) -> tuple[bool, str] | None:
        """Whether the namespace's watch works, and why not; None while not known yet."""
        return self._states.get(namespace)

    def _health(self, namespace: str, ok: bool, why: str) -> None:
        state = (ok, "" if ok else why)
        if self._states.get(namespace) != state:
            self._states[namespace] = state
            self.on_health(namespace)

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
        self._states = {}
