"""MPIJob (training operator v1): the launcher's init container counted at placement, the
launcher's pod name."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.core.inventory import NodeInfo
from fleet.core.kinds import gang_from_workload
from fleet.core.kinds.mpijob import MPIJOB
from fleet.core.placement import place
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import WorkloadError
from tests.core.kinds.builders import fleet_meta, pod_template

GI = 1024**3


def mpijob(api: str = "kubeflow.org/v1", launcher_cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": "MPIJob",
        "metadata": fleet_meta("mpi"),
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": pod_template(cpu=launcher_cpu)},
                "Worker": {"replicas": 2, "template": pod_template(cpu="2")},
            }
        },
    }


def test_the_launcher_asks_for_its_init_container_too() -> None:
    launcher, worker = gang_from_workload(mpijob()).components
    assert launcher.name == "launcher"
    # max(its containers, the kubectl-delivery init container: 100m, 512Mi, 5Gi).
    assert launcher.requests == Resources(
        {"cpu": 1000, "memory": 512 * 1024**2, "ephemeral-storage": 5 * GI, "pods": 1}
    )
    assert worker.requests == Resources({"cpu": 2000, "pods": 1})


def test_a_small_launcher_asks_the_init_containers_cpu() -> None:
    launcher = gang_from_workload(mpijob(launcher_cpu="50m")).components[0]
    assert launcher.requests.get("cpu") == 100


def test_mpi_operator_v2_is_no_kind_fleet_dispatches() -> None:
    with pytest.raises(WorkloadError, match="v2beta1"):
        gang_from_workload(mpijob(api="kubeflow.org/v2beta1"))


def test_the_fleet_object_is_not_modified() -> None:
    obj = mpijob()
    gang_from_workload(obj)
    assert "initContainers" not in obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]


def test_malformed_init_containers_name_the_field() -> None:
    obj = mpijob()
    obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["initContainers"] = "kubectl"
    with pytest.raises(WorkloadError, match=r"Launcher\.template\.spec\.initContainers"):
        gang_from_workload(obj)


def test_pods_are_named_as_the_training_operator_names_them() -> None:
    assert MPIJOB.pod_name("mpi", "launcher", 0) == "mpi-launcher"
    assert MPIJOB.pod_name("mpi", "worker", 1) == "mpi-worker-1"


def test_the_copy_carries_the_gang_minimum() -> None:
    out = MPIJOB.member_copy(mpijob(), min_member=3, gang_scheduler=None)
    assert out["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3
    assert "initContainers" not in out["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]


def test_placement_counts_the_launchers_ephemeral_storage() -> None:
    """A member whose nodes advertise no ephemeral-storage could never start the launcher."""
    gang = gang_from_workload(mpijob())
    shape = {"cpu": 32_000, "memory": 128 * GI, "pods": 110}
    bare = ClusterSnapshot.build("member-1", [NodeInfo("n1", Resources(shape), {}, (), False)])
    disk = Resources({**shape, "ephemeral-storage": 100 * GI})
    real = ClusterSnapshot.build("member-2", [NodeInfo("n1", disk, {}, (), False)])
    decision = place(gang, [bare, real])
    assert decision.placement is not None and decision.placement.cluster == "member-2"
    (sentence,) = decision.sentences()
    assert sentence.startswith("member-1:") and "ephemeral-storage" in sentence
