"""GangBinding: one per dispatched workload, holding every decision and timer fleet needs.

Modelled on Karmada's ResourceBinding. Everything a controller must remember across restarts
(the chosen cluster, eviction tasks, when a failure started, which clusters are excluded and
until when) lives in this object, so each controller step can be recomputed from it alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

from pydantic import Field

from fleet.api._meta import (
    Condition,
    CrdInfo,
    KubeModel,
    KubeResource,
    ObjectMeta,
    OwnerReference,
    PrinterColumn,
)
from fleet.api._policy import (
    FailoverBehavior,
    GangEstimator,
    NormalizedPurgeMode,
    Placement,
    StatePreservation,
    Suspension,
    normalize_purge_mode,
)
from fleet.api._types import (
    FreeForm,
    IntOrString,
    NonNegInt32,
    NonNegInt64,
    PosInt32,
    ResourceList,
    Time,
)
from fleet.api.constants import API_VERSION, FLEET_API_VERSION, FLEET_GROUP
from fleet.core.names import bounded

__all__ = [
    "AggregatedStatusItem",
    "BindingFailover",
    "BindingPhase",
    "ClusterHealth",
    "DependencyRecord",
    "ExcludedCluster",
    "FailoverRecord",
    "GangBinding",
    "GangBindingSpec",
    "GangBindingStatus",
    "GangComponent",
    "GangSpec",
    "GracefulEvictionTask",
    "PendingReason",
    "PlacementRecord",
    "PolicyRef",
    "TargetCluster",
    "TargetComponent",
    "WorkloadReference",
    "binding_name",
]

BindingPhase = Literal[
    "Pending",
    "Queued",
    "Reserving",
    "Scheduled",
    "Dispatched",
    "Running",
    "Succeeded",
    "Failed",
    "FailingOver",
    "Released",
]
ClusterHealth = Literal["Healthy", "Unhealthy", "Unknown"]

_MAX_NAME: Final = 253


def binding_name(kind: str, name: str) -> str:
    """Deterministic GangBinding name `<kind-lowercase>-<name>`, so a restarted controller finds
    the binding it already made instead of creating a second one. Over-long names are cut and
    suffixed with a hash of the full name to stay unique and a valid DNS subdomain."""
    return bounded(f"{kind.lower()}-{name}", _MAX_NAME)


class WorkloadReference(KubeModel):
    """The fleet-side workload the binding is for."""

    api_version: str = Field(min_length=1)
    """API version of the workload."""
    kind: str = Field(min_length=1)
    """Kind of the workload."""
    namespace: str | None = None
    """Namespace of the workload (the binding's own namespace)."""
    name: str = Field(min_length=1)
    """Name of the workload."""
    uid: str = Field(min_length=1)
    """UID of the workload; member copies are labelled with it."""

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> WorkloadReference:
        """From the workload as a dict (what kubectl get -o json returns)."""
        meta = obj.get("metadata") or {}
        return cls(
            api_version=obj.get("apiVersion") or "",
            kind=obj.get("kind") or "",
            namespace=meta.get("namespace"),
            name=meta.get("name") or "",
            uid=meta.get("uid") or "",
        )


class PolicyRef(KubeModel):
    """The policy that claimed the workload."""

    kind: Literal["PropagationPolicy", "ClusterPropagationPolicy"]
    """Kind of the policy."""
    namespace: str | None = None
    """Namespace of a PropagationPolicy; empty for a ClusterPropagationPolicy."""
    name: str = Field(min_length=1)
    """Name of the policy."""


class GangComponent(KubeModel):
    """One role of the gang (e.g. PyTorchJob Master or Worker) with its per-pod requests."""

    name: str = Field(min_length=1)
    """Role name."""
    replicas: NonNegInt32
    """Number of pods of this role."""
    requests: ResourceList | None = None
    """Resource requests of one pod of this role."""


class GangSpec(KubeModel):
    """What must be placed together."""

    min_member: PosInt32
    """Pods that must be schedulable at the same time for the job to start."""
    components: list[GangComponent] = Field(min_length=1)
    """The roles of the job."""

    @property
    def total_replicas(self) -> int:
        return sum(c.replicas for c in self.components)


class TargetComponent(KubeModel):
    """Replicas of one role assigned to a cluster."""

    name: str = Field(min_length=1)
    """Role name."""
    replicas: NonNegInt32
    """Replicas of the role in that cluster."""


class TopologyDomain(KubeModel):
    """fleet extension: the topology domain placement chose for the gang (or some of its
    roles) in the target cluster; the member copy's pods are pinned to it (docs/placement.md)."""

    level: str = Field(min_length=1)
    """The node label key of the level (e.g. topology.kubernetes.io/rack)."""
    value: str = Field(min_length=1)
    """The domain: the label's value."""
    components: list[str] | None = None
    """The roles placed in it; absent: the whole gang."""
    mode: Literal["Required", "Preferred"] = "Required"
    """Required: the copy carries required node affinity to the domain; Preferred: preferred
    node affinity (the member tries the domain first)."""


class TargetCluster(KubeModel):
    """A chosen cluster (Karmada's spec.clusters entry)."""

    name: str = Field(min_length=1)
    """MemberCluster name."""
    replicas: NonNegInt32
    """Total replicas placed there."""
    components: list[TargetComponent] | None = None
    """Per-role replicas."""
    domains: list[TopologyDomain] | None = None
    """fleet extension: the topology domains placement chose there, kept so a restarted
    controller pins the copy to the same ones."""


#: How long a lost cluster is tolerated when only `failover.cluster` is set: Karmada's default
#: toleration of its not-ready and unreachable cluster taints.
DEFAULT_CLUSTER_TOLERATION_SECONDS: Final = 300


class BindingFailover(KubeModel):
    """The failover parameters, copied from the policy when the binding is made so that later
    policy edits or a controller restart do not change a failover already under way."""

    toleration_seconds: NonNegInt32
    """How long the workload may stay unhealthy (or its cluster lost) before it is moved."""
    purge_mode: NormalizedPurgeMode
    """What happens to the old copy after an application failure (normalized spelling)."""
    grace_period_seconds: PosInt32 | None = None
    """With Gracefully: longest wait before the old copy is deleted."""
    max_failovers: NonNegInt32 | None = None
    """fleet extension: give up (phase Failed) after this many failovers; absent = no limit."""
    cluster_exclusion_seconds: NonNegInt32 | None = None
    """fleet extension: how long a failed cluster stays excluded; absent = for good."""
    gang_schedule_timeout_seconds: NonNegInt32 | None = None
    """fleet extension: how long the gang's pods may go refused by the member's scheduler
    before the copy is not Healthy (GangUnschedulable) and, tolerationSeconds later, fails
    over; absent = the job's own gang schedule timeout, else 300."""
    on_application_failure: bool | None = None
    """False when the policy sets only `failover.cluster`: a Failed copy is not moved. Absent
    means true."""
    on_cluster_loss: bool | None = None
    """Whether a copy in a lost cluster is moved; absent means true (`failover.application` or
    `failover.cluster` is set)."""
    cluster_purge_mode: NormalizedPurgeMode | None = None
    """`failover.cluster.purgeMode`: how copies in lost or tainted clusters go; absent = as
    purgeMode."""
    state_preservation: StatePreservation | None = None
    """`failover.application.statePreservation`: what an application failover (and an
    eviction by the queue) reads from the old copy's status for the next copy."""
    cluster_state_preservation: StatePreservation | None = None
    """`failover.cluster.statePreservation`: the same for a move off a lost, tainted or
    unjoined cluster (and an eviction by the queue when the application's is absent)."""

    @classmethod
    def from_policy(cls, failover: FailoverBehavior | None) -> BindingFailover | None:
        """Snapshot a policy's failover behaviour (None when the policy sets none)."""
        if failover is None or (failover.application is None and failover.cluster is None):
            return None
        app = failover.application
        cluster = failover.cluster
        return cls(
            toleration_seconds=app.decision_conditions.toleration_seconds
            if app
            else DEFAULT_CLUSTER_TOLERATION_SECONDS,
            purge_mode=app.normalized_purge_mode if app else "Gracefully",
            grace_period_seconds=app.grace_period_seconds if app else None,
            max_failovers=app.max_failovers if app else None,
            cluster_exclusion_seconds=app.cluster_exclusion_seconds if app else None,
            gang_schedule_timeout_seconds=app.gang_schedule_timeout_seconds if app else None,
            on_application_failure=None if app is not None else False,
            cluster_purge_mode=normalize_purge_mode(cluster.purge_mode)
            if cluster is not None and cluster.purge_mode
            else None,
            state_preservation=app.state_preservation if app else None,
            cluster_state_preservation=cluster.state_preservation if cluster else None,
        )


class GracefulEvictionTask(KubeModel):
    """An old copy still to be removed from a cluster the workload left (Karmada's shape)."""

    from_cluster: str = Field(min_length=1)
    """Cluster the workload is being evicted from."""
    reason: str = Field(min_length=1)
    """Why, in CamelCase (e.g. ApplicationFailure, ClusterLost)."""
    message: str | None = None
    """Human-readable detail."""
    purge_mode: NormalizedPurgeMode | None = None
    """How the old copy is removed."""
    creation_timestamp: Time | None = None
    """When the task was made; with gracePeriodSeconds it bounds the wait."""
    grace_period_seconds: NonNegInt32 | None = None
    """Longest wait for the new copy to become healthy before the old one is deleted."""
    evicted_for: str | None = None
    """fleet extension: the QueueUnit (`<namespace>/<name>`) a reclaim or a preemption evicted
    this copy to make room for; absent for a failover's eviction."""
    preserved_label_state: dict[str, str] | None = None
    """Label -> value read from the old copy's status by the policy's statePreservation rules
    before it was removed (Karmada's field): the labels the next copy carries."""
    cluster_id: str | None = None
    """fleet extension: the identity of the cluster the copy is in (its kube-system UID, as
    `fleet join` recorded it), so the copy is fenced if that cluster answers again under any
    MemberCluster name; the task stays until the copy and its pods are observed gone."""


class GangBindingSpec(KubeModel):
    """The workload, its gang, and where it is to run."""

    resource: WorkloadReference
    """The fleet-side workload."""
    policy: PolicyRef
    """The policy that claimed the workload."""
    gang: GangSpec
    """What must be placed together."""
    estimator: GangEstimator | None = None
    """Capacity estimator used for this workload (policy override or the fleet default)."""
    clusters: list[TargetCluster] | None = None
    """The chosen target; empty until scheduled. A gang has at most one entry."""
    failover: BindingFailover | None = None
    """Failover parameters; absent disables failover."""
    graceful_eviction_tasks: list[GracefulEvictionTask] | None = None
    """Old copies still to be removed."""
    suspension: Suspension | None = None
    """scheduling=true holds the binding in the queue until it is admitted; dispatching (or
    dispatchingOnClusters) keeps the member copy from being created or updated."""
    placement: Placement | None = None
    """The policy's placement, synced from it (Karmada keeps it in the binding too), so a
    failover after the policy was deleted still honours it."""
    conflict_resolution: Literal["Abort", "Overwrite"] | None = None
    """The policy's conflictResolution: Overwrite adopts a member object fleet did not create."""
    preserved_labels: dict[str, str] | None = None
    """fleet extension: the labels the gang's copies carry (statePreservation), as its last
    move preserved them; kept after that move's eviction task is gone, until a move preserves
    anew, so every later copy (and a restarted controller) has them."""


class AggregatedStatusItem(KubeModel):
    """The workload's state in one member cluster."""

    cluster_name: str = Field(min_length=1)
    """Member cluster."""
    applied: bool | None = None
    """Whether the member copy was created or updated successfully."""
    applied_message: str | None = None
    """Why applying failed."""
    health: ClusterHealth | None = None
    """Health of the member copy."""
    job_state: str | None = None
    """Job state reported by the member (e.g. Created, Running, Succeeded, Failed)."""
    status: FreeForm | None = None
    """The member copy's raw status, as reported."""


class PlacementRecord(KubeModel):
    """One stay of the workload in a cluster."""

    cluster: str = Field(min_length=1)
    """Member cluster."""
    placed_at: Time
    """When the workload was placed there."""
    removed_at: Time | None = None
    """When it left; absent while it is still there."""
    reason: str | None = None
    """Why it left."""
    running_since: Time | None = None
    """When its copy first reported Running in this stay (absent: not yet). A reclaim counts
    the work its eviction would lose, and the limit the job declares, from here."""


class FailoverRecord(KubeModel):
    """One failover."""

    from_cluster: str = Field(min_length=1)
    """Cluster the workload was moved away from."""
    reason: str = Field(min_length=1)
    """Why (CamelCase)."""
    time: Time
    """When the failover was decided."""


class ExcludedCluster(KubeModel):
    """A cluster this workload must not be placed in."""

    name: str = Field(min_length=1)
    """Member cluster."""
    reason: str | None = None
    """Why it is excluded."""
    until: Time | None = None
    """When the exclusion ends; absent means for the workload's lifetime."""
    code: str | None = None
    """Why, for machines, when the cluster refused the job rather than the job failing there:
    DependencyConflict (a dependency there is not fleet's). Absent for a failover's."""


class PendingReason(KubeModel):
    """Why a cluster cannot take the workload now."""

    cluster: str = Field(min_length=1)
    """Member cluster."""
    reason: str = Field(min_length=1)
    """Explanation from the placement engine."""
    code: str | None = None
    """Why, for machines: NotReady, FailedOver, TaintUntolerated, ClusterAffinity, Insufficient
    Outranked, DependencyConflict or WaitingForDomain."""
    facts: dict[str, IntOrString] | None = None
    """The numbers behind `reason`, for machines: for Insufficient, `resource` with `needed` and
    `free` (in the resource's base unit: millicores, bytes, devices), or `perPod`, `pods`,
    `largestFree`, `podsThatFit`; `components` and `unplacedPods` when no node-by-node
    assignment exists; with a topology, `topologyLevel`, `topologyMode`, `pods`, `domains`,
    `largestDomain` and `podsThatFit` (how many pods the largest domain holds); for
    WaitingForDomain also `waitingSince`, `waitingUntil` and `waitSeconds`."""


class DependencyRecord(KubeModel):
    """A dependency (propagateDeps) fleet wrote in a member for this workload."""

    cluster: str = Field(min_length=1)
    """Member cluster."""
    kind: str = Field(min_length=1)
    """ConfigMap, Secret, ServiceAccount or PersistentVolumeClaim (in the workload's namespace),
    or what the workload's kind reads besides it: a TrainingRuntime (in its namespace) or a
    ClusterTrainingRuntime."""
    name: str = Field(min_length=1)
    """Its name."""
    digest: str = Field(min_length=1)
    """Digest of the fleet's object as fleet last wrote it there: a fleet object whose digest
    differs is written again (kept in step)."""
    uid: str | None = None
    """The member object's UID when fleet created it there (not when it took a member's object
    over, nor for a runtime the member has of its own): deleted, by this UID, once no workload
    of fleet's in that member uses it."""
    creating: bool | None = None
    """Recorded before fleet creates it, so a controller that dies between the create and the
    record leaves nothing in the member that no record names. Rewritten without it (and with its
    UID) by the next write; a job that leaves the member first deletes it by name, which the
    member's admission policy allows only for an object carrying fleet's mark."""


class GangBindingStatus(KubeModel):
    """Observed state and restart-safe controller memory."""

    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Scheduled, FullyApplied, Healthy."""
    phase: BindingPhase | None = None
    """Pending, Scheduled, Dispatched, Running, Succeeded, Failed or FailingOver."""
    aggregated_status: list[AggregatedStatusItem] | None = None
    """State per member cluster."""
    placement_history: list[PlacementRecord] | None = None
    """Every cluster the workload was placed in, oldest first."""
    failover_history: list[FailoverRecord] | None = None
    """Every failover, oldest first."""
    failover_count: NonNegInt32 | None = None
    """Failovers so far, compared against maxFailovers."""
    excluded_clusters: list[ExcludedCluster] | None = None
    """Clusters the workload must avoid (after failing there)."""
    unhealthy_since: Time | None = None
    """When the current copy was first seen unhealthy; cleared when it recovers. Stored so a
    controller restart neither resets nor forgets the toleration timer."""
    cluster_lost_since: Time | None = None
    """When the current cluster was first seen lost (not Ready); cleared when it returns."""
    tainted_since: Time | None = None
    """When an untolerated NoExecute taint was first seen on the current cluster."""
    gang_unschedulable_since: Time | None = None
    """fleet extension: when the member's scheduler was first seen refusing pods of the
    current copy's gang (PodScheduled=False), continuously since; cleared once none is refused
    or the copy runs. Past the gang schedule timeout the copy is not Healthy
    (GangUnschedulable), and tolerationSeconds later it fails over."""
    reserving_since: Time | None = None
    """While the chosen member's capacity is being reserved for the gang (Koordinator
    Reservations, phase Reserving): since when; the wait is bounded from it."""
    domain_wait_since: Time | None = None
    """While a gang with a Preferred topology that fits only spread waits for one domain
    (gangTopology.waitSeconds): since when; the wait is bounded from it, and it is placed
    spread when it runs out. Cleared when the gang is placed."""
    scheduler_observed_affinity_name: str | None = None
    """The clusterAffinities group the placement came from (Karmada's
    schedulerObservedAffinityName); the next placement starts its search there."""
    pending_reasons: list[PendingReason] | None = None
    """Per-cluster explanations when no cluster fits: at most 10, the clusters that came
    closest to taking the workload (the furthest along placement's order of work: Outranked
    and WaitingForDomain, then Insufficient, then the filters in reverse), then by name; every
    cluster is counted in pendingReasonCounts."""
    pending_reason_counts: dict[str, NonNegInt32] | None = None
    """When no cluster fits: how many clusters gave each code, over every cluster (those in
    pendingReasons included), so the counts add up to the clusters placement looked at."""
    dependencies: list[DependencyRecord] | None = None
    """The dependencies fleet wrote in members for this workload (propagateDeps), per member."""
    observed_generation: NonNegInt64 | None = None
    """The metadata.generation fleet has finished acting on: equal to it once a spec change
    (such as a policy edit synced into spec.placement) has been placed, judged and applied."""


class GangBinding(KubeResource):
    """The placement decision and failover state of one gang workload; owned by the workload."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=FLEET_GROUP,
        version=API_VERSION,
        kind="GangBinding",
        plural="gangbindings",
        scope="Namespaced",
        short_names=("gb",),
        categories=("fleet",),
        status_subresource=True,
        printer_columns=(
            PrinterColumn("CLUSTER", ".spec.clusters[0].name", "string", "Target cluster."),
            PrinterColumn("PHASE", ".status.phase", "string", "Phase."),
            PrinterColumn(
                "SCHEDULED",
                '.status.conditions[?(@.type=="Scheduled")].status',
                "string",
                "Whether a target cluster was chosen.",
            ),
            PrinterColumn(
                "APPLIED",
                '.status.conditions[?(@.type=="FullyApplied")].status',
                "string",
                "Whether the workload exists in the target cluster.",
            ),
            PrinterColumn("AGE", ".metadata.creationTimestamp", "date", "Age."),
            PrinterColumn("KIND", ".spec.resource.kind", "string", "Workload kind.", priority=1),
            PrinterColumn(
                "WORKLOAD", ".spec.resource.name", "string", "Workload name.", priority=1
            ),
        ),
    )

    api_version: Literal["fleet.dev/v1alpha1"] = FLEET_API_VERSION
    kind: Literal["GangBinding"] = "GangBinding"
    spec: GangBindingSpec
    """The decision."""
    status: GangBindingStatus | None = None
    """Observed state."""

    @classmethod
    def for_workload(
        cls,
        resource: WorkloadReference,
        policy: PolicyRef,
        gang: GangSpec,
        *,
        estimator: GangEstimator | None = None,
        failover: BindingFailover | None = None,
        suspension: Suspension | None = None,
        placement: Placement | None = None,
        conflict_resolution: Literal["Abort", "Overwrite"] | None = None,
    ) -> GangBinding:
        """A new binding with its deterministic name, in the workload's namespace, owned by the
        workload (so Kubernetes deletes it with the workload)."""
        owner = OwnerReference(
            api_version=resource.api_version,
            kind=resource.kind,
            name=resource.name,
            uid=resource.uid,
            controller=True,
            block_owner_deletion=True,
        )
        return cls(
            metadata=ObjectMeta(
                name=binding_name(resource.kind, resource.name),
                namespace=resource.namespace,
                owner_references=[owner],
            ),
            spec=GangBindingSpec(
                resource=resource,
                policy=policy,
                gang=gang,
                estimator=estimator,
                failover=failover,
                suspension=suspension,
                placement=placement,
                conflict_resolution=conflict_resolution,
            ),
        )

    @property
    def target_cluster(self) -> str | None:
        """The cluster the gang is placed in, if any."""
        clusters = self.spec.clusters or []
        return clusters[0].name if clusters else None

    def condition(self, type_: str) -> Condition | None:
        for c in (self.status.conditions if self.status else None) or []:
            if c.type == type_:
                return c
        return None
