"""MPIJob: the training operator's (`kubeflow.org/v1`).

mpi-operator v2's MPIJob (`kubeflow.org/v2beta1`) is not dispatched: the sandbox cannot run
mpi-operator beside the training operator (both serve `mpijobs.kubeflow.org`, each with its own
version and no conversion), so nothing would prove it end to end (docs/kinds.md).

Everything a Kubeflow job has (`kubeflow.KubeflowJob`), with the launcher first. What differs:

* Counted at placement: the training operator (v1.9.3, `pkg/controller.v1/mpi`, `newLauncher`)
  gives the v1 launcher pod a `kubectl-delivery` init container requesting (and limited to)
  100m CPU, 512Mi memory and 5Gi ephemeral-storage, always. The launcher's requests are those
  of its template with that init container added (the pod needs the larger of its containers'
  sum and any init container), so a member whose nodes lack 5Gi of ephemeral-storage is not
  chosen for a job whose launcher could never start there.
* `kubectl amc`: v1 pods are `<job>-launcher` (one launcher, no index) and
  `<job>-worker-<index>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fleet.core.kinds.adapter import PodTemplate
from fleet.core.kinds.kubeflow import KubeflowJob

#: The init container the training operator adds to a v1 MPIJob's launcher (its constants
#: initContainerCpu, initContainerMem, initContainerEphStorage; requests equal limits).
LAUNCHER_INIT_CONTAINER: Final = {
    "name": "kubectl-delivery",
    "resources": {
        "requests": {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"},
        "limits": {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"},
    },
}


class TrainingOperatorMPIJob(KubeflowJob):
    """The v1 MPIJob: the launcher's init container counted, the launcher's pod unindexed."""

    def pod_spec(self, obj: Mapping[str, Any], template: PodTemplate) -> Mapping[str, Any]:
        spec = super().pod_spec(obj, template)
        if template.role != "Launcher":
            return spec
        inits = spec.get("initContainers") or []
        if not isinstance(inits, list):
            return spec  # malformed: the requests reading names the field
        return {**spec, "initContainers": [*inits, LAUNCHER_INIT_CONTAINER]}

    def pod_name(self, job: str, component: str, index: int) -> str:
        if component == "launcher":
            return f"{job}-launcher"
        return super().pod_name(job, component, index)


MPIJOB = TrainingOperatorMPIJob(
    "kubeflow.org/v1",
    "MPIJob",
    "spec.mpiReplicaSpecs",
    ("Launcher", "Worker"),
    added="launcher: `kubectl-delivery` init container, 100m CPU, 512Mi, 5Gi "
    "ephemeral-storage (counted)",
)
