"""Cost of one dequeue pass of the Kube Queue admission core (`fleet.core.admission`).

    .venv/bin/python bench/queue.py [--units 1000,10000,100000] [--passes 2000] [--runs 5]

A tree of 100 quota nodes (root, 9 departments, 90 teams; every team min 16 GPUs, max 32, some
with max-jobs) and N queued units spread over the teams, gangs of 1-4 workers x 1-8 GPUs with
8 CPUs and 64Gi per GPU, priorities 0-3. After the first pass fills the quota, each measured pass
is: one running job finishes, `plan(now)` runs, its dequeued units are placed, and a new unit is
queued (the queue stays at N). Prints per-pass p50/p99 wall time (the median over --runs
runs of each run's percentile), the p99 of the CPU time the pass used (`time.thread_time`, which a
busy shared machine does not inflate), units dequeued per pass, and the CPU p99's ratio to the
smallest size, for Priority and Block queues, and for a worst case where every unit asks a
distinct CPU amount (no two units share a demand vector). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from typing import Any

from fleet.core.admission import Admission, UnitSpec
from fleet.core.quota import MAX_JOBS, QuotaTree, check_tree
from fleet.core.resources import CPU, GPU, MEMORY, Resources

GiB = 1 << 30
DEPARTMENTS = 9
TEAMS_PER_DEPARTMENT = 10
TEAM_MIN, TEAM_MAX = 16, 32


def build_tree() -> QuotaTree:
    departments = []
    for d in range(DEPARTMENTS):
        teams = []
        for t in range(TEAMS_PER_DEPARTMENT):
            name = f"team-{d}-{t}"
            team: dict[str, Any] = {
                "name": name,
                "namespaces": [name],
                "min": {GPU: TEAM_MIN},
                "max": {GPU: TEAM_MAX, CPU: TEAM_MAX * 8, MEMORY: f"{TEAM_MAX * 64}Gi"},
            }
            if t % 3 == 0:
                team["max"][MAX_JOBS] = 4
            teams.append(team)
        per = TEAM_MIN * TEAMS_PER_DEPARTMENT
        departments.append(
            {"name": f"dept-{d}", "min": {GPU: per}, "max": {GPU: per * 3 // 2}, "children": teams}
        )
    total = TEAM_MIN * TEAMS_PER_DEPARTMENT * DEPARTMENTS
    root = {"name": "root", "min": {GPU: total}, "max": {GPU: total}, "children": departments}
    check = check_tree({"root": root})
    assert check.tree is not None, check.problems
    return check.tree


def make_unit(rng: random.Random, i: int, now: float, *, distinct: bool) -> UnitSpec:
    workers = rng.choice((1, 1, 1, 2, 4))
    per = rng.choice((1, 1, 2, 4, 8))
    gpus = workers * per
    cpu = gpus * 8000 + (i % 997 if distinct else 0)
    team = f"team-{rng.randrange(DEPARTMENTS)}-{rng.randrange(TEAMS_PER_DEPARTMENT)}"
    resources = Resources({GPU: gpus, CPU: cpu, MEMORY: gpus * 64 * GiB})
    return UnitSpec(f"u{i}", team, resources, now, rng.randrange(4))


def one_run(
    tree: QuotaTree, units: int, passes: int, seed: int, policy: str, distinct: bool
) -> tuple[list[float], list[float], float]:
    rng = random.Random(seed)
    a = Admission()
    a.set_tree(tree)
    for path in tree.nodes:
        a.configure_queue(path, policy)
    for i in range(units):
        a.upsert(make_unit(rng, i, float(i), distinct=distinct))
    now = float(units)
    running = [d.key for d in a.plan(now).dequeue]
    for key in running:
        a.placed(key, now)
    next_id = units
    times: list[float] = []
    cpu: list[float] = []
    admitted = 0
    gc.collect()
    gc.disable()
    try:
        for _ in range(passes):
            if not running:
                break
            now += 1.0
            victim = running.pop(rng.randrange(len(running)))
            start, start_cpu = time.perf_counter(), time.thread_time()
            a.finished(victim, True, now)
            plan = a.plan(now)
            times.append(time.perf_counter() - start)
            cpu.append(time.thread_time() - start_cpu)
            a.remove(victim)
            for d in plan.dequeue:
                a.placed(d.key, now)
                running.append(d.key)
            admitted += len(plan.dequeue)
            a.upsert(make_unit(rng, next_id, now, distinct=distinct))
            next_id += 1
    finally:
        gc.enable()
    return times, cpu, admitted / max(len(times), 1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--units", default="1000,10000,100000")
    p.add_argument("--passes", type=int, default=2000)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    sizes = [int(x) for x in args.units.split(",")]
    tree = build_tree()
    print(f"tree: {len(tree)} quota nodes; {args.passes} passes per run, {args.runs} runs")
    print(
        f"{'case':<22} {'units':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU p99':>8} "
        f"{'dequeued/pass':>14} {'CPU ratio':>9}"
    )
    for case, policy, distinct in (
        ("Priority", "Priority", False),
        ("Block", "Block", False),
        ("Priority, all distinct", "Priority", True),
    ):
        base = None
        for n in sizes:
            p50s, p99s, cpu99s, rates = [], [], [], []
            for run in range(args.runs):
                times, cpu, rate = one_run(tree, n, args.passes, run, policy, distinct)
                p50s.append(percentile(times, 50) * 1e3)
                p99s.append(percentile(times, 99) * 1e3)
                cpu99s.append(percentile(cpu, 99) * 1e3)
                rates.append(rate)
            p50, p99 = statistics.median(p50s), statistics.median(p99s)
            cpu99 = statistics.median(cpu99s)
            base = base or cpu99
            print(
                f"{case:<22} {n:>8,} {p50:>8.3f} {p99:>8.3f} {cpu99:>8.3f} "
                f"{statistics.median(rates):>14.2f} {cpu99 / base:>8.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
