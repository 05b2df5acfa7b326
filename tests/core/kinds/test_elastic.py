"""Elastic PyTorchJobs (`spec.elasticPolicy`): the gang minimum is what must start at once (the
Master plus `minReplicas` workers), the member's gang is written with it, the queue charges the
declared replicas while it waits and what its member's HPA runs once it runs, and a Worker count
the member's HPA scaled is kept when the copy is applied again."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.core.gangmarks import COSCHEDULING, KOORDINATOR, KUBERNETES, VOLCANO
from fleet.core.kinds import gang_from_workload
from fleet.core.kinds.adapter import LABEL_MIN_AVAILABLE
from fleet.core.kinds.kubeflow import PYTORCHJOB, TFJOB
from fleet.core.workload import WorkloadError
from tests.core.kinds.builders import fleet_meta, pod_template

WORKER = "spec.pytorchReplicaSpecs.Worker"


def elastic(
    *,
    master: bool = True,
    replicas: int = 4,
    policy: dict[str, Any] | None = None,
    min_available: int | None = None,
) -> dict[str, Any]:
    """A PyTorchJob with `replicas` workers (1 CPU each, the Master 2) and `policy` as its
    elasticPolicy (minReplicas 2, maxReplicas 4 by default)."""
    specs: dict[str, Any] = {"Worker": {"replicas": replicas, "template": pod_template()}}
    if master:
        specs["Master"] = {"replicas": 1, "template": pod_template("2")}
    obj: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": fleet_meta("pj"),
        "spec": {
            "pytorchReplicaSpecs": specs,
            "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4} if policy is None else policy,
        },
    }
    if min_available is not None:
        obj["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": min_available}}
    return obj


@pytest.mark.parametrize(
    ("master", "min_member", "parts", "cpu"),
    [
        (True, 3, (("master", 1), ("worker", 2)), 4000),
        (False, 2, (("worker", 2),), 2000),
    ],
)
def test_the_minimum_is_the_master_and_min_replicas_workers(
    master: bool, min_member: int, parts: tuple[tuple[str, int], ...], cpu: int
) -> None:
    gang = gang_from_workload(elastic(master=master))
    assert (gang.min_member, gang.min_source) == (min_member, "spec.elasticPolicy.minReplicas")
    assert gang.minimum_parts == parts
    # Placement and reservations ask room for the minimum only...
    assert gang.minimum_requests.get("cpu") == cpu
    # ...the queue charges every Worker the job declares (replicas 4), not maxReplicas.
    assert PYTORCHJOB.charge(gang).get("cpu") == (6000 if master else 4000)


@pytest.mark.parametrize("master", [True, False])
def test_a_users_min_available_wins_over_the_elastic_minimum(master: bool) -> None:
    gang = gang_from_workload(elastic(master=master, min_available=4))
    assert (gang.min_member, gang.min_source) == (
        4,
        "spec.runPolicy.schedulingPolicy.minAvailable",
    )


def test_a_users_pod_group_label_wins_over_the_elastic_minimum() -> None:
    obj = elastic()
    for spec in obj["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["metadata"]["labels"] = {LABEL_MIN_AVAILABLE: "5"}
    assert gang_from_workload(obj).min_member == 5


@pytest.mark.parametrize(
    ("policy", "min_member"),
    [
        ({"maxReplicas": 3}, 4),  # the operator's default: minReplicas = maxReplicas
        ({"minReplicas": 1}, 2),  # maxReplicas = minReplicas
        ({}, 5),  # both the Worker replicas: every replica
    ],
)
def test_the_operators_defaults_for_the_bounds(policy: dict[str, Any], min_member: int) -> None:
    assert gang_from_workload(elastic(policy=policy)).min_member == min_member


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda o: o["spec"]["elasticPolicy"].update(minReplicas=5),
            "PyTorchJob ns/pj: spec.elasticPolicy.minReplicas: 5 is larger than the 4 replicas "
            f"of {WORKER}: set its replicas to at least 5 (the workers the job starts with)",
        ),
        (
            lambda o: o["spec"]["elasticPolicy"].update(minReplicas=0),
            "PyTorchJob ns/pj: spec.elasticPolicy.minReplicas: must be at least 1, got 0",
        ),
        (
            lambda o: o["spec"].update(elasticPolicy=[]),
            "PyTorchJob ns/pj: spec.elasticPolicy: expected an object, got []",
        ),
        (
            lambda o: o["spec"]["pytorchReplicaSpecs"].pop("Worker"),
            f"PyTorchJob ns/pj: {WORKER}: must be given when spec.elasticPolicy is",
        ),
    ],
)
def test_a_bad_elastic_policy_names_the_field(edit: Any, message: str) -> None:
    obj = elastic()
    edit(obj)
    with pytest.raises(WorkloadError) as error:
        gang_from_workload(obj)
    assert str(error.value) == message


def test_only_pytorchjob_reads_an_elastic_policy() -> None:
    obj = elastic()
    obj["kind"] = "TFJob"
    obj["spec"]["tfReplicaSpecs"] = obj["spec"].pop("pytorchReplicaSpecs")
    gang = TFJOB.gang(obj, gang_from_workload(elastic()).ref)
    assert gang.min_member == 5


@pytest.mark.parametrize("scheduler", [COSCHEDULING, VOLCANO, KOORDINATOR, None, KUBERNETES])
def test_the_members_gang_is_written_with_the_elastic_minimum(scheduler: str | None) -> None:
    obj = elastic()
    gang = gang_from_workload(obj)
    out = PYTORCHJOB.member_copy(obj, min_member=gang.min_member, gang_scheduler=scheduler)
    # The operator sizes its coscheduling / Volcano PodGroup from minAvailable (not from
    # elasticPolicy): 3, not the 5 replicas.
    assert out["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3
    labels = [
        s["template"]["metadata"].get("labels") or {}
        for s in out["spec"]["pytorchReplicaSpecs"].values()
    ]
    if scheduler in (KOORDINATOR, None):
        assert all(x[LABEL_MIN_AVAILABLE] == "3" for x in labels)
    out["metadata"]["uid"] = "member-uid"
    group = PYTORCHJOB.pod_group(out, min_member=gang.min_member, gang_scheduler=scheduler)
    if scheduler == KUBERNETES:
        assert group is not None
        assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3


METRICS = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]


def _member_copy(workers: int) -> dict[str, Any]:
    copy = PYTORCHJOB.member_copy(elastic(), min_member=3, gang_scheduler=None)
    copy["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers
    return copy


@pytest.mark.parametrize(("metrics", "kept"), [(METRICS, 3), (None, 4)])
def test_the_members_hpa_owns_the_worker_replicas_when_metrics_are_set(
    metrics: list[dict[str, Any]] | None, kept: int
) -> None:
    obj = elastic(policy={"minReplicas": 2, "maxReplicas": 4, "metrics": metrics})
    # The user's own key case ("worker") is kept; the member's copy reads "Worker".
    specs = obj["spec"]["pytorchReplicaSpecs"]
    specs["worker"] = specs.pop("Worker")
    desired = PYTORCHJOB.member_copy(obj, min_member=3, gang_scheduler=None)
    PYTORCHJOB.keep_member_owned(desired, _member_copy(3))
    assert desired["spec"]["pytorchReplicaSpecs"]["worker"]["replicas"] == kept
    assert desired["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3


@given(
    master=st.booleans(),
    replicas=st.integers(1, 8),
    low=st.integers(1, 8),
    high=st.integers(1, 8) | st.none(),
    min_available=st.integers(1, 9) | st.none(),
)
def test_the_minimum_never_exceeds_the_pods_the_job_creates(
    master: bool, replicas: int, low: int, high: int | None, min_available: int | None
) -> None:
    policy: dict[str, Any] = {"minReplicas": low}
    if high is not None:
        policy["maxReplicas"] = high
    obj = elastic(master=master, replicas=replicas, policy=policy, min_available=min_available)
    created = replicas + master
    try:
        gang = gang_from_workload(obj)
    except WorkloadError:
        # Refused only when a bound asks more than the job creates.
        assert (min_available is None and low > replicas) or (min_available or 0) > created
        return
    assert 1 <= gang.min_member <= created
    if min_available is None:
        assert gang.min_member == master + low
    assert sum(n for _, n in gang.minimum_parts) == gang.min_member


METRICS = [{"type": "Resource", "resource": {"name": "cpu"}}]


@pytest.mark.parametrize(
    ("policy", "scaled", "cpu"),
    [
        ({"minReplicas": 2, "maxReplicas": 4, "metrics": METRICS}, 2, 4000),  # its HPA's 2
        ({"minReplicas": 2, "maxReplicas": 4, "metrics": METRICS}, 3, 5000),
        ({"minReplicas": 2, "maxReplicas": 4}, 2, 6000),  # no HPA: as declared
    ],
)
def test_a_running_elastic_job_is_charged_the_workers_its_member_scaled_it_to(
    policy: dict[str, Any], scaled: int, cpu: int
) -> None:
    obj = elastic(policy=policy)
    gang = gang_from_workload(obj)
    copy = elastic(policy=policy)
    copy["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = scaled
    # The Master's 2 CPUs, and a CPU for each Worker the copy runs.
    assert PYTORCHJOB.running_charge(gang, copy).get("cpu") == cpu


def test_a_job_that_is_not_elastic_is_charged_as_declared_while_it_runs() -> None:
    obj = elastic(policy={"minReplicas": 2, "maxReplicas": 4, "metrics": METRICS})
    del obj["spec"]["elasticPolicy"]
    gang = gang_from_workload(obj)
    copy = elastic(policy={"minReplicas": 2, "maxReplicas": 4, "metrics": METRICS})
    copy["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    del copy["spec"]["elasticPolicy"]
    assert PYTORCHJOB.running_charge(gang, copy) == PYTORCHJOB.charge(gang)
