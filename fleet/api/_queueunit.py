"""QueueUnit: one queued job, in the job's namespace (kube-queue's shape plus fleet's memory).

`spec` is kube-queue's (`consumerRef`, `queue`, `resource`, `priority`); `status.phase`,
`message` and `lastUpdateTime` are kube-queue's too. fleet adds to the status what the queue must
find again after a controller restart: when the unit was dequeued (the placement timeout runs from
there), until when it backs off, how many times it was dequeued, and the quota node it is charged
to. With those, a restarted controller rebuilds the queue's usage exactly (`fleet.core.admission`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from fleet.api._binding import binding_name
from fleet.api._meta import (
    CrdInfo,
    KubeModel,
    KubeResource,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    PrinterColumn,
)
from fleet.api._types import Int32, NonNegInt32, ResourceList, Time
from fleet.api.constants import API_VERSION, QUEUE_API_VERSION, QUEUE_GROUP

__all__ = ["QueueUnit", "QueueUnitPhase", "QueueUnitSpec", "QueueUnitStatus", "queue_unit_name"]

QueueUnitPhase = Literal["Enqueued", "Dequeued", "Running", "Succeed", "Failed", "TimeoutBackoff"]


def queue_unit_name(kind: str, name: str) -> str:
    """Deterministic `<kind-lowercase>-<name>` (the GangBinding's rule), so a restarted controller
    finds the unit it made instead of making a second one."""
    return binding_name(kind, name)


class QueueUnitSpec(KubeModel):
    """The job and what it asks of the queue."""

    consumer_ref: ObjectReference
    """The queued job."""
    queue: str | None = None
    """Name of the Queue (in kube-queue) of the job's quota node; empty when it has none."""
    resource: ResourceList | None = None
    """The whole gang's total request: every replica of every role."""
    priority: Int32 | None = None
    """Order within the queue: higher first (the job's PriorityClass value when it has one)."""
    priority_class_name: str | None = None
    """The job's PriorityClass, when priority came from one."""


class QueueUnitStatus(KubeModel):
    """Where the unit is in the queue; written by fleet."""

    phase: QueueUnitPhase | None = None
    """Enqueued (waiting), Dequeued (released to gang placement, holding quota), Running (placed),
    Succeed / Failed (ended, quota released), TimeoutBackoff (not placed in time: quota released,
    back in the queue after a backoff)."""
    message: str | None = None
    """Why the unit waits or what happened last."""
    last_update_time: Time | None = None
    """When phase or message last changed."""
    quota: str | None = None
    """Path of the quota node the unit is charged to (`root/child-2`)."""
    dequeued_at: Time | None = None
    """When the unit was last dequeued (or its job failed over); the placement timeout runs from
    here."""
    backoff_until: Time | None = None
    """With phase TimeoutBackoff: when the unit returns to its queue."""
    attempts: NonNegInt32 | None = None
    """How many times the unit was dequeued; each backoff doubles."""


class QueueUnit(KubeResource):
    """One job waiting in (or released by) the queue; owned by the job."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=QUEUE_GROUP,
        version=API_VERSION,
        kind="QueueUnit",
        plural="queueunits",
        scope="Namespaced",
        short_names=("qu",),
        categories=("fleet", "kube-queue"),
        status_subresource=True,
        printer_columns=(
            PrinterColumn("QUEUE", ".spec.queue", "string", "Queue of the job's quota node."),
            PrinterColumn("PHASE", ".status.phase", "string", "Phase."),
            PrinterColumn("RESOURCE", ".spec.resource", "string", "The gang's total request."),
            PrinterColumn("AGE", ".metadata.creationTimestamp", "date", "Age."),
            PrinterColumn("JOB", ".spec.consumerRef.name", "string", "The job.", priority=1),
            PrinterColumn("QUOTA", ".status.quota", "string", "Quota node path.", priority=1),
            PrinterColumn("MESSAGE", ".status.message", "string", "Why.", priority=1),
        ),
    )

    api_version: Literal["scheduling.x-k8s.io/v1alpha1"] = QUEUE_API_VERSION
    kind: Literal["QueueUnit"] = "QueueUnit"
    spec: QueueUnitSpec
    """The job and its request."""
    status: QueueUnitStatus | None = None
    """Where it is in the queue."""

    @classmethod
    def for_job(
        cls,
        job: ObjectReference,
        *,
        resource: ResourceList,
        queue: str | None = None,
        priority: int | None = None,
        labels: dict[str, str] | None = None,
    ) -> QueueUnit:
        """A new unit for `job` (which must carry kind, name, namespace and uid), in the job's
        namespace, owned by it so Kubernetes deletes the unit with the job. `labels` carries the
        job's quota label, if any."""
        if not (job.kind and job.name and job.uid and job.api_version):
            raise ValueError(
                "QueueUnit.for_job: the job reference needs apiVersion, kind, name, uid"
            )
        owner = OwnerReference(
            api_version=job.api_version,
            kind=job.kind,
            name=job.name,
            uid=job.uid,
            controller=True,
            block_owner_deletion=True,
        )
        return cls(
            metadata=ObjectMeta(
                name=queue_unit_name(job.kind, job.name),
                namespace=job.namespace,
                labels=labels or None,
                owner_references=[owner],
            ),
            spec=QueueUnitSpec(consumer_ref=job, queue=queue, resource=resource, priority=priority),
            status=QueueUnitStatus(phase="Enqueued"),
        )

    @property
    def phase(self) -> QueueUnitPhase | None:
        return self.status.phase if self.status else None
