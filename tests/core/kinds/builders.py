"""Small manifests for the adapters' tests."""

from __future__ import annotations

from typing import Any


def pod_template(cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **extra},
    }


def cond(type_: str, status: str = "True") -> dict[str, str]:
    return {"type": type_, "status": status}


def fleet_meta(name: str = "j", **extra: Any) -> dict[str, Any]:
    """Metadata as the fleet's API server returns it."""
    return {"name": name, "namespace": "ns", "uid": "fleet-uid", "resourceVersion": "7", **extra}
