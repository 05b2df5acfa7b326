"""An elastic PyTorchJob on real API servers and the training operator (docs/kinds.md, "Elastic
PyTorchJobs"): its gang is the workers it must start with (`minReplicas`), so it is placed where
only those fit, and the member's gang scheduler starts them without waiting for the rest.
"""

from __future__ import annotations

from typing import Any

from fleet.core.kinds import adapter_for
from fleet.testing.kube import wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import PYTORCHJOB, Fleet


def _elastic(namespace: str) -> dict[str, Any]:
    """Four workers of 1 GPU, elastic from 2 to 4 (as the training operator's own elastic
    examples: workers only, c10d rendezvous)."""
    job = pytorchjob("elastic", workers=4, gpus=1, namespace=namespace)
    specs = job["spec"]["pytorchReplicaSpecs"]
    del specs["Master"]
    specs["Worker"]["template"]["spec"]["nodeSelector"] = {"test": namespace}
    job["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d"}
    return job


def test_an_elastic_pytorchjob_starts_where_only_its_minimum_fits(
    live: Fleet, namespace: str, add_nodes: Any
) -> None:
    add_nodes("member-1", count=1, gpu=2, labels={"test": namespace})  # 2 of its 4 workers
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_elastic(namespace))

    member = wait_until(lambda: live.target(namespace, "elastic"), what="the job placed")
    assert member == "member-1"
    # The binding names the member before the copy is created there: wait for the copy.
    copy = wait_until(
        lambda: live.clusters[member].get(*PYTORCHJOB, "elastic", namespace),
        what="the copy in member-1",
    )
    assert copy["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 2

    adapter = adapter_for(*PYTORCHJOB)
    assert adapter is not None
    selector = adapter.pod_selector("elastic")

    def phases() -> list[str] | None:
        pods = live.clusters[member].pods(namespace, selector)
        found = sorted(str(p["status"].get("phase")) for p in pods)
        return found if found == ["Pending", "Pending", "Running", "Running"] else None

    # The two workers that fit run at once; the other two wait for room in the member.
    wait_until(phases, timeout=120, what="two workers running and two pending in member-1")
