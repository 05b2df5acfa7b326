"""Status: the member copy's state mirrored onto the fleet object and the binding.

Users look at the job they submitted to the fleet (`kubectl get pytorchjob`), so fleet copies the
member copy's conditions, replica statuses and times onto it, with fleet's own `Scheduled`
condition in front: the STATE column shows a Kubeflow job's last condition, which must stay the
job's own. Every condition fleet writes on a job is in its kind's shape and of its kind's types
(`KindAdapter.conditions`): a Kubeflow JobCondition on a PyTorchJob, a metav1.Condition on a
JobSet or TrainJob, none on a RayJob (which has no conditions list). The binding records the
per-cluster state (Karmada's aggregatedStatus), the phase the lifecycle derives from the job's
state, and the FullyApplied and Healthy conditions.
"""

from __future__ import annotations

from typing import Any

from fleet.api import ConditionStatus
from fleet.api import constants as c
from fleet.api.conditions import condition_of, upsert_condition
from fleet.controller import preservation
from fleet.controller.context import Job, Shell, save
from fleet.controller.keys import WorkloadKey
from fleet.controller.members import Member
from fleet.core import lifecycle
from fleet.core.kinds import ConditionStyle, KindAdapter, adapter_for
from fleet.kube import Obj

#: The fleet-side condition fleet puts in front of the mirrored member conditions.
FLEET_CONDITION = c.CONDITION_SCHEDULED


def conditions_of(obj: Obj) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


def kind_of(workload: Obj) -> KindAdapter | None:
    return adapter_for(str(workload.get("apiVersion")), str(workload.get("kind")))


def _generation(workload: Obj) -> int | None:
    generation = (workload.get("metadata") or {}).get("generation")
    return generation if isinstance(generation, int) else None


def mark_created(workload: Obj, reason: str, waits_for: str, now: float) -> None:
    """A fleet job with no conditions yet gets its kind's waiting condition (the training
    operator's `Created`, as the operator would write it), saying what it waits for on the
    fleet (`status` may be null). A kind with no such condition gets none."""
    kind = kind_of(workload)
    style = kind.conditions if kind is not None else None
    if kind is None or style is None or style.waiting is None or conditions_of(workload):
        return
    meta = workload["metadata"]
    status = workload.get("status") or {}
    status["conditions"] = with_job_condition(
        kind,
        [],
        style.waiting,
        reason,
        f"{workload['kind']} {meta['name']} is created on the fleet and waits {waits_for}.",
        now,
        generation=_generation(workload),
    )
    workload["status"] = status


def with_fleet_condition(
    kind: KindAdapter,
    conditions: list[dict[str, Any]],
    status: ConditionStatus,
    reason: str,
    message: str,
    now: float,
    *,
    generation: int | None = None,
) -> list[dict[str, Any]]:
    """The job's conditions with fleet's `Scheduled` first (see the module docstring), in its
    kind's shape; unchanged for a kind without conditions."""
    style = kind.conditions
    if style is None:
        return conditions
    return upsert_condition(
        conditions,
        FLEET_CONDITION,
        status,
        reason,
        message,
        now,
        first=True,
        **_shape(style, generation),
    )


def with_job_condition(
    kind: KindAdapter,
    conditions: list[dict[str, Any]],
    type_: str,
    reason: str,
    message: str,
    now: float,
    *,
    generation: int | None = None,
) -> list[dict[str, Any]]:
    """A condition of the job's kind set True, last (so it is what a Kubeflow job's STATE
    column shows), in the kind's shape."""
    style = kind.conditions
    if style is None:
        return conditions
    rest = [x for x in conditions if x.get("type") != type_]
    added = upsert_condition([], type_, "True", reason, message, now, **_shape(style, generation))
    return rest + added


def _shape(style: ConditionStyle, generation: int | None) -> dict[str, Any]:
    """upsert_condition's arguments for the kind's condition shape."""
    if style.shape == "kubeflow":
        return {"shape": "kubeflow"}
    if style.shape == "batch":
        return {"shape": "metav1"}  # a batch/v1 JobCondition has no observedGeneration
    return {"shape": "metav1", "observed_generation": generation}


async def patch_workload_status(shell: Shell, workload: Obj, status: dict[str, Any]) -> None:
    """Merge-patch the fleet workload's status; `workload` and the cache follow."""
    meta = workload["metadata"]
    updated = await shell.fleet.patch(
        workload["apiVersion"],
        workload["kind"],
        meta["name"],
        {"status": status},
        meta.get("namespace"),
        subresource="status",
    )
    workload["status"] = updated.get("status")
    workload["metadata"] = updated["metadata"]
    shell.triggers.workloads.offer(WorkloadKey.of(workload), updated)


async def set_scheduled_condition(
    shell: Shell, workload: Obj, status: ConditionStatus, reason: str, message: str
) -> None:
    """Set fleet's condition on the fleet workload; no write when it is unchanged (or its kind
    has no conditions)."""
    kind = kind_of(workload)
    if kind is None:
        return
    current = conditions_of(workload)
    conditions = with_fleet_condition(
        kind, current, status, reason, message, shell.clock.now(), generation=_generation(workload)
    )
    if conditions != current:
        await patch_workload_status(shell, workload, {"conditions": conditions})


def binding_conditions(
    shell: Shell, job: Job, *changes: tuple[str, ConditionStatus, str, str]
) -> list[dict[str, Any]]:
    """The binding's conditions with each (type, status, reason, message) set (on top of
    conditions decided but not written yet, if any)."""
    current = job.deferred_status.get("conditions") or [
        x.to_dict() for x in (job.binding.status.conditions if job.binding.status else None) or []
    ]
    now = shell.clock.now()
    for type_, status, reason, message in changes:
        current = upsert_condition(
            current,
            type_,
            status,
            reason,
            message,
            now,
            observed_generation=job.binding.metadata.generation,
        )
    return current


async def mirror(shell: Shell, job: Job, member: Member, copy: Obj) -> None:
    """Copy the member copy's state to the fleet object and the binding (each written only
    when something changed)."""
    seen = member.job(job.key.api_version, job.key.kind, job.key.namespace, job.key.name)
    if seen is not None and int(seen["metadata"].get("resourceVersion") or 0) > int(
        copy["metadata"].get("resourceVersion") or 0
    ):
        copy = seen
    member_status = dict(copy.get("status") or {})
    state = job.kind.state(member_status)
    scheduled = condition_of(conditions_of(job.workload), FLEET_CONDITION)
    # The binding's Scheduled condition, written or decided this reconcile (deferred).
    result = condition_of(binding_conditions(shell, job), c.CONDITION_SCHEDULED)
    current = job.workload.get("status") or {}
    # A failure of this copy is failed over while the policy fails over and fleet has not
    # given up on the job (maxFailovers).
    fails_over = job.failover is not None and job.life.gave_up is None
    mirrored = job.kind.fleet_status(member_status, current, fails_over=fails_over)
    # Fleet's condition as the fleet job has it, in front of the member's: unchanged, it is kept
    # as it is (timestamps included), so a reconcile that observed nothing new writes nothing.
    # A gang that has not started in the member within its deadline is not scheduled there:
    # False, GangUnschedulable, with the member's word (`failovers.judge`).
    if "conditions" in mirrored:
        member_conditions = [x for x in mirrored["conditions"] if x.get("type") != FLEET_CONDITION]
        mirrored["conditions"] = with_fleet_condition(
            job.kind,
            [scheduled, *member_conditions] if scheduled else member_conditions,
            *(
                ("False", c.REASON_GANG_UNSCHEDULABLE, job.stuck)
                if job.stuck is not None
                else (
                    "True",
                    c.REASON_SCHEDULED,
                    result.get("message")
                    or (scheduled.get("reason") == c.REASON_SCHEDULED and scheduled.get("message"))
                    or f"scheduled to {member.name}",
                )
            ),
            shell.clock.now(),
            generation=_generation(job.workload),
        )
    # A first dispatch whose copy has reported nothing yet leaves the fleet job's status alone:
    # its Scheduled condition goes in with the first state the member's operator reports (the
    # binding and the ScheduleBindingSucceed event already say where it went). A job that shows
    # something (it waited, or a failover, or its gang is stuck) is told at once.
    first_word = not member_status and not current.get("conditions") and job.stuck is None
    if not first_word and any(current.get(k) != v for k, v in mirrored.items()):
        await patch_workload_status(shell, job.workload, mirrored)

    now = shell.clock.now()
    life = lifecycle.observed(lifecycle.recovered(job.life, now), state, now)
    # A binding created with its decision whose status was never written (a restart in
    # between, see placing) gets the Scheduled condition now, with what it is known by.
    placed = (
        ()
        if result.get("status") == "True"
        else ((c.CONDITION_SCHEDULED, "True", c.REASON_SCHEDULED, f"scheduled to {member.name}"),)
    )
    health = lifecycle.health_of(state)
    unhealthy = health == "Unhealthy"
    item: dict[str, Any] = {
        "clusterName": member.name,
        "applied": True,
        "health": "Unhealthy" if job.stuck is not None else health,
        "jobState": state,
    }
    if member_status and preservation.wants_status(job.binding):
        # Karmada's AggregatedStatusItem.status: what statePreservation reads when the member
        # can no longer be asked (a lost cluster, a restarted controller).
        item["status"] = member_status
    await save(
        shell,
        job,
        life,
        status={"aggregatedStatus": [item]},
        conditions=binding_conditions(
            shell,
            job,
            *placed,
            (
                c.CONDITION_FULLY_APPLIED,
                "True",
                c.REASON_FULLY_APPLIED,
                f"applied to {member.name}",
            ),
            (c.CONDITION_HEALTHY, "False", c.REASON_GANG_UNSCHEDULABLE, job.stuck)
            if job.stuck is not None and not unhealthy
            else (
                c.CONDITION_HEALTHY,
                "False" if unhealthy else "True",
                c.REASON_UNHEALTHY if unhealthy else c.REASON_HEALTHY,
                f"{job.key.kind} is {state} in {member.name}",
            ),
        ),
    )
