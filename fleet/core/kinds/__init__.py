"""The workload kinds fleet dispatches: one adapter per kind (one module each), and the
registry the rest of fleet asks.

`gang_from_workload(obj)` reads any supported object as a gang; `adapter_for(apiVersion,
kind)` gives the kind's adapter (`adapter.KindAdapter`) for everything else: the member copy,
the state word, replica names, the queue's charge. `ADAPTERS` is the list the controller
watches, the docs print and `fleet --help` names. How to add a kind: docs/kinds.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.core.errors import FieldError
from fleet.core.kinds.adapter import (
    Access,
    ConditionStyle,
    KindAdapter,
    Needed,
    PodMarks,
    PodTemplate,
)
from fleet.core.kinds.job import JOB
from fleet.core.kinds.jobset import JOBSET
from fleet.core.kinds.kubeflow import JAXJOB, PADDLEJOB, PYTORCHJOB, TFJOB, XGBOOSTJOB
from fleet.core.kinds.mpijob import MPIJOB
from fleet.core.kinds.raycluster import RAYCLUSTER
from fleet.core.kinds.rayjob import RAYJOB
from fleet.core.kinds.trainjob import TRAINJOB
from fleet.core.workload import Gang, WorkloadError, WorkloadRef

#: Every kind fleet dispatches, in the order the docs list them.
ADAPTERS: tuple[KindAdapter, ...] = (
    PYTORCHJOB,
    TFJOB,
    MPIJOB,
    XGBOOSTJOB,
    PADDLEJOB,
    JAXJOB,
    JOB,
    JOBSET,
    TRAINJOB,
    RAYJOB,
    RAYCLUSTER,
)

_BY_TYPE = {a.type: a for a in ADAPTERS}
if len(_BY_TYPE) != len(ADAPTERS):
    raise AssertionError("two adapters claim the same apiVersion and kind")


def adapter_for(api_version: str, kind: str) -> KindAdapter | None:
    """The adapter of a kind, None when fleet does not dispatch it."""
    return _BY_TYPE.get((api_version, kind))


def supported() -> list[str]:
    """`apiVersion/kind` of every kind fleet dispatches."""
    return [str(a) for a in ADAPTERS]


def pod_spec_paths() -> dict[tuple[str, str], tuple[str, ...]]:
    """(API group, kind) -> where its pod specs are (`KindAdapter.pod_spec_paths`), for every
    kind fleet writes pods of in a member: the kinds it dispatches and what they take along
    (a TrainJob's runtimes). The member's admission policy checks each (fleet.api.guard)."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for a in ADAPTERS:
        out[(_group(a.api_version), a.kind)] = a.pod_spec_paths
        for api_version, kind in a.needs_kinds:
            if kind in a.needs_pod_spec_paths:
                out[(_group(api_version), kind)] = a.needs_pod_spec_paths[kind]
    return out


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def kinds_table() -> str:
    """The docs' table of supported kinds (docs/kinds.md holds a copy, checked by a test)."""
    rows = [
        "| apiVersion | kind | gang | copy drops | the member's operator adds |",
        "|---|---|---|---|---|",
    ]
    rows += [
        f"| {a.api_version} | {a.kind} | {a.doc_gang} | {a.doc_dropped} | {a.doc_added} |"
        for a in ADAPTERS
    ]
    return "\n".join(rows) + "\n"


def gang_from_workload(obj: Mapping[str, Any], needed: Needed | None = None) -> Gang:
    """Interpret a workload object (plain dict) as a gang; `needed` holds the other objects
    its kind reads the gang from (`KindAdapter.needs`: a TrainJob's runtime).

    Raises `WorkloadError` for an unknown kind or a malformed spec; the message names the object
    and the field path (e.g. `spec.tfReplicaSpecs.Worker.replicas`).
    """
    ref = _ref(obj)
    adapter = adapter_for(ref.api_version, ref.kind)
    if adapter is None:
        raise WorkloadError(
            str(ref),
            "kind",
            f"unsupported kind {ref.api_version}/{ref.kind} (supported: {', '.join(supported())})",
        )
    try:
        return adapter.gang(obj, ref, needed)
    except WorkloadError:
        raise
    except FieldError as err:
        raise WorkloadError(str(ref), err.field, err.reason) from err


def _ref(obj: Mapping[str, Any]) -> WorkloadRef:
    if not isinstance(obj, Mapping):
        raise WorkloadError("workload", "", f"expected an object, got {type(obj).__name__}")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        meta = {}
    ref = WorkloadRef(
        str(obj.get("apiVersion") or ""),
        str(obj.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )
    if not ref.api_version or not ref.kind:
        raise WorkloadError(str(ref) or "workload", "kind", "apiVersion and kind are required")
    return ref


__all__ = [
    "ADAPTERS",
    "Access",
    "ConditionStyle",
    "KindAdapter",
    "Needed",
    "PodMarks",
    "PodTemplate",
    "adapter_for",
    "gang_from_workload",
    "kinds_table",
    "pod_spec_paths",
    "supported",
]
