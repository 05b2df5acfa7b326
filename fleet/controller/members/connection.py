"""One connection to a member cluster: its client and every task that reads through it.

A member's connection is replaced whenever its kubeconfig Secret changes. The registry closes the
old connection before it opens the new one, under the member's lock. `close` first marks the
connection dead, so an event one of its tasks already produced can no longer reach the member,
then cancels and awaits every task, then closes the client. Without that, a superseded
connection's watches kept reporting into the member and flipped a Ready member to NotReady,
which is the failover trigger.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Protocol

from fleet.api import constants as c
from fleet.api.access import job_kinds
from fleet.kube import REFUSED, ApiError, Informer, KubeClient, Obj, Unreachable, identity

log = logging.getLogger(__name__)

#: The kinds that tell which gang scheduler a member runs, most specific first: Koordinator's
#: Reservation, Volcano's PodGroup, scheduler-plugins' PodGroup.
GANG_SCHEDULER_KINDS = (
    ("scheduling.koordinator.sh/v1alpha1", "Reservation", "Koordinator"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup", "Volcano"),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup", "Coscheduling"),
    # Last: an API server with GenericWorkload on serves it whichever scheduler runs, so a gang
    # scheduler installed beside it (its own CRD) says more.
    ("scheduling.k8s.io/v1beta1", "PodGroup", "Kubernetes"),
)


def gang_scheduler_of(served: Collection[tuple[str, str]]) -> str | None:
    """The gang scheduler a member runs, from the (apiVersion, kind) of `GANG_SCHEDULER_KINDS`
    it serves: the most specific one. The one rule; the controller (every connection) and
    `fleet join` (so the MemberCluster names it from the start) both ask it."""
    for api_version, kind, scheduler in GANG_SCHEDULER_KINDS:
        if (api_version, kind) in served:
            return scheduler
    return None


#: Every kind fleet dispatches, as (apiVersion, kind): the same list its member role permits.
JOB_KINDS = job_kinds()
#: Pods that hold resources: finished ones free their node and are not watched.
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def managed_selector(fleet_id: str) -> str:
    """The label selector of the jobs this fleet dispatched (another fleet's are not ours)."""
    return f"{c.MANAGED_BY_LABEL}={fleet_id}"


class ConnectionEvents(Protocol):
    """What a connection reports to its member."""

    def node_event(self, event: str, obj: Obj) -> None: ...

    def pod_event(self, event: str, obj: Obj) -> None: ...

    def job_event(self, event: str, obj: Obj) -> None: ...

    def source_health(self, source: str, ok: bool, why: str, refused: bool) -> None: ...

    def detected(self, gang_scheduler: str | None) -> None: ...

    def kinds_found(self) -> None: ...

    def probed(self, ok: bool, why: str, version: str | None, refused: bool) -> None: ...


class MemberConnection:
    """The client of one member and the watches and probe that read through it."""

    def __init__(
        self,
        member: str,
        client: KubeClient,
        events: ConnectionEvents,
        *,
        fleet_id: str,
        probe_interval: float,
        crd_retry: float = 30.0,
        job_kinds: Iterable[tuple[str, str]] = JOB_KINDS,
        guard_check: Callable[[], Awaitable[None]] | None = None,
        guard_interval: float = 60.0,
        guard_check_first: bool = False,
    ) -> None:
        self.member = member
        self.client = client
        self._events = events
        self._fleet_id = fleet_id
        self._probe_interval = probe_interval
        self._crd_retry = crd_retry
        self._job_kinds = tuple(job_kinds)
        #: The dispatchable kinds the member did not serve when last looked for (None until
        #: every kind has been looked for once).
        self.missing_kinds: set[tuple[str, str]] | None = None
        #: False once closed: nothing this connection produces reaches the member any more.
        self.alive = True
        self.tasks: list[asyncio.Task[None]] = []
        self.jobs: dict[tuple[str, str], Informer] = {}
        #: When a watch last brought an event (the event loop's clock), and what the last probe
        #: that answered said the member's version is.
        self._heard_at = float("-inf")
        self._version: str | None = None
        #: Probes sent (a member whose watches speak is not asked again, see `_probe_loop`).
        self.probes = 0
        #: Asks the member whether its guard is in force (the registry's, through the member's
        #: writer), every `guard_interval`; the first time at once with `guard_check_first`.
        self._guard_check = guard_check
        self._guard_interval = guard_interval
        self._guard_check_first = guard_check_first

    # -- reports, dropped once the connection is closed ----------------------------------------

    def _guard(self, report: Callable[..., None]) -> Callable[..., None]:
        def guarded(*args: object) -> None:
            if self.alive:
                report(*args)

        return guarded

    def _heard(self, report: Callable[..., None]) -> Callable[..., None]:
        """A watch's event report that also notes the member just answered."""
        guarded = self._guard(report)

        def heard(*args: object) -> None:
            self._heard_at = asyncio.get_running_loop().time()
            guarded(*args)

        return heard

    def _source(self, source: str, informer: Informer) -> Callable[[bool, str], None]:
        """A watch's health report, told whether its failure is a refusal of fleet's
        credentials (the member answered) or not."""
        report = self._guard(self._events.source_health)
        return lambda ok, why: report(source, ok, why, informer.refused)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        nodes = Informer(
            self.client,
            "v1",
            "Node",
            self._heard(self._events.node_event),
            keep=identity,  # the snapshot holds what placement needs; not whole Nodes
        )
        pods = Informer(
            self.client,
            "v1",
            "Pod",
            self._heard(self._events.pod_event),
            field_selector=NON_TERMINAL_PODS,
            keep=identity,  # the snapshot holds what placement needs; not whole Pods
        )
        nodes.on_health = self._source("Node", nodes)
        pods.on_health = self._source("Pod", pods)
        name = self.member
        self.tasks = [
            asyncio.create_task(nodes.run(), name=f"member-{name}-nodes"),
            asyncio.create_task(pods.run(), name=f"member-{name}-pods"),
            asyncio.create_task(self._probe_loop(), name=f"member-{name}-probe"),
            asyncio.create_task(self._watch_jobs(), name=f"member-{name}-jobs"),
            asyncio.create_task(self._detect_gang_scheduler(), name=f"member-{name}-gang"),
        ]
        if self._guard_check is not None:
            self.tasks.append(asyncio.create_task(self._guard_loop(), name=f"member-{name}-guard"))

    async def close(self) -> None:
        self.alive = False
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.tasks = []
        self.jobs = {}
        await self.client.aclose()

    # -- the member's dispatched jobs ------------------------------------------------------------

    def job(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        informer = self.jobs.get((api_version, kind))
        return informer.store.get(f"{namespace}/{name}") if informer else None

    def jobs_synced(self, api_version: str, kind: str) -> bool:
        informer = self.jobs.get((api_version, kind))
        return informer is not None and informer.synced.is_set()

    async def _detect_gang_scheduler(self) -> None:
        """Which gang scheduler the member runs, from the kinds it serves (once per connection;
        a MemberCluster's spec.gangScheduler, when set, wins over this)."""
        report = self._guard(self._events.detected)
        served = set()
        for api_version, kind, _ in GANG_SCHEDULER_KINDS:
            try:
                await self.client.resource(api_version, kind)
            except ApiError:
                continue
            except Unreachable:
                return  # the probe reports it; detection runs again with the next connection
            served.add((api_version, kind))
            break  # the most specific one served decides: no need to ask for the others
        report(gang_scheduler_of(served))

    async def _watch_jobs(self) -> None:
        """Watch every dispatchable kind the member serves (a missing CRD is retried slowly)."""
        pending = set(self._job_kinds)
        report = self._heard(self._events.job_event)
        while pending:
            for api_version, kind in sorted(pending):
                try:
                    await self.client.resource(api_version, kind)
                except (ApiError, Unreachable):
                    continue
                informer = Informer(
                    self.client,
                    api_version,
                    kind,
                    report,
                    label_selector=managed_selector(self._fleet_id),
                )
                self.jobs[(api_version, kind)] = informer
                self.tasks.append(
                    asyncio.create_task(informer.run(), name=f"member-{self.member}-{kind}")
                )
                pending.discard((api_version, kind))
            before, self.missing_kinds = self.missing_kinds, set(pending)
            if before is None or before - self.missing_kinds:
                # Every kind looked for once (gangs judged before that are judged again, now
                # knowing which kinds the member lacks), or a CRD installed since (gangs held for
                # want of the kind may go there now).
                self._guard(self._events.kinds_found)()
            if pending:
                await asyncio.sleep(self._crd_retry)  # a CRD installed later is found then

    # -- the guard ------------------------------------------------------------------------------

    async def _guard_loop(self) -> None:
        """Ask whether the member's guard is in force, every guard interval, for as long as the
        connection lives (the check reports to the member itself; a closed connection's task
        is cancelled first)."""
        assert self._guard_check is not None
        if not self._guard_check_first:
            await asyncio.sleep(self._guard_interval)
        while True:
            if self.alive:
                await self._guard_check()
            await asyncio.sleep(self._guard_interval)

    # -- reachability ----------------------------------------------------------------------------

    async def _probe_loop(self) -> None:
        """Ask the member its version every probe interval, unless one of its watches brought an
        event within the interval: that was an answer too, so the probe is not sent (a busy
        member, as in a burst of dispatches, costs no probes; a silent or lost one is asked
        as before, so losing it is noticed within one more interval at most)."""
        report = self._guard(self._events.probed)
        loop = asyncio.get_running_loop()
        while True:
            if self._version is not None and loop.time() - self._heard_at < self._probe_interval:
                report(True, "", self._version, False)
            else:
                try:
                    self.probes += 1
                    version = await self.client.version()
                    self._version = str(version.get("gitVersion") or "")
                    report(True, "", version.get("gitVersion"), False)
                except ApiError as e:
                    # It answered: a 401/403 is fleet's credentials refused, not a lost member.
                    report(False, str(e), None, e.status in REFUSED)
                except Unreachable as e:
                    report(False, str(e), None, False)
            await asyncio.sleep(self._probe_interval)
