"""Each kind's declared run-time limit (`KindAdapter.run_limit_seconds`): what a reclaim's worth
rule reads as `activeDeadlineSeconds` or the kind's equivalent; None where the kind has none."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.core.kinds import adapter_for
from fleet.testing.workloads import batch_job, jobset, mpijob, pytorchjob, raycluster, rayjob


def limit_of(obj: dict[str, Any]) -> float | None:
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    return kind.run_limit_seconds(obj)


def test_kubeflow_jobs_declare_it_in_their_run_policy():
    job = pytorchjob("p")
    assert limit_of(job) is None
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 7200}
    assert limit_of(job) == 7200.0
    mpi = mpijob("m")
    mpi["spec"].setdefault("runPolicy", {})["activeDeadlineSeconds"] = 60
    assert limit_of(mpi) == 60.0


@pytest.mark.parametrize("make", [batch_job, rayjob])
def test_a_job_and_a_rayjob_declare_it_in_their_spec(make: Any):
    obj = make("j")
    assert limit_of(obj) is None
    obj["spec"]["activeDeadlineSeconds"] = 600
    assert limit_of(obj) == 600.0


@pytest.mark.parametrize("make", [jobset, raycluster])
def test_kinds_without_a_limit_declare_none(make: Any):
    obj = make("x")
    obj["spec"]["activeDeadlineSeconds"] = 600  # not a field of theirs
    assert limit_of(obj) is None


@pytest.mark.parametrize("value", [0, -5, "600", True, None])
def test_only_a_positive_integer_is_a_limit(value: Any):
    job = pytorchjob("p")
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": value}
    assert limit_of(job) is None
