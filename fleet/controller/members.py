"""Member clusters: one connection each, a live snapshot, health, and the MemberCluster status.

A member is connected with the kubeconfig in the Secret its MemberCluster names, validated first
(fleet.kubeconfig). Nodes and pods are listed and watched into the member's ClusterSnapshot, so
placement always sees current capacity without asking the member; the jobs fleet dispatched there
are watched too, so their status reaches the fleet as it changes. A member that cannot be reached,
or whose kubeconfig is unusable, is NotReady with the reason, and is never dropped: it comes back
by itself when it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from fleet.api import Condition
from fleet.api import constants as c
from fleet.api.conditions import set_condition
from fleet.core.errors import ObjectError
from fleet.core.inventory import node_from_k8s, pod_from_k8s
from fleet.core.kinds import KINDS
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.kube import ApiError, Informer, KubeClient, Obj, Unreachable, from_kubeconfig
from fleet.kubeconfig import KubeconfigError, kubeconfig_from_secret

log = logging.getLogger(__name__)

MEMBER_CLUSTER = (c.FLEET_API_VERSION, "MemberCluster")
_NON_TERMINAL = "status.phase!=Succeeded,status.phase!=Failed"
_MANAGED = f"{c.MANAGED_BY_LABEL}={c.MANAGED_BY_VALUE}"


@dataclasses.dataclass
class Health:
    ready: bool = False
    reason: str = "Connecting"
    message: str = "not connected yet"
    since: float = dataclasses.field(default_factory=time.monotonic)


class Member:
    """One member cluster as the controller sees it."""

    def __init__(self, name: str, labels: Mapping[str, str], fields: Mapping[str, str]) -> None:
        self.name = name
        self.snapshot = ClusterSnapshot(name, dict(labels), fields=dict(fields))
        self.client: KubeClient | None = None
        self.health = Health()
        self.version: str | None = None
        self.fingerprint = ""
        self.tasks: list[asyncio.Task[None]] = []
        self.nodes: Informer | None = None
        self.pods: Informer | None = None
        self.jobs: dict[tuple[str, str], Informer] = {}
        #: Namespaces known to exist in the member (skips a GET per dispatch).
        self.namespaces: set[str] = set()
        #: Per watched kind: (in sync, why not, since when not, ever synced).
        self._sources: dict[str, _Source] = {}
        self._probe = (False, "not probed yet")

    @property
    def ready(self) -> bool:
        return self.health.ready

    @property
    def known(self) -> bool:
        """Whether we have heard from the member since connecting (ready or not)."""
        return self.health.reason != "Connecting"

    def job(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        """The member's copy of a dispatched job, as last seen by its watch."""
        informer = self.jobs.get((api_version, kind))
        return informer.store.get(f"{namespace}/{name}") if informer else None

    def jobs_synced(self, api_version: str, kind: str) -> bool:
        informer = self.jobs.get((api_version, kind))
        return informer is not None and informer.synced.is_set()

    def totals(self) -> tuple[Resources, Resources, int]:
        """(allocatable, allocated, nodes) over the member's current nodes."""
        allocatable = Resources()
        nodes = 0
        for info in self.snapshot.nodes():
            allocatable = allocatable + info.allocatable
            nodes += 1
        allocated = Resources()
        for pod in self.snapshot.pods():
            if pod.node_name and pod.holds_resources:
                allocated = allocated + pod.requests
        return allocatable, allocated, nodes


@dataclasses.dataclass
class _Source:
    """The health of one of a member's watches (nodes, pods)."""

    ok: bool = False
    why: str = "syncing"
    failing_since: float = dataclasses.field(default_factory=time.monotonic)
    synced_once: bool = False

    def report(self, ok: bool, why: str) -> None:
        if ok:
            self.synced_once = True
        elif self.ok:
            self.failing_since = time.monotonic()
        self.ok, self.why = ok, why


HealthCallback = Callable[[str, bool], None]


class MemberRegistry:
    """Every member, kept connected and in sync; notifies the controller of what changed."""

    def __init__(
        self,
        fleet: KubeClient,
        *,
        on_capacity: Callable[[str], None],
        on_job: Callable[[str, str, Obj], None],
        on_health: HealthCallback,
        probe_interval: float = 3.0,
        status_interval: float = 10.0,
        source_grace: float = 15.0,
    ) -> None:
        self.fleet = fleet
        self.source_grace = source_grace
        self.members: dict[str, Member] = {}
        self.on_capacity = on_capacity
        self.on_job = on_job
        self.on_health = on_health
        self.probe_interval = probe_interval
        self.status_interval = status_interval
        self._status_task: asyncio.Task[None] | None = None
        #: Only the leading replica writes MemberCluster status.
        self.writes_enabled = False

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        if self._status_task is None:
            self._status_task = asyncio.create_task(self._status_loop(), name="member-status")

    async def stop(self) -> None:
        for name in list(self.members):
            await self.remove(name)
        if self._status_task:
            self._status_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._status_task
            self._status_task = None

    def get(self, name: str) -> Member | None:
        return self.members.get(name)

    def snapshots(self) -> list[ClusterSnapshot]:
        return [m.snapshot for m in self.members.values()]

    def not_ready(self) -> dict[str, str]:
        return {
            name: f"{m.health.reason}: {m.health.message}"
            for name, m in self.members.items()
            if not m.ready
        }

    # -- membership -------------------------------------------------------------------------

    async def sync(self, obj: Obj) -> None:
        """A MemberCluster was added or changed: (re)connect if its kubeconfig changed."""
        meta = obj["metadata"]
        name = meta["name"]
        if meta.get("deletionTimestamp"):
            await self.remove(name)
            return
        labels = dict(meta.get("labels") or {})
        member = self.members.get(name)
        if member is None:
            member = Member(name, labels, _fields(labels))
            self.members[name] = member
        else:
            member.snapshot.labels = labels
            member.snapshot.fields = _fields(labels)
        ref = (obj.get("spec") or {}).get("kubeconfigSecretRef") or {}
        try:
            secret = await self.fleet.get("v1", "Secret", ref.get("name", ""), ref.get("namespace"))
        except (ApiError, Unreachable) as e:
            self._set_health(member, False, c.REASON_KUBECONFIG_SECRET_MISSING, str(e))
            return
        if secret is None:
            self._set_health(
                member,
                False,
                c.REASON_KUBECONFIG_SECRET_MISSING,
                f"Secret {ref.get('namespace')}/{ref.get('name')} not found",
            )
            await self._disconnect(member)
            return
        key = ref.get("key") or "kubeconfig"
        fingerprint = hashlib.sha256(
            json.dumps([secret.get("data"), secret.get("stringData"), key], sort_keys=True).encode()
        ).hexdigest()
        if fingerprint == member.fingerprint and member.client is not None:
            return
        await self._disconnect(member)
        member.fingerprint = fingerprint
        try:
            resolved = kubeconfig_from_secret(secret, key)
            connection = from_kubeconfig(resolved.config)
        except (KubeconfigError, ValueError) as e:
            self._set_health(member, False, c.REASON_KUBECONFIG_INVALID, str(e))
            return
        member.client = KubeClient(connection, name=name)
        self._connect(member)

    async def remove(self, name: str) -> None:
        member = self.members.pop(name, None)
        if member is not None:
            await self._disconnect(member)
            self.on_health(name, False)

    async def recheck_secrets(self) -> None:
        """Pick up edited kubeconfig Secrets (they are not watched)."""
        try:
            listing = await self.fleet.list(*MEMBER_CLUSTER)
        except (ApiError, Unreachable) as e:
            log.warning("cannot list MemberClusters: %s", e)
            return
        for obj in listing["items"]:
            await self.sync({"apiVersion": MEMBER_CLUSTER[0], "kind": MEMBER_CLUSTER[1], **obj})

    def _connect(self, member: Member) -> None:
        assert member.client is not None
        client = member.client
        member._sources = {"Node": _Source(), "Pod": _Source()}

        def source_health(kind: str) -> Callable[[bool, str], None]:
            def report(ok: bool, why: str) -> None:
                member._sources[kind].report(ok, why)
                self._refresh_health(member)

            return report

        member.nodes = Informer(
            client,
            "v1",
            "Node",
            lambda t, o: self._node_event(member, t, o),
            on_health=source_health("Node"),
        )
        member.pods = Informer(
            client,
            "v1",
            "Pod",
            lambda t, o: self._pod_event(member, t, o),
            on_health=source_health("Pod"),
            field_selector=_NON_TERMINAL,
        )
        member.tasks = [
            asyncio.create_task(member.nodes.run(), name=f"{member.name}-nodes"),
            asyncio.create_task(member.pods.run(), name=f"{member.name}-pods"),
            asyncio.create_task(self._probe_loop(member), name=f"{member.name}-probe"),
            asyncio.create_task(self._watch_jobs(member), name=f"{member.name}-jobs"),
        ]

    async def _disconnect(self, member: Member) -> None:
        for task in member.tasks:
            task.cancel()
        for task in member.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        member.tasks = []
        member.jobs = {}
        member.namespaces = set()
        if member.client is not None:
            await member.client.aclose()
            member.client = None
        member.fingerprint = ""
        member.snapshot = ClusterSnapshot(
            member.name, member.snapshot.labels, fields=member.snapshot.fields
        )

    async def _watch_jobs(self, member: Member) -> None:
        """Watch every dispatchable kind the member serves (a missing CRD is retried slowly)."""
        assert member.client is not None
        client = member.client
        pending = {(k.api_version, k.kind) for k in KINDS}
        while pending:
            for api_version, kind in sorted(pending):
                try:
                    await client.resource(api_version, kind)
                except (ApiError, Unreachable):
                    continue
                informer = Informer(
                    client,
                    api_version,
                    kind,
                    functools.partial(self.on_job, member.name),
                    label_selector=_MANAGED,
                )
                member.jobs[(api_version, kind)] = informer
                member.tasks.append(
                    asyncio.create_task(informer.run(), name=f"{member.name}-{kind}")
                )
                pending.discard((api_version, kind))
            if pending:
                await asyncio.sleep(30)
                client.forget_discovery()

    # -- events into the snapshot ---------------------------------------------------------------

    def _node_event(self, member: Member, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            member.snapshot.remove_node(obj["metadata"]["name"])
        else:
            try:
                member.snapshot.upsert_node(node_from_k8s(obj))
            except ObjectError as e:
                log.warning("%s: ignoring node: %s", member.name, e)
                return
        self.on_capacity(member.name)

    def _pod_event(self, member: Member, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            member.snapshot.remove_pod(obj["metadata"]["uid"])
        else:
            try:
                member.snapshot.upsert_pod(pod_from_k8s(obj, owner_label=c.FLEET_UID_LABEL))
            except ObjectError as e:
                log.warning("%s: ignoring pod: %s", member.name, e)
                return
        self.on_capacity(member.name)

    # -- health ----------------------------------------------------------------------------------

    async def _probe_loop(self, member: Member) -> None:
        assert member.client is not None
        while True:
            try:
                version = await member.client.version()
                member.version = version.get("gitVersion")
                member._probe = (True, "")
            except (ApiError, Unreachable) as e:
                member._probe = (False, str(e))
            self._refresh_health(member)
            await asyncio.sleep(self.probe_interval)

    def _refresh_health(self, member: Member) -> None:
        """Unreachable is the probe's word; a watch that breaks after it was in sync only
        counts once it has stayed broken past `source_grace` (it relists by itself meanwhile),
        so one dropped connection never looks like a lost cluster."""
        ok, why = member._probe
        if not ok:
            self._set_health(member, False, c.REASON_CLUSTER_NOT_REACHABLE, why)
            return
        now = time.monotonic()
        for kind, source in member._sources.items():
            if not source.synced_once:
                self._set_health(member, False, c.REASON_CLUSTER_NOT_READY, f"{kind}s syncing")
                return
            if not source.ok and now - source.failing_since > self.source_grace:
                message = f"{kind}s not in sync for {now - source.failing_since:.0f}s: {source.why}"
                self._set_health(member, False, c.REASON_CLUSTER_NOT_READY, message)
                return
        self._set_health(member, True, c.REASON_CLUSTER_READY, "connected; nodes and pods in sync")

    def _set_health(self, member: Member, ready: bool, reason: str, message: str) -> None:
        changed = member.health.ready != ready
        if changed or member.health.reason != reason:
            member.health = Health(ready, reason, message[:500])
            log.info(
                "member %s: %s %s: %s",
                member.name,
                "Ready" if ready else "NotReady",
                reason,
                message,
            )
        else:
            member.health.message = message[:500]
        if changed:
            self.on_health(member.name, ready)
            self._write_status_soon()

    # -- MemberCluster status ------------------------------------------------------------------

    def _write_status_soon(self) -> None:
        if self._status_task is not None:
            asyncio.get_running_loop().call_soon(
                lambda: asyncio.ensure_future(self.write_statuses())
            )

    async def _status_loop(self) -> None:
        while True:
            await self.write_statuses()
            await asyncio.sleep(self.status_interval)

    async def write_statuses(self) -> None:
        if not self.writes_enabled:
            return
        for member in list(self.members.values()):
            try:
                await self._write_status(member)
            except (ApiError, Unreachable) as e:
                log.debug("cannot write status of MemberCluster %s: %s", member.name, e)

    async def _write_status(self, member: Member) -> None:
        current = await self.fleet.get(*MEMBER_CLUSTER, member.name)
        if current is None:
            return
        status = dict(current.get("status") or {})
        now = dt.datetime.now(dt.UTC)
        conditions = set_condition(
            [Condition.from_dict(x) for x in status.get("conditions") or []],
            c.CONDITION_READY,
            "True" if member.ready else "False",
            member.health.reason,
            member.health.message,
            now,
            observed_generation=current["metadata"].get("generation"),
        )
        desired: dict[str, Any] = {"conditions": [x.to_dict() for x in conditions]}
        if member.ready:
            allocatable, allocated, nodes = member.totals()
            desired |= {
                "kubernetesVersion": member.version,
                "nodeCount": nodes,
                "resources": {
                    "allocatable": allocatable.quantities(),
                    "allocated": allocated.quantities(),
                },
            }
        if all(status.get(k) == v for k, v in desired.items()):
            return
        desired["lastProbeTime"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        await self.fleet.patch(
            *MEMBER_CLUSTER, member.name, {"status": desired}, subresource="status"
        )


def _fields(labels: Mapping[str, str]) -> dict[str, str]:
    """Karmada's provider/region/zone cluster fields, which fleet keeps as labels."""
    return {
        field: labels[label] for field, label in c.FIELD_SELECTOR_LABELS.items() if label in labels
    }
