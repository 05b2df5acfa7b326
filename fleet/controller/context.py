"""What every step of a reconcile shares: the controller's parts, and the workload at hand."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from fleet.api import GangBinding
from fleet.controller.bindings import BindingStore, failover_settings
from fleet.controller.clock import Clock
from fleet.controller.events import EventRecorder
from fleet.controller.keys import WorkloadKey
from fleet.controller.members import MemberRegistry
from fleet.controller.metrics import Metrics
from fleet.controller.policies import AnyPolicy, PolicyIndex
from fleet.controller.queue.kubequeue import KubeQueue
from fleet.controller.settings import Settings
from fleet.controller.triggers import Triggers
from fleet.controller.workqueue import WorkQueue
from fleet.core import ledger, lifecycle
from fleet.core.arrivals import RecentArrivals
from fleet.core.failover import FailoverSettings
from fleet.core.kinds import KindAdapter, Needed
from fleet.core.workload import Gang
from fleet.kube import KubeClient, Obj


@dataclasses.dataclass
class Shell:
    """The controller's parts a reconcile step may use."""

    fleet: KubeClient
    members: MemberRegistry
    policies: PolicyIndex
    bindings: BindingStore
    triggers: Triggers
    queue: WorkQueue[WorkloadKey]
    events: EventRecorder
    metrics: Metrics
    settings: Settings
    clock: Clock
    #: Kube Queue: the admission and its objects (trees, Queues, QueueUnits).
    kube_queue: KubeQueue
    #: The gangs bound lately: the workload mix the fragmentation score expects (learned here,
    #: as every new binding is made; rebuilt from the bindings when a replica starts leading,
    #: `fleet.controller.arrivals`).
    arrivals: RecentArrivals = dataclasses.field(default_factory=RecentArrivals)


@dataclasses.dataclass
class Job:
    """One bound workload during one reconcile: the fleet object, its binding (as stored and as
    the core's lifecycle value), and its gang."""

    key: WorkloadKey
    kind: KindAdapter
    workload: Obj
    binding: GangBinding
    life: lifecycle.Binding
    gang: Gang
    #: What the kind reads besides the job (a TrainJob's runtime), as fetched from the fleet
    #: this reconcile (`KindAdapter.needs`): where its pods' templates and gang are.
    needed: Needed = dataclasses.field(default_factory=dict)
    #: Status fields decided but not written yet: the next `save` writes them with its own
    #: (see `save(defer_status=True)`); the reconcile's last save always comes.
    deferred_status: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: The copies the job may still have outside its target, as this reconcile's purge found
    #: them (`failovers.purge_old_copies`, `fleet.core.ledger`).
    outside: tuple[ledger.Outside, ...] = ()
    #: Why the gang has not started in its member within its deadline, as this reconcile's
    #: failover judgement found it (`failover.Stay.stuck`); the mirror says it.
    stuck: str | None = None

    @property
    def uid(self) -> str:
        uid: str = self.workload["metadata"]["uid"]
        return uid

    @property
    def components(self) -> list[tuple[str, int]]:
        return [(c.name, c.replicas) for c in self.gang.components]

    @property
    def failover(self) -> FailoverSettings | None:
        return failover_settings(self.binding)

    def policy(self, shell: Shell) -> AnyPolicy | None:
        return shell.policies.get(self.binding.spec.policy)

    def scheduler_name(self, shell: Shell) -> str:
        """The policy's schedulerName: the source of ScheduleBinding events (as ACK prints)."""
        policy = self.policy(shell)
        return (policy.spec.scheduler_name if policy else None) or "default-scheduler"


async def save(
    shell: Shell,
    job: Job,
    life: lifecycle.Binding | None = None,
    *,
    conditions: list[dict[str, Any]] | None = None,
    status: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
    observed: bool = False,
    defer_status: bool = False,
) -> None:
    """Write the job's binding (its lifecycle, if given, and other fields); `job` follows.
    `observed`: the write completes a decision on the binding's current spec
    (`status.observedGeneration`, see `BindingStore.save`). `defer_status`: write the spec
    (or create the binding) now and keep the status changes for the next save, which writes
    them together with its own: one status write instead of two (docs/controller.md says why
    that is crash safe where it is used)."""
    job.binding, job.deferred_status = await shell.bindings.save(
        job.key,
        job.binding,
        life=life,
        components=job.components,
        multi_role=job.gang.multi_role,
        conditions=conditions,
        status=status,
        spec=spec,
        observed=observed,
        carried=job.deferred_status,
        defer_status=defer_status,
    )
    if life is not None:
        job.life = life
