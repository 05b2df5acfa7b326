"""Job traces: when each job arrives, how long it runs, and the gang it needs.

Three readers, one result (a list of `JobSpec` sorted by arrival):

* `load_philly` — Microsoft Philly (`timestamp, duration, num_gpus, gpu_time, cluster`). The
  gang follows the literature's convention: `ceil(g / 8)` workers x `min(g, 8)` GPUs. The
  virtual cluster is kept only as the job's team label; the fleet decides the member.
* `load_alibaba_pods` + `fill_workload` / `replay_pods` — the Alibaba v2023 pod list, one pod
  per gang.
* `load_trace` — the documented CSV format for users' own traces (see docs/simulate.md).

Every reader rejects a malformed row with `DataError("file:line: column: why")`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from fleet.core.resources import CPU, GPU, MEMORY, PODS, Resources
from fleet.core.workload import Component, Gang
from fleet.simulate.csvio import count, number, quantity, rows
from fleet.simulate.errors import DataError

#: GPUs on one Philly node (the usual assumption; the trace does not say).
PHILLY_GPUS_PER_NODE = 8
_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Shape:
    """`workers` identical pods, each asking `per_worker` (its pod slot included)."""

    workers: int
    per_worker: Resources

    @property
    def gpus(self) -> int:
        return self.workers * int(self.per_worker.get(GPU, 0))

    @property
    def gang(self) -> Gang:
        """One shared `Gang` per shape: the engine caches per-gang work (minimum set, demands),
        so 80,000 jobs of ten shapes cost ten gangs."""
        gang = _GANGS.get(self)
        if gang is None:
            gang = _GANGS[self] = Gang.of(
                Component("worker", self.workers, self.per_worker), name=str(self)
            )
        return gang

    def __str__(self) -> str:
        return f"{self.workers}x[{self.per_worker.describe()}]"


_GANGS: dict[Shape, Gang] = {}


def philly_shape(gpus: int) -> Shape:
    """`ceil(g / 8)` workers x `min(g, 8)` GPUs (a 12-GPU job becomes 2 x 8, as in the papers)."""
    per = min(gpus, PHILLY_GPUS_PER_NODE)
    return Shape(-(-gpus // PHILLY_GPUS_PER_NODE), Resources({GPU: per, PODS: 1}))


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of a trace. `submit` is seconds after the trace starts; `duration` may be
    `math.inf` (a pod that never ends, as in a fill experiment)."""

    id: str
    submit: float
    duration: float
    team: str
    shape: Shape
    limit: float | None = None
    """The run time the job declares at most (`activeDeadlineSeconds`), seconds; what the
    controller may know of its end. None: none (the traces declare none)."""


def prepare(
    jobs: Iterable[JobSpec], *, limit: int | None = None, time_scale: float = 1.0
) -> list[JobSpec]:
    """Sort by arrival, keep the first `limit`, compress arrivals `time_scale` times (more load
    on the same fleet; durations are kept)."""
    if time_scale <= 0:
        raise ValueError(f"time scale must be positive, got {time_scale}")
    out = sorted(jobs, key=lambda j: j.submit)
    if limit is not None:
        out = out[:limit]
    if out:
        start = out[0].submit
        out = [replace(j, submit=(j.submit - start) / time_scale) for j in out]
    return out


# Philly ----------------------------------------------------------------------------------------
def load_philly(path: str | Path) -> list[JobSpec]:
    """The Philly job list (see the module docstring for the gang convention)."""
    path = Path(path)
    raw: list[tuple[float, int, float, str, int]] = []
    shapes: dict[int, Shape] = {}
    for line, row in rows(path, ("timestamp", "duration", "num_gpus"), ("gpu_time", "cluster")):
        try:
            stamp = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=UTC).timestamp()
        except ValueError:
            raise DataError(
                path, line, f"timestamp: expected YYYY-MM-DD HH:MM:SS, got {row['timestamp']!r}"
            ) from None
        duration = number(path, line, "duration", row["duration"])
        gpus = count(path, line, "num_gpus", row["num_gpus"], minimum=1)
        if gpus not in shapes:
            shapes[gpus] = philly_shape(gpus)
        raw.append((stamp, line, duration, row.get("cluster") or "default", gpus))
    if not raw:
        return []
    start = min(r[0] for r in raw)
    return prepare(
        JobSpec(f"philly-{line}", stamp - start, duration, team, shapes[gpus])
        for stamp, line, duration, team, gpus in raw
    )


# Alibaba v2023 pods ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PodRecord:
    """One pod of the Alibaba list; `requests` in whole GPUs (see `load_alibaba_pods`)."""

    name: str
    requests: Resources
    gpu_milli: int
    created: float
    deleted: float
    scheduled: float | None


def load_alibaba_pods(path: str | Path) -> list[PodRecord]:
    """The v2023 pod list. A pod sharing part of a GPU (`gpu_milli` < 1000) asks for one whole
    `nvidia.com/gpu` here: the device plugin's resource is an integer, and the engine, like
    kube-scheduler without a sharing plugin, cannot split a device."""
    path = Path(path)
    out = []
    required = ("name", "cpu_milli", "memory_mib", "num_gpu", "creation_time", "deletion_time")
    optional = ("gpu_milli", "gpu_spec", "qos", "pod_phase", "scheduled_time")
    for line, row in rows(path, required, optional):
        cpu = count(path, line, "cpu_milli", row["cpu_milli"])
        memory = count(path, line, "memory_mib", row["memory_mib"])
        gpus = count(path, line, "num_gpu", row["num_gpu"])
        milli = count(path, line, "gpu_milli", row.get("gpu_milli") or "0")
        created = number(path, line, "creation_time", row["creation_time"])
        deleted = number(path, line, "deletion_time", row["deletion_time"])
        if deleted < created:
            raise DataError(path, line, "deletion_time is before creation_time")
        sched_text = row.get("scheduled_time") or ""
        scheduled = number(path, line, "scheduled_time", sched_text) if sched_text else None
        requests = Resources({CPU: cpu, MEMORY: memory * _MIB, GPU: gpus, PODS: 1})
        out.append(PodRecord(row["name"], requests, milli, created, deleted, scheduled))
    return out


def fill_workload(
    pods: Sequence[PodRecord], capacity_gpus: int, *, target: float = 1.3, seed: int = 0
) -> list[JobSpec]:
    """The FGD paper's experiment: pods drawn from the list at random (with replacement, seeded)
    arrive one a second and never leave, until their GPU requests reach `target` x capacity.
    The pod list is a sample of a cluster's demand, not a time series, so this is how it is
    meant to be replayed."""
    if not pods:
        return []
    if not any(p.requests.get(GPU, 0) for p in pods):
        raise ValueError("no pod of the list asks for a GPU; a GPU fill would never end")
    rng = random.Random(seed)
    shapes = {p.requests: Shape(1, p.requests) for p in pods}
    goal = target * capacity_gpus
    out: list[JobSpec] = []
    asked = 0
    while asked < goal:
        pod = pods[rng.randrange(len(pods))]
        asked += int(pod.requests.get(GPU, 0))
        out.append(
            JobSpec(
                f"{pod.name}#{len(out)}", float(len(out)), math.inf, "default", shapes[pod.requests]
            )
        )
    return out


def replay_pods(pods: Sequence[PodRecord]) -> list[JobSpec]:
    """The pod list as recorded: arrival at creation, running from scheduling (or creation, for
    pods that never ran) to deletion. Its peak demand is about 1% of the cluster's GPUs."""
    shapes = {p.requests: Shape(1, p.requests) for p in pods}
    return prepare(
        JobSpec(
            p.name,
            p.created,
            p.deleted - (p.scheduled if p.scheduled is not None else p.created),
            "default",
            shapes[p.requests],
        )
        for p in pods
    )


# The documented CSV format ------------------------------------------------------------------
TRACE_REQUIRED = ("submit", "duration")
TRACE_OPTIONAL = ("job", "team", "workers", "gpu", "gpus", "cpu", "memory")


def load_trace(path: str | Path) -> list[JobSpec]:
    """A user's trace (docs/simulate.md): `submit,duration` plus either `workers,gpu` (per
    worker) or `gpus` (total, Philly's convention); optional `job,team,cpu,memory` (per worker,
    Kubernetes quantities). `duration` may be `inf`."""
    path = Path(path)
    out: list[JobSpec] = []
    seen: set[str] = set()
    shapes: dict[Shape, Shape] = {}
    for line, row in rows(path, TRACE_REQUIRED, TRACE_OPTIONAL):
        submit = number(path, line, "submit", row["submit"])
        duration = number(path, line, "duration", row["duration"], allow_inf=True)
        job = row.get("job") or f"job-{line}"
        if job in seen:
            raise DataError(path, line, f"job: {job!r} appears twice")
        seen.add(job)
        shape = _row_shape(path, line, row)
        shape = shapes.setdefault(shape, shape)
        out.append(JobSpec(job, submit, duration, row.get("team") or "default", shape))
    return sorted(out, key=lambda j: j.submit)


def _row_shape(path: Path, line: int, row: dict[str, str]) -> Shape:
    total, workers, per = row.get("gpus", ""), row.get("workers", ""), row.get("gpu", "")
    extra: dict[str, int] = {PODS: 1}
    for column, resource in (("cpu", CPU), ("memory", MEMORY)):
        if row.get(column):
            extra[resource] = quantity(path, line, column, resource, row[column])
    if total:
        if workers or per:
            raise DataError(path, line, "give either gpus or workers and gpu, not both")
        shape = philly_shape(count(path, line, "gpus", total, minimum=1))
        return Shape(shape.workers, shape.per_worker + Resources(extra).without(PODS))
    if not workers:
        raise DataError(path, line, "workers: required (or give gpus)")
    n_workers = count(path, line, "workers", workers, minimum=1)
    gpu = count(path, line, "gpu", per) if per else 0
    requests = Resources({**extra, GPU: gpu})
    if not requests.without(PODS):
        raise DataError(path, line, "a worker must ask for something (gpu, cpu or memory)")
    return Shape(n_workers, requests)
