from typing import Any

import pytest

from fleet.core.errors import FieldError
from fleet.core.requests import pod_requests
from fleet.core.resources import Resources

Gi = 2**30


def c(
    requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def test_containers_add_up_and_take_a_pod_slot() -> None:
    spec = {"containers": [c({"cpu": "500m", "memory": "1Gi"}), c({"cpu": "1"})]}
    assert pod_requests(spec) == Resources(cpu=1500, memory=Gi, pods=1)


def test_limit_stands_in_for_a_missing_request_per_resource_and_container() -> None:
    spec = {
        "containers": [
            c({"cpu": "250m"}, {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": 2}),
            c(None, {"cpu": "500m"}),
        ]
    }
    # first container: cpu request kept (250m), memory and gpu from limits; second: cpu from limit
    assert pod_requests(spec) == Resources(
        {"cpu": 750, "memory": 2 * Gi, "nvidia.com/gpu": 2, "pods": 1}
    )


def test_largest_init_container_wins_when_larger_than_the_sum() -> None:
    spec = {
        "initContainers": [c({"cpu": "3", "memory": "100Mi"}), c({"cpu": "1"})],
        "containers": [c({"cpu": "1", "memory": "1Gi"}), c({"cpu": "1"})],
    }
    # cpu: max(2, 3) = 3; memory: max(1Gi, 100Mi) = 1Gi
    assert pod_requests(spec) == Resources(cpu=3000, memory=Gi, pods=1)


def test_sidecars_run_alongside_later_init_containers_and_the_app() -> None:
    spec = {
        "initContainers": [
            c({"cpu": "500m"}, restartPolicy="Always"),  # sidecar
            c({"cpu": "2"}),  # runs while the sidecar runs: 2.5
            c({"memory": "1Gi"}, restartPolicy="Always"),  # second sidecar
        ],
        "containers": [c({"cpu": "1"})],
    }
    # app phase: 1 + 0.5 + 0 cpu, 1Gi memory; init peak: 2.5 cpu
    assert pod_requests(spec) == Resources(cpu=2500, memory=Gi, pods=1)


def test_overhead_is_added_on_top() -> None:
    spec = {"containers": [c({"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}}
    assert pod_requests(spec) == Resources(cpu=1250, memory=120 * 2**20, pods=1)


def test_pod_level_resources_override_the_container_aggregate() -> None:
    spec = {
        "resources": {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}},
        "containers": [c({"cpu": "1", "nvidia.com/gpu": 1})],
    }
    # cpu from pod requests, memory defaulted from the pod limit, gpu stays per container
    assert pod_requests(spec) == Resources(
        {"cpu": 4000, "memory": 8 * Gi, "nvidia.com/gpu": 1, "pods": 1}
    )


def test_empty_pod_still_takes_a_slot() -> None:
    assert pod_requests({"containers": [{"name": "x"}]}) == Resources(pods=1)


def test_errors_name_the_container_field() -> None:
    spec = {"containers": [c({"cpu": "1"}), c(None, {"nvidia.com/gpu": "abc"})]}
    with pytest.raises(FieldError) as err:
        pod_requests(spec, "spec.template.spec")
    assert str(err.value) == (
        "spec.template.spec.containers[1].resources.limits.nvidia.com/gpu: "
        "unparsable quantity 'abc'"
    )


def test_malformed_shapes_are_reported() -> None:
    with pytest.raises(FieldError, match=r"spec.containers: expected a list"):
        pod_requests({"containers": {"name": "x"}})
    with pytest.raises(FieldError, match=r"spec.containers\[0\].resources: expected an object"):
        pod_requests({"containers": [{"resources": 3}]})
