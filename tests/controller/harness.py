"""A controller shell wired as `operator.Controller` wires it, on in-memory API servers and a
fake clock: the fleet API server, member clusters with live snapshots, and the event routing
kopf and the member watches would do. Tests drive `Reconciler.reconcile` directly; the work
queue is never started, so its contents are what the controller would do next.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

from fleet.api import binding_name, cluster_fields
from fleet.api import constants as c
from fleet.controller import reserving
from fleet.controller.bindings import BindingStore, key_of_binding
from fleet.controller.context import Shell
from fleet.controller.events import EventRecorder
from fleet.controller.keys import WorkloadKey
from fleet.controller.members import Member, MemberRegistry
from fleet.controller.members.connection import MemberConnection
from fleet.controller.members.feed import apply_node_event
from fleet.controller.members.health import Health
from fleet.controller.members.registry import _MemberEvents
from fleet.controller.metrics import Metrics
from fleet.controller.policies import PolicyIndex
from fleet.controller.queue.kubequeue import KubeQueue
from fleet.controller.reconciler import EXPECTED_FAILURES, Reconciler
from fleet.controller.settings import Settings
from fleet.controller.triggers import Triggers
from fleet.controller.workqueue import WorkQueue
from fleet.core.kinds import adapter_for
from fleet.core.taints import Taint
from fleet.kube import Connection, Informer, KubeClient, Obj, object_key
from tests.controller.apiserver import MEMBER_KINDS, MemoryApi, status

FLEET_ID = "fleet-test"
NAMESPACE = "team-a"
PYTORCH = ("kubeflow.org/v1", "PyTorchJob")
BINDING = (c.FLEET_API_VERSION, "GangBinding")


class FakeClock:
    """The controller's `Clock`, moved by the test."""

    def __init__(self, now: float = 1_750_000_000.0) -> None:
        self._now = now
        self._monotonic = 1_000.0

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._monotonic += seconds


class RecordingQueue(WorkQueue[WorkloadKey]):
    """The controller's work queue, never started: it records what it is asked to run."""

    def __init__(self) -> None:
        super().__init__(self._never, workers=1, expected=EXPECTED_FAILURES)
        #: Every key added, in order (a key added later by `add_after` is added when due).
        self.added: list[WorkloadKey] = []
        #: Every (key, delay) scheduled for later.
        self.later: list[tuple[WorkloadKey, float]] = []

    async def _never(self, key: WorkloadKey) -> None:
        raise AssertionError(f"the work queue runs nothing in these tests ({key})")

    def add(self, key: WorkloadKey) -> None:
        self.added.append(key)
        super().add(key)

    def add_after(self, key: WorkloadKey, delay: float) -> None:
        self.later.append((key, delay))
        super().add_after(key, delay)


class QuietReports:
    """A connection's reports nobody listens to (reconciler tests fill the member directly)."""

    def node_event(self, event: str, obj: Obj) -> None: ...

    def pod_event(self, event: str, obj: Obj) -> None: ...

    def job_event(self, event: str, obj: Obj) -> None: ...

    def source_health(self, source: str, ok: bool, why: str, refused: bool) -> None: ...

    def kinds_found(self) -> None: ...

    def probed(self, ok: bool, why: str, version: str | None, refused: bool) -> None: ...


def node(
    name: str, *, gpus: int = 4, cpu: str = "32", labels: Mapping[str, str] | None = None
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {
            "allocatable": {
                "cpu": cpu,
                "memory": "256Gi",
                "nvidia.com/gpu": str(gpus),
                "pods": "110",
            }
        },
    }


def conditions(obj: Obj | None) -> dict[str, Obj]:
    """An object's conditions by type."""
    return {x["type"]: x for x in ((obj or {}).get("status") or {}).get("conditions") or []}


@dataclasses.dataclass
class FakeMember:
    """One member cluster: its API server, and the controller's `Member` for it."""

    api: MemoryApi
    member: Member
    jobs: Informer
    #: The kinds the member's job watches follow (`add_member(kinds=...)`).
    watched: tuple[tuple[str, str], ...] = (PYTORCH,)
    #: While it refuses fleet's credentials (`refuse`): what it answers every request with.
    refusal: Callable[[httpx.Request], httpx.Response | None] | None = None

    @property
    def name(self) -> str:
        return self.member.name

    def copy(self, name: str, namespace: str = NAMESPACE) -> Obj | None:
        """The member copy of a PyTorchJob, as stored in the member."""
        return self.api.get(*PYTORCH, name, namespace)

    def set_job_state(self, name: str, condition: str, namespace: str = NAMESPACE) -> None:
        """The member's training operator reports the copy `condition` (Running, Failed...)."""
        self.api.merge(
            *PYTORCH,
            name,
            namespace,
            {"status": {"conditions": [{"type": condition, "status": "True"}]}},
        )

    def object(self, kind: tuple[str, str], name: str, namespace: str = NAMESPACE) -> Obj | None:
        """The member copy of a job of any kind, as stored in the member."""
        return self.api.get(*kind, name, namespace)

    def set_status(
        self, kind: tuple[str, str], name: str, status: Obj, namespace: str = NAMESPACE
    ) -> None:
        """The member's operator writes the copy's status (any kind)."""
        self.api.merge(*kind, name, namespace, {"status": status})

    def set_ready(self, ready: bool, since: float = 0.0) -> None:
        """The member's health verdict, as the registry would reach it (at monotonic `since`)."""
        self.member.health = (
            Health(True, c.REASON_CLUSTER_READY, "connected", since)
            if ready
            else Health(False, c.REASON_CLUSTER_NOT_REACHABLE, "connection refused", since)
        )
        self.api.reachable = ready
        self._stop_refusing()

    def refuse(self, reason: str = c.REASON_CREDENTIALS_REFUSED, since: float = 0.0) -> None:
        """The member is up but refuses fleet's credentials (every request: 401), and its
        health verdict says `reason`, as the registry would reach it (at monotonic `since`)."""
        self.member.health = Health(False, reason, "GET /version: 401 Unauthorized", since)
        self.api.reachable = True
        self._stop_refusing()
        self.refusal = lambda _request: status(401, "Unauthorized", "Unauthorized")
        self.api.interceptors.append(self.refusal)

    def _stop_refusing(self) -> None:
        if self.refusal is not None:
            self.api.interceptors.remove(self.refusal)
            self.refusal = None

    def add_node(self, name: str, **kw: Any) -> None:
        apply_node_event(self.member.snapshot, "ADDED", node(name, **kw))


class World:
    """The shell, the fleet API server, and the members."""

    def __init__(self, *, settings: Settings | None = None) -> None:
        self.clock = FakeClock()
        self.fleet_api = MemoryApi(namespaces=("default", "kube-system", NAMESPACE))
        self.fleet = self.fleet_api.client("fleet")
        self.settings = settings or Settings(fleet_id=FLEET_ID)
        self.reconciled: list[WorkloadKey] = []
        self.queue = RecordingQueue()
        self.triggers = Triggers(self.queue)
        self.registry = MemberRegistry(
            self.fleet,
            self.triggers,
            fleet_id=self.settings.fleet_id,
            clock=self.clock,
            connect=self._no_connect,
        )
        self.registry.listed = True  # as when the workers run: every MemberCluster listed
        self.policies = PolicyIndex()
        self.metrics = Metrics()
        self.events_recorder = EventRecorder(self.fleet, instance="test", clock=self.clock)
        self.kube_queue = self.new_kube_queue()
        self.triggers.member_lost = self.kube_queue.member_lost
        self.triggers.room = self.registry.room
        self.shell = Shell(
            fleet=self.fleet,
            members=self.registry,
            policies=self.policies,
            bindings=BindingStore(self.fleet, self.triggers.bindings),
            triggers=self.triggers,
            queue=self.queue,
            events=self.events_recorder,
            metrics=self.metrics,
            settings=self.settings,
            clock=self.clock,
            kube_queue=self.kube_queue,
        )
        self.reconciler = Reconciler(self.shell)
        self.kube_queue.holds.unreserve = functools.partial(reserving.release_held, self.shell)
        self.members: dict[str, FakeMember] = {}
        self.fleet_api.watchers.append(self._fleet_event)

    def _no_connect(self, name: str, connection: Connection) -> KubeClient:
        raise AssertionError(f"reconciler tests build members directly ({name})")

    # -- what kopf would deliver -------------------------------------------------------------------

    def _fleet_event(self, event: str, obj: Obj) -> None:
        deleted = event == "DELETED"
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        if adapter_for(api_version, kind) is not None:
            self.triggers.workload_changed(obj, deleted=deleted)
        elif (api_version, kind) == BINDING:
            self.triggers.binding_changed(key_of_binding(obj), obj, deleted=deleted)
        elif kind == "ElasticQuotaTree":
            self.kube_queue.tree_event(obj, deleted=deleted)
        elif kind == "Queue":
            self.kube_queue.queue_event(obj, deleted=deleted)
        elif kind == "QueueUnit":
            self.kube_queue.unit_event(obj, deleted=deleted)
        elif kind == "PriorityClass":
            self.kube_queue.priority_event(obj, deleted=deleted)
        elif (api_version, kind) == ("v1", "Namespace"):
            self.kube_queue.namespace_event(obj, deleted=deleted)
        elif api_version == c.POLICY_API_VERSION:
            meta = obj["metadata"]
            if deleted:
                self.policies.remove(kind, meta.get("namespace"), meta["name"])
            else:
                report = self.policies.upsert(obj)
                assert not report.problems, report.problems
            self.triggers.policies_changed()

    # -- members -----------------------------------------------------------------------------------

    def add_member(
        self,
        name: str,
        *,
        gpus: int = 4,
        nodes: int = 1,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Taint] = (),
        kinds: Iterable[tuple[str, str]] = (PYTORCH,),
        api: MemoryApi | None = None,
        cluster_id: str | None = None,
    ) -> FakeMember:
        """A Ready member with `nodes` nodes of `gpus` GPUs each, its jobs (of `kinds`) watched;
        `api`: the cluster it reaches (a new one by default), `cluster_id` its identity (the
        kube-system UID join records; `uid-<name>` by default)."""
        fresh = api is None
        api = api or MemoryApi(MEMBER_KINDS, server=f"https://{name}.test")
        client = api.client(name)
        member = Member(name, dict(labels or {}), cluster_fields(dict(labels or {})), tuple(taints))
        member.cluster_id = cluster_id or f"uid-{name}"
        connection = MemberConnection(
            name, client, QuietReports(), fleet_id=self.settings.fleet_id, probe_interval=3600
        )
        watched = tuple(kinds)
        for kind in watched:
            informer = Informer(client, *kind, lambda _e, _o: None)
            informer.synced.set()
            connection.jobs[kind] = informer
        connection.missing_kinds = set()  # every kind looked for (the watches above)
        jobs = connection.jobs[watched[0]]
        member.connection = connection
        fake = FakeMember(api, member, jobs, watched)
        fake.set_ready(True)
        for i in range(nodes if fresh else 0):
            fake.add_node(f"{name}-n{i}", gpus=gpus)
        for obj in api.objects.values() if not fresh else ():
            key = (obj.get("apiVersion"), obj.get("kind"))
            if key in watched:
                connection.jobs[key].store[object_key(obj)] = obj  # type: ignore[index]
        api.watchers.append(self._member_event(fake))
        self.registry.members[name] = member
        self.members[name] = fake
        return fake

    def _member_event(self, fake: FakeMember) -> Callable[[str, Obj], None]:
        """What the member's job watch does: the informer's store, then the trigger."""

        def deliver(event: str, obj: Obj) -> None:
            kind = (obj.get("apiVersion"), obj.get("kind"))
            if kind not in fake.watched:
                return
            connection = fake.member.connection
            assert connection is not None
            store = connection.jobs[kind].store  # type: ignore[index]
            if event == "DELETED":
                store.pop(object_key(obj), None)
            else:
                store[object_key(obj)] = obj
            self.triggers.job_changed(fake.name, event, obj)

        return deliver

    def pod_event(self, fake: FakeMember, event: str, pod: Obj) -> None:
        """What the member's pod watch reports, through the registry's handler of it (the
        snapshot, the refused pods of fleet's gangs, and the listener)."""
        _MemberEvents(self.registry, fake.member).pod_event(event, pod)

    def rejoin(self, old: FakeMember, name: str) -> FakeMember:
        """The cluster behind `old` joined again as MemberCluster `name` (same identity), after
        `old`'s MemberCluster was deleted."""
        self.registry.members.pop(old.name, None)
        fake = self.add_member(
            name, api=old.api, cluster_id=old.member.cluster_id, kinds=old.watched
        )
        fake.member.fenced = False  # as the registry connects it: the collector looks first
        return fake

    # -- the fleet's objects -----------------------------------------------------------------------

    def apply_policy(self, policy: Obj) -> Obj:
        return self.fleet_api.put(copy.deepcopy(policy))

    def submit(self, job: Obj) -> WorkloadKey:
        job = copy.deepcopy(job)
        job["metadata"].setdefault("namespace", NAMESPACE)
        stored = self.fleet_api.put(job)
        return WorkloadKey.of(stored)

    def workload(self, key: WorkloadKey) -> Obj | None:
        return self.fleet_api.get(key.api_version, key.kind, key.name, key.namespace)

    def binding(self, key: WorkloadKey) -> Obj | None:
        return self.fleet_api.get(*BINDING, binding_name(key.kind, key.name), key.namespace)

    def binding_writes(self, key: WorkloadKey) -> list[Obj]:
        """Every status the binding was written with, in order (PATCH bodies to /status)."""
        path = f"/gangbindings/{binding_name(key.kind, key.name)}/status"
        return [
            json.loads(r.content)["status"]
            for r in self.fleet_api.requests
            if r.method == "PATCH" and r.url.path.endswith(path)
        ]

    def new_kube_queue(self) -> KubeQueue:
        """The queue as a (re)started controller makes it over this world's API servers."""
        return KubeQueue(
            self.fleet,
            self.events_recorder,
            self.clock,
            self.settings,
            self.queue,
            bindings=self.triggers.bindings,
            workloads=self.triggers.workloads,
            metrics=self.metrics,
            members=self.registry,
        )

    def events(self, reason: str, key: WorkloadKey) -> list[Obj]:
        return self.fleet_api.events(reason, about=key.name)

    async def delete(self, key: WorkloadKey) -> None:
        """`kubectl delete`: the API server marks it (fleet's finalizer holds it)."""
        await self.fleet.delete(key.api_version, key.kind, key.name, key.namespace)

    async def reconcile(self, key: WorkloadKey) -> None:
        """One reconcile, as a worker would run it for a key taken off the queue."""
        await self.reconciler.reconcile(key)

    async def until_queued(self, key: WorkloadKey, *, after: int, timeout: float = 5.0) -> None:
        """Wait until `key` is put on the work queue after the `after`-th addition."""
        async with asyncio.timeout(timeout):
            while key not in self.queue.added[after:]:
                await asyncio.sleep(0.01)
