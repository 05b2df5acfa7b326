"""Topology ignored / preferred / required on a fleet with racks: the share of multi-node gangs
placed inside one rack, and their wait (issue 27).

Replays one scenario (default `philly-x5`) with racks of `--racks` nodes (each member's nodes in
list order, `fleets.with_racks`) under `nodes` (topology ignored, today), `nodes+preferred` and
`nodes+required` (every gang in one rack, as a policy's gangTopology; members pinned to the
rack chosen), through the same code the controller runs, and prints the table docs/placement.md
quotes, with the waits as ratios to topology ignored measured in the same run.

    nice .venv/bin/python bench/topology.py                        # philly-x5, 8 nodes per rack
    nice .venv/bin/python bench/topology.py --racks 16 --topology-wait 30m
    nice .venv/bin/python bench/topology.py --dataset philly --limit 20000

A multi-node gang is one whose pods were bound on 2 or more nodes; its wait runs from
submission until every pod runs. The last column compares only the multi-node gangs that fit
one rack (their GPUs at most a rack's): a required gang larger than every rack can never start,
by definition, and the ignored run's gangs of that size are left out too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.simulate.faults import parse_duration
from fleet.simulate.fleets import RACK_LABEL, MemberSpec
from fleet.simulate.metrics import CLASSES, RunResult, stats, summarize, wait_of
from fleet.simulate.policies import make_policy
from fleet.simulate.report import human
from fleet.simulate.scenarios import Options, build
from fleet.simulate.simulation import SimConfig, simulate

MODES = (("ignored", "nodes"), ("preferred", "nodes+preferred"), ("required", "nodes+required"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="philly-x5")
    parser.add_argument("--racks", type=int, default=8, help="nodes per rack")
    parser.add_argument("--limit", type=int, help="replay only the first N jobs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--topology-wait",
        default="default",
        help="the preferred gangs' wait for a rack (gangTopology.waitSeconds: 30m, 0); "
        "default: the field's default",
    )
    parser.add_argument(
        "--modes", default="ignored,preferred,required", help="which rows to replay"
    )
    args = parser.parse_args()
    wait = None if args.topology_wait == "default" else parse_duration(args.topology_wait)
    modes = [(m, p) for m, p in MODES if m in args.modes.split(",")]
    print(
        f"{args.dataset}, {args.racks} nodes per rack; load average at start "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    scenario = build(args.dataset, Options(limit=args.limit, seed=args.seed, racks=args.racks))
    rows = []
    fitting = []
    members = [m.name for m in scenario.fleet.members]
    rack_gpus = _largest_rack_gpus(scenario.fleet.members)
    for mode, policy in modes:
        kwargs = {} if wait is None else {"topology_wait": wait}
        result = simulate(
            scenario.fleet,
            scenario.trace,
            make_policy(policy, members, args.seed, **kwargs),
            SimConfig(),
        )
        s = summarize(result)
        rows.append((mode, s))
        fitting.append(_fitting_wait_p90(result, rack_gpus))
        print(f"  {mode}: {result.wall_seconds:.0f} s", file=sys.stderr, flush=True)
    base = rows[0][1]["multi_node_wait_s"]
    print(
        "| topology | multi-node gangs | in one rack | wait p50 | wait p90 | p90 / first row "
        f"| all jobs, wait p90 | gangs of at most {rack_gpus} GPUs (a rack): p90, / first row |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (mode, s), fit in zip(rows, fitting, strict=True):
        wait_s = s["multi_node_wait_s"]
        ratio = wait_s["p90"] / base["p90"] if base["p90"] else float("nan")
        fit_ratio = fit / fitting[0] if fitting[0] else float("nan")
        print(
            f"| {mode} | {s['multi_node_gangs']:,} | {s['multi_node_in_one_domain']:,} "
            f"({s['multi_node_in_one_domain_share']:.0%}) | {human(wait_s['p50'])} | "
            f"{human(wait_s['p90'])} | {ratio:.2f}x | {human(s['wait_s']['p90'])} | "
            f"{human(fit)}, {fit_ratio:.2f}x |"
        )
    print()
    print("| gang class | " + " | ".join(f"{mode}: wait p90" for mode, _ in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for name in CLASSES:
        cells = []
        for _, s in rows:
            entry = s["wait_by_class_s"].get(name)
            cells.append(
                "-"
                if entry is None
                else f"{human(entry['p90'])}"
                + (f" ({entry['never_started']:.0f} never start)" if entry["never_started"] else "")
            )
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"load average at end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def _largest_rack_gpus(members: Sequence[MemberSpec]) -> int:
    """The GPUs of the largest rack of the fleet (what a gang must fit to fit a rack)."""
    racks: dict[str, int] = {}
    for member in members:
        for node in member.nodes:
            rack = node.labels.get(RACK_LABEL)
            if rack is not None:
                racks[rack] = racks.get(rack, 0) + int(node.allocatable.get("nvidia.com/gpu", 0))
    return max(racks.values(), default=0)


def _fitting_wait_p90(result: RunResult, rack_gpus: int) -> float:
    """The p90 wait of the multi-node gangs that fit one rack."""
    waits = [
        wait_of(j, result.end)
        for j in result.jobs
        if j.first_start is not None and j.nodes_used > 1 and j.gpus <= rack_gpus
    ]
    return stats(waits)["p90"]


if __name__ == "__main__":
    main()
