"""The fleet controller process: kopf watches the fleet, the parts of the shell act on it.

kopf delivers the fleet's events (workloads, policies, MemberClusters, bindings) and runs the
operator's lifecycle; every handler only updates an index or enqueues a key (`triggers`), so all
decisions go through one idempotent reconcile (`reconciler`). Replicas elect a leader on a
Lease: standbys keep their member snapshots warm but reconcile nothing until they lead.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime
import functools
import logging
import os
import socket
import ssl
from collections import Counter
from typing import Any

import kopf
from aiohttp import web

from fleet.api import constants as c
from fleet.api.membership import default_fleet_id
from fleet.controller import arrivals, reserving
from fleet.controller.bindings import BindingStore, key_of_binding
from fleet.controller.clock import SYSTEM_CLOCK, Clock
from fleet.controller.collector import collect_forever
from fleet.controller.context import Shell
from fleet.controller.events import EventRecorder
from fleet.controller.keys import WorkloadKey
from fleet.controller.leader import LeaderElector, renew_deadline_of
from fleet.controller.members import Connect, MemberRegistry, connect_with_kubeconfig
from fleet.controller.metrics import Metrics
from fleet.controller.policies import PolicyIndex, explain_policy
from fleet.controller.queue.kubequeue import KubeQueue
from fleet.controller.reconciler import EXPECTED_FAILURES, Reconciler
from fleet.controller.resync import resync_forever
from fleet.controller.settings import Settings
from fleet.controller.triggers import Triggers
from fleet.controller.workqueue import WorkQueue
from fleet.core.kinds import ADAPTERS
from fleet.kube import (
    ApiError,
    Connection,
    KubeClient,
    TokenFile,
    Unreachable,
    refresh_deadline,
)

log = logging.getLogger("fleet.controller")


class Controller:
    """Everything one controller replica holds, started and stopped with kopf."""

    def __init__(
        self,
        settings: Settings,
        fleet: KubeClient,
        identity: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        connect: Connect = connect_with_kubeconfig,
    ) -> None:
        self.settings = settings
        self.identity = identity
        self.fleet = fleet
        self.metrics = Metrics()
        self.policies = PolicyIndex()
        self.events = EventRecorder(fleet, instance=identity, clock=clock)
        self.queue: WorkQueue[WorkloadKey] = WorkQueue(
            self._reconcile, workers=settings.workers, expected=EXPECTED_FAILURES
        )
        self.triggers = Triggers(self.queue)
        self.members = MemberRegistry(
            fleet,
            self.triggers,
            fleet_id=settings.fleet_id,
            clock=clock,
            probe_interval=settings.probe_interval,
            status_interval=settings.status_interval,
            guard_check_interval=settings.guard_check_interval,
            connect=connect,
            member_qps=settings.member_qps,
            member_burst=settings.member_burst,
            token_renew_before=settings.token_renew_before or None,
            events=self.events,
            metrics=self.metrics,
            secrets_namespaces=settings.secrets_namespaces,
        )
        self.kube_queue = KubeQueue(
            fleet,
            self.events,
            clock,
            settings,
            self.queue,
            bindings=self.triggers.bindings,
            workloads=self.triggers.workloads,
            metrics=self.metrics,
            members=self.members,
        )
        self.triggers.member_lost = self.kube_queue.member_lost
        self.triggers.room = self.members.room
        self.shell = Shell(
            fleet=fleet,
            members=self.members,
            policies=self.policies,
            bindings=BindingStore(fleet, self.triggers.bindings),
            triggers=self.triggers,
            queue=self.queue,
            events=self.events,
            metrics=self.metrics,
            settings=settings,
            clock=clock,
            kube_queue=self.kube_queue,
        )
        self.reconciler = Reconciler(self.shell)
        self.kube_queue.holds.unreserve = functools.partial(reserving.release_held, self.shell)
        self.metrics.request_counts = self._request_counts
        self.metrics.request_seconds = self._request_seconds
        self.leading = asyncio.Event()
        #: Set when a member turns Ready: the collector's next pass fences it at once.
        self.collect_wake = asyncio.Event()
        self.triggers.member_ready = lambda _member: self.collect_wake.set()
        self.elector = LeaderElector(
            fleet,
            namespace=settings.lease_namespace,
            name=settings.lease_name,
            identity=identity,
            lease_seconds=settings.lease_seconds,
            renew_deadline=settings.renew_deadline or None,
            on_started=self._lead,
            on_stopped=self._follow,
            clock=clock,
        )
        self._tasks: list[asyncio.Task[Any]] = []
        self._runner: web.AppRunner | None = None

    async def _reconcile(self, key: WorkloadKey) -> None:
        await self.reconciler.reconcile(key)

    def _request_counts(self) -> dict[str, Counter[tuple[str, str]]]:
        counts = {"fleet": self.fleet.requests}
        for name, member in self.members.members.items():
            if member.client is not None:
                counts[name] = member.client.requests
        return counts

    def _request_seconds(self) -> dict[str, float]:
        seconds = {"fleet": self.fleet.busy_seconds}
        for name, member in self.members.members.items():
            if member.client is not None:
                seconds[name] = member.client.busy_seconds
        return seconds

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.queue.running.clear()  # nothing happens until we lead
        self.queue.start()
        self.kube_queue.start()
        self.members.start()
        self._tasks = [asyncio.create_task(self.elector.run(), name="leader-election")]
        # Always on: it fences members that (re)connect before anything is placed there;
        # sweep_interval only spaces its periodic passes.
        self._tasks.append(
            asyncio.create_task(
                collect_forever(self.shell, self.leading, self.collect_wake), name="collector"
            )
        )
        if self.settings.resync_interval > 0:
            self._tasks.append(
                asyncio.create_task(resync_forever(self.shell, self.leading), name="resync")
            )
        if self.settings.metrics_port:
            await self._serve_metrics()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.queue.stop()
        await self.kube_queue.stop()
        await self.members.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.fleet.aclose()

    def _lead(self) -> None:
        self.metrics.leader.set(1)
        self.leading.set()
        self.members.writes_enabled = True
        self._tasks.append(asyncio.create_task(self._start_leading(), name="start-leading"))

    async def _start_leading(self) -> None:
        """Warm the binding cache with one list, know every member, then let the workers
        run. Without the members' list a reconcile could take a member not heard of yet for one
        that left (its copies forgotten, its gangs failed over): wait for it."""
        try:
            listed = await self.shell.bindings.warm()
        except (ApiError, Unreachable) as e:
            log.warning(
                "cannot list GangBindings (%s); reading them one by one, and learning the "
                "workload mix afresh",
                e,
            )
        else:
            # The mix the fragmentation score ranks by, as the arrivals built it (not lost
            # with the last leader).
            self.shell.arrivals = arrivals.rebuilt(self.shell.arrivals, listed)
            log.info("workload mix rebuilt from %d GangBindings", self.shell.arrivals.observed)
        while self.leading.is_set() and not self.members.listed:
            try:
                await self.members.warm()
            except (ApiError, Unreachable) as e:
                wait = self.members.resync_after_error
                log.warning("cannot list MemberClusters (%s); retrying in %.0f s", e, wait)
                await asyncio.sleep(wait)
        if not self.leading.is_set():
            return
        self.kube_queue.lead()  # rebuilt from its objects before it admits anything
        self.queue.running.set()
        for key in list(self.triggers.known):
            self.queue.add(key)

    def _follow(self) -> None:
        """Stop acting at once (the lease is lost, or about to be): the reconciles and queue
        passes in flight are cancelled, so nothing they have not sent yet is sent; their keys
        run again when this replica leads again."""
        self.metrics.leader.set(0)
        self.leading.clear()
        self.members.writes_enabled = False
        self.shell.bindings.complete = False
        cancelled = self.queue.halt()
        self.kube_queue.follow()
        if cancelled:
            log.warning("%s: %d reconciles in flight cancelled", self.identity, cancelled)

    # -- fleet events (kopf) --------------------------------------------------------------------

    async def policy_event(self, obj: dict[str, Any], deleted: bool) -> None:
        meta = obj.get("metadata") or {}
        if deleted:
            self.policies.remove(str(obj.get("kind")), meta.get("namespace"), meta["name"])
        else:
            report = self.policies.upsert(obj)
            if self.elector.leading:
                await explain_policy(
                    obj, report, fleet=self.fleet, events=self.events, now=self.shell.clock.now()
                )
        self.triggers.policies_changed()

    async def member_event(self, obj: dict[str, Any], deleted: bool) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        if deleted:
            await self.members.remove(name)
        else:
            await self.members.sync(obj)
        # Only a change to what placement reads wakes anything (not fleet's status writes).
        self.triggers.member_changed(obj, deleted=deleted)

    # -- metrics ----------------------------------------------------------------------------------

    async def _serve_metrics(self) -> None:
        async def metrics(_: web.Request) -> web.Response:
            return web.Response(text=self.metrics.render(), content_type="text/plain")

        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "0.0.0.0", self.settings.metrics_port)
        await site.start()


@dataclasses.dataclass(frozen=True, kw_only=True)
class FleetConnectionInfo(kopf.ConnectionInfo):
    """kopf's credentials with fleet's own SSLContext: the one the Connection verifies the
    server with (its CA, the tls-server-name it names, the client key loaded from memory).
    kopf's aiohttp session connects with it as it is (`as_ssl_context`), so kopf checks the
    server exactly as fleet's own client does and never writes a key to a temporary file."""

    ssl_context: ssl.SSLContext | None = dataclasses.field(default=None, compare=False, repr=False)

    def as_ssl_context(self) -> ssl.SSLContext:
        return self.ssl_context if self.ssl_context is not None else super().as_ssl_context()


def kopf_login(
    conn: Connection, now: datetime.datetime, rejected: str | None = None
) -> kopf.ConnectionInfo:
    """kopf's credentials: the same as fleet's own client, SSLContext and proxy included.

    The SSLContext is the Connection's own (FleetConnectionInfo): the CA, the tls-server-name,
    the client certificate and key, all in memory; kopf gets no PEM data it would write to a
    temporary file (kopf 1.45's `ConnectionInfo.as_ssl_context` does that with certificate and
    key data). A Connection without one (the system's CAs, or insecure-skip-tls-verify) leaves
    kopf to build its own with `insecure`. The kubeconfig's proxy-url is kopf's `proxy_url`.

    A token read from a file (the pod's service account) rotates: `expiration` makes kopf log in
    again, and so re-read it, at 90% of the token's lifetime (fleet.kube.refresh_deadline).

    A token from an exec plugin (a controller run outside the cluster with the user's
    kubeconfig) expires when its ExecCredential says. kopf asks again only when the token it
    holds expired or was refused (401); `rejected` is that token (the one the last login gave),
    so the plugin runs again rather than hand back the same one.
    """
    token = conn.bearer_token(rejected)
    rotates = isinstance(conn.auth, TokenFile)
    expiration = refresh_deadline(token, now) if token and rotates else conn.token_expires
    return FleetConnectionInfo(
        server=conn.server,
        ssl_context=conn.ssl_context if isinstance(conn.ssl_context, ssl.SSLContext) else None,
        token=token,
        insecure=conn.insecure,
        default_namespace=conn.default_namespace,
        proxy_url=conn.proxy,
        expiration=expiration,
    )


class KopfLogin:
    """kopf's logins with one connection. kopf logs in at start, and again only when the token
    it holds expired or a request got 401; so the token the last login gave is, at the next
    one, a token to replace (`rejected`): an exec plugin runs again rather than hand it back."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.given: str | None = None

    def login(self, now: datetime.datetime) -> kopf.ConnectionInfo:
        info = kopf_login(self.connection, now, rejected=self.given)
        self.given = info.token
        return info


def build_registry(controller: Controller, connection: Connection) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    logins = KopfLogin(connection)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return logins.login(datetime.datetime.now(datetime.UTC))

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # we post our own, meaningful events
        settings.peering.standalone = True  # leadership is ours (a Lease), see leader.py
        settings.watching.server_timeout = 300
        settings.networking.request_timeout = 60
        await controller.start()

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await controller.stop()

    def workload_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        deleted = event.get("type") == "DELETED"
        controller.triggers.workload_changed(copy.deepcopy(dict(body)), deleted=deleted)

    for kind in ADAPTERS:
        kopf.on.event(kind.api_version, kind.kind, registry=registry)(workload_event)

    # What some kind reads its gang from on the fleet (a TrainJob's runtime).
    def needed_event(body: kopf.Body, **_: Any) -> None:
        meta = body.get("metadata") or {}
        controller.triggers.needed_changed(
            str(body.get("apiVersion")), str(body.get("kind")), meta.get("namespace")
        )

    for api_version, needed_kind in sorted({n for k in ADAPTERS for n in k.needs_kinds}):
        kopf.on.event(api_version, needed_kind, registry=registry)(needed_event)

    @kopf.on.event(c.POLICY_API_VERSION, "PropagationPolicy", registry=registry)
    @kopf.on.event(c.POLICY_API_VERSION, "ClusterPropagationPolicy", registry=registry)
    async def policy_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        await controller.policy_event(dict(body), event.get("type") == "DELETED")

    @kopf.on.event(c.FLEET_API_VERSION, "GangBinding", registry=registry)
    def binding_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        obj = copy.deepcopy(dict(body))
        deleted = event.get("type") == "DELETED"
        controller.triggers.binding_changed(key_of_binding(obj), obj, deleted=deleted)

    # Kube Queue: the tree, the Queues and the units only update the queue's indexes.
    @kopf.on.event(c.ELASTIC_QUOTA_API_VERSION, "ElasticQuotaTree", registry=registry)
    def tree_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        obj = copy.deepcopy(dict(body))
        controller.kube_queue.tree_event(obj, deleted=event.get("type") == "DELETED")

    @kopf.on.event(c.QUEUE_API_VERSION, "Queue", registry=registry)
    def queue_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        obj = copy.deepcopy(dict(body))
        controller.kube_queue.queue_event(obj, deleted=event.get("type") == "DELETED")

    @kopf.on.event(c.QUEUE_API_VERSION, "QueueUnit", registry=registry)
    def unit_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        obj = copy.deepcopy(dict(body))
        controller.kube_queue.unit_event(obj, deleted=event.get("type") == "DELETED")

    # What a QueueUnit's priority and opt-out of reclaim follow.
    @kopf.on.event("scheduling.k8s.io/v1", "PriorityClass", registry=registry)
    def priority_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        obj = copy.deepcopy(dict(body))
        controller.kube_queue.priority_event(obj, deleted=event.get("type") == "DELETED")

    @kopf.on.event("v1", "Namespace", registry=registry)
    def namespace_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        obj = copy.deepcopy(dict(body))
        controller.kube_queue.namespace_event(obj, deleted=event.get("type") == "DELETED")

    @kopf.on.event(c.FLEET_API_VERSION, "MemberCluster", registry=registry)
    async def member_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        await controller.member_event(dict(body), event.get("type") == "DELETED")

    return registry


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


class StartupError(Exception):
    """The controller cannot start; the message says what to do (the CLI prints it alone)."""


async def resolve_fleet_id(fleet: KubeClient) -> str:
    """`fleet-` and the start of the fleet API server's kube-system namespace UID: stable for a
    fleet, different between fleets."""
    try:
        namespace = await fleet.get("v1", "Namespace", "kube-system")
    except (ApiError, Unreachable) as e:
        raise StartupError(
            f"cannot read Namespace kube-system to derive the fleet id ({e}); set --fleet-id"
        ) from e
    uid = str(((namespace or {}).get("metadata") or {}).get("uid") or "")
    if not uid:
        raise StartupError(
            "Namespace kube-system has no UID to derive the fleet id; set --fleet-id"
        )
    return default_fleet_id(uid)


async def run(
    settings: Settings,
    connection: Connection,
    *,
    identity: str | None = None,
    stop_flag: asyncio.Event | None = None,
    ready_flag: asyncio.Event | None = None,
) -> None:
    try:
        renew_deadline_of(settings.lease_seconds, settings.renew_deadline or None)
    except ValueError as e:
        raise StartupError(f"{e}; set --renew-deadline") from e
    fleet = KubeClient(connection, name="fleet")
    if not settings.fleet_id:
        settings = dataclasses.replace(settings, fleet_id=await resolve_fleet_id(fleet))
    log.info("fleet id %s", settings.fleet_id)
    controller = Controller(settings, fleet, identity or default_identity())
    registry = build_registry(controller, connection)
    await kopf.operator(
        registry=registry,
        clusterwide=True,
        standalone=True,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
