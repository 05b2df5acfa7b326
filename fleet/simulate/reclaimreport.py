"""Per-team figures of reclaim: what a team's min was worth with and without it.

For each run with a quota queue, per team (quota node with jobs):

* **min-guarantee violation**: GPU-hours the team spent below its min while it had a job
  waiting that would have fit within it (its placed gangs' GPUs below its min, and its smallest
  waiting job no bigger than the gap), the integral of the gap over that time;
* wait p50 / p90 / p99: submission to first start (a job never started counts until the end);
* **evicted**: its gangs that were reclaimed (or preempted), and the **GPU-hours of work** they
  lost (GPUs times the time each had run; the simulator reruns an evicted gang from the start).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from fleet.core.quota import QuotaTree
from fleet.simulate import plots
from fleet.simulate.metrics import RunResult, stats, wait_of

__all__ = ["reclaim_plot", "reclaim_section"]


def _by_team(result: RunResult, tree: QuotaTree) -> dict[str, list[float]]:
    waits: dict[str, list[float]] = {}
    for job in result.jobs:
        path = tree.quota_for(job.spec.team)
        if path is not None:
            waits.setdefault(path, []).append(wait_of(job, result.end))
    return waits


def reclaim_section(
    results: Sequence[RunResult], tree: QuotaTree, human: Callable[[float | None], str]
) -> list[str]:
    """Markdown: one row per team with jobs; per run its violation, waits, evictions, loss."""
    runs = [r for r in results if r.teams]
    if not runs:
        return []
    waits = [_by_team(r, tree) for r in runs]
    teams = [p for p in tree.nodes if any(p in w for w in waits)]
    head = "| team | min GPUs | " + " | ".join(
        f"{r.policy}: violation GPU-h | {r.policy}: wait p50 / p90 / p99 | "
        f"{r.policy}: evicted | {r.policy}: GPU-h lost"
        for r in runs
    )
    lines = [
        "Reclaim per team. *violation*: GPU-hours the team spent below its min while a job of it "
        "that would fit within the min waited; *evicted*: its gangs reclaimed or preempted; "
        "*GPU-h lost*: the work they had done (rerun from the start).",
        "",
        head + " |",
        "| --- | ---: |" + " ---: | ---: | ---: | ---: |" * len(runs),
    ]
    for path in teams:
        low = int(tree.nodes[path].min.get("nvidia.com/gpu", 0))
        cells = []
        for run, by_team in zip(runs, waits, strict=True):
            figures = run.teams.get(path, {})
            s = stats(by_team.get(path, []))
            cells.append(
                f"{figures.get('violation_gpu_hours', 0.0):,.0f} | "
                f"{human(s['p50'])} / {human(s['p90'])} / {human(s['p99'])} | "
                f"{int(figures.get('evicted', 0)):,} | {figures.get('lost_gpu_hours', 0.0):,.0f}"
            )
        lines.append(f"| {tree.nodes[path].name} | {low:,} | " + " | ".join(cells) + " |")
    total = [sum(f.get("violation_gpu_hours", 0.0) for f in r.teams.values()) for r in runs]
    lost = [sum(f.get("lost_gpu_hours", 0.0) for f in r.teams.values()) for r in runs]
    lines += [
        "",
        "All teams: "
        + "; ".join(
            f"{r.policy}: violation {v:,.0f} GPU-h, {r.counters.get('queue_reclaims', 0):,} "
            f"reclaims, {w:,.0f} GPU-h lost"
            for r, v, w in zip(runs, total, lost, strict=True)
        ),
    ]
    return lines


def reclaim_plot(results: Sequence[RunResult], tree: QuotaTree, path: Path, title: str) -> bool:
    """Violation and work lost per team, one bar per run (False: nothing to plot)."""
    runs = [r for r in results if r.teams]
    if not runs:
        return False
    teams = [
        p for p in tree.nodes if any(r.teams.get(p, {}).get("violation_gpu_hours") for r in runs)
    ] or [p for p in tree.nodes if tree.nodes[p].namespaces]
    plt = plots._pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        xs = [x + i * width for x in range(len(teams))]
        for ax, key in zip(axes, ("violation_gpu_hours", "lost_gpu_hours"), strict=True):
            ax.bar(
                xs,
                [run.teams.get(p, {}).get(key, 0.0) for p in teams],
                width,
                label=run.policy,
                color=plots.color(run.policy),
            )
    names = [tree.nodes[p].name for p in teams]
    for ax, what in zip(
        axes,
        ("min-guarantee violation (GPU-hours)", "work lost to evictions (GPU-hours)"),
        strict=True,
    ):
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(teams))], names, rotation=45)
        ax.set_title(what)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
