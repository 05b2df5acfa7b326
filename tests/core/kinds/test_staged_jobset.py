"""Staged JobSets (issue 34): `startupPolicyOrder: InOrder` and `dependsOn` make the JobSet
controller create one stage at a time, so the member-side gang is one per stage (its pods, its
group), while placement still holds room for the whole job."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.api import constants as c
from fleet.controller import copies
from fleet.core.gangmarks import COSCHEDULING, KOORDINATOR, KUBERNETES, VOLCANO
from fleet.core.kinds import adapter_for, gang_from_workload
from fleet.core.kinds.adapter import Stage
from fleet.core.workload import WorkloadError
from fleet.testing.workloads import jobset, jobset_depends_on, jobset_in_order

JOBSET = adapter_for("jobset.x-k8s.io/v1alpha2", "JobSet")
assert JOBSET is not None

#: The label naming a template's group, per gang scheduler that reads one.
GROUP_LABEL = {
    COSCHEDULING: c.COSCHEDULING_POD_GROUP_LABEL,
    KOORDINATOR: c.POD_GROUP_NAME_LABEL,
    KUBERNETES: "scheduling.fleet.dev/pod-group",
}


def _fleet(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"] |= {"namespace": "team-a", "uid": "u-1", "resourceVersion": "7"}
    return obj


def _copy(obj: dict[str, Any], scheduler: str | None, min_member: int) -> dict[str, Any]:
    """The member copy, as the member returns it (its own UID)."""
    out = copies.member_copy(
        obj, JOBSET, min_member=min_member, binding="b", fleet_id="f", gang_scheduler=scheduler
    )
    return {**out, "metadata": {**out["metadata"], "uid": "member-uid"}}


def _labels(out: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {t.component: t.template["metadata"]["labels"] for t in JOBSET.templates(out)}


def _multiple_depends_on() -> dict[str, Any]:
    """JobSet's `examples/depends-on/multiple-depends-on.yaml`: two initializers, then a worker
    that depends on both being Complete."""
    obj = jobset_depends_on("multiple-depends-on")
    init, _, worker = obj["spec"]["replicatedJobs"]
    model = copy.deepcopy(init) | {"name": "model-initializer"}
    init["name"] = "dataset-initializer"
    worker["dependsOn"] = [
        {"name": "dataset-initializer", "status": "Complete"},
        {"name": "model-initializer", "status": "Complete"},
    ]
    obj["spec"]["replicatedJobs"] = [init, model, worker]
    return obj


# -- the stages ----------------------------------------------------------------------------


def test_a_plain_jobset_is_one_gang():
    assert JOBSET.stages(jobset("j")) == ()
    any_order = jobset("j")
    any_order["spec"]["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    assert JOBSET.stages(any_order) == ()


def test_in_order_each_replicated_job_is_a_stage():
    assert JOBSET.stages(jobset_in_order()) == (
        Stage("driver", ("driver",), 1),
        Stage("workers", ("workers",), 4),
    )
    # replicas x min(parallelism, completions) per replicated job, as the gang counts them
    assert JOBSET.stages(_in_order(jobset("j", leaders=2, workers=3, worker_pods=2))) == (
        Stage("leader", ("leader",), 2),
        Stage("worker", ("worker",), 6),
    )


def _in_order(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    return obj


def test_depends_on_replicated_jobs_with_the_same_dependencies_are_one_stage():
    assert JOBSET.stages(jobset_depends_on()) == (
        Stage("initializer", ("initializer",), 1),
        Stage("launcher", ("launcher",), 1),
        Stage("worker", ("worker",), 4),
    )
    assert JOBSET.stages(_multiple_depends_on()) == (
        Stage("dataset-initializer", ("dataset-initializer", "model-initializer"), 2),
        Stage("worker", ("worker",), 4),
    )


def test_in_order_with_depends_on_still_starts_one_replicated_job_at_a_time():
    obj = _in_order(_multiple_depends_on())
    assert [s.components for s in JOBSET.stages(obj)] == [
        ("dataset-initializer",),
        ("model-initializer",),
        ("worker",),
    ]


def test_one_stage_with_pods_is_one_gang_as_before():
    one = _in_order(jobset("j"))
    one["spec"]["replicatedJobs"] = one["spec"]["replicatedJobs"][:1]
    assert JOBSET.stages(one) == ()
    none_first = _in_order(jobset("j"))
    none_first["spec"]["replicatedJobs"][0]["replicas"] = 0
    assert JOBSET.stages(none_first) == ()


def test_placement_holds_room_for_every_stage():
    """The gang placement reads is the whole job, staged or not: a member must hold it all."""
    for obj, pods in ((jobset_in_order(), 5), (jobset_depends_on(), 6)):
        gang = gang_from_workload(_fleet(obj))
        assert gang.min_member == gang.total_replicas == pods
        assert sum(s.pods for s in JOBSET.stages(obj)) == pods


# -- what JobSet refuses, fleet refuses naming the field -----------------------------------


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (
            lambda js: js[0].update(dependsOn=[{"name": "launcher", "status": "Ready"}]),
            "spec.replicatedJobs[0].dependsOn",
        ),
        (
            lambda js: js[1].update(dependsOn=[{"name": "nope", "status": "Complete"}]),
            "spec.replicatedJobs[1].dependsOn[0].name",
        ),
        (
            lambda js: js[1].update(dependsOn=[{"name": "worker", "status": "Complete"}]),
            "spec.replicatedJobs[1].dependsOn[0].name",
        ),
        (
            lambda js: js[2].update(dependsOn=[{"name": "launcher", "status": "Started"}]),
            "spec.replicatedJobs[2].dependsOn[0].status",
        ),
        (
            lambda js: js[2].update(dependsOn={"name": "launcher"}),
            "spec.replicatedJobs[2].dependsOn",
        ),
        (
            lambda js: js[2].update(dependsOn=[{"status": "Ready"}]),
            "spec.replicatedJobs[2].dependsOn[0].name",
        ),
    ],
    ids=["first-depends", "unknown", "later", "status", "not-a-list", "no-name"],
)
def test_a_dependency_jobset_refuses_is_refused_naming_the_field(edit, field):
    obj = _fleet(jobset_depends_on())
    edit(obj["spec"]["replicatedJobs"])
    with pytest.raises(WorkloadError) as caught:
        gang_from_workload(obj)
    assert caught.value.field == field


def test_an_unknown_startup_order_is_refused_naming_the_field():
    obj = _fleet(jobset("j"))
    obj["spec"]["startupPolicy"] = {"startupPolicyOrder": "Sometimes"}
    with pytest.raises(WorkloadError) as caught:
        gang_from_workload(obj)
    assert caught.value.field == "spec.startupPolicy.startupPolicyOrder"


# -- the member-side gang per stage ---------------------------------------------------------


def test_coscheduling_one_pod_group_per_stage_each_named_by_its_templates():
    out = _copy(_fleet(jobset_depends_on()), COSCHEDULING, 6)
    assert {k: v[c.COSCHEDULING_POD_GROUP_LABEL] for k, v in _labels(out).items()} == {
        "initializer": "depends-on-initializer",
        "launcher": "depends-on-launcher",
        "worker": "depends-on-worker",
    }
    groups = JOBSET.pod_groups(out, min_member=6, gang_scheduler=COSCHEDULING)
    assert [(g["metadata"]["name"], g["spec"]) for g in groups] == [
        ("depends-on-initializer", {"minMember": 1}),
        ("depends-on-launcher", {"minMember": 1}),
        ("depends-on-worker", {"minMember": 4}),
    ]
    for g in groups:
        assert g["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
        assert g["metadata"]["namespace"] == "team-a"
        (owner,) = g["metadata"]["ownerReferences"]
        assert owner["uid"] == "member-uid" and owner["name"] == "depends-on"


def test_koordinator_labels_name_each_stage_and_its_minimum():
    out = _copy(_fleet(_multiple_depends_on()), KOORDINATOR, 6)
    labels = _labels(out)
    got = {
        k: (v[c.POD_GROUP_NAME_LABEL], v[c.POD_GROUP_MIN_AVAILABLE_LABEL])
        for k, v in labels.items()
    }
    assert got == {
        "dataset-initializer": ("multiple-depends-on-dataset-initializer", "2"),
        "model-initializer": ("multiple-depends-on-dataset-initializer", "2"),
        "worker": ("multiple-depends-on-worker", "4"),
    }
    assert JOBSET.pod_groups(out, min_member=6, gang_scheduler=KOORDINATOR) == []


def test_native_gang_one_pod_group_per_stage_with_the_same_topology():
    out = _copy(_fleet(jobset_in_order()), KUBERNETES, 5)
    assert {k: v[GROUP_LABEL[KUBERNETES]] for k, v in _labels(out).items()} == {
        "driver": "startup-driver-ready-driver",
        "workers": "startup-driver-ready-workers",
    }
    rack = "topology.kubernetes.io/rack"
    groups = JOBSET.pod_groups(out, min_member=5, gang_scheduler=KUBERNETES, topology=rack)
    assert [(g["metadata"]["name"], g["spec"]) for g in groups] == [
        (
            "startup-driver-ready-driver",
            {
                "schedulingPolicy": {"gang": {"minCount": 1}},
                "schedulingConstraints": {"topology": [{"key": rack}]},
            },
        ),
        (
            "startup-driver-ready-workers",
            {
                "schedulingPolicy": {"gang": {"minCount": 4}},
                "schedulingConstraints": {"topology": [{"key": rack}]},
            },
        ),
    ]


def test_a_staged_jobset_still_goes_nowhere_on_volcano():
    obj = _fleet(jobset_in_order())
    assert JOBSET.gang_refusal(obj, {}, gang_scheduler=VOLCANO, scheduler_name=None)
    assert JOBSET.pod_groups(_copy(obj, VOLCANO, 5), min_member=5, gang_scheduler=VOLCANO) == []


def test_a_plain_jobset_keeps_its_one_group_named_after_the_copy():
    for scheduler in (COSCHEDULING, KUBERNETES):
        out = _copy(_fleet(jobset("j")), scheduler, 5)
        assert {v[GROUP_LABEL[scheduler]] for v in _labels(out).values()} == {"j"}
        groups = JOBSET.pod_groups(out, min_member=5, gang_scheduler=scheduler)
        assert groups == [JOBSET.pod_group(out, min_member=5, gang_scheduler=scheduler)]
        assert groups[0]["metadata"]["name"] == "j"


def test_a_stage_never_waits_for_more_than_the_jobs_own_minimum():
    obj = _fleet(jobset_in_order())
    for t in obj["spec"]["replicatedJobs"]:
        t["template"]["spec"]["template"]["metadata"] = {
            "labels": {c.POD_GROUP_MIN_AVAILABLE_LABEL: "3"}
        }
    assert gang_from_workload(obj).min_member == 3
    out = _copy(obj, COSCHEDULING, 3)
    groups = JOBSET.pod_groups(out, min_member=3, gang_scheduler=COSCHEDULING)
    assert [g["spec"]["minMember"] for g in groups] == [1, 3]


def test_a_users_own_gang_labels_are_kept():
    obj = _fleet(jobset_in_order())
    worker = obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    worker["metadata"] = {"labels": {c.COSCHEDULING_POD_GROUP_LABEL: "mine"}}
    out = _copy(obj, COSCHEDULING, 5)
    assert _labels(out)["workers"][c.COSCHEDULING_POD_GROUP_LABEL] == "mine"
    assert _labels(out)["driver"][c.COSCHEDULING_POD_GROUP_LABEL] == "startup-driver-ready-driver"


def test_long_group_names_stay_label_values_and_apart():
    base = "j" * 40
    one, two = Stage("w" * 30 + "-a", ("a",), 1), Stage("w" * 30 + "-b", ("b",), 1)
    a, b = one.group_name(base), two.group_name(base)
    assert len(a) <= 63 and len(b) <= 63 and a != b
    assert a[0].isalnum() and a[-1].isalnum()
    assert Stage("x", ("x",), 1).group_name("short") == "short-x"


# -- the property ----------------------------------------------------------------------------


@st.composite
def staged_jobsets(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 5))
    replicated = []
    for i in range(n):
        pods = draw(st.integers(1, 4))
        job = jobset("j")["spec"]["replicatedJobs"][1]
        job = copy.deepcopy(job) | {"name": f"r{i}", "replicas": draw(st.integers(0, 3))}
        spec = job["template"]["spec"]
        spec["parallelism"], spec["completions"] = pods, draw(st.integers(1, 4))
        if i and draw(st.booleans()):
            names = draw(st.sets(st.integers(0, i - 1), min_size=1, max_size=min(i, 3)))
            job["dependsOn"] = [
                {"name": f"r{k}", "status": draw(st.sampled_from(["Ready", "Complete"]))}
                for k in sorted(names)
            ]
        replicated.append(job)
    obj = jobset("j")
    obj["spec"]["replicatedJobs"] = replicated
    order = draw(st.sampled_from([None, "AnyOrder", "InOrder"]))
    if order:
        obj["spec"]["startupPolicy"] = {"startupPolicyOrder": order}
    return _fleet(obj)


def _moments(obj: dict[str, Any]) -> list[list[str]]:
    """The replicated jobs the JobSet controller (v0.10.1, `reconcileReplicatedJobs`) creates
    at each reconcile, each batch run to its end before the next reconcile: an oracle of when
    pods exist, independent of the adapter's stages."""
    jobs = obj["spec"]["replicatedJobs"]
    in_order = (obj["spec"].get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    replicas = {j["name"]: j.get("replicas", 1) for j in jobs}
    created: set[str] = set()
    moments = []
    while True:
        batch: list[str] = []
        for j in jobs:
            deps = [d["name"] for d in j.get("dependsOn") or []]
            if not all(d in created or replicas[d] == 0 for d in deps):
                continue
            if j["name"] in created or (in_order and replicas[j["name"]] == 0):
                continue
            batch.append(j["name"])
            if in_order:
                break
        if not batch:
            return moments
        created.update(batch)
        moments.append(batch)


@given(obj=staged_jobsets(), scheduler=st.sampled_from([COSCHEDULING, KOORDINATOR, KUBERNETES]))
def test_no_stage_waits_for_pods_it_does_not_create(obj: dict[str, Any], scheduler: str) -> None:
    try:
        gang = gang_from_workload(obj)
    except WorkloadError:
        assert gang_total(obj) == 0  # a JobSet of no pods is no gang
        return
    out = _copy(obj, scheduler, gang.min_member)
    labels = _labels(out)
    pods = {t.component: t.replicas for t in JOBSET.templates(out)}
    group_of = {x: labels[x][GROUP_LABEL[scheduler]] for x in labels}
    groups = {
        g["metadata"]["name"]: g["spec"]
        for g in JOBSET.pod_groups(out, min_member=gang.min_member, gang_scheduler=scheduler)
    }

    def minimum(group: str) -> int:
        if scheduler == KOORDINATOR:
            first = next(x for x in labels if group_of[x] == group)
            return int(labels[first][c.POD_GROUP_MIN_AVAILABLE_LABEL])
        if scheduler == KUBERNETES:
            return int(groups[group]["schedulingPolicy"]["gang"]["minCount"])
        return int(groups[group]["minMember"])

    # Each time the JobSet controller creates pods, every group they join can form with the
    # pods that exist by then: none waits for pods only a later stage creates.
    existing: dict[str, int] = {}
    for batch in _moments(obj):
        for x in batch:
            existing[group_of[x]] = existing.get(group_of[x], 0) + pods[x]
        for x in batch:
            if pods[x]:
                assert 1 <= minimum(group_of[x]) <= existing[group_of[x]]
    # Every pod the job creates joins a group of its stage, and the stages hold every pod of
    # the job once: the room placement holds is the whole job.
    assert sum(existing.values()) == gang.total_replicas
    stages = JOBSET.stages(obj)
    if stages:
        assert sum(s.pods for s in stages) == gang.total_replicas
        staged = [x for s in stages for x in s.components]
        assert len(staged) == len(set(staged))
        assert len(groups) in (0, len(stages))


def gang_total(obj: dict[str, Any]) -> int:
    return sum(t.replicas for t in JOBSET.templates(obj))
