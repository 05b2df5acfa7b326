"""One member cluster as the controller sees it: what placement needs, its connection, health."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence

from fleet.controller.members.connection import MemberConnection
from fleet.controller.members.health import Health, Probe, SourceState
from fleet.controller.members.renewal import RenewalState
from fleet.controller.members.writer import MemberWriter
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint
from fleet.core.unscheduled import UnscheduledPods
from fleet.kube import KubeClient, Obj

#: Why a member that answers is not placeable yet (Ready=False reason Fencing, and the pending
#: reason placement gives).
FENCING_MESSAGE = (
    "fleet's objects there are being checked against the bindings (copies no job wants there "
    "are deleted first)"
)


class Member:
    """A member's placement facts (labels, fields, taints, live snapshot), its current
    connection, and its health."""

    def __init__(
        self,
        name: str,
        labels: Mapping[str, str],
        fields: Mapping[str, str],
        taints: Sequence[Taint] = (),
    ) -> None:
        self.name = name
        self.taints: tuple[Taint, ...] = tuple(taints)
        self.snapshot = ClusterSnapshot(name, dict(labels), fields=dict(fields))
        #: The pods of fleet's gangs the member's scheduler refused (from the same pod watch).
        self.unscheduled = UnscheduledPods()
        self.connection: MemberConnection | None = None
        self.health = Health()
        self.version: str | None = None
        #: The MemberCluster's metadata.generation this member was last synced from: its
        #: Ready condition's observedGeneration, so a reader knows a spec change (taints,
        #: labels, the Secret it names) has been taken in.
        self.generation: int | None = None
        #: The kubeconfig Secret's digest the connection was made from.
        self.fingerprint = ""
        #: That kubeconfig's digest without its token: a Secret of the same shape differs by its
        #: token alone, which is swapped into the live client (renewal).
        self.shape = ""
        #: The task that renews the member's bound token (a `fleet join` Secret's), if any.
        self.renewal: asyncio.Task[None] | None = None
        #: The bound token's renewal as the status tells it (None: not a bound token).
        self.token: RenewalState | None = None
        #: Whether the watch on its kubeconfig Secret's namespace works, and why not (None: not
        #: known yet, or not watched at all).
        self.secret_watch: tuple[bool, str] | None = None
        #: Namespaces known to exist in the member (skips a GET per dispatch).
        self.namespaces: set[str] = set()
        #: The last probe (answered, why not, refused); None until the first probe.
        self.probe: Probe | None = None
        #: Per watched kind (Node, Pod): in sync or why not.
        self.sources: dict[str, SourceState] = {}
        #: The MemberCluster's spec.gangScheduler, and what the member's API showed.
        self.declared_gang_scheduler: str | None = None
        self.detected_gang_scheduler: str | None = None
        #: Whether a connection's probe has reported `detected_gang_scheduler`; until then it
        #: is what the MemberCluster's status records (`fleet join` writes it).
        self.gang_probed = False
        #: spec.schedulerName: set on the pod templates of copies sent here.
        self.scheduler_name: str | None = None
        #: spec.reservation, when enabled: (ttl seconds, wait seconds).
        self.reservation: tuple[int, float] | None = None
        #: The admission policy `fleet join` installed to narrow fleet's identity there
        #: (fleet.api.guard); "" when the member serves none; None: not made by `fleet join`.
        self.guard: str | None = None
        #: The member namespace of the people's identity whose ClusterRole fleet binds in each
        #: namespace it dispatches to (fleet.api.membership.viewer_binding); None: none to bind.
        self.viewer: str | None = None
        #: The namespaces where that RoleBinding is known to exist (since this connection).
        self.viewer_bound: set[str] = set()
        #: fleet's identity namespace in the member (the kubeconfig Secret's ServiceAccount):
        #: where the guard's probe is sent.
        self.identity_namespace: str | None = None
        #: Why the guard is not in force any more, as the last probe found (None: in force, or
        #: not known to be missing). Nothing new is placed in the member meanwhile.
        self.guard_missing: str | None = None
        #: The cluster this member is (its kube-system namespace's UID): the MemberCluster's
        #: spec.id, else what its kubeconfig reached when last asked (`reached_id`); None: not
        #: known yet. MemberRegistry.by_identity finds a member by it.
        self.cluster_id: str | None = None
        #: The kube-system UID the latest connection attempt read (kept when one got no answer).
        self.reached_id: str | None = None
        #: The MemberCluster's creationTimestamp, epoch seconds: its rank among MemberClusters
        #: of the same cluster (fleet.core.identity).
        self.created: float | None = None
        #: The MemberCluster that holds this member's cluster while this one is refused as its
        #: duplicate (reason DuplicateCluster); synced again when that one lets go.
        self.duplicate_of: str | None = None
        #: Whether the collector has made this connection's cluster match the ledger since it
        #: (re)connected (every object of fleet's there that no binding wants deleted). Nothing
        #: new is placed in a member before (`MemberRegistry.not_ready`).
        self.fenced = True
        #: Writes sent to the member through its writer, per (verb, kind).
        self.writes: Counter[tuple[str, str]] = Counter()

    @property
    def gang_scheduler(self) -> str | None:
        """What copies sent here are written for: declared, else detected."""
        return self.declared_gang_scheduler or self.detected_gang_scheduler

    @property
    def ready(self) -> bool:
        return self.health.ready

    @property
    def unguarded(self) -> bool:
        """Whether the member answers but its guard was found gone: not placeable (like a
        member still fencing), while its gangs stay."""
        return bool(self.guard) and self.guard_missing is not None

    @property
    def known(self) -> bool:
        """Whether we have heard from the member since connecting (ready or not)."""
        return self.health.known

    @property
    def client(self) -> KubeClient | None:
        return self.connection.client if self.connection is not None else None

    @property
    def writer(self) -> MemberWriter:
        """The one door for writes into the member (its current connection's client)."""
        client = self.client
        if client is None:
            raise RuntimeError(f"member {self.name} is not connected: nothing can be written")
        return MemberWriter(self, client)

    def reset_snapshot(self) -> None:
        """Forget what the member held (a new connection lists it all again)."""
        self.snapshot = ClusterSnapshot(
            self.name, self.snapshot.labels, fields=self.snapshot.fields
        )
        self.unscheduled = UnscheduledPods()
        self.namespaces = set()
        self.viewer_bound = set()

    def job(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        """The member's copy of a dispatched job, as last seen by its watch."""
        return self.connection.job(api_version, kind, namespace, name) if self.connection else None

    def jobs_synced(self, api_version: str, kind: str) -> bool:
        return self.connection is not None and self.connection.jobs_synced(api_version, kind)

    def lacks(self, api_version: str, kind: str) -> bool:
        """Whether the member is known not to serve this kind (its CRD was not there when last
        looked for); False while that is not known yet."""
        missing = self.connection.missing_kinds if self.connection is not None else None
        return missing is not None and (api_version, kind) in missing

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
