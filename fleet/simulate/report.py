"""Writes what a run found: `metrics.json`, per-scenario `jobs.csv` and PNGs, and `report.md`.

The Markdown leads with the comparison a platform team asks for (`nodes` against ACK's `sum`),
then the per-policy table, the breakdown by gang class, and the pictures next to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.core.resources import GPU
from fleet.simulate import plots
from fleet.simulate.faults import Outage
from fleet.simulate.kubequeue import quota_tree
from fleet.simulate.metrics import CLASSES, RunResult, binned, write_jobs_csv, write_json
from fleet.simulate.reclaimreport import reclaim_plot, reclaim_section
from fleet.simulate.scenarios import Scenario
from fleet.simulate.teamreport import team_figures, team_plots, team_section


@dataclass
class ScenarioRun:
    scenario: Scenario
    results: list[RunResult]
    summaries: list[dict[str, Any]]
    outages: tuple[Outage, ...] = ()


def human(seconds: float | None) -> str:
    """`0 s`, `45 s`, `12 min`, `3.4 h`, `2.1 d`."""
    if seconds is None or not math.isfinite(seconds):
        return "n/a"
    if seconds < 1:
        return "0 s" if seconds < 0.5 else "<1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def change(new: float, old: float) -> str:
    """`-35%` (new vs old); `same` when equal; `n/a` when the base is zero."""
    if not (math.isfinite(new) and math.isfinite(old)):
        return "n/a"
    if new == old:
        return "same"
    if old == 0:
        return "n/a (base 0)"
    return f"{(new - old) / old:+.0%}"


def write(
    out: Path,
    runs: Sequence[ScenarioRun],
    settings: Mapping[str, Any],
    *,
    plots_enabled: bool = True,
) -> Path:
    """Everything under `out`; returns the report's path."""
    out.mkdir(parents=True, exist_ok=True)
    metrics: dict[str, Any] = {"settings": dict(settings), "scenarios": {}}
    sections = []
    for run in runs:
        folder = out / run.scenario.name
        folder.mkdir(exist_ok=True)
        write_jobs_csv(folder / "jobs.csv", run.results)
        images = _plots(folder, run) if plots_enabled else []
        metrics["scenarios"][run.scenario.name] = _scenario_metrics(run)
        sections.append(_section(run, images))
        if run.scenario.quota is not None:
            sections[-1] += "\n\n" + _teams(folder, run, metrics, plots_enabled)
    write_json(out / "metrics.json", metrics)
    report = out / "report.md"
    report.write_text(_document(settings, sections), encoding="utf-8")
    return report


def _teams(folder: Path, run: ScenarioRun, metrics: dict[str, Any], plots_enabled: bool) -> str:
    """The per-team part of a scenario with a quota tree (fleet.simulate.teamreport)."""
    s = run.scenario
    assert s.quota is not None
    tree = quota_tree(s.quota, s.name)
    labels = [r.policy for r in run.results]
    figures = [team_figures(r, tree) for r in run.results]
    metrics["scenarios"][s.name]["teams"] = {
        label: {team: f.as_json() for team, f in by_team.items()}
        for label, by_team in zip(labels, figures, strict=True)
    }
    metrics["scenarios"][s.name]["queue_counters"] = {
        r.policy: {k: v for k, v in r.counters.items() if k.startswith("queue_")}
        for r in run.results
    }
    lines = [f"### Per team (`{s.name}`)", "", *team_section(labels, figures, human), ""]
    if plots_enabled:
        for file, alt in team_plots(labels, figures, s.fleet.total(GPU), folder, s.name):
            lines += [f"![{alt}]({s.name}/{file})", ""]
    reclaim = reclaim_section(run.results, tree, human)
    if reclaim:
        metrics["scenarios"][s.name]["reclaim"] = {r.policy: r.teams for r in run.results}
        lines += [f"### Reclaim per team (`{s.name}`)", "", *reclaim, ""]
        if plots_enabled and reclaim_plot(
            run.results, tree, folder / "teams-reclaim.png", f"{s.name}: reclaim"
        ):
            lines += [f"![min-guarantee violation and work lost]({s.name}/teams-reclaim.png)", ""]
    return "\n".join(lines)


def _scenario_metrics(run: ScenarioRun) -> dict[str, Any]:
    s = run.scenario
    fill = s.kind == "fill"
    series = {}
    for result in run.results:
        end = result.jobs[-1].spec.submit if (fill and result.jobs) else result.end
        series[result.policy] = [
            [round(t, 1), round(u, 5)] for t, u in binned(result.samples, result.total_gpus, end)
        ]
    return {
        "title": s.title,
        "kind": s.kind,
        "fleet": s.fleet.describe(),
        "members": {m.name: {"nodes": len(m.nodes), "gpus": m.total(GPU)} for m in s.fleet.members},
        "load": s.load,
        "source": s.source,
        "time_scale": s.time_scale,
        "policies": {summary["policy"]: summary for summary in run.summaries},
        "gpu_utilization_series": series,
    }


def _plots(folder: Path, run: ScenarioRun) -> list[tuple[str, str]]:
    s = run.scenario
    fill = s.kind == "fill"
    name = s.name
    images = []
    waited = any(x["wait_s"]["max"] for x in run.summaries)
    if not fill and waited:
        plots.wait_cdf(run.results, folder / "wait-cdf.png", f"{name}: wait until every pod runs")
        images.append(("wait-cdf.png", "CDF of wait time per policy"))
    plots.utilization(run.results, folder / "utilization.png", f"{name}: GPU allocation", fill=fill)
    images.append(("utilization.png", "GPU utilization"))
    if any(x["mis_dispatches"] or x["never_started"] for x in run.summaries):
        plots.misdispatches(run.summaries, folder / "misdispatch.png", f"{name}: mis-dispatches")
        images.append(("misdispatch.png", "mis-dispatches per policy"))
    if not fill and waited:
        plots.wait_by_class(
            run.summaries, folder / "wait-by-class.png", f"{name}: p90 wait by gang class"
        )
        images.append(("wait-by-class.png", "p90 wait by gang class"))
    return [(f"{name}/{file}", alt) for file, alt in images]


def _section(run: ScenarioRun, images: Sequence[tuple[str, str]]) -> str:
    s = run.scenario
    by = {summary["policy"]: summary for summary in run.summaries}
    lines = [
        f"## {s.title} (`{s.name}`)",
        "",
        f"- Fleet: {s.fleet.describe()} "
        f"({', '.join(f'{m.name} {m.total(GPU)}' for m in s.fleet.members)} GPUs).",
        f"- Load: {s.load}.",
        f"- Data: {s.source}.",
    ]
    if run.outages:
        lines.append(
            "- Outages: "
            + ", ".join(
                f"{o.member} at {human(o.start)} for {human(o.duration)}" for o in run.outages
            )
            + "."
        )
    lines.append("")
    headline = _headline(by, fill=s.kind == "fill")
    if headline:
        lines += [f"**{headline}**", ""]
    lines += _fill_table(run) if s.kind == "fill" else _time_table(run)
    if any(x["failures"] or x["failovers"] for x in run.summaries):
        lines += [
            "",
            "| policy | failures | failovers | gave up | GPU hours lost |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for x in run.summaries:
            lines.append(
                f"| {x['policy']} | {x['failures']:,} | {x['failovers']:,} | "
                f"{x['gave_up']:,} | {x['lost_gpu_hours']:,.0f} |"
            )
    if s.kind != "fill":
        lines += ["", *_class_table(run)]
    lines += [""]
    for path, alt in images:
        lines += [f"![{alt}]({path})", ""]
    return "\n".join(lines)


def _headline(by: Mapping[str, Mapping[str, Any]], *, fill: bool) -> str:
    if "nodes" not in by or "sum" not in by:
        return ""
    n, s = by["nodes"], by["sum"]
    if fill:
        return (
            f"nodes vs sum: {n['gpu_utilization_final']:.1%} vs {s['gpu_utilization_final']:.1%} "
            f"of GPUs allocated at the end; {n['started']:,} vs {s['started']:,} pods started; "
            f"mis-dispatches {s['mis_dispatches']:,} -> {n['mis_dispatches']:,}."
        )
    wn, ws = n["wait_s"], s["wait_s"]
    parts = [
        f"nodes vs sum: p90 wait {human(wn['p90'])} vs {human(ws['p90'])} "
        f"({change(wn['p90'], ws['p90'])}), p99 {human(wn['p99'])} vs {human(ws['p99'])} "
        f"({change(wn['p99'], ws['p99'])})",
        "GPU-weighted mean wait "
        + change(n["gpu_weighted_mean_wait_s"], s["gpu_weighted_mean_wait_s"]),
        f"mis-dispatches {s['mis_dispatches']:,} -> {n['mis_dispatches']:,}",
        f"never started {s['never_started']:,} -> {n['never_started']:,}",
    ]
    return "; ".join(parts) + "."


def _time_table(run: ScenarioRun) -> list[str]:
    lines = [
        "| policy | wait p50 | wait p90 | wait p99 | GPU-weighted mean wait | JCT p50 | "
        "makespan | GPU util mean / peak | mis-dispatches | sat p50 / p90 | never started | "
        "replay |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for x in run.summaries:
        w, sat = x["wait_s"], x["mis_dispatch_sat_s"]
        lines.append(
            f"| {x['policy']} | {human(w['p50'])} | {human(w['p90'])} | {human(w['p99'])} | "
            f"{human(x['gpu_weighted_mean_wait_s'])} | {human(x['jct_s']['p50'])} | "
            f"{human(x['makespan_s'])} | "
            f"{x['gpu_utilization_mean']:.1%} / {x['gpu_utilization_peak']:.0%} | "
            f"{x['mis_dispatches']:,} | {human(sat['p50'])} / {human(sat['p90'])} | "
            f"{x['never_started']:,} | {x['replay_seconds']:.0f} s |"
        )
    lines += [
        "",
        "Waits count a job that never started as waiting until the run ended (a lower bound). "
        "GPU utilization mean is over the arrival window. *sat*: how long mis-dispatched jobs "
        "sat in their member before starting (or until the end).",
    ]
    return lines


def _fill_table(run: ScenarioRun) -> list[str]:
    lines = [
        "| policy | pods started | never started: stuck in a member / pending on the fleet | "
        "GPUs allocated at the end | mis-dispatches | replay |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for x in run.summaries:
        stuck = x["never_started_stuck_in_member"]
        lines.append(
            f"| {x['policy']} | {x['started']:,} | {stuck:,} / {x['never_started'] - stuck:,} | "
            f"{x['gpu_utilization_final']:.1%} | {x['mis_dispatches']:,} | "
            f"{x['replay_seconds']:.0f} s |"
        )
    lines += [
        "",
        "Pods never leave, so a pod that cannot start at once never starts; the demand beyond "
        "capacity is left pending on purpose. A fractional-GPU pod asks for one whole GPU here "
        "(the engine, like kube-scheduler without a sharing plugin, counts whole devices), so "
        "the allocation rates are not comparable with FGD's fractional ones.",
    ]
    return lines


def _class_table(run: ScenarioRun) -> list[str]:
    names = [x["policy"] for x in run.summaries]
    lines = [
        "p90 wait by gang class (jobs never started in brackets):",
        "",
        "| class | jobs | " + " | ".join(names) + " |",
        "| --- | ---: |" + " ---: |" * len(names),
    ]
    for c in CLASSES:
        entries = [x["wait_by_class_s"].get(c) for x in run.summaries]
        if not any(entries):
            continue
        count = next(int(e["count"]) for e in entries if e)
        cells = []
        for e in entries:
            if not e:
                cells.append("")
                continue
            never = int(e["never_started"])
            cells.append(human(e["p90"]) + (f" ({never:,})" if never else ""))
        lines.append(f"| {c} | {count:,} | " + " | ".join(cells) + " |")
    return lines


def _document(settings: Mapping[str, Any], sections: Sequence[str]) -> str:
    opts = ", ".join(f"{k} {v}" for k, v in settings.items() if v not in (None, "", ()))
    head = [
        "# Fleet simulation report",
        "",
        "Every decision below was made by `fleet.core.placement.place` with the real estimators "
        "over real `ClusterSnapshot`s updated pod by pod, with in-flight reservations, in "
        "simulated time; a dispatched gang starts only when its member can bind every pod "
        "(docs/simulate.md describes the model).",
        "",
        f"Settings: {opts}.",
        "",
        "Policies: `sum` = ACK One's sum-of-free rule, `nodes` = node-level gang check (both with "
        "the engine's best-fit ranking); `random` / `first` = a random / the first fitting member "
        "(node-level check); `fgd` = node-level check ranked by least added fragmentation for "
        "the mix learned from arrivals (`fgd-fleet`: members bind by best fit).",
        "",
    ]
    return "\n".join(head) + "\n" + "\n\n".join(sections).rstrip() + "\n"
