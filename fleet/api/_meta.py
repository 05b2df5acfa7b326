"""Kubernetes meta and core shapes (ObjectMeta, selectors, taints, conditions) as pydantic models.

They are re-declared here instead of borrowed from the kubernetes client so that the CRD generator
sees their full OpenAPI shape and so that dumps are plain JSON-ready dicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from fleet.api._types import FreeForm, Int64, NonNegInt64, Time

__all__ = [
    "Condition",
    "ConditionStatus",
    "CrdInfo",
    "KubeModel",
    "KubeResource",
    "LabelSelector",
    "LabelSelectorRequirement",
    "NodeSelectorRequirement",
    "ObjectMeta",
    "ObjectReference",
    "OwnerReference",
    "PrinterColumn",
    "Taint",
    "Toleration",
]


class KubeModel(BaseModel):
    """Base of every fleet API shape: camelCase on the wire, snake_case in Python.

    Unknown fields are refused: the CRD schemas are generated from these models, so anything the
    API server stores fits them, and a typo in a hand-written policy fails loudly instead of
    silently meaning nothing.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The Kubernetes JSON form: camelCase keys, absent fields left out, times as strings."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Parse a dict as kubectl or the API returns it (camelCase) or as Python names."""
        return cls.model_validate(data)


class OwnerReference(KubeModel):
    """Ties a dependent to its owner so Kubernetes garbage collection removes it with the owner."""

    api_version: str
    """API version of the owner."""
    kind: str
    """Kind of the owner."""
    name: str
    """Name of the owner."""
    uid: str
    """UID of the owner; a recreated owner with the same name does not adopt the dependent."""
    controller: bool | None = None
    """True on the one reference that points at the managing controller."""
    block_owner_deletion: bool | None = None
    """With foreground deletion, the owner waits until this dependent is gone."""


class ObjectMeta(KubeModel):
    """metav1.ObjectMeta. Fields fleet does not name are kept as they are, so objects round-trip."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    """Object name, unique per namespace (or cluster, for cluster-scoped kinds)."""
    generate_name: str | None = None
    """Prefix the server completes with random characters when name is empty."""
    namespace: str | None = None
    """Namespace of namespaced objects."""
    uid: str | None = None
    """Server-assigned unique id."""
    resource_version: str | None = None
    """Opaque version for optimistic concurrency."""
    generation: int | None = None
    """Incremented by the server on every spec change."""
    creation_timestamp: Time | None = None
    """When the object was created."""
    deletion_timestamp: Time | None = None
    """Set when deletion was requested and finalizers are still pending."""
    deletion_grace_period_seconds: int | None = None
    """Grace period the deletion was requested with."""
    labels: dict[str, str] | None = None
    """Labels; on a MemberCluster these are what clusterAffinity.labelSelector matches."""
    annotations: dict[str, str] | None = None
    """Annotations."""
    owner_references: list[OwnerReference] | None = None
    """Owners of this object."""
    finalizers: list[str] | None = None
    """Finalizers that must be removed before the object is deleted."""
    managed_fields: list[FreeForm] | None = None
    """Server-side apply bookkeeping, kept verbatim."""


class ObjectReference(KubeModel):
    """corev1.ObjectReference: points at one object (a QueueUnit's job)."""

    api_version: str | None = None
    """API version of the referent."""
    kind: str | None = None
    """Kind of the referent."""
    namespace: str | None = None
    """Namespace of the referent."""
    name: str | None = None
    """Name of the referent."""
    uid: str | None = None
    """UID of the referent."""
    resource_version: str | None = None
    """The referent's resourceVersion when the reference was made."""
    field_path: str | None = None
    """A field within the referent, if the reference is to part of it."""


class LabelSelectorRequirement(KubeModel):
    """One matchExpressions entry of a metav1.LabelSelector."""

    key: str
    """Label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key's value relates to values."""
    values: list[str] | None = None
    """Values for In/NotIn; must be empty for Exists/DoesNotExist."""


class LabelSelector(KubeModel):
    """metav1.LabelSelector: every matchLabels pair and every expression must hold."""

    match_labels: dict[str, str] | None = None
    """Exact key=value pairs."""
    match_expressions: list[LabelSelectorRequirement] | None = None
    """Set-based requirements."""


class NodeSelectorRequirement(KubeModel):
    """corev1.NodeSelectorRequirement, which Karmada reuses for cluster field selectors."""

    key: str
    """Field the requirement applies to (Karmada: provider, region or zone)."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    """How the field's value relates to values."""
    values: list[str] | None = None
    """Values to compare with."""


class Toleration(KubeModel):
    """corev1.Toleration, used as a cluster toleration: lets a policy land on a tainted cluster."""

    key: str | None = None
    """Taint key to tolerate; empty with operator Exists tolerates every taint."""
    operator: Literal["", "Exists", "Equal"] | None = None
    """Equal (the default) compares value too; Exists matches any value."""
    value: str | None = None
    """Taint value to match with operator Equal."""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """Taint effect to match; empty matches every effect."""
    toleration_seconds: Int64 | None = None
    """For NoExecute: how long the workload may stay after the taint appears."""


class Taint(KubeModel):
    """corev1.Taint on a MemberCluster: keeps workloads away unless their policy tolerates it."""

    key: str = Field(min_length=1)
    """Taint key."""
    value: str | None = None
    """Taint value."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    """NoSchedule keeps new workloads off; NoExecute also evicts placed ones."""
    time_added: Time | None = None
    """When a NoExecute taint was added."""


ConditionStatus = Literal["True", "False", "Unknown"]

_CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(KubeModel):
    """metav1.Condition, the standard shape kubectl wait and other tools understand."""

    type: str = Field(max_length=316, pattern=_CONDITION_TYPE_PATTERN)
    """Condition type in CamelCase, e.g. Ready or Scheduled."""
    status: ConditionStatus
    """True, False or Unknown."""
    observed_generation: NonNegInt64 | None = None
    """metadata.generation the condition was computed from."""
    last_transition_time: Time
    """When status last changed (not when the condition was last written)."""
    reason: str = Field(min_length=1, max_length=1024, pattern=_CONDITION_REASON_PATTERN)
    """Machine-readable CamelCase reason for the last transition."""
    message: str = Field(max_length=32768)
    """Human-readable detail; may be empty."""


@dataclass(frozen=True)
class PrinterColumn:
    """One additionalPrinterColumns entry: what `kubectl get` shows."""

    name: str
    json_path: str
    type: Literal["integer", "number", "string", "boolean", "date"]
    description: str
    priority: int = 0


@dataclass(frozen=True)
class CrdInfo:
    """What the CRD generator needs beyond the schema: names, scope and columns."""

    group: str
    version: str
    kind: str
    plural: str
    scope: Literal["Namespaced", "Cluster"]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool = False
    spec_required: bool = True

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


class KubeResource(KubeModel):
    """A top-level object (TypeMeta + ObjectMeta); subclasses pin apiVersion and kind."""

    crd: ClassVar[CrdInfo]

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata."""

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""
