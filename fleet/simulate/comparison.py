"""Issue 21's comparison: `sum`, `nodes` and `fgd` (nodes ranked by fragmentation) on every
built-in dataset, with the figures docs/placement.md publishes.

    python -m fleet.simulate.comparison --out out/fragmentation          # the full figures
    python -m fleet.simulate.comparison --limit 2000 --no-plots          # a quick look

Per dataset: wait p50 / p90 / p99 per gang class, mis-dispatches, GPU allocation (at the end of
the Alibaba fill, at 130% demand: the FGD paper's experiment), and against the goal (no class
worse than `sum` at any of the three percentiles) the cells where a rule loses. Writes
`comparison.md` (the tables), `comparison.json` and, unless `--no-plots`, one PNG of waits by
class per dataset and the Alibaba allocation curve.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.simulate.cli import replay
from fleet.simulate.metrics import CLASSES, RunResult, summarize
from fleet.simulate.policies import FRAGMENTATION_POLICIES
from fleet.simulate.report import human
from fleet.simulate.scenarios import Options, Scenario, build
from fleet.simulate.simulation import SimConfig

#: Every built-in dataset: Philly as recorded and 5x compressed, the Alibaba fill at 130% of
#: capacity, and Philly's VCs as teams with quotas (Kube Queue, Priority), 5x compressed.
DATASETS = ("philly", "philly-x5", "alibaba", "philly-teams-x5")
#: The queue mode the quota-tree dataset runs under.
QUEUE_MODE = "Priority"
PERCENTILES = ("p50", "p90", "p99")
#: The baseline every class is compared with.
BASELINE = "sum"


@dataclass
class DatasetRun:
    dataset: str
    title: str
    fill: bool
    results: list[RunResult]
    summaries: list[dict[str, Any]]


def run_one(scenario: Scenario, policy: str, seed: int) -> RunResult:
    mode = QUEUE_MODE if scenario.quota is not None else None
    result = replay(scenario, policy, seed, SimConfig(), mode=mode)
    result.policy = policy
    return result


def _run_by_name(dataset: str, policy: str, options: Options) -> RunResult:
    return run_one(build(dataset, options), policy, options.seed)


def compare(
    datasets: Sequence[str] = DATASETS,
    policies: Sequence[str] = FRAGMENTATION_POLICIES,
    options: Options | None = None,
    workers: int = 1,
) -> list[DatasetRun]:
    """Every policy on every dataset (in `workers` processes)."""
    options = options or Options()
    scenarios = {d: build(d, options) for d in datasets}
    tasks = [(d, p) for d in datasets for p in policies]
    results: dict[tuple[str, str], RunResult] = {}
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {t: pool.submit(_run_by_name, t[0], t[1], options) for t in tasks}
            for task, future in futures.items():
                results[task] = future.result()
                _progress(task, results[task])
    else:
        for task in tasks:
            results[task] = run_one(scenarios[task[0]], task[1], options.seed)
            _progress(task, results[task])
    runs = []
    for dataset in datasets:
        scenario = scenarios[dataset]
        rs = [results[(dataset, p)] for p in policies]
        runs.append(
            DatasetRun(
                dataset, scenario.title, scenario.kind == "fill", rs, [summarize(r) for r in rs]
            )
        )
    return runs


def _progress(task: tuple[str, str], result: RunResult) -> None:
    print(
        f"{task[0]:>16} {task[1]:<6} {len(result.jobs):>7,} jobs ({result.wall_seconds:.0f} s)",
        file=sys.stderr,
        flush=True,
    )


def losses(run: DatasetRun, policy: str) -> list[tuple[str, str, float, float]]:
    """(class, percentile, policy's wait, sum's wait) where `policy` waits longer than `sum`."""
    by = {s["policy"]: s for s in run.summaries}
    if policy not in by or BASELINE not in by:
        return []
    out = []
    for name in CLASSES:
        mine = by[policy]["wait_by_class_s"].get(name)
        base = by[BASELINE]["wait_by_class_s"].get(name)
        if not mine or not base:
            continue
        for q in PERCENTILES:
            if mine[q] > base[q] + 1e-9:
                out.append((name, q, mine[q], base[q]))
    return out


def markdown(runs: Sequence[DatasetRun]) -> str:
    lines: list[str] = []
    for run in runs:
        names = [s["policy"] for s in run.summaries]
        lines += [f"#### {run.title} (`{run.dataset}`)", ""]
        head = "| | " + " | ".join(names) + " |"
        lines += [head, "| --- |" + " ---: |" * len(names)]

        def row(label: str, cells: Sequence[str], lines: list[str] = lines) -> None:
            lines.append(f"| {label} | " + " | ".join(cells) + " |")

        row("jobs", [f"{s['jobs']:,}" for s in run.summaries])
        row("mis-dispatches", [f"{s['mis_dispatches']:,}" for s in run.summaries])
        row("never started", [f"{s['never_started']:,}" for s in run.summaries])
        if run.fill:
            row(
                "GPUs allocated at 130% demand",
                [f"{s['gpu_utilization_final']:.1%}" for s in run.summaries],
            )
        else:
            row("GPU allocation, mean", [f"{s['gpu_utilization_mean']:.1%}" for s in run.summaries])
        row(
            "wait p50 / p90 / p99, all",
            [" / ".join(human(s["wait_s"][q]) for q in PERCENTILES) for s in run.summaries],
        )
        for name in CLASSES:
            entries = [s["wait_by_class_s"].get(name) for s in run.summaries]
            if not any(entries):
                continue
            count = next(int(e["count"]) for e in entries if e)
            cells = [" / ".join(human(e[q]) for q in PERCENTILES) if e else "-" for e in entries]
            row(f"{name} ({count:,} jobs): p50 / p90 / p99", cells)
        lines.append("")
        for policy in names:
            if policy == BASELINE or BASELINE not in names:
                continue
            lost = losses(run, policy)
            if lost:
                text = "; ".join(f"{c} {q} {human(m)} vs {human(b)}" for c, q, m, b in lost)
                lines.append(f"- `{policy}` waits longer than `sum`: {text}.")
            else:
                lines.append(f"- `{policy}`: no class waits longer than under `sum`.")
        lines.append("")
    return "\n".join(lines)


def plots(runs: Sequence[DatasetRun], folder: Path) -> list[Path]:
    from fleet.simulate import plots as pictures

    plt = pictures._pyplot()
    out = []
    for run in runs:
        classes = [c for c in CLASSES if any(c in s["wait_by_class_s"] for s in run.summaries)]
        fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), dpi=pictures.DPI)
        width = 0.8 / max(len(run.summaries), 1)
        for ax, q in zip(axes, PERCENTILES, strict=True):
            for k, summary in enumerate(run.summaries):
                values = [_hours(summary["wait_by_class_s"].get(c, {}).get(q)) for c in classes]
                xs = [i - 0.4 + width * (k + 0.5) for i in range(len(classes))]
                ax.bar(
                    xs,
                    values,
                    width,
                    label=summary["policy"],
                    color=pictures.color(summary["policy"]),
                )
            ax.set_xticks(
                range(len(classes)), [c.replace(", ", ",\n") for c in classes], fontsize=8
            )
            ax.set_title(f"{q} wait (hours)", fontsize=9)
            ax.grid(True, axis="y", alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle(f"{run.dataset}: wait by gang class", fontsize=10)
        fig.tight_layout()
        path = folder / f"{run.dataset}-wait-by-class.png"
        fig.savefig(path)
        plt.close(fig)
        out.append(path)
        if run.fill:
            path = folder / f"{run.dataset}-allocation.png"
            pictures.utilization(
                run.results, path, f"{run.dataset}: allocation vs demand", fill=True
            )
            out.append(path)
    return out


def _hours(seconds: float | None) -> float:
    return 0.0 if seconds is None or math.isnan(seconds) else seconds / 3600.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fleet.simulate.comparison", description=__doc__
    )
    parser.add_argument(
        "--out", default="out/fragmentation", help="folder for the tables and plots"
    )
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--policies", default=",".join(FRAGMENTATION_POLICIES))
    parser.add_argument("--limit", type=int, default=None, help="replay only the first N jobs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    runs = compare(datasets, policies, Options(seed=args.seed, limit=args.limit), args.workers)
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "comparison.md").write_text(markdown(runs) + "\n")
    (folder / "comparison.json").write_text(json.dumps(_json(runs), indent=1, default=str) + "\n")
    if not args.no_plots:
        plots(runs, folder)
    print(f"comparison: {folder / 'comparison.md'}")
    return 0


def _json(runs: Sequence[DatasetRun]) -> list[Mapping[str, Any]]:
    keep = (
        *("policy", "jobs", "mis_dispatches", "never_started", "wait_s", "wait_by_class_s"),
        *("gpu_utilization_final", "gpu_utilization_mean"),
    )
    return [
        {"dataset": r.dataset, "policies": [{k: s[k] for k in keep} for s in r.summaries]}
        for r in runs
    ]


if __name__ == "__main__":
    sys.exit(main())
