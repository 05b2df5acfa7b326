"""Where a trace replay spends its time: one policy-run under cProfile, grouped by component.

    .venv/bin/python bench/simulate.py                         # Philly x5, nodes, full trace
    .venv/bin/python bench/simulate.py --dataset philly --policy sum --limit 20000

Groups (cumulative time of entry points that never nest): placement decisions (`place` with
its estimators, scoring and packing), the member's own gang check, snapshot updates (pods bound
and freed, reservations), and the rest: the simulator itself (event loop, queues, bookkeeping).
Wall time is measured once without the profiler; the profiled run gives the split (cProfile
inflates Python-heavy code, so read the split, not the seconds).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.simulate.cli import replay
from fleet.simulate.scenarios import Options, build
from fleet.simulate.simulation import SimConfig

#: (label, file suffix, functions) whose *cumulative* time makes a group; they never nest.
GROUPS = (
    ("placement decisions (fleet.core.placement.place)", "fleet/core/placement.py", {"place"}),
    ("member gang check (NODES on the member's truth)", "fleet/simulate/member.py", {"fits"}),
    (
        "snapshot updates (pods bound/freed, reservations)",
        "fleet/core/snapshot.py",
        {"upsert_pod", "remove_pod", "reserve", "release", "expire"},
    ),
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="philly-x5")
    p.add_argument("--policy", default="nodes")
    p.add_argument("--limit", type=int)
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args()
    scenario = build(args.dataset, Options(limit=args.limit))
    started = time.perf_counter()
    result = replay(scenario, args.policy, 0, SimConfig())
    wall = time.perf_counter() - started
    print(
        f"{args.dataset} {args.policy}: {len(result.jobs):,} jobs, "
        f"{result.counters['decisions']:,} decisions, wall {wall:.1f} s "
        f"({1e6 * wall / max(len(result.jobs), 1):.0f} us a job)"
    )
    profile = cProfile.Profile()
    profile.enable()
    replay(scenario, args.policy, 0, SimConfig())
    profile.disable()
    stats = pstats.Stats(profile)
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    print(f"\nprofiled: {total:.1f} s")
    counted = 0.0
    for label, suffix, names in GROUPS:
        seconds = sum(
            entry[3]
            for (path, _, name), entry in raw.items()
            if path.endswith(suffix) and name in names
        )
        counted += seconds
        print(f"  {label:<52} {seconds:6.1f} s  {seconds / total:5.0%}")
    rest = total - counted
    label = "simulator itself (events, queues, metrics, bind)"
    print(f"  {label:<52} {rest:6.1f} s  {rest / total:5.0%}")
    print()
    stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
