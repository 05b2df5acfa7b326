"""Queue: kube-queue's queue, one per quota node, in namespace kube-queue.

kube-queue's shape (`scheduling.x-k8s.io/v1alpha1`, `github.com/kube-queue/api`). fleet creates
one Queue per node of the ElasticQuotaTree in force, named as ACK names them (the node's path
lowercased, `/` and `_` turned into `-`, plus the API server's generated suffix:
`root-child-2-v5zxz`) with the node's path in the annotation `kube-queue/quota-fullname`.
Admins may edit `spec.queuePolicy` and `spec.priority`; fleet writes the status.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fleet.api._meta import CrdInfo, KubeModel, KubeResource, ObjectMeta, PrinterColumn
from fleet.api._types import Int32, NonNegInt32, ResourceList
from fleet.api.constants import (
    API_VERSION,
    QUEUE_API_VERSION,
    QUEUE_GROUP,
    QUEUE_NAMESPACE,
    QUOTA_FULLNAME_ANNOTATION,
)

__all__ = ["Queue", "QueuePolicyName", "QueueSpec", "QueueStatus"]

QueuePolicyName = Literal["Priority", "Block", "FIFO"]


class QueueSpec(KubeModel):
    """How the queue orders and releases its jobs."""

    queue_policy: QueuePolicyName = "Priority"
    """Priority (default): jobs in order of priority, then submission time, and a head that does
    not fit its quota does not hold back smaller jobs behind it. Block: strict order, nothing
    passes the head (a head that can never fit is set aside). FIFO (kube-queue's older policy):
    as Priority, ordered by submission time alone."""
    priority: Int32 | None = None
    """Higher-priority queues are served first when several compete for shared quota."""
    priority_class_name: str | None = None
    """kube-queue's field; accepted, not interpreted (use priority)."""


class QueueStatus(KubeModel):
    """Written by fleet."""

    quota: str | None = None
    """Path of the quota node this queue serves (also the kube-queue/quota-fullname annotation)."""
    waiting: NonNegInt32 | None = None
    """Units waiting (Enqueued or TimeoutBackoff)."""
    dequeued: NonNegInt32 | None = None
    """Units holding this node's quota (Dequeued or Running)."""
    used: ResourceList | None = None
    """What this quota node holds now, its subtree included."""


class Queue(KubeResource):
    """kube-queue's Queue; fleet keeps one per quota node of the ElasticQuotaTree."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=QUEUE_GROUP,
        version=API_VERSION,
        kind="Queue",
        plural="queues",
        scope="Namespaced",
        categories=("fleet", "kube-queue"),
        status_subresource=True,
        spec_required=False,
        printer_columns=(
            # `kubectl get queue -n kube-queue` shows NAME and AGE, as ACK's does; -o wide more.
            PrinterColumn("AGE", ".metadata.creationTimestamp", "date", "Age."),
            PrinterColumn("QUOTA", ".status.quota", "string", "Quota node path.", priority=1),
            PrinterColumn("POLICY", ".spec.queuePolicy", "string", "Queue policy.", priority=1),
            PrinterColumn("PRIORITY", ".spec.priority", "integer", "Queue priority.", priority=1),
            PrinterColumn("WAITING", ".status.waiting", "integer", "Units waiting.", priority=1),
            PrinterColumn(
                "DEQUEUED", ".status.dequeued", "integer", "Units holding quota.", priority=1
            ),
        ),
    )

    api_version: Literal["scheduling.x-k8s.io/v1alpha1"] = QUEUE_API_VERSION
    kind: Literal["Queue"] = "Queue"
    spec: QueueSpec = Field(default_factory=QueueSpec)
    """Policy and priority."""
    status: QueueStatus | None = None
    """What the queue holds."""

    @classmethod
    def for_quota(cls, path: str, generate_name: str) -> Queue:
        """A new Queue for the quota node at `path`; `generate_name` is the node's queue name
        prefix (`fleet.core.quota.queue_name_prefix`), completed by the API server."""
        return cls(
            metadata=ObjectMeta(
                generate_name=generate_name,
                namespace=QUEUE_NAMESPACE,
                annotations={QUOTA_FULLNAME_ANNOTATION: path},
            ),
            status=QueueStatus(quota=path),
        )

    @property
    def quota_path(self) -> str | None:
        """The quota node's path from the annotation (None on a Queue fleet did not make)."""
        return (self.metadata.annotations or {}).get(QUOTA_FULLNAME_ANNOTATION)
