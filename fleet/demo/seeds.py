"""The seeds' objects, as the stories submit them (one copy; policies/ has the same as YAML).

- `PYTORCHJOB_POLICY`: the ACK One fleet example's PropagationPolicy (seed 001;
  policies/pytorchjob-gang.yaml): Gang, propagateDeps, failover after 30 s, purge Immediately.
- `TFJOB_POLICY`: the same policy for TFJobs (policies/tfjob-gang.yaml).
- `tfjob()`: the ACK gang-scheduling example's TFJob (seed 000), read unchanged from
  fleet/demo/manifests/tf-smoke-gpu.yaml.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

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
