"""A MemberRegistry on in-memory API servers: the fleet (MemberClusters, kubeconfig Secrets) and
one server per kubeconfig, reached through the registry's `connect` injection, so every
connection the registry makes runs its real watches and probe against a server the test steers.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

import yaml

from fleet.controller.members import MemberRegistry
from fleet.kube import Connection, KubeClient, Obj
from tests.controller.apiserver import MEMBER_KINDS, MemoryApi
from tests.controller.harness import FakeClock, node
from tests.kube.pki import Pem, inline_kubeconfig, make_pem

SECRET_NAMESPACE = "fleet-system"
FLEET_ID = "fleet-test"
#: How often each connection probes its member (real seconds: the probe loop's own sleep).
PROBE_INTERVAL = 0.02
#: How long a broken watch is tolerated before the member is NotReady (fake clock seconds).
GRACE = 15.0


class Listener:
    """The registry's listener: what the rest of the controller heard, in order."""

    def __init__(self) -> None:
        self.health: list[tuple[str, bool]] = []
        self.capacity: list[str] = []
        self.jobs: list[tuple[str, str]] = []
        self.refused: list[tuple[str, str]] = []
        #: Set by `Members`: a member that turns Ready is fenced at once, as the collector would
        #: fence a member with nothing of fleet's to delete (these tests run no collector).
        self.registry: MemberRegistry | None = None

    def capacity_changed(self, member: str) -> None:
        self.capacity.append(member)

    def job_changed(self, member: str, event: str, obj: Obj) -> None:
        self.jobs.append((member, event))

    def gang_pods_refused(self, member: str, uid: str) -> None:
        self.refused.append((member, uid))

    def health_changed(self, member: str, ready: bool) -> None:
        self.health.append((member, ready))
        found = self.registry.members.get(member) if self.registry is not None else None
        if ready and found is not None and self.registry is not None:
            self.registry.fenced(found)


def is_probe(request: Any) -> bool:
    return bool(request.url.path == "/version")


def _lists_secrets(request: Any) -> bool:
    return bool(request.method == "GET" and request.url.path.endswith("/secrets"))


class Members:
    """The fleet, member servers by URL, and a registry that connects to them."""

    def __init__(self, *, grace: float = GRACE) -> None:
        self.clock = FakeClock()
        self.fleet_api = MemoryApi(namespaces=("default", "kube-system", SECRET_NAMESPACE))
        self.servers: dict[str, MemoryApi] = {}
        self.listener = Listener()
        self._pem: Pem = make_pem()
        #: Every client the registry had made, with the server it talks to, in order.
        self.connected: list[tuple[str, KubeClient]] = []
        #: The Connection each client was made from (fleet.kubeconfig's, built as it checked).
        self.connections: list[Connection] = []
        self.registry = MemberRegistry(
            self.fleet_api.client("fleet"),
            self.listener,
            fleet_id=FLEET_ID,
            clock=self.clock,
            probe_interval=PROBE_INTERVAL,
            source_grace=grace,
            connect=self._connect,
        )
        self.listener.registry = self.registry
        # The registry's Secret watch never finishes its first list here, so every (re)sync in
        # these tests is one the test started.
        self.fleet_api.holds.append(_lists_secrets)

    def _connect(self, name: str, connection: Connection) -> KubeClient:
        server = connection.server
        self.connections.append(connection)
        client = self.servers[server].client(name, retries=1)
        self.connected.append((server, client))
        return client

    def server(self, url: str, *, nodes: int = 1) -> MemoryApi:
        """A member API server at `url` with `nodes` 4-GPU nodes."""
        api = MemoryApi(MEMBER_KINDS, server=url)
        for i in range(nodes):
            api.put(node(f"n{i}"))
        self.servers[url] = api
        return api

    def secret(self, name: str, server: str, **cluster: str) -> Obj:
        """The kubeconfig Secret for `name`, pointing at `server` (stored in the fleet), with
        `cluster` fields added to its cluster entry (`**{"tls-server-name": ...}`)."""
        config = inline_kubeconfig(self._pem, server)
        config["clusters"][0]["cluster"].update(cluster)
        text = yaml.safe_dump(config)
        return self.fleet_api.put(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-kubeconfig", "namespace": SECRET_NAMESPACE},
                "data": {"kubeconfig": base64.b64encode(text.encode()).decode()},
            }
        )

    def member_cluster(
        self, name: str, *, cluster_id: str | None = None, created: str | None = None
    ) -> Obj:
        """The MemberCluster `name`, naming its Secret; with `cluster_id` as its spec.id (what
        `fleet join` records) and `created` as its creationTimestamp, when given."""
        meta: dict[str, Any] = {"name": name}
        if created is not None:
            meta["creationTimestamp"] = created
        spec: dict[str, Any] = {"id": cluster_id} if cluster_id is not None else {}
        return self.fleet_api.put(
            {
                "apiVersion": "fleet.dev/v1alpha1",
                "kind": "MemberCluster",
                "metadata": meta,
                "spec": {
                    **spec,
                    "kubeconfigSecretRef": {
                        "namespace": SECRET_NAMESPACE,
                        "name": f"{name}-kubeconfig",
                    },
                },
            }
        )

    async def until(self, what: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until `what` holds (the connection's tasks run on real time)."""
        async with asyncio.timeout(timeout):
            while not what():
                await asyncio.sleep(0.005)

    async def stop(self) -> None:
        await self.registry.stop()
