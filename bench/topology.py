"""Topology ignored / preferred / required on a fleet with racks: the share of multi-node gangs
placed inside one rack, and their wait (issue 27).

Replays one scenario (default `philly-x5`) with racks of `--racks` nodes (each member's nodes in
list order, `fleets.with_racks`) under `nodes` (topology ignored, today), `nodes+preferred` and
`nodes+required` (every gang in one rack, as a policy's gangTopology; members pinned to the
rack chosen), through the same code the controller runs, and prints the table docs/placement.md
quotes, with the waits as ratios to topology ignored measured in the same run.

    nice .venv/bin/python bench/topology.py                        # philly-x5, 8 nodes per rack
    nice .venv/bin/python bench/topology.py --dataset philly --limit 20000

A multi-node gang is one whose pods were bound on 2 or more nodes; its wait runs from
submission until every pod runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.simulate.metrics import CLASSES, summarize
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
    args = parser.parse_args()
    print(
        f"{args.dataset}, {args.racks} nodes per rack; load average at start "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    scenario = build(args.dataset, Options(limit=args.limit, seed=args.seed, racks=args.racks))
    rows = []
    members = [m.name for m in scenario.fleet.members]
    for mode, policy in MODES:
        result = simulate(
            scenario.fleet,
            scenario.trace,
            make_policy(policy, members, args.seed),
            SimConfig(),
        )
        s = summarize(result)
        rows.append((mode, s))
        print(f"  {mode}: {result.wall_seconds:.0f} s", file=sys.stderr, flush=True)
    base = rows[0][1]["multi_node_wait_s"]
    print(
        "| topology | multi-node gangs | in one rack | wait p50 | wait p90 | p90 / ignored "
        "| all jobs, wait p90 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, s in rows:
        wait = s["multi_node_wait_s"]
        ratio = wait["p90"] / base["p90"] if base["p90"] else float("nan")
        print(
            f"| {mode} | {s['multi_node_gangs']:,} | {s['multi_node_in_one_domain']:,} "
            f"({s['multi_node_in_one_domain_share']:.0%}) | {human(wait['p50'])} | "
            f"{human(wait['p90'])} | {ratio:.2f}x | {human(s['wait_s']['p90'])} |"
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


if __name__ == "__main__":
    main()
