"""Every condition fleet writes on a fleet job is of its kind's shape and types
(`KindAdapter.conditions`): a JobSet that fails over or is given up shows JobSet's own
conditions, a PyTorchJob the training operator's, a RayJob (no conditions list) its own words."""

from __future__ import annotations

import json
from typing import Any

from fleet.api import constants as c
from fleet.controller.status_mirror import (
    mark_created,
    with_fleet_condition,
    with_job_condition,
)
from fleet.core import lifecycle
from fleet.core.gangmarks import COSCHEDULING, KOORDINATOR
from fleet.core.kinds import ADAPTERS, adapter_for
from fleet.testing.workloads import (
    gang_policy,
    jobset,
    pytorchjob,
    rayjob,
    training_runtime,
    trainjob,
)
from tests.controller.harness import NAMESPACE, PYTORCH, World, conditions

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
#: metav1.Condition's fields: what a JobSet's, TrainJob's or RayCluster's conditions hold.
METAV1 = {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"}
NOW = 1_750_000_000.0


def _kind(api_version: str, kind: str) -> Any:
    found = adapter_for(api_version, kind)
    assert found is not None
    return found


def _placed_jobset(world: World, **policy: Any) -> Any:
    for name in ("member-1", "member-2"):
        world.add_member(name, gpus=8, kinds=(PYTORCH, JOBSET))
    world.apply_policy(gang_policy("gang", NAMESPACE, kinds=("JobSet",), **policy))
    return world.submit(jobset("js", workers=2))


async def test_a_jobset_that_fails_over_has_jobsets_own_conditions_on_the_fleet():
    world = World()
    key = _placed_jobset(world, toleration_seconds=0)
    await world.reconcile(key)
    binding = world.binding(key) or {}
    first = world.members[binding["spec"]["clusters"][0]["name"]]
    assert first.object(JOBSET, "js") is not None
    first.set_status(
        JOBSET,
        "js",
        {
            "terminalState": "Failed",
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "FailedJobs",
                    "message": "jobset failed due to failed jobs",
                    "lastTransitionTime": "2025-06-15T00:00:00Z",
                }
            ],
        },
    )

    mark = len(world.fleet_api.requests)
    await world.reconcile(key)  # tolerationSeconds 0: failed over
    await world.reconcile(key)  # and placed again

    assert world.events("FailoverTriggered", key)
    # What the failover wrote on the fleet's JobSet: JobSet's terms, no Kubeflow condition.
    (moved, *_) = [
        json.loads(r.content)["status"]
        for r in world.fleet_api.requests[mark:]
        if r.method == "PATCH" and r.url.path.endswith("/jobsets/js/status")
    ]
    types = {x["type"]: x for x in moved["conditions"]}
    assert set(types) == {c.CONDITION_SCHEDULED}  # the failed copy's Failed dropped
    scheduled = types[c.CONDITION_SCHEDULED]
    assert (scheduled["status"], scheduled["reason"]) == ("False", c.REASON_FAILED_OVER)
    # metav1.Condition's shape: observedGeneration, no Kubeflow lastUpdateTime.
    assert set(scheduled) == METAV1
    assert moved["terminalState"] is None  # `kubectl get jobset` shows no end while it moves

    # And as the fleet's JobSet stands once placed again: no Kubeflow condition, no end.
    workload = world.workload(key) or {}
    found = conditions(workload)
    assert set(found) == {c.CONDITION_SCHEDULED}
    assert set(found[c.CONDITION_SCHEDULED]) == METAV1
    assert found[c.CONDITION_SCHEDULED]["observedGeneration"] == workload["metadata"]["generation"]
    assert (workload.get("status") or {}).get("terminalState") is None


async def test_a_jobset_given_up_is_failed_in_jobsets_terms():
    world = World()
    key = _placed_jobset(world, toleration_seconds=0, max_failovers=0)
    await world.reconcile(key)
    binding = world.binding(key) or {}
    first = world.members[binding["spec"]["clusters"][0]["name"]]
    first.set_status(JOBSET, "js", {"terminalState": "Failed"})
    await world.reconcile(key)
    await world.reconcile(key)

    workload = world.workload(key) or {}
    failed = conditions(workload)["Failed"]
    assert (failed["status"], failed["reason"]) == ("True", lifecycle.GAVE_UP_REASON)
    assert set(failed) == METAV1
    assert workload["status"]["terminalState"] == "Failed"
    assert "Restarting" not in conditions(workload)


def test_each_kind_gets_fleets_condition_in_its_own_shape():
    for kind in ADAPTERS:
        out = with_fleet_condition(kind, [], "False", "NoClusterFit", "waits", NOW, generation=3)
        style = kind.conditions
        if style is None:
            assert out == []  # RayJob: no conditions list, nothing written
            continue
        (cond,) = out
        if style.shape == "kubeflow":
            assert "lastUpdateTime" in cond and "observedGeneration" not in cond
        elif style.shape == "batch":
            assert "lastUpdateTime" not in cond and "observedGeneration" not in cond
        else:
            assert set(cond) == METAV1 and cond["observedGeneration"] == 3


def test_only_a_kind_with_a_waiting_condition_gets_one_while_it_waits():
    waiting = {}
    for name, job in (
        ("PyTorchJob", pytorchjob("p")),
        ("JobSet", jobset("js", workers=1)),
        ("RayJob", rayjob("r")),
    ):
        job["metadata"].update(namespace=NAMESPACE, generation=1)
        mark_created(job, "FleetPending", "for a cluster", NOW)
        waiting[name] = [x["type"] for x in (job.get("status") or {}).get("conditions") or []]
    assert waiting == {"PyTorchJob": ["Created"], "JobSet": [], "RayJob": []}


def test_the_kubeflow_shape_stays_on_kubeflow_jobs():
    kind = _kind("kubeflow.org/v1", "PyTorchJob")
    out = with_job_condition(kind, [], "Restarting", "FailingOver", "moved", NOW)
    assert out[0]["type"] == "Restarting" and "lastUpdateTime" in out[0]


def test_a_rayjob_fails_over_and_gives_up_in_kuberays_words():
    kind = _kind("ray.io/v1", "RayJob")
    assert kind.conditions is None
    assert kind.fleet_word("Restarting", "FailingOver", "moved")["jobDeploymentStatus"] == (
        "Retrying"
    )
    assert kind.fleet_word("Failed", "MaxFailoversReached", "gave up")["jobDeploymentStatus"] == (
        "Failed"
    )


# -- a kind that cannot be gang-scheduled in a member is not sent there --------------------------

TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")


async def test_a_trainjob_whose_runtime_gangs_for_coscheduling_is_not_sent_to_koordinator():
    world = World()
    koord = world.add_member("member-1", gpus=8, kinds=(PYTORCH, TRAINJOB))
    cosched = world.add_member("member-2", gpus=8, kinds=(PYTORCH, TRAINJOB))
    koord.member.declared_gang_scheduler = KOORDINATOR
    cosched.member.declared_gang_scheduler = COSCHEDULING
    world.fleet_api.put(training_runtime("torch", namespace=NAMESPACE, coscheduling=True))
    world.apply_policy(gang_policy("gang", NAMESPACE, kinds=("TrainJob",)))
    key = world.submit(trainjob("tj", "torch", nodes=2))

    await world.reconcile(key)

    binding = world.binding(key) or {}
    assert [x["name"] for x in binding["spec"]["clusters"]] == ["member-2"]
    scheduled = conditions(binding)[c.CONDITION_SCHEDULED]
    assert "member-1" in scheduled["message"]
    assert "cannot gang-schedule this TrainJob" in scheduled["message"]
    # The copy's pods carry fleet's labels through podTemplateOverrides; Trainer makes the gang.
    copy = cosched.object(TRAINJOB, "tj")
    assert copy is not None
    (entry,) = copy["spec"]["podTemplateOverrides"]
    uid = (world.workload(key) or {})["metadata"]["uid"]
    assert entry["metadata"]["labels"] == {c.FLEET_UID_LABEL: uid, c.ROLE_LABEL: "node"}
    assert koord.object(TRAINJOB, "tj") is None
