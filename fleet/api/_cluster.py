"""MemberCluster: a member Kubernetes cluster fleet can dispatch to (Karmada calls it Cluster)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleet.api._meta import Condition, CrdInfo, KubeModel, KubeResource, PrinterColumn, Taint
from fleet.api._types import NonNegInt32, PosInt32, Quantity, ResourceList, Time
from fleet.api.constants import API_VERSION, CONDITION_READY, FLEET_API_VERSION, FLEET_GROUP

__all__ = [
    "ClusterResources",
    "GangScheduler",
    "KubeconfigSecretRef",
    "MemberCluster",
    "MemberClusterSpec",
    "MemberClusterStatus",
    "ReservationSettings",
    "TokenRenewalStatus",
]


class KubeconfigSecretRef(KubeModel):
    """Where the member's kubeconfig is kept; fleet validates it before it connects."""

    namespace: str = Field(min_length=1)
    """Namespace of the Secret."""
    name: str = Field(min_length=1)
    """Name of the Secret."""
    key: str = Field(default="kubeconfig", min_length=1)
    """Key in the Secret's data holding the kubeconfig."""


GangScheduler = Literal["Coscheduling", "Koordinator", "Volcano", "Kubernetes"]
"""Which gang scheduler a member runs: what its copies' gang is written in."""


class ReservationSettings(KubeModel):
    """Reservation-backed placement in a Koordinator member (ACK's `enableReservation`)."""

    enabled: bool = False
    """Reserve the member's capacity for a gang (one Reservation per pod) before dispatching it."""
    ttl_seconds: PosInt32 = 600
    """How long Reservations the gang never consumes live (Koordinator's spec.ttl)."""
    wait_seconds: PosInt32 = 60
    """How long fleet waits for every Reservation to be Available before it tries another
    member."""


class MemberClusterSpec(KubeModel):
    """How to reach the cluster and what may run there."""

    id: str | None = Field(default=None, min_length=1)
    """The member's cluster id: its kube-system namespace's UID (Karmada's Cluster spec.id), as
    `fleet join` found it. The controller refuses a kubeconfig that reaches another cluster,
    and `fleet join`/`unjoin` refuse to act on another cluster under this name."""
    kubeconfig_secret_ref: KubeconfigSecretRef
    """Secret holding a kubeconfig with inline credentials (no exec plugins, no file paths)."""
    taints: list[Taint] | None = None
    """Keeps workloads off unless their policy's clusterTolerations tolerate the taint."""
    gang_scheduler: GangScheduler | None = None
    """The member's gang scheduler: Coscheduling (scheduler-plugins; the training operator makes
    a PodGroup from minAvailable), Koordinator (the seeds' pod-group labels), Volcano, or
    Kubernetes (its own Workload API: fleet writes a scheduling.k8s.io/v1beta1 PodGroup with the
    gang's minCount, and its topology when the gang requires one domain). Absent: detected
    from the kinds the member serves (status.gangScheduler)."""
    scheduler_name: str | None = Field(default=None, min_length=1)
    """schedulerName set on the pod templates of copies sent here (a user's own is kept);
    absent leaves it to the member's default scheduler."""
    reservation: ReservationSettings | None = None
    """Reservation-backed placement (Koordinator members only)."""


class ClusterResources(KubeModel):
    """Resource totals over the cluster's schedulable nodes."""

    allocatable: ResourceList | None = None
    """Sum of the nodes' allocatable resources (cpu, memory, nvidia.com/gpu, ...)."""
    allocated: ResourceList | None = None
    """Sum of the requests of the pods bound to those nodes."""


class TokenRenewalStatus(KubeModel):
    """The renewal of the bound token `fleet join` stored (absent for a long-lived token); the
    TokenRenewed condition says whether the last attempt succeeded, and why not."""

    last_renewal_time: Time | None = None
    """When the token in use was issued: the last successful renewal (or the join)."""
    expiration_time: Time | None = None
    """When the token in use expires: the member stays Ready until then, renewed or not."""
    next_attempt_time: Time | None = None
    """When the controller next tries to renew it."""
    consecutive_failures: NonNegInt32 | None = None
    """Failed attempts since the last success."""


class MemberClusterStatus(KubeModel):
    """What the last probe of the cluster found."""

    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Ready (with reason and message); TokenRenewed for a bound token."""
    kubernetes_version: str | None = None
    """The API server's gitVersion."""
    node_count: NonNegInt32 | None = None
    """Number of nodes."""
    resources: ClusterResources | None = None
    """Allocatable and allocated resources."""
    gang_scheduler: GangScheduler | None = None
    """The gang scheduler fleet writes copies for: spec.gangScheduler, else detected."""
    last_probe_time: Time | None = None
    """When fleet last probed the cluster."""
    token_renewal: TokenRenewalStatus | None = None
    """The bound token's renewal (absent for other credentials)."""


class MemberCluster(KubeResource):
    """A member cluster; its metadata.labels are what clusterAffinity.labelSelector matches."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=FLEET_GROUP,
        version=API_VERSION,
        kind="MemberCluster",
        plural="memberclusters",
        scope="Cluster",
        short_names=("mc",),
        categories=("fleet",),
        status_subresource=True,
        printer_columns=(
            PrinterColumn(
                "READY",
                '.status.conditions[?(@.type=="Ready")].status',
                "string",
                "Whether the last probe succeeded.",
            ),
            PrinterColumn(
                "TOKEN",
                '.status.conditions[?(@.type=="TokenRenewed")].status',
                "string",
                "Whether the last renewal of fleet's bound token succeeded (empty: not a bound "
                "token).",
                priority=1,
            ),
            PrinterColumn("VERSION", ".status.kubernetesVersion", "string", "Kubernetes version."),
            PrinterColumn(
                "GANG",
                ".status.gangScheduler",
                "string",
                "The gang scheduler copies are written for.",
            ),
            PrinterColumn("NODES", ".status.nodeCount", "integer", "Number of nodes."),
            PrinterColumn(
                "GPUS",
                r".status.resources.allocatable.nvidia\.com/gpu",
                "string",
                "Allocatable nvidia.com/gpu.",
            ),
            PrinterColumn("AGE", ".metadata.creationTimestamp", "date", "Age."),
        ),
    )

    api_version: Literal["fleet.dev/v1alpha1"] = FLEET_API_VERSION
    kind: Literal["MemberCluster"] = "MemberCluster"
    spec: MemberClusterSpec
    """How to reach the cluster."""
    status: MemberClusterStatus | None = None
    """Observed state, written by fleet."""

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.metadata.labels or {})

    def condition(self, type_: str) -> Condition | None:
        for c in (self.status.conditions if self.status else None) or []:
            if c.type == type_:
                return c
        return None

    @property
    def ready(self) -> bool:
        c = self.condition(CONDITION_READY)
        return c is not None and c.status == "True"

    def allocatable(self, resource: str) -> Quantity | None:
        res = self.status.resources if self.status else None
        return (res.allocatable or {}).get(resource) if res else None
