"""What a kind's own reader finds in a job: its pod templates, each with a pod count.

Shared by the kinds whose templates are found by code rather than declared (see `kinds.PodSets`):
JobSet's replicated jobs, Ray's head and worker groups. Pure; errors name the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.core.errors import FieldError


@dataclass(frozen=True, slots=True)
class PodSet:
    """One pod template of a job, found by a kind's own reader (`PodSets`): how many pods it
    stands for, and how many of them the gang needs."""

    name: str
    pods: int
    #: The object's own template dict (so a caller holding a copy can edit it in place).
    template: dict[str, Any]
    #: Field path of `template`, for errors.
    path: str
    #: Pods of this set the gang cannot start without (None: all of them).
    minimum: int | None = None
    #: The pod spec the member's operator will really run, when it adds containers fleet can
    #: know of (KubeRay's init container): requests are computed from it. None: the template's.
    effective_spec: Mapping[str, Any] | None = None


def optional_count(spec: Mapping[str, Any], key: str, field: str) -> int | None:
    """A non-negative integer field of `spec`, or None when absent."""
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"{field}.{key}", f"expected an integer, got {value!r}")
    if value < 0:
        raise FieldError(f"{field}.{key}", f"must not be negative, got {value}")
    return value


def job_pods(spec: Mapping[str, Any], field: str = "spec") -> int:
    """Pods a batch/v1 Job runs at once: the Job controller's `wantActive` before any success.

    parallelism (default 1), capped by completions when set (Indexed and NonIndexed alike)."""
    parallelism = optional_count(spec, "parallelism", field)
    completions = optional_count(spec, "completions", field)
    pods = 1 if parallelism is None else parallelism
    return pods if completions is None else min(pods, completions)


def mapping_at(parent: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    """`parent[key]`, which must be an object; the error names `path.key`."""
    value = parent.get(key)
    if not isinstance(value, dict):
        what = "missing" if value is None else f"expected an object, got {value!r}"
        raise FieldError(f"{path}.{key}", what)
    return value


def name_at(parent: Mapping[str, Any], key: str, path: str) -> str:
    """`parent[key]`, which must be a non-empty string."""
    value = parent.get(key)
    if not isinstance(value, str) or not value:
        raise FieldError(f"{path}.{key}", f"expected a name, got {value!r}")
    return value
