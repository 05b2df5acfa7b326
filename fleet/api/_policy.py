"""PropagationPolicy and ClusterPropagationPolicy: Karmada's shape in ACK One's group.

Field for field what Karmada's policy/v1alpha1 accepts plus ACK One's additions, so a policy
written for either applies unchanged (after the group change). fleet's own extensions are all
optional and marked "fleet extension" in their docs.
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal

from pydantic import Field

from fleet.api._meta import (
    Condition,
    CrdInfo,
    KubeModel,
    KubeResource,
    LabelSelector,
    NodeSelectorRequirement,
    PrinterColumn,
    Toleration,
)
from fleet.api._types import Int32, Int64, NonNegInt32, PosInt32, PosInt64
from fleet.api.constants import API_VERSION, POLICY_API_VERSION, POLICY_GROUP

__all__ = [
    "GANG",
    "ApplicationFailoverBehavior",
    "ClusterAffinity",
    "ClusterAffinityTerm",
    "ClusterFailoverBehavior",
    "ClusterPreferences",
    "ClusterPropagationPolicy",
    "DecisionConditions",
    "FailoverBehavior",
    "FieldSelector",
    "GangEstimator",
    "GangScoring",
    "GangTopology",
    "NormalizedPurgeMode",
    "Placement",
    "PolicyPurgeMode",
    "PolicyStatus",
    "PropagationPolicy",
    "PropagationSpec",
    "ReplicaSchedulingStrategy",
    "ResourceSelector",
    "SchedulePriority",
    "SpreadConstraint",
    "StatePreservation",
    "StatePreservationRule",
    "StaticClusterWeight",
    "SuspendClusters",
    "Suspension",
    "normalize_purge_mode",
]

GANG: Final = "Gang"
"""The customSchedulingType value that hands a workload to fleet."""

GangEstimator = Literal["nodes", "sum"]
GangScoring = Literal["bestFit", "fragmentation"]
GangReservation = Literal["Enabled", "Disabled"]
"""How capacity is estimated: `nodes` packs pods onto real nodes, `sum` adds free resources up."""

PolicyPurgeMode = Literal["Immediately", "Graciously", "Never", "Directly", "Gracefully"]
"""Purge modes as written: ACK One (and older Karmada) Immediately/Graciously; Karmada now
Directly/Gracefully."""

NormalizedPurgeMode = Literal["Directly", "Gracefully", "Never"]
"""The one spelling fleet works with internally (Karmada's current names)."""

_PURGE_ALIASES: Final[dict[str, NormalizedPurgeMode]] = {
    "Immediately": "Directly",
    "Directly": "Directly",
    "Graciously": "Gracefully",
    "Gracefully": "Gracefully",
    "Never": "Never",
}


def normalize_purge_mode(mode: str | None) -> NormalizedPurgeMode:
    """Fold the ACK One and Karmada spellings into one; absent means Gracefully as in Karmada."""
    if mode is None or mode == "":
        return "Gracefully"
    try:
        return _PURGE_ALIASES[mode]
    except KeyError:
        raise ValueError(
            f"unknown purgeMode {mode!r}; expected one of {sorted(_PURGE_ALIASES)}"
        ) from None


class ResourceSelector(KubeModel):
    """Selects the resource templates a policy governs."""

    api_version: str = Field(min_length=1)
    """API version of the target resources, e.g. kubeflow.org/v1."""
    kind: str = Field(min_length=1)
    """Kind of the target resources, e.g. PyTorchJob."""
    namespace: str | None = None
    """Namespace of the target resources; empty inherits the policy's scope."""
    name: str | None = None
    """Name of one target resource; empty selects all. When set, labelSelector is ignored."""
    label_selector: LabelSelector | None = None
    """Label query over the target resources."""


class FieldSelector(KubeModel):
    """Selects clusters by Karmada's cluster fields (provider, region, zone)."""

    match_expressions: list[NodeSelectorRequirement] | None = None
    """Requirements over the fields; fleet reads them from the MemberCluster labels
    fleet.dev/provider, topology.kubernetes.io/region and topology.kubernetes.io/zone."""


class ClusterAffinity(KubeModel):
    """Which member clusters may receive the workload."""

    label_selector: LabelSelector | None = None
    """Selects MemberClusters by their metadata.labels; empty or absent selects all."""
    field_selector: FieldSelector | None = None
    """Selects clusters by provider, region or zone."""
    cluster_names: list[str] | None = None
    """Only these clusters (by MemberCluster name)."""
    exclude: list[str] | None = None
    """Never these clusters."""


class ClusterAffinityTerm(ClusterAffinity):
    """A named cluster group; groups are tried in order until one can hold the workload."""

    affinity_name: str = Field(min_length=1, max_length=32)
    """Name of the group."""


class SpreadConstraint(KubeModel):
    """How many cluster groups a workload spreads over (Karmada; a gang always uses one cluster)."""

    spread_by_field: Literal["cluster", "region", "zone", "provider"] | None = None
    """Cluster field that forms the groups; excludes spreadByLabel."""
    spread_by_label: str | None = None
    """Cluster label key that forms the groups; excludes spreadByField."""
    max_groups: Int64 | None = None
    """Most groups to select."""
    min_groups: Int64 | None = None
    """Fewest groups to select (Karmada defaults it to 1)."""


class StaticClusterWeight(KubeModel):
    """A static weight for a set of clusters."""

    target_cluster: ClusterAffinity
    """The clusters this weight applies to."""
    weight: PosInt64
    """Relative weight."""


class ClusterPreferences(KubeModel):
    """Weights for dividing replicas among clusters."""

    static_weight_list: list[StaticClusterWeight] | None = None
    """Static cluster weights."""
    dynamic_weight: Literal["AvailableReplicas"] | None = None
    """Derive weights from what each cluster can hold; overrides staticWeightList."""


class GangTopology(KubeModel):
    """fleet extension: the policy's default topology for the gangs it governs whose pod
    templates ask for none (Kueue's `kueue.x-k8s.io/podset-required-topology` /
    `podset-preferred-topology` annotations win over it)."""

    level: str = Field(min_length=1, max_length=317)
    """A node label key naming the domains (`topology.kubernetes.io/rack`): every pod of the
    gang's minimum set in nodes with one value of it (Kueue's topology level, Kubernetes'
    PodGroup `schedulingConstraints.topology.key`)."""
    mode: Literal["Required", "Preferred"] = "Required"
    """`Required`: the gang is placed only in a member where one domain holds it, node by node;
    `Preferred`: members where one domain holds it are ranked first, else anywhere it fits
    (after waitSeconds)."""
    wait_seconds: NonNegInt32 | None = Field(default=None, le=86400)
    """`Preferred` only: how long a gang that fits only spread over domains waits for one
    domain to hold it before it is placed spread, counted from the first time it fitted only
    spread (the binding keeps that time as status.domainWaitSince). 0 places it spread at
    once (Kueue's preferred), as does absent. Not acted on with `Required`, which never places
    spread."""


class ReplicaSchedulingStrategy(KubeModel):
    """How replicas are assigned to clusters; ACK One adds customSchedulingType Gang here."""

    replica_scheduling_type: Literal["Duplicated", "Divided"] = "Divided"
    """Duplicated copies all replicas to every cluster; Divided splits them."""
    replica_division_preference: Literal["Aggregated", "Weighted"] | None = None
    """With Divided: Aggregated uses as few clusters as possible; Weighted follows
    weightPreference."""
    weight_preference: ClusterPreferences | None = None
    """Cluster weights for Weighted division."""
    custom_scheduling_type: str | None = Field(default=None, min_length=1)
    """ACK One: `Gang` places all replicas of the workload in one cluster that can hold them all
    at once. Only policies with Gang are acted on by fleet."""
    gang_estimator: GangEstimator | None = None
    """fleet extension: per-policy override of the capacity estimator (`nodes` or `sum`);
    absent uses the fleet-wide default."""
    gang_scoring: GangScoring | None = None
    """fleet extension: which fitting member (and nodes) the `nodes` estimator prefers.
    `bestFit` fills the tightest holes; `fragmentation` picks where the gang least increases
    the expected fragmentation for the mix of recently arrived jobs (after FGD, ATC '23).
    Absent uses the fleet-wide default; `sum` has no nodes to measure and ignores it."""
    gang_topology: GangTopology | None = None
    """fleet extension: keep each gang inside one topology domain (a rack); see GangTopology.
    Absent: no topology, unless the job's pod templates carry Kueue's topology annotations."""
    gang_reservation: GangReservation | None = None
    """fleet extension (ACK's enableReservation, per policy): `Enabled` reserves the gang's
    capacity before dispatching it to any member whose scheduler supports Reservation
    (Koordinator), `Disabled` never does; absent follows the member's
    `spec.reservation.enabled`."""


class Placement(KubeModel):
    """Rules for selecting target clusters."""

    cluster_affinity: ClusterAffinity | None = None
    """Restricts the candidate clusters; cannot be combined with clusterAffinities."""
    cluster_affinities: list[ClusterAffinityTerm] | None = None
    """Ordered cluster groups, tried one after another; cannot be combined with clusterAffinity."""
    cluster_tolerations: list[Toleration] | None = None
    """Tolerations for MemberCluster taints."""
    spread_constraints: list[SpreadConstraint] | None = None
    """Spread constraints (Karmada)."""
    replica_scheduling: ReplicaSchedulingStrategy | None = None
    """How replicas are assigned to clusters."""


class DecisionConditions(KubeModel):
    """When an application failover is decided."""

    toleration_seconds: NonNegInt32 = 300
    """How long the workload may stay unhealthy before it is moved."""


class StatePreservationRule(KubeModel):
    """A piece of status carried to the new cluster as a label."""

    alias_label_name: str = Field(min_length=1)
    """Label key the preserved value is injected under."""
    json_path: str = Field(min_length=1)
    """JSONPath into the old copy's status, e.g. {.replicas}."""


class StatePreservation(KubeModel):
    """State carried over a failover (Karmada)."""

    rules: list[StatePreservationRule]
    """The values to preserve."""


class ApplicationFailoverBehavior(KubeModel):
    """Failover when the application itself is unhealthy in its cluster."""

    decision_conditions: DecisionConditions
    """When failover is decided."""
    purge_mode: PolicyPurgeMode | None = None
    """What happens to the old copy: Immediately/Directly deletes it before the new one starts,
    Graciously/Gracefully waits for the new one to be healthy (or gracePeriodSeconds), Never
    leaves it. Both the ACK One and the Karmada spellings are accepted."""
    grace_period_seconds: PosInt32 | None = None
    """With Graciously/Gracefully: longest wait before the old copy is deleted (Karmada: 600)."""
    state_preservation: StatePreservation | None = None
    """Status values to carry to the new cluster."""
    max_failovers: NonNegInt32 | None = None
    """fleet extension: fail the workload instead of moving it after this many failovers;
    absent means no limit."""
    cluster_exclusion_seconds: NonNegInt32 | None = None
    """fleet extension: how long a cluster the workload failed over from stays excluded for it;
    absent keeps it excluded for the workload's lifetime."""
    gang_schedule_timeout_seconds: NonNegInt32 | None = None
    """fleet extension: how long the gang's pods may go refused by its member's scheduler
    (PodScheduled=False) before its copy is not Healthy (GangUnschedulable) and, after
    tolerationSeconds more, fails over like a Failed copy; absent = the job's own gang schedule
    timeout (runPolicy.schedulingPolicy.scheduleTimeoutSeconds), else 300."""

    @property
    def normalized_purge_mode(self) -> NormalizedPurgeMode:
        return normalize_purge_mode(self.purge_mode)


class ClusterFailoverBehavior(KubeModel):
    """Failover when a whole cluster fails (Karmada)."""

    purge_mode: PolicyPurgeMode | None = None
    """What happens to the copy in the lost cluster, as for application failover."""
    state_preservation: StatePreservation | None = None
    """Status values to carry to the new cluster."""


class FailoverBehavior(KubeModel):
    """Failover behaviour; absent means no failover."""

    application: ApplicationFailoverBehavior | None = None
    """Failover on application failure."""
    cluster: ClusterFailoverBehavior | None = None
    """Failover on cluster failure (Karmada)."""


class SuspendClusters(KubeModel):
    """Clusters to which dispatching is suspended."""

    cluster_names: list[str] | None = None
    """Cluster names."""


class Suspension(KubeModel):
    """Pauses parts of propagation."""

    dispatching: bool | None = None
    """True stops propagation to every cluster."""
    dispatching_on_clusters: SuspendClusters | None = None
    """Stops propagation to the listed clusters only."""
    scheduling: bool | None = None
    """ACK One: true enters the workload into the queue (Kube Queue); it is scheduled only when
    the queue admits it."""


class SchedulePriority(KubeModel):
    """Where the workload's scheduling priority comes from (Karmada)."""

    priority_class_source: Literal[
        "KubePriorityClass", "PodPriorityClass", "FederatedPriorityClass"
    ]
    """Source of the PriorityClass."""
    priority_class_name: str
    """Name of the PriorityClass."""


class PropagationSpec(KubeModel):
    """What a policy selects and how it places it."""

    resource_selectors: list[ResourceSelector] = Field(min_length=1)
    """Resources the policy governs; never empty (an empty list would select everything)."""
    association: bool | None = None
    """Deprecated in Karmada in favour of propagateDeps."""
    propagate_deps: bool | None = None
    """Propagate the ConfigMaps, Secrets and the like the workload refers to along with it."""
    placement: Placement | None = None
    """Where the workload may go."""
    priority: Int32 = 0
    """Higher wins when several policies match one resource."""
    preemption: Literal["Always", "Never"] = "Never"
    """Always lets this policy take resources already claimed by a lower-priority policy."""
    dependent_overrides: list[str] | None = None
    """OverridePolicies that must exist before this policy takes effect."""
    scheduler_name: str = "default-scheduler"
    """Scheduler that handles the policy."""
    failover: FailoverBehavior | None = None
    """Failover behaviour; absent disables failover."""
    conflict_resolution: Literal["Abort", "Overwrite"] = "Abort"
    """What to do when the object already exists in the member cluster."""
    activation_preference: Literal["Lazy"] | None = None
    """Lazy: policy changes reach a workload only when the workload itself changes."""
    suspension: Suspension | None = None
    """Suspends scheduling or dispatching."""
    preserve_resources_on_deletion: bool | None = None
    """Keep the member copies when the resource template is deleted."""
    schedule_priority: SchedulePriority | None = None
    """Scheduling priority source (Karmada)."""

    @property
    def custom_scheduling_type(self) -> str | None:
        rs = self.placement.replica_scheduling if self.placement else None
        return rs.custom_scheduling_type if rs else None

    @property
    def is_gang(self) -> bool:
        """Whether fleet acts on workloads governed by this policy."""
        return self.custom_scheduling_type == GANG

    def unknown_scheduling_type(self) -> str | None:
        """Why fleet does not act on this policy when its customSchedulingType is a value fleet
        does not know (`gang`, a typo): such a policy would otherwise be silently not fleet's.
        None when it is Gang, or absent (a plain Karmada policy, knowingly not fleet's)."""
        value = self.custom_scheduling_type
        if value is None or value == GANG:
            return None
        case = " (values are case-sensitive)" if value.lower() == GANG.lower() else ""
        return (
            f"spec.placement.replicaScheduling.customSchedulingType: {value!r} is not a value "
            f"fleet knows{case}; the accepted value is {GANG!r}. fleet does not act on the "
            "workloads this policy selects"
        )

    @property
    def queued(self) -> bool:
        """ACK One's suspension.scheduling: the workload waits in the queue."""
        return bool(self.suspension and self.suspension.scheduling)

    @property
    def gang_estimator(self) -> GangEstimator | None:
        rs = self.placement.replica_scheduling if self.placement else None
        return rs.gang_estimator if rs else None

    @property
    def gang_scoring(self) -> GangScoring | None:
        rs = self.placement.replica_scheduling if self.placement else None
        return rs.gang_scoring if rs else None

    @property
    def gang_reservation(self) -> GangReservation | None:
        rs = self.placement.replica_scheduling if self.placement else None
        return rs.gang_reservation if rs else None

    @property
    def application_failover(self) -> ApplicationFailoverBehavior | None:
        return self.failover.application if self.failover else None

    def problems(self) -> list[str]:
        """Cross-field mistakes the schema cannot express; reported, never raised, so a stored
        policy always parses and the controller can explain what is wrong with it."""
        out: list[str] = []
        placement = self.placement
        if placement and placement.cluster_affinity and placement.cluster_affinities:
            out.append(
                "spec.placement: clusterAffinity and clusterAffinities cannot be used together"
            )
        for i, sc in enumerate((placement.spread_constraints or []) if placement else []):
            if sc.spread_by_field and sc.spread_by_label:
                out.append(
                    f"spec.placement.spreadConstraints[{i}]: spreadByField and spreadByLabel "
                    "cannot be used together"
                )
        rs = placement.replica_scheduling if placement else None
        if rs and rs.custom_scheduling_type == GANG and rs.replica_scheduling_type == "Duplicated":
            out.append(
                "spec.placement.replicaScheduling: customSchedulingType Gang places one copy in "
                "one cluster; replicaSchedulingType Duplicated is ignored (use Divided)"
            )
        if (
            self.suspension
            and self.suspension.dispatching
            and self.suspension.dispatching_on_clusters
        ):
            out.append(
                "spec.suspension: dispatching and dispatchingOnClusters cannot be used together"
            )
        app = self.application_failover
        if app is not None:
            mode = app.normalized_purge_mode
            if app.grace_period_seconds is not None and mode != "Gracefully":
                out.append(
                    "spec.failover.application.gracePeriodSeconds: only takes effect when "
                    f"purgeMode is Graciously/Gracefully, not {app.purge_mode}"
                )
        return out

    def not_acted_on(self) -> list[str]:
        """The fields this policy sets that fleet accepts but does not act on for a Gang
        workload, each with why (docs/api.md lists the same). fleet posts them as an Event on
        the policy, so a Karmada policy never silently means less than its author thought."""
        out: list[str] = []
        placement = self.placement
        rs = placement.replica_scheduling if placement else None
        if placement and placement.spread_constraints:
            out.append(
                "spec.placement.spreadConstraints: a Gang workload goes whole to one cluster"
            )
        if rs and rs.replica_division_preference:
            out.append(
                "spec.placement.replicaScheduling.replicaDivisionPreference: a Gang workload "
                "is not divided among clusters"
            )
        if rs and rs.weight_preference:
            out.append(
                "spec.placement.replicaScheduling.weightPreference: a Gang workload is not "
                "divided among clusters"
            )
        topology = rs.gang_topology if rs else None
        if topology and topology.mode == "Required" and topology.wait_seconds is not None:
            out.append(
                "spec.placement.replicaScheduling.gangTopology.waitSeconds: a Required "
                "topology never places a gang spread, so it never waits to"
            )
        if rs and rs.gang_topology and rs.gang_estimator == "sum":
            out.append(
                "spec.placement.replicaScheduling.gangTopology: the sum estimator counts no "
                "nodes, so it cannot keep a gang in one domain (use gangEstimator: nodes)"
            )
        if self.dependent_overrides:
            out.append(
                "spec.dependentOverrides: fleet has no OverridePolicy, so the policy does not "
                "wait for any"
            )
        if self.schedule_priority:
            out.append(
                "spec.schedulePriority: fleet places waiting gangs oldest first, not by priority"
            )
        if self.scheduler_name != "default-scheduler":
            out.append(
                f"spec.schedulerName: fleet places Gang workloads itself; {self.scheduler_name!r} "
                "only names the source of its ScheduleBinding events"
            )
        return out


_POLICY_COLUMNS: Final = (
    PrinterColumn("PRIORITY", ".spec.priority", "integer", "Priority among matching policies."),
    PrinterColumn(
        "SCHEDULING",
        ".spec.placement.replicaScheduling.customSchedulingType",
        "string",
        "Custom scheduling type; Gang hands the workload to fleet.",
    ),
    PrinterColumn(
        "CONFLICT-RESOLUTION", ".spec.conflictResolution", "string", "Conflict resolution."
    ),
    PrinterColumn("AGE", ".metadata.creationTimestamp", "date", "Age."),
)


class PolicyStatus(KubeModel):
    """Written by fleet (a fleet extension: Karmada's policies have no status)."""

    conditions: list[Condition] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Recognized: False when customSchedulingType is a value fleet does not know, so fleet
    does not act on the policy (the message names the accepted value, Gang)."""


class PropagationPolicy(KubeResource):
    """Places the resources it selects in its own namespace onto member clusters."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=POLICY_GROUP,
        version=API_VERSION,
        kind="PropagationPolicy",
        plural="propagationpolicies",
        scope="Namespaced",
        short_names=("pp",),
        categories=("fleet",),
        status_subresource=True,
        printer_columns=_POLICY_COLUMNS,
    )

    api_version: Literal["policy.one.alibabacloud.com/v1alpha1"] = POLICY_API_VERSION
    kind: Literal["PropagationPolicy"] = "PropagationPolicy"
    spec: PropagationSpec
    """Desired behaviour."""
    status: PolicyStatus | None = None
    """What fleet made of it."""


class ClusterPropagationPolicy(KubeResource):
    """Like PropagationPolicy, for resources in any namespace; a PropagationPolicy wins over it."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=POLICY_GROUP,
        version=API_VERSION,
        kind="ClusterPropagationPolicy",
        plural="clusterpropagationpolicies",
        scope="Cluster",
        short_names=("cpp",),
        categories=("fleet",),
        status_subresource=True,
        printer_columns=_POLICY_COLUMNS,
    )

    api_version: Literal["policy.one.alibabacloud.com/v1alpha1"] = POLICY_API_VERSION
    kind: Literal["ClusterPropagationPolicy"] = "ClusterPropagationPolicy"
    spec: PropagationSpec
    """Desired behaviour."""
    status: PolicyStatus | None = None
    """What fleet made of it."""
