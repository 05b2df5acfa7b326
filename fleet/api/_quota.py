"""ElasticQuotaTree: ACK's quota tree for Kube Queue, in ACK's group, served by the fleet.

Field for field what ACK (and koord-queue, `scheduling.sigs.k8s.io/v1beta1`) accepts, so the
seeds' tree applies unchanged. Only the tree in namespace `kube-system` is honoured; fleet writes
every tree's status: whether its latest spec is valid, each broken rule naming the node, and which
tree (and generation) is in force. The rules themselves live in `fleet.core.quota`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleet.api._meta import CrdInfo, KubeModel, KubeResource, PrinterColumn
from fleet.api._types import NonNegInt64, ResourceList
from fleet.api.constants import (
    ELASTIC_QUOTA_API_VERSION,
    ELASTIC_QUOTA_GROUP,
    ELASTIC_QUOTA_VERSION,
)

__all__ = [
    "ElasticQuotaNode",
    "ElasticQuotaTree",
    "ElasticQuotaTreeSpec",
    "ElasticQuotaTreeStatus",
    "QuotaTreeProblem",
    "QuotaTreeRef",
    "QuotaTreeState",
]

QuotaTreeState = Literal["Active", "Invalid", "Ignored"]


class ElasticQuotaNode(KubeModel):
    """One quota node: what the jobs under it are guaranteed (min) and may hold at most (max)."""

    name: str = Field(min_length=1)
    """Unique in the tree; names the node's Queue (`root-child-2-<suffix>`) and is what the
    `quota.scheduling.alibabacloud.com/name` label of a job refers to."""
    min: ResourceList | None = None
    """Guaranteed amounts, lent to others while idle (absent: nothing guaranteed)."""
    max: ResourceList | None = None
    """Caps, borrowed capacity included; a resource not listed is not capped at this node.
    `kube-queue/max-jobs` caps how many jobs of this node are dequeued at once."""
    namespaces: list[str] | None = None
    """The namespaces whose queued jobs this node's quota holds (on leaves)."""
    attributes: dict[str, str] | None = None
    """ACK's free-form attributes; kept, not interpreted by fleet."""
    children: list[ElasticQuotaNode] | None = None
    """Child quota nodes."""


class ElasticQuotaTreeSpec(KubeModel):
    """The tree."""

    root: ElasticQuotaNode
    """The root node: its max caps the whole tree (ACK: root min == root max)."""


class QuotaTreeProblem(KubeModel):
    """One broken rule."""

    node: str
    """Path of the node (`root/child-2`) the rule is broken at."""
    field: str
    """Field in this object, e.g. `spec.root.children[0].min`."""
    rule: str
    """The rule's name, e.g. MinWithinMax, ChildrenMinWithinParentMin, NamespaceInOneLeaf."""
    severity: Literal["Error", "Warning"]
    """Error: the spec is not put in force. Warning: it is, and the problem is reported."""
    message: str
    """What is wrong, with the amounts."""


class QuotaTreeRef(KubeModel):
    """Which tree, at which generation, is in force."""

    namespace: str
    """Namespace of the tree in force (always kube-system)."""
    name: str
    """Name of the tree in force."""
    generation: NonNegInt64 | None = None
    """metadata.generation of its spec that is in force (older than the latest when the latest
    edit is invalid)."""
    spec: ElasticQuotaTreeSpec | None = None
    """The spec in force, kept so a restarted controller keeps using the last valid tree while
    the latest edit is invalid."""


class ElasticQuotaTreeStatus(KubeModel):
    """Written by fleet."""

    state: QuotaTreeState | None = None
    """Active: this tree's latest spec is in force. Invalid: it breaks a rule; the last valid spec
    (inForce) stays in force. Ignored: fleet honours only one tree, in kube-system."""
    valid: bool | None = None
    """Whether the latest spec passed every rule (warnings allowed)."""
    observed_generation: NonNegInt64 | None = None
    """metadata.generation this status was computed from."""
    in_force: QuotaTreeRef | None = None
    """The tree and generation the queue is using now."""
    problems: list[QuotaTreeProblem] | None = None
    """Every broken rule of the latest spec, errors and warnings."""
    message: str | None = None
    """One line for humans: the first error, why the tree is ignored, or empty."""


class ElasticQuotaTree(KubeResource):
    """ACK's ElasticQuotaTree: the quota nodes Kube Queue builds its queues from. Only the one in
    kube-system is honoured."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=ELASTIC_QUOTA_GROUP,
        version=ELASTIC_QUOTA_VERSION,
        kind="ElasticQuotaTree",
        plural="elasticquotatrees",
        scope="Namespaced",
        short_names=("eqtree",),
        categories=("fleet", "kube-queue"),
        status_subresource=True,
        printer_columns=(
            PrinterColumn("STATE", ".status.state", "string", "Active, Invalid or Ignored."),
            PrinterColumn("VALID", ".status.valid", "boolean", "Latest spec passes every rule."),
            PrinterColumn(
                "IN-FORCE",
                ".status.inForce.generation",
                "integer",
                "Generation of the spec in force.",
            ),
            PrinterColumn("AGE", ".metadata.creationTimestamp", "date", "Age."),
            PrinterColumn(
                "MESSAGE", ".status.message", "string", "First problem, if any.", priority=1
            ),
        ),
    )

    api_version: Literal["scheduling.sigs.k8s.io/v1beta1"] = ELASTIC_QUOTA_API_VERSION
    kind: Literal["ElasticQuotaTree"] = "ElasticQuotaTree"
    spec: ElasticQuotaTreeSpec
    """The tree."""
    status: ElasticQuotaTreeStatus | None = None
    """What fleet made of it."""
