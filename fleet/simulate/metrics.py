"""What a run measured, reduced to numbers a platform team compares.

Per policy: wait (submission until every pod runs, first start) p50/p90/p99, job completion
time and makespan, GPU utilization over time (allocated / total, time-weighted; its mean is
taken over the arrival window, since a few multi-week jobs run long after the last arrival),
mis-dispatches (dispatched where the gang could not start at once) and how long those jobs sat
in their member, jobs never started, and, with faults injected, failovers and lost GPU hours.
Everything is plain data so JSON, CSV, the report and the tests read the same numbers.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.simulate.jobs import SimJob, State

PERCENTILES = (50, 90, 99)


@dataclass
class RunResult:
    policy: str
    jobs: list[SimJob]
    #: (time, allocated GPUs) at every change; a step function.
    samples: list[tuple[float, int]]
    total_gpus: int
    end: float
    counters: dict[str, int]
    wall_seconds: float
    #: With reservations: seconds from the start of reserving until all were Available.
    time_to_available: list[float] = field(default_factory=list)
    #: With a quota queue: per quota path, `violation_gpu_hours` (below its min while a job
    #: that would fit within it waited), `evicted` (gangs reclaimed or preempted) and
    #: `lost_gpu_hours` (their work thrown away).
    teams: dict[str, dict[str, float]] = field(default_factory=dict)

    def waits(self) -> list[float]:
        return sorted(j.first_start - j.spec.submit for j in self.jobs if j.first_start is not None)


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN when empty."""
    if not ordered:
        return math.nan
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def stats(values: Iterable[float]) -> dict[str, float]:
    ordered = sorted(values)
    out = {f"p{q}": percentile(ordered, q) for q in PERCENTILES}
    out["mean"] = sum(ordered) / len(ordered) if ordered else math.nan
    out["max"] = ordered[-1] if ordered else math.nan
    out["count"] = float(len(ordered))
    return out


def utilization(
    samples: Sequence[tuple[float, int]], total: int, start: float, end: float
) -> float:
    """Time-weighted mean of allocated / total over [start, end]."""
    if end <= start or total <= 0:
        return math.nan
    return _integral(samples, start, end) / (total * (end - start))


def _integral(samples: Sequence[tuple[float, int]], start: float, end: float) -> float:
    area = 0.0
    for (t0, value), (t1, _) in zip(samples, [*samples[1:], (end, 0)], strict=True):
        lo, hi = max(t0, start), min(t1, end)
        if hi > lo:
            area += value * (hi - lo)
    return area


def binned(
    samples: Sequence[tuple[float, int]], total: int, end: float, bins: int = 400
) -> list[tuple[float, float]]:
    """(bin start, mean utilization in the bin): a step function made plottable, in one pass."""
    if end <= 0 or total <= 0 or not samples:
        return []
    width = end / bins
    out = [0.0] * bins
    points = [*samples, (end, 0)]
    for (t0, value), (t1, _) in itertools.pairwise(points):
        if t1 <= t0 or value == 0:
            continue
        first, last = int(t0 / width), min(int(t1 / width), bins - 1)
        for b in range(first, last + 1):
            lo, hi = max(t0, b * width), min(t1, (b + 1) * width)
            if hi > lo:
                out[b] += value * (hi - lo)
    return [(b * width, out[b] / (total * width)) for b in range(bins)]


#: Gang classes the report breaks waits down by, in display order.
CLASSES = ("CPU only", "1 GPU", "1 pod, 2+ GPUs", "2+ pods")


def gang_class(job: SimJob) -> str:
    if job.spec.shape.workers > 1:
        return CLASSES[3]
    gpus = job.gpus
    return CLASSES[0] if gpus == 0 else CLASSES[1] if gpus == 1 else CLASSES[2]


def wait_of(job: SimJob, end: float) -> float:
    """Submission until every pod runs; a job that never started counts as waiting until the
    run ends (a lower bound, so unstarted jobs are not silently dropped)."""
    start = job.first_start if job.first_start is not None else end
    return start - job.spec.submit


#: A gang that starts within this many seconds of the fleet's decision "started at once".
RACE_WINDOW = 30.0


def _decision_to_start(jobs: Sequence[SimJob]) -> list[float]:
    return [
        j.first_start - j.first_decision
        for j in jobs
        if j.first_start is not None and j.first_decision is not None
    ]


def _share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values) if values else math.nan


def summarize(result: RunResult) -> dict[str, Any]:
    """The per-policy figures (JSON-able; NaN where a figure does not apply)."""
    jobs = result.jobs
    end = result.end
    done = [j for j in jobs if j.state is State.DONE and j.end is not None]
    never = [j for j in jobs if j.first_start is None]
    misjobs = [j for j in jobs if j.mis_dispatches]
    first_submit = jobs[0].spec.submit if jobs else 0.0
    last_submit = jobs[-1].spec.submit if jobs else 0.0
    makespan = max((j.end for j in done if j.end is not None), default=math.nan) - first_submit
    total_gpus = sum(j.gpus for j in jobs)
    by_class: dict[str, dict[str, float]] = {}
    for name in CLASSES:
        members = [j for j in jobs if gang_class(j) == name]
        if members:
            entry = stats(wait_of(j, end) for j in members)
            entry["never_started"] = float(sum(1 for j in members if j.first_start is None))
            by_class[name] = entry
    window_end = last_submit if last_submit > first_submit else end
    # Topology: of the gangs of 2+ pods whose pods were bound on 2+ nodes, how many sat in one
    # domain of the run's level (one rack).
    multi = [j for j in jobs if j.first_start is not None and j.nodes_used > 1]
    in_one = sum(1 for j in multi if j.domains_used == 1)
    return {
        "multi_node_gangs": len(multi),
        "multi_node_in_one_domain": in_one,
        "multi_node_in_one_domain_share": in_one / len(multi) if multi else math.nan,
        "multi_node_wait_s": stats(wait_of(j, end) for j in multi),
        "policy": result.policy,
        "jobs": len(jobs),
        "started": len(jobs) - len(never),
        "completed": len(done),
        "never_started": len(never),
        "never_started_stuck_in_member": sum(1 for j in never if j.stuck_in is not None),
        "never_started_gpus": sum(j.gpus for j in never),
        "wait_s": stats(wait_of(j, end) for j in jobs),
        "wait_started_s": stats(result.waits()),
        "wait_by_class_s": by_class,
        "gpu_weighted_mean_wait_s": sum(wait_of(j, end) * j.gpus for j in jobs) / total_gpus
        if total_gpus
        else math.nan,
        "jct_s": stats(j.end - j.spec.submit for j in done if j.end is not None),
        "makespan_s": makespan,
        "fleet_pending_s": stats(j.pending_total for j in jobs),
        "gpu_utilization_mean": utilization(
            result.samples, result.total_gpus, first_submit, window_end
        ),
        "gpu_utilization_peak": max(v for _, v in result.samples) / result.total_gpus
        if result.total_gpus
        else math.nan,
        "gpu_utilization_final": result.samples[-1][1] / result.total_gpus
        if result.total_gpus
        else math.nan,
        "mis_dispatches": result.counters["mis_dispatches"],
        "mis_dispatched_jobs": len(misjobs),
        "mis_dispatch_sat_s": stats(j.sat for j in misjobs),
        "mis_dispatch_sat_gpu_hours": sum(j.sat * j.gpus for j in misjobs) / 3600.0,
        "failures": result.counters["failures"],
        "failovers": result.counters["failovers"],
        "gave_up": sum(1 for j in jobs if j.state is State.GAVE_UP),
        "lost_gpu_hours": sum(j.lost_gpu_seconds for j in jobs) / 3600.0,
        # The race reservations close: from the fleet's first decision until every pod runs.
        "decision_to_start_s": stats(_decision_to_start(jobs)),
        "started_within_30s": _share(d <= RACE_WINDOW for d in _decision_to_start(jobs)),
        "reservation_attempts": result.counters.get("reservation_attempts", 0),
        "reservation_fallbacks": result.counters.get("reservation_fallbacks", 0),
        "time_to_available_s": stats(result.time_to_available),
        "local_pods_started": result.counters.get("local_started", 0),
        "local_pods_turned_away": result.counters.get("local_turned_away", 0),
        "decisions": result.counters["decisions"],
        "dispatches": result.counters["dispatches"],
        "end_s": end,
        "replay_seconds": result.wall_seconds,
    }


def _clean(value: Any) -> Any:
    """NaN and infinity are not JSON; write null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(_clean(data), indent=2, sort_keys=False) + "\n", encoding="utf-8")


JOB_COLUMNS = (
    "policy",
    "job",
    "team",
    "gpus",
    "workers",
    "submit_s",
    "first_start_s",
    "end_s",
    "wait_s",
    "state",
    "member",
    "mis_dispatches",
    "sat_s",
    "failovers",
)


def write_jobs_csv(path: Path, results: Sequence[RunResult]) -> None:
    """One row per job and policy, for anyone who wants to slice differently."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(JOB_COLUMNS)
        for result in results:
            for j in result.jobs:
                start = j.first_start
                writer.writerow(
                    (
                        result.policy,
                        j.spec.id,
                        j.spec.team,
                        j.gpus,
                        j.spec.shape.workers,
                        _num(j.spec.submit),
                        "" if start is None else _num(start),
                        "" if j.end is None else _num(j.end),
                        "" if start is None else _num(start - j.spec.submit),
                        j.state.value,
                        j.member or j.stuck_in or "",
                        j.mis_dispatches,
                        _num(j.sat),
                        j.failovers,
                    )
                )


def _num(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.3f}"
