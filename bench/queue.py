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
distinct CPU amount (no two units share a demand vector).

`--reclaim` measures a reclaim pass instead (`Admission.plan` then `Admission.reclaim`, the
controller's pass with reclaim on): 10 members of 18 nodes x 8 GPUs (1,440 GPUs, the tree's
root); 45 teams (5 per department) borrow the whole fleet with 1,000 running gangs of 1-2 GPUs
packed onto the nodes; the 10,000 waiting units are spread over all 90 teams, so the other 45
teams, holding nothing, are below their min and claim. Each measured pass: a running gang
finishes (its pods leave), the pass plans and reclaims (the measured part), the victims' pods
leave, the dequeued gangs are packed and run, a new unit is queued. Also prints the evictions
per pass and the load average (a figure taken at a load above 2 is mostly waiting for a core).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time
from typing import Any

from fleet.core.admission import Admission, AdmissionSettings, Placed, UnitSpec
from fleet.core.assignment import Assignment
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.packing import pack
from fleet.core.quota import MAX_JOBS, QuotaTree, check_tree
from fleet.core.resources import CPU, GPU, MEMORY, PODS, Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Component, Gang

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


MEMBERS, NODES_PER_MEMBER = 10, 18
BORROWING_TEAMS_PER_DEPARTMENT = 5


def gang_of(spec: UnitSpec) -> Gang:
    gpus = spec.resources.get(GPU, 0)
    per = Resources({GPU: gpus, CPU: gpus * 8000, MEMORY: gpus * 64 * GiB, PODS: 1})
    return Gang.of(Component("worker", 1, per), name=spec.key)


class Fleet:
    """The members' snapshots and the running gangs' pods on them."""

    def __init__(self) -> None:
        node = Resources({GPU: 8, CPU: 96000, MEMORY: 768 * GiB, PODS: 110})
        self.members = [
            ClusterSnapshot.build(
                f"m{m}", [NodeInfo(f"m{m}-n{n}", node) for n in range(NODES_PER_MEMBER)]
            )
            for m in range(MEMBERS)
        ]
        self.running: dict[str, Placed] = {}
        self.pods: dict[str, tuple[ClusterSnapshot, list[str]]] = {}

    def place(self, key: str, gang: Gang, now: float) -> bool:
        for member in self.members:
            found = pack(member, gang)
            if isinstance(found, Assignment):
                uids = []
                for slot in found:
                    for i in range(slot.pods):
                        uid = f"{key}-{i}"
                        member.upsert_pod(
                            PodInfo(uid, "", uid, slot.node, slot.requests, owner_key=key)
                        )
                        uids.append(uid)
                self.pods[key] = (member, uids)
                self.running[key] = Placed(member.name, key, now)
                return True
        return False

    def leave(self, key: str) -> None:
        member, uids = self.pods.pop(key)
        for uid in uids:
            member.remove_pod(uid)
        self.running.pop(key, None)


def waiting_unit(rng: random.Random, i: int, now: float) -> UnitSpec:
    """A one-pod gang of 1-8 GPUs (8 CPUs and 64Gi per GPU) of any team, priority 0-3."""
    gpus = rng.choice((1, 1, 2, 4, 8))
    team = f"team-{rng.randrange(DEPARTMENTS)}-{rng.randrange(TEAMS_PER_DEPARTMENT)}"
    resources = Resources({GPU: gpus, CPU: gpus * 8000, MEMORY: gpus * 64 * GiB})
    return UnitSpec(f"u{i}", team, resources, now, rng.randrange(4))


def reclaim_run(
    tree: QuotaTree, units: int, running: int, passes: int, seed: int
) -> tuple[list[float], list[float], float]:
    rng = random.Random(seed)
    a = Admission(AdmissionSettings(reclaim=True))
    a.set_tree(tree)
    fleet = Fleet()
    gangs: dict[str, Gang] = {}
    borrowers = [
        f"team-{d}-{t}" for d in range(DEPARTMENTS) for t in range(BORROWING_TEAMS_PER_DEPARTMENT)
    ]
    now = 0.0
    # The borrowers fill the fleet: 1,000 gangs of 1-2 GPUs (1,440 GPUs).
    sizes = [2] * (TEAM_MIN * 2 * len(borrowers) - running) + [1] * (
        2 * running - TEAM_MIN * 2 * len(borrowers)
    )
    rng.shuffle(sizes)
    for i, gpus in enumerate(sizes):
        team = borrowers[i % len(borrowers)]
        spec = UnitSpec(
            f"r{i}", team, Resources({GPU: gpus, CPU: gpus * 8000, MEMORY: gpus * 64 * GiB}), now
        )
        gangs[spec.key] = gang_of(spec)
        a.upsert(spec)
    for d in a.plan(now).dequeue:
        if fleet.place(d.key, gangs[d.key], now):
            a.placed(d.key, now)
    for i in range(units):
        spec = waiting_unit(rng, i, float(i))
        gangs[spec.key] = gang_of(spec)
        a.upsert(spec)
    now = float(units)
    next_id = units
    times: list[float] = []
    cpu: list[float] = []
    evicted = 0
    members = fleet.members
    gc.collect()
    gc.disable()
    try:
        for _ in range(passes):
            keys = list(fleet.running)
            if not keys:
                break
            now += 1.0
            done = keys[rng.randrange(len(keys))]
            fleet.leave(done)
            a.finished(done, True, now)
            start, start_cpu = time.perf_counter(), time.thread_time()
            plan = a.plan(now)
            reclaim = a.reclaim(now, fleet.running, gangs.get, lambda _key: members)
            times.append(time.perf_counter() - start)
            cpu.append(time.thread_time() - start_cpu)
            a.remove(done)
            for e in reclaim.evict:
                fleet.leave(e.key)
            evicted += len(reclaim.evict)
            for d in [*plan.dequeue, *reclaim.dequeue]:
                if fleet.place(d.key, gangs[d.key], now):
                    a.placed(d.key, now)
            spec = waiting_unit(rng, next_id, now)
            gangs[spec.key] = gang_of(spec)
            a.upsert(spec)
            next_id += 1
    finally:
        gc.enable()
    return times, cpu, evicted / max(len(times), 1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--units", default="1000,10000,100000")
    p.add_argument("--passes", type=int, default=2000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--reclaim", action="store_true", help="measure a reclaim pass instead")
    p.add_argument("--running", type=int, default=1000, help="running gangs (--reclaim)")
    args = p.parse_args()
    if args.reclaim:
        reclaim_main(args)
        return
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


def reclaim_main(args: argparse.Namespace) -> None:
    tree = build_tree()
    load = os.getloadavg()
    print(
        f"tree: {len(tree)} quota nodes; {MEMBERS} members x {NODES_PER_MEMBER} nodes x 8 GPUs; "
        f"{args.running:,} running gangs; {args.passes} passes per run, {args.runs} runs; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(
        f"{'units':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU p50':>8} {'CPU p99':>8} "
        f"{'evicted/pass':>13}"
    )
    for n in [int(x) for x in args.units.split(",")]:
        p50s, p99s, c50s, c99s, rates = [], [], [], [], []
        for run in range(args.runs):
            times, cpu, rate = reclaim_run(tree, n, args.running, args.passes, run)
            p50s.append(percentile(times, 50) * 1e3)
            p99s.append(percentile(times, 99) * 1e3)
            c50s.append(percentile(cpu, 50) * 1e3)
            c99s.append(percentile(cpu, 99) * 1e3)
            rates.append(rate)
        print(
            f"{n:>8,} {statistics.median(p50s):>8.2f} {statistics.median(p99s):>8.2f} "
            f"{statistics.median(c50s):>8.2f} {statistics.median(c99s):>8.2f} "
            f"{statistics.median(rates):>13.3f}",
            flush=True,
        )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
