"""Each kind's adapter says where its pod specs are (`pod_spec_paths`), and the member's admission
policy checks every pod spec there (fleet.api.guard): a path that misses a template would let a
pod through unchecked. Every template the adapter reads its gang from is at one of its paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fleet.core.kinds import ADAPTERS, adapter_for, pod_spec_paths
from fleet.core.kinds.adapter import path_steps, specs_at
from fleet.core.kinds.trainjob import CLUSTER_RUNTIME, RUNTIME, TRAINJOB
from fleet.testing.workloads import (
    batch_job,
    jobset,
    kubeflow_job,
    mpijob,
    pytorchjob,
    raycluster,
    rayjob,
    training_runtime,
    trainjob,
)


def _tfjob() -> dict[str, Any]:
    job = pytorchjob("t")
    job["kind"] = "TFJob"
    job["spec"]["tfReplicaSpecs"] = job["spec"].pop("pytorchReplicaSpecs")
    job["spec"]["tfReplicaSpecs"]["Chief"] = job["spec"]["tfReplicaSpecs"].pop("Master")
    return job


SAMPLES: dict[str, Any] = {
    "PyTorchJob": pytorchjob("p"),
    "TFJob": _tfjob(),
    "MPIJob": mpijob("m"),
    "XGBoostJob": kubeflow_job("XGBoostJob", "x"),
    "PaddleJob": kubeflow_job("PaddleJob", "pd"),
    "JAXJob": kubeflow_job("JAXJob", "j"),
    "Job": batch_job("b"),
    "JobSet": jobset("js"),
    "RayCluster": raycluster("rc"),
    "RayJob": rayjob("rj"),
}


@pytest.mark.parametrize("adapter", [a for a in ADAPTERS if a.kind in SAMPLES], ids=str)
def test_every_template_of_the_gang_is_at_one_of_the_kinds_paths(adapter):
    obj = copy.deepcopy(SAMPLES[adapter.kind])
    found = [id(spec) for path in adapter.pod_spec_paths for spec in specs_at(obj, path)]
    templates = adapter.templates(obj)
    assert templates, adapter
    for t in templates:
        assert id(t.template["spec"]) in found, f"{adapter.kind}: {t.field}.spec not covered"


def test_a_rayjobs_submitter_pod_is_checked_too():
    job = rayjob("rj")
    job["spec"]["submitterPodTemplate"] = {"spec": {"containers": [{"name": "submit"}]}}
    adapter = adapter_for("ray.io/v1", "RayJob")
    assert adapter is not None
    specs = [s for p in adapter.pod_spec_paths for s in specs_at(job, p)]
    assert job["spec"]["submitterPodTemplate"]["spec"] in specs


def test_a_trainjobs_overrides_and_its_runtimes_templates_are_checked():
    runtime = training_runtime("torch", namespace="team-a")
    cluster_runtime = training_runtime("torch", cluster=True)
    job = trainjob("tj", "torch", namespace="team-a")
    job["spec"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": "x"}}
    ]
    (override,) = specs_at(job, TRAINJOB.pod_spec_paths[0])
    assert override == {"serviceAccountName": "x"}
    for kind, obj in ((RUNTIME, runtime), (CLUSTER_RUNTIME, cluster_runtime)):
        found = [id(s) for p in TRAINJOB.needs_pod_spec_paths[kind] for s in specs_at(obj, p)]
        needed = {(kind, (obj["metadata"].get("namespace") or ""), "torch"): obj}
        ref = job if kind == RUNTIME else trainjob("tj", "torch", cluster_runtime=True)
        templates = TRAINJOB._runtime_templates(ref, needed)
        assert templates and all(id(t.template["spec"]) in found for t in templates)


def test_every_kind_fleet_writes_pods_of_has_paths_and_they_are_well_formed():
    paths = pod_spec_paths()
    for adapter in ADAPTERS:
        assert adapter.pod_spec_paths, adapter
        assert paths[(adapter.api_version.rpartition("/")[0], adapter.kind)]
    assert ("trainer.kubeflow.org", CLUSTER_RUNTIME) in paths
    for each in paths.values():
        for path in each:
            path_steps(path)  # raises on a malformed one
    with pytest.raises(ValueError):
        path_steps("spec.a[].b.*.c")


def test_specs_at_gives_none_for_missing_steps():
    assert specs_at({"spec": {}}, "spec.replicatedJobs[].template.spec") == []
    assert specs_at({"spec": {"m": {"a": {"t": {"x": 1}}, "b": 3}}}, "spec.m.*.t") == [{"x": 1}]
