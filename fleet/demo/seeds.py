"""The seeds' objects, as the stories submit them (one copy; policies/ has the same as YAML).

- `PYTORCHJOB_POLICY`: the ACK One fleet example's PropagationPolicy (seed 001;
  policies/pytorchjob-gang.yaml): Gang, propagateDeps, failover after 30 s, purge Immediately.
- `TFJOB_POLICY`: the same policy for TFJobs (policies/tfjob-gang.yaml).
- `QUEUED_POLICY`: the fleet example's policy with the queue (seed 001;
  policies/pytorchjob-gang-queued.yaml): `suspension.scheduling: true`, only for PyTorchJobs
  labelled `fleet.dev/queue: "true"` (`QUEUE_LABEL`), so the other stories' jobs are not queued.
- `QUOTA_TREE`: the fleet example's ElasticQuotaTree (seed 001;
  policies/elasticquotatree-seed.yaml): `default` in leaf `root/child-2`, `kube-queue/max-jobs: 1`.
- `tfjob()`: the ACK gang-scheduling example's TFJob (seed 000), read unchanged from
  fleet/demo/manifests/tf-smoke-gpu.yaml.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

from fleet.api import constants as c
from fleet.testing.workloads import gang_policy

NAMESPACE = "default"
TOLERATION_SECONDS = 30

PYTORCHJOB_POLICY = gang_policy(
    "example-policy", NAMESPACE, toleration_seconds=TOLERATION_SECONDS, purge_mode="Immediately"
)
TFJOB_POLICY = gang_policy(
    "example-policy-tfjob",
    NAMESPACE,
    kinds=("TFJob",),
    toleration_seconds=TOLERATION_SECONDS,
    purge_mode="Immediately",
)

#: The label that puts a PyTorchJob under `QUEUED_POLICY` (a labelSelector match outranks
#: example-policy's kind-only match).
QUEUE_LABEL = {"fleet.dev/queue": "true"}


def _queued_policy() -> dict[str, Any]:
    policy = gang_policy(
        "example-policy-queued",
        NAMESPACE,
        toleration_seconds=TOLERATION_SECONDS,
        purge_mode="Immediately",
    )
    policy["spec"]["suspension"] = {"scheduling": True}
    for selector in policy["spec"]["resourceSelectors"]:
        selector["labelSelector"] = {"matchLabels": dict(QUEUE_LABEL)}
    return policy


QUEUED_POLICY = _queued_policy()

QUOTA_TREE: dict[str, Any] = {
    "apiVersion": c.ELASTIC_QUOTA_API_VERSION,
    "kind": "ElasticQuotaTree",
    "metadata": {"name": "elasticquotatree", "namespace": c.QUOTA_TREE_NAMESPACE},
    "spec": {
        "root": {
            "name": "root",
            "max": {
                "cpu": 999900,
                "memory": "400000Gi",
                "kube-queue/max-jobs": 10000000000,
                "nvidia.com/gpu": 100000,
            },
            "min": {"cpu": 9999, "memory": "40Gi"},
            "children": [
                {
                    "name": "child-2",
                    "max": {
                        "kube-queue/max-jobs": 1,
                        "cpu": 10000,
                        "nvidia.com/gpu": 10000,
                        "memory": "10000Gi",
                    },
                    "namespaces": [NAMESPACE],
                }
            ],
        }
    },
}


def manifest(name: str) -> dict[str, Any]:
    """A manifest shipped in fleet/demo/manifests/."""
    text = resources.files("fleet.demo").joinpath("manifests", name).read_text()
    obj: dict[str, Any] = yaml.safe_load(text)
    return obj


def tfjob() -> dict[str, Any]:
    """The seeds' TFJob tf-smoke-gpu (1 PS + 4 workers x 2 GPUs, min-available 5), in `default`."""
    job = manifest("tf-smoke-gpu.yaml")
    job["metadata"]["namespace"] = NAMESPACE
    return job
