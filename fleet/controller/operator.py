"""The fleet controller process: kopf watches the fleet, our reconciler acts on what it sees.

kopf delivers the fleet's events (workloads, policies, MemberClusters) and runs the operator's
lifecycle; every handler only updates an index or enqueues a key, so all decisions go through
one idempotent reconcile. Replicas elect a leader on a Lease: standbys keep their member
snapshots warm but reconcile nothing until they lead.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import socket
from typing import Any

import kopf
from aiohttp import web

from fleet.api import constants as c
from fleet.controller.events import EventRecorder
from fleet.controller.leader import LeaderElector
from fleet.controller.members import MemberRegistry
from fleet.controller.metrics import Metrics
from fleet.controller.policies import PolicyIndex
from fleet.controller.reconciler import Reconciler
from fleet.controller.settings import Settings
from fleet.core.kinds import KINDS
from fleet.kube import Connection, KubeClient

log = logging.getLogger("fleet.controller")


class Controller:
    """Everything one controller replica holds, started and stopped with kopf."""

    def __init__(self, settings: Settings, connection: Connection, identity: str) -> None:
        self.settings = settings
        self.connection = connection
        self.identity = identity
        self.fleet = KubeClient(connection, name="fleet")
        self.metrics = Metrics()
        self.policies = PolicyIndex()
        self.events = EventRecorder(self.fleet, instance=identity)
        self.members = MemberRegistry(
            self.fleet,
            on_capacity=self._capacity_changed,
            on_job=lambda member, event, obj: self.reconciler.member_job_changed(
                member, event, obj
            ),
            on_health=lambda member, ready: self.reconciler.member_health_changed(member, ready),
            probe_interval=settings.probe_interval,
            status_interval=settings.status_interval,
        )
        self.reconciler = Reconciler(
            self.fleet, self.members, self.policies, settings, self.events, self.metrics
        )
        self.elector = LeaderElector(
            self.fleet,
            namespace=settings.lease_namespace,
            name=settings.lease_name,
            identity=identity,
            lease_seconds=settings.lease_seconds,
            on_started=self._lead,
            on_stopped=self._follow,
        )
        self._tasks: list[asyncio.Task[Any]] = []
        self._capacity_scheduled = False
        self._runner: web.AppRunner | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.reconciler.queue.paused.clear()  # nothing happens until we lead
        self.reconciler.queue.start()
        self.members.start()
        self._tasks = [
            asyncio.create_task(self.elector.run(), name="leader-election"),
            asyncio.create_task(self._recheck_secrets(), name="secret-recheck"),
        ]
        if self.settings.metrics_port:
            await self._serve_metrics()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.reconciler.queue.stop()
        await self.members.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.fleet.aclose()

    def _lead(self) -> None:
        self.metrics.leader.set(1)
        self.members.writes_enabled = True
        self.reconciler.queue.paused.set()
        for key in list(self.reconciler.known):
            self.reconciler.queue.add(key)

    def _follow(self) -> None:
        self.metrics.leader.set(0)
        self.members.writes_enabled = False
        self.reconciler.queue.paused.clear()

    def _capacity_changed(self, _member: str) -> None:
        """Coalesce a burst of pod/node events into one retry of the waiting jobs."""
        if self._capacity_scheduled or not self.reconciler.pending:
            return
        self._capacity_scheduled = True

        def fire() -> None:
            self._capacity_scheduled = False
            self.reconciler.retry_pending()

        asyncio.get_running_loop().call_later(0.2, fire)

    async def _recheck_secrets(self) -> None:
        while True:
            await asyncio.sleep(self.settings.secret_interval)
            await self.members.recheck_secrets()

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


def build_registry(controller: Controller) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    conn = controller.connection

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        token = conn.token
        return kopf.ConnectionInfo(
            server=conn.server,
            ca_path=conn.ca_path,
            certificate_path=conn.cert_path,
            private_key_path=conn.key_path,
            token=token,
            insecure=conn.ssl_context is False,
            default_namespace=conn.default_namespace,
        )

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
        controller.reconciler.workload_changed(copy.deepcopy(dict(body)), deleted=deleted)

    for kind in KINDS:
        kopf.on.event(kind.api_version, kind.kind, registry=registry)(workload_event)

    @kopf.on.event(c.POLICY_API_VERSION, "PropagationPolicy", registry=registry)
    @kopf.on.event(c.POLICY_API_VERSION, "ClusterPropagationPolicy", registry=registry)
    async def policy_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        obj = dict(body)
        if event.get("type") == "DELETED":
            meta = obj.get("metadata") or {}
            controller.policies.remove(str(obj.get("kind")), meta.get("namespace"), meta["name"])
        else:
            problems = controller.policies.upsert(obj)
            if problems and controller.elector.leading:
                await controller.events.record(
                    obj, "InvalidPolicy", "; ".join(problems), warning=True
                )
        controller.reconciler.policies_changed()

    @kopf.on.event(c.FLEET_API_VERSION, "GangBinding", registry=registry)
    def binding_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        deleted = event.get("type") == "DELETED"
        controller.reconciler.binding_changed(copy.deepcopy(dict(body)), deleted=deleted)

    @kopf.on.event(c.FLEET_API_VERSION, "MemberCluster", registry=registry)
    async def member_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        obj = dict(body)
        if event.get("type") == "DELETED":
            await controller.members.remove(obj["metadata"]["name"])
        else:
            await controller.members.sync(obj)
        controller.reconciler.retry_pending()

    return registry


def default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


async def run(
    settings: Settings,
    connection: Connection,
    *,
    identity: str | None = None,
    stop_flag: asyncio.Event | None = None,
    ready_flag: asyncio.Event | None = None,
) -> None:
    controller = Controller(settings, connection, identity or default_identity())
    registry = build_registry(controller)
    await kopf.operator(
        registry=registry,
        clusterwide=True,
        standalone=True,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
