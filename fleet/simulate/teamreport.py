"""Per-team figures for runs with a quota tree: waits, GPUs in use over time, borrowed share.

A team is a quota node of the tree (its jobs: the trace's team is the job's namespace). Every run
of a scenario is measured the same way, whether a queue enforced the tree or not, so "no queue"
shows what the teams would have taken without one:

* wait p50 / p90: submission until every pod runs (a job never started counts until the end);
* GPUs in use: the team's running jobs, first start to end, as a step function over time;
* peak: the most GPUs the team's jobs ran on at once (a queue keeps it within the team's max);
* borrowed share: GPU-hours beyond the team's min over all its GPU-hours (what it took from
  others' idle guarantee; 0 when it stays within its min).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.core.quota import QuotaTree
from fleet.core.resources import GPU
from fleet.simulate import plots
from fleet.simulate.metrics import RunResult, stats, wait_of

__all__ = ["NO_QUOTA_TEAM", "TeamFigures", "team_figures", "team_plots", "team_section"]

NO_QUOTA_TEAM = "(no quota)"
BINS = 300


@dataclass
class TeamFigures:
    team: str
    min_gpus: int
    max_gpus: int | None
    jobs: int
    never_started: int
    wait: dict[str, float]
    gpu_hours: float
    borrowed_gpu_hours: float
    peak_gpus: int
    #: (bin start in seconds, mean GPUs in use in the bin)
    series: list[tuple[float, float]]

    @property
    def borrowed_share(self) -> float:
        return self.borrowed_gpu_hours / self.gpu_hours if self.gpu_hours else math.nan

    def as_json(self) -> dict[str, Any]:
        return {
            "min_gpus": self.min_gpus,
            "max_gpus": self.max_gpus,
            "jobs": self.jobs,
            "never_started": self.never_started,
            "wait_s": self.wait,
            "gpu_hours": self.gpu_hours,
            "borrowed_gpu_hours": self.borrowed_gpu_hours,
            "borrowed_share": self.borrowed_share,
            "peak_gpus": self.peak_gpus,
        }


def _team_of(tree: QuotaTree, namespace: str) -> str:
    path = tree.quota_for(namespace)
    return tree.node(path).name if path is not None else NO_QUOTA_TEAM


def team_figures(result: RunResult, tree: QuotaTree) -> dict[str, TeamFigures]:
    """Figures per team (quota node with jobs), in tree order, `(no quota)` last."""
    end = result.end
    by_team: dict[str, list[Any]] = {}
    for job in result.jobs:
        by_team.setdefault(_team_of(tree, job.spec.team), []).append(job)
    order = [n.name for n in tree if n.name in by_team]
    if NO_QUOTA_TEAM in by_team:
        order.append(NO_QUOTA_TEAM)
    out: dict[str, TeamFigures] = {}
    for team in order:
        jobs = by_team[team]
        path = tree.by_name.get(team)
        node = tree.node(path) if path is not None else None
        low = int(node.min.get(GPU, 0)) if node else 0
        high = node.max.get(GPU, None) if node else None
        steps: list[tuple[float, int]] = []
        for job in jobs:
            if job.first_start is None or not job.gpus:
                continue
            stop = job.end if job.end is not None else end
            steps.append((job.first_start, job.gpus))
            steps.append((max(stop, job.first_start), -job.gpus))
        steps.sort()
        used, borrowed, peak = _integrals(steps, low)
        out[team] = TeamFigures(
            team=team,
            min_gpus=low,
            max_gpus=int(high) if high is not None else None,
            jobs=len(jobs),
            never_started=sum(1 for j in jobs if j.first_start is None),
            wait=stats(wait_of(j, end) for j in jobs),
            gpu_hours=used / 3600.0,
            borrowed_gpu_hours=borrowed / 3600.0,
            peak_gpus=peak,
            series=_binned(steps, end),
        )
    return out


def _integrals(steps: Sequence[tuple[float, int]], low: int) -> tuple[float, float, int]:
    """GPU-seconds in use, GPU-seconds beyond `low`, and the peak. `steps` is sorted with ends
    before starts at equal times, so a job starting as another ends is not counted twice."""
    level = peak = 0
    used = borrowed = 0.0
    for (t0, delta), (t1, _) in itertools.pairwise([*steps, (steps[-1][0], 0)] if steps else []):
        level += delta
        if t1 > t0:
            peak = max(peak, level)
        width = t1 - t0
        if width > 0 and level > 0:
            used += level * width
            if level > low:
                borrowed += (level - low) * width
    return used, borrowed, peak


def _binned(steps: Sequence[tuple[float, int]], end: float) -> list[tuple[float, float]]:
    if end <= 0:
        return []
    width = end / BINS
    area = [0.0] * BINS
    level = 0
    for (t0, delta), (t1, _) in itertools.pairwise([*steps, (end, 0)]):
        level += delta
        if level <= 0 or t1 <= t0:
            continue
        first, last = int(t0 / width), min(int(t1 / width), BINS - 1)
        for b in range(first, last + 1):
            lo, hi = max(t0, b * width), min(t1, (b + 1) * width)
            if hi > lo:
                area[b] += level * (hi - lo)
    return [(b * width, area[b] / width) for b in range(BINS)]


# --- Report -------------------------------------------------------------------------------------


def team_section(
    labels: Sequence[str], figures: Sequence[Mapping[str, TeamFigures]], human: Any
) -> list[str]:
    """Markdown: one row per team, per run its wait p50 / p90 and borrowed share."""
    teams = list(figures[0]) if figures else []
    head = "| team | min / max GPUs | jobs | " + " | ".join(
        f"{label}: wait p50 / p90 | {label}: peak | {label}: borrowed" for label in labels
    )
    lines = [
        "Per team (quota node; a job's team is its namespace). *peak*: most GPUs in use at once; "
        "*borrowed*: share of the team's GPU-hours beyond its min.",
        "",
        head + " |",
        "| --- | ---: | ---: |" + " ---: | ---: | ---: |" * len(labels),
    ]
    for team in teams:
        first = figures[0][team]
        limits = f"{first.min_gpus} / {first.max_gpus if first.max_gpus is not None else '-'}"
        cells = []
        for run in figures:
            f = run[team]
            never = f" ({f.never_started:,} never started)" if f.never_started else ""
            share = "-" if math.isnan(f.borrowed_share) else f"{f.borrowed_share:.0%}"
            wait = f"{human(f.wait['p50'])} / {human(f.wait['p90'])}{never}"
            cells.append(f"{wait} | {f.peak_gpus:,} | {share}")
        lines.append(f"| {team} | {limits} | {first.jobs:,} | " + " | ".join(cells) + " |")
    return lines


def team_plots(
    labels: Sequence[str],
    figures: Sequence[Mapping[str, TeamFigures]],
    total_gpus: int,
    folder: Path,
    name: str,
) -> list[tuple[str, str]]:
    """teams-wait.png, teams-use.png, teams-borrowed.png; returns (file, alt) pairs."""
    if not figures or not figures[0]:
        return []
    _waits(labels, figures, folder / "teams-wait.png", f"{name}: wait per team")
    _use(labels, figures, total_gpus, folder / "teams-use.png", f"{name}: GPUs in use per team")
    _borrowed(labels, figures, folder / "teams-borrowed.png", f"{name}: borrowed share per team")
    return [
        ("teams-wait.png", "wait p50 and p90 per team"),
        ("teams-use.png", "GPUs in use per team over time"),
        ("teams-borrowed.png", "borrowed share per team"),
    ]


def _hours(seconds: float) -> float:
    return max(seconds, 1.0) / 3600.0


def _waits(
    labels: Sequence[str], figures: Sequence[Mapping[str, TeamFigures]], path: Path, title: str
) -> None:
    plt = plots._pyplot()
    teams = list(figures[0])
    fig, axes = plt.subplots(2, 1, figsize=(max(7.0, 0.7 * len(teams) + 2), 6.0), dpi=plots.DPI)
    width = 0.8 / len(labels)
    for ax, q in zip(axes, ("p50", "p90"), strict=True):
        for k, (label, run) in enumerate(zip(labels, figures, strict=True)):
            xs = [i - 0.4 + width * (k + 0.5) for i in range(len(teams))]
            ys = [_hours(run[t].wait[q]) for t in teams]
            ax.bar(xs, ys, width, label=label, color=plots.color(label))
        ax.set_yscale("log")
        ax.set_ylabel(f"wait {q} (hours, log)")
        ax.set_xticks(range(len(teams)), teams, rotation=30, ha="right", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _use(
    labels: Sequence[str],
    figures: Sequence[Mapping[str, TeamFigures]],
    total: int,
    path: Path,
    title: str,
) -> None:
    plt = plots._pyplot()
    teams = list(figures[0])
    fig, axes = plt.subplots(
        len(labels), 1, figsize=(8.5, 2.4 * len(labels) + 0.6), dpi=plots.DPI, sharex=True
    )
    axes = list(axes) if len(labels) > 1 else [axes]
    palette = plt.get_cmap("tab20")
    for ax, label, run in zip(axes, labels, figures, strict=True):
        series = [run[t].series for t in teams]
        if not series or not series[0]:
            continue
        xs = [t / 86400.0 for t, _ in series[0]]
        ax.stackplot(
            xs,
            [[v for _, v in s] for s in series],
            labels=teams,
            colors=[palette(i % 20) for i in range(len(teams))],
            linewidth=0,
        )
        ax.axhline(total, color="black", lw=0.8, ls="--")
        ax.set_ylim(0, total * 1.05)
        ax.set_ylabel("GPUs")
        ax.set_title(label, fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("time (days)")
    axes[0].legend(fontsize=6, ncol=min(6, len(teams)), loc="upper right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _borrowed(
    labels: Sequence[str], figures: Sequence[Mapping[str, TeamFigures]], path: Path, title: str
) -> None:
    plt = plots._pyplot()
    teams = list(figures[0])
    fig, ax = plt.subplots(figsize=(max(7.0, 0.7 * len(teams) + 2), 3.6), dpi=plots.DPI)
    width = 0.8 / len(labels)
    for k, (label, run) in enumerate(zip(labels, figures, strict=True)):
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(teams))]
        ys = [
            0.0 if math.isnan(run[t].borrowed_share) else 100 * run[t].borrowed_share for t in teams
        ]
        ax.bar(xs, ys, width, label=label, color=plots.color(label))
    ax.set_ylabel("GPU-hours beyond min (%)")
    ax.set_xticks(range(len(teams)), teams, rotation=30, ha="right", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
