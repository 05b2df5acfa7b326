"""The report's pictures (matplotlib, Agg backend, PNG): small, labelled, one idea each.

matplotlib is imported here only, so the simulator itself runs without it (`--no-plots`).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fleet.simulate.metrics import CLASSES, RunResult, binned

COLORS = {"sum": "#d62728", "nodes": "#1f77b4", "random": "#7f7f7f", "first": "#ff7f0e"}
_EXTRA = itertools.cycle(["#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"])
DPI = 100


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def color(policy: str) -> str:
    if policy not in COLORS:
        COLORS[policy] = next(_EXTRA)
    return COLORS[policy]


def wait_cdf(results: Sequence[RunResult], path: Path, title: str) -> None:
    """Left: fraction of all jobs started within x seconds of submission (a policy that leaves
    jobs unstarted tops out below 1), zoomed on the part that differs. Right: the tail, the
    fraction still not started after x, on a log scale, where p99 lives."""
    plt = _pyplot()
    fig, (cdf, tail) = plt.subplots(1, 2, figsize=(9.5, 4.0), dpi=DPI)
    longest = max((w for r in results for w in r.waits()[-1:]), default=1.0)
    longest = max(longest, 1.0)
    lowest = 1.0
    for result in results:
        waits = [max(w, 1.0) for w in result.waits()]
        total = len(result.jobs)
        if not waits or not total:
            continue
        xs = [1.0, *waits]
        ys = [0.0, *((i + 1) / total for i in range(len(waits)))]
        if len(waits) < total:  # jobs that never started: the line runs on to the edge
            xs.append(longest * 1.5)
            ys.append(ys[-1])
        at_once = sum(1 for w in waits if w <= 1.0) / total
        lowest = min(lowest, at_once)
        style = {"label": result.policy, "color": color(result.policy), "lw": 1.6}
        cdf.step(xs, ys, where="post", **style)
        left = [1.0 - y for y in ys]
        tail.step(xs, [max(v, 0.5 / total) for v in left], where="post", **style)
    bottom = max(0.0, math.floor((lowest - 0.05) * 10) / 10)
    for ax in (cdf, tail):
        ax.set_xscale("log")
        ax.set_xlim(1.0, longest * 1.5)
        ax.set_xlabel("wait (s, log; under 1 s drawn at 1 s)")
        ax.grid(True, which="major", alpha=0.3)
        _time_marks(ax, longest)
    cdf.set_ylim(bottom, 1.005)
    cdf.set_ylabel("fraction of jobs started")
    cdf.legend(loc="lower right", fontsize=8)
    cdf.set_title("jobs started within x", fontsize=9)
    tail.set_yscale("log")
    tail.set_ylabel("fraction of jobs not yet started")
    tail.set_title("the tail (log scale)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _time_marks(ax: Any, longest: float) -> None:
    marks = [(60, "1 min"), (3600, "1 h"), (86400, "1 d"), (7 * 86400, "1 wk")]
    for x, label in marks:
        if x <= longest:
            ax.axvline(x, color="black", lw=0.5, alpha=0.25)
            ax.text(x, 0.02, f" {label}", fontsize=7, alpha=0.6, transform=ax.get_xaxis_transform())


def utilization(
    results: Sequence[RunResult], path: Path, title: str, *, fill: bool = False
) -> None:
    """Allocated GPUs / all GPUs over time (days), or, for a fill, over the GPU demand
    submitted so far (% of capacity), the FGD paper's x-axis."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=DPI)
    for result in results:
        if not result.jobs:
            continue
        end = result.jobs[-1].spec.submit if fill else result.end
        series = binned(result.samples, result.total_gpus, end, bins=300)
        if fill:
            submits = [j.spec.submit for j in result.jobs]
            demand = list(itertools.accumulate(j.gpus for j in result.jobs))
            xs = []
            for t, _ in series:
                i = bisect.bisect_right(submits, t) - 1
                xs.append(100.0 * demand[i] / result.total_gpus if i >= 0 else 0.0)
        else:
            xs = [t / 86400.0 for t, _ in series]
        ys = [100.0 * u for _, u in series]
        ax.plot(xs, ys, label=result.policy, color=color(result.policy), lw=1.3, alpha=0.85)
    ax.set_xlabel("GPU demand submitted (% of capacity)" if fill else "time (days)")
    ax.set_ylabel("GPUs allocated (% of all)")
    ax.set_ylim(0, 102)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right" if fill else "upper right")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def misdispatches(summaries: Sequence[Mapping[str, Any]], path: Path, title: str) -> None:
    """Left: mis-dispatches and jobs never started. Right: how long mis-dispatched jobs sat in
    their member (median and p90, hours)."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.8), dpi=DPI)
    names = [s["policy"] for s in summaries]
    xs = list(range(len(names)))
    width = 0.38
    mis = [s["mis_dispatches"] for s in summaries]
    never = [s["never_started"] for s in summaries]
    bars = left.bar(
        [x - width / 2 for x in xs],
        mis,
        width,
        label="mis-dispatches",
        color=[color(n) for n in names],
    )
    bars2 = left.bar(
        [x + width / 2 for x in xs],
        never,
        width,
        label="never started",
        color="white",
        edgecolor=[color(n) for n in names],
        hatch="//",
    )
    for group in (bars, bars2):
        for bar in group:
            left.annotate(
                f"{int(bar.get_height()):,}",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    left.set_xticks(xs, names)
    left.set_ylabel("jobs")
    left.legend(fontsize=8)
    left.set_title("dispatched where they could not start", fontsize=9)
    p50 = [_hours(s["mis_dispatch_sat_s"]["p50"]) for s in summaries]
    p90 = [_hours(s["mis_dispatch_sat_s"]["p90"]) for s in summaries]
    right.bar(
        [x - width / 2 for x in xs], p50, width, label="median", color=[color(n) for n in names]
    )
    right.bar(
        [x + width / 2 for x in xs],
        p90,
        width,
        label="p90",
        color="white",
        edgecolor=[color(n) for n in names],
        hatch="..",
    )
    right.set_xticks(xs, names)
    right.set_ylabel("hours sat in the member")
    right.legend(fontsize=8)
    right.set_title("time mis-dispatched jobs sat there", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _hours(seconds: float | None) -> float:
    return 0.0 if seconds is None or seconds != seconds else seconds / 3600.0


def wait_by_class(summaries: Sequence[Mapping[str, Any]], path: Path, title: str) -> None:
    """p90 wait per gang class and policy (hours): who pays for each rule."""
    plt = _pyplot()
    classes = [c for c in CLASSES if any(c in s["wait_by_class_s"] for s in summaries)]
    fig, ax = plt.subplots(figsize=(7, 3.8), dpi=DPI)
    width = 0.8 / max(len(summaries), 1)
    for k, summary in enumerate(summaries):
        values = [_hours(summary["wait_by_class_s"].get(c, {}).get("p90")) for c in classes]
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(classes))]
        ax.bar(xs, values, width, label=summary["policy"], color=color(summary["policy"]))
    ax.set_xticks(range(len(classes)), classes)
    ax.set_ylabel("p90 wait (hours)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
