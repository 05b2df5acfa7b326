"""The dashboard's watches: the fleet's objects, and each member's nodes, pods and Reservations.

Members are reached exactly as `kubectl amc` reaches them (fleet.amc.members: the member's
viewer kubeconfig Secret, read with the dashboard's own credentials and validated by
fleet.kubeconfig), so its RBAC applies: a member whose Secret it may not read is shown as
unreachable, with the 403. The viewer reads pods only in the namespaces fleet dispatched to, so
pods are watched per namespace, in each namespace a GangBinding lives in (a job's binding lives
in its namespace, and its copy in the member namespace of the same name); a namespace fleet
never dispatched to in that member refuses, and is asked again with a growing wait, unreported
(the Node watch says whether the member answers). Each member is watched by its own informers
(fleet.kube.Informer): a member that does not answer is marked unreachable and retried with
backoff while everything else goes on. A watch the server refuses (401/403: the identity may
list but not watch, say) is shown on the page as refused, per member and resource, and retried
with a growing wait (up to REFUSED_BACKOFF_SECONDS), not every half second.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from contextlib import ExitStack

from fleet.amc.errors import MemberUnavailable
from fleet.amc.members import Fleet
from fleet.dashboard.state import (
    FLEET_KINDS,
    GANG_BINDING,
    MEMBER_CLUSTER,
    RESERVATION,
    Obj,
    State,
)
from fleet.kube import Informer, KubeClient, SyncKubeClient, identity

log = logging.getLogger(__name__)

#: How a member's client is made (tests give an in-memory API server, or refuse).
ConnectMember = Callable[[str], Awaitable[KubeClient]]

#: Seconds between tries to reach a member whose kubeconfig could not be used.
RETRY_SECONDS = 10.0
#: The longest wait between tries of a watch the server refused (401/403): the informer backs
#: off from half a second, doubling, up to this, and the page says it was refused.
REFUSED_BACKOFF_SECONDS = 120.0
KOORDINATOR = "Koordinator"


def amc_connector(fleet: SyncKubeClient) -> ConnectMember:
    """Members as `kubectl amc` reaches them: through the kubeconfig in their Secret."""

    async def connect(name: str) -> KubeClient:
        def resolve() -> KubeClient:
            with ExitStack() as stack:
                connection = Fleet(fleet, stack).connect(name).connection
            return KubeClient(connection, name=name)

        return await asyncio.to_thread(resolve)

    return connect


def _scheduler(obj: Obj) -> str | None:
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    found = (status.get("gangScheduler") if isinstance(status, dict) else None) or (
        spec.get("gangScheduler") if isinstance(spec, dict) else None
    )
    return str(found) if found else None


class Watches:
    """Informers on the fleet, and one task per member that keeps its informers running."""

    def __init__(
        self,
        state: State,
        fleet: KubeClient,
        connect: ConnectMember,
        *,
        retry_seconds: float = RETRY_SECONDS,
        refused_backoff: float = REFUSED_BACKOFF_SECONDS,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`sleep` is how every informer waits between tries (tests record the waits)."""
        self.state = state
        self.fleet = fleet
        self.connect = connect
        self.retry_seconds = retry_seconds
        self.refused_backoff = refused_backoff
        self.sleep = sleep
        self._tasks: list[asyncio.Task[None]] = []
        self._members: dict[str, asyncio.Task[None]] = {}
        self._schedulers: dict[str, str | None] = {}
        self._clients: dict[str, KubeClient] = {}
        #: Each member's pod watches, by namespace.
        self._pods: dict[str, dict[str, asyncio.Task[None]]] = {}

    def start(self) -> None:
        for kind in FLEET_KINDS:
            informer = Informer(
                self.fleet,
                *kind,
                functools.partial(self._fleet_event, kind),
                on_health=functools.partial(self.state.fleet_health, kind),
                max_refused_backoff=self.refused_backoff,
                sleep=self.sleep,
            )
            self._tasks.append(asyncio.create_task(informer.run(), name=f"watch-{kind[1]}"))

    def _binding_namespaces(self) -> set[str]:
        bindings = self.state.fleet.get(GANG_BINDING) or {}
        return {str((b.get("metadata") or {}).get("namespace") or "") for b in bindings.values()}

    def _watch_pods(self, name: str, namespaces: set[str]) -> None:
        """A pod watch in each of `namespaces` of member `name` that has none yet."""
        client = self._clients.get(name)
        if client is None or name not in self._members:
            return
        tasks = self._pods.setdefault(name, {})
        state = self.state
        for namespace in sorted(namespaces - tasks.keys() - {""}):
            informer = Informer(
                client,
                "v1",
                "Pod",
                lambda event, obj: state.pod_event(name, event, obj),
                namespace=namespace,
                keep=identity,
                max_refused_backoff=self.refused_backoff,
                sleep=self.sleep,
            )
            tasks[namespace] = asyncio.create_task(informer.run(), name=f"pods-{name}-{namespace}")

    def _stop_pods(self, name: str) -> None:
        for task in (self._pods.pop(name, None) or {}).values():
            task.cancel()

    def _fleet_event(self, kind: tuple[str, str], event: str, obj: Obj) -> None:
        self.state.fleet_event(kind, event, obj)
        if kind == GANG_BINDING and event != "DELETED":
            namespace = str((obj.get("metadata") or {}).get("namespace") or "")
            for name in list(self._pods):
                self._watch_pods(name, {namespace})
        if kind != MEMBER_CLUSTER:
            return
        name = str((obj.get("metadata") or {}).get("name") or "")
        if not name:
            return
        if event == "DELETED":
            task = self._members.pop(name, None)
            if task is not None:
                task.cancel()
            self._stop_pods(name)
            self._schedulers.pop(name, None)
            self.state.forget_member(name)
            return
        scheduler = _scheduler(obj)
        if name in self._members and self._schedulers.get(name) == scheduler:
            return
        # New, or its scheduler changed (Reservations are watched on Koordinator members).
        old = self._members.pop(name, None)
        if old is not None:
            old.cancel()
        self._stop_pods(name)
        self._schedulers[name] = scheduler
        # The new informers list everything again: start from nothing, so nothing deleted
        # meanwhile lingers.
        self.state.reset_member(name)
        self._members[name] = asyncio.create_task(
            self._run_member(name, scheduler == KOORDINATOR), name=f"member-{name}"
        )

    async def _client(self, name: str) -> KubeClient:
        client = self._clients.get(name)
        if client is None:
            while True:
                try:
                    client = await self.connect(name)
                    break
                except MemberUnavailable as e:
                    self.state.member_health(name, False, e.problem.message)
                except Exception as e:  # anything else about this member stays with it
                    self.state.member_health(name, False, f"{name}: {e}")
                await asyncio.sleep(self.retry_seconds)
            self._clients[name] = client
        return client

    async def _run_member(self, name: str, reservations: bool) -> None:
        client = await self._client(name)
        state = self.state

        def informer(kind: tuple[str, str], on_event: Callable[[str, Obj], None]) -> Informer:
            # Each watch's health on its own: a refused Reservation watch is said on the page
            # (and backs off) without making the member unreachable.
            return Informer(
                client,
                *kind,
                on_event,
                on_health=functools.partial(state.watch_health, name, kind[1]),
                keep=identity,
                max_refused_backoff=self.refused_backoff,
                sleep=self.sleep,
            )

        informers = [
            informer(("v1", "Node"), lambda event, obj: state.node_event(name, event, obj)),
        ]
        self._pods.setdefault(name, {})
        self._watch_pods(name, self._binding_namespaces())
        if reservations:
            state.member(name).reservations = {}
            informers.append(
                informer(RESERVATION, lambda event, obj: state.reservation_event(name, event, obj))
            )
        await asyncio.gather(*(i.run() for i in informers))

    async def stop(self) -> None:
        pods = [task for tasks in self._pods.values() for task in tasks.values()]
        tasks = [*self._tasks, *self._members.values(), *pods]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
