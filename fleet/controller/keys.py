"""The key every controller index and the work queue use for one fleet workload."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True, order=True)
class WorkloadKey:
    """apiVersion, kind, namespace and name of a fleet-side workload."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> WorkloadKey:
        meta = obj.get("metadata") or {}
        return cls(
            str(obj.get("apiVersion") or ""),
            str(obj.get("kind") or ""),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
        )

    @classmethod
    def of_reference(cls, ref: Mapping[str, Any]) -> WorkloadKey:
        """From a GangBinding's `spec.resource`."""
        return cls(
            str(ref.get("apiVersion") or ""),
            str(ref.get("kind") or ""),
            str(ref.get("namespace") or ""),
            str(ref.get("name") or ""),
        )

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"
