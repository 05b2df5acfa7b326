"""Benchmark of the gang placement engine (fleet.core).

Builds realistic fleets (GPU nodes of a few types, CPU-only nodes, random partial occupancy with
a fixed seed, zone/pool labels, GPU taints, a few cordoned nodes), then times `place()` for a
mix of gangs (1 master + N workers x 8 GPUs, small 1-2 GPU jobs, CPU-only jobs, some pinned to a
GPU type) over every cluster count x node count, and the cost of one incremental node update
and one pod update.

Gangs come in a few dozen shapes, as jobs of a sweep do: while a cluster is unchanged, placement
reuses its verdict for a gang of the same demand. The `cold` rows time the same gangs made all
different, so nothing is reused: the cost of a new kind of job.

`--fragmentation` also times the fragmentation-aware ranking (`place(..., mix=)`, issue 21) on
the same fleet and gangs, with the mix learned from the bench's gangs (`fgd` warm, `fcold`
cold), and prints its CPU p50/p99 as a ratio to today's best-fit ranking (`nodes`, `cold`)
measured in the same run.

Each decision is timed twice: wall clock, and the CPU time of this thread (which leaves out the
time the process waited for a core: on a shared machine wall-clock tails measure the neighbours).
Each point is built and timed `--runs` times (default 3, different seeds); the table shows the
median over runs of each figure, and the machine's load average is printed with it.

    nice .venv/bin/python bench/placement.py          # full grid (skips what would not fit in RAM)
    nice .venv/bin/python bench/placement.py --quick  # a few minutes
    nice .venv/bin/python bench/placement.py --clusters 1000 --nodes 5000 \
        --max-total-nodes 5000000
    nice .venv/bin/python bench/placement.py --clusters 100 --nodes 5000 --fragmentation
    nice .venv/bin/python bench/placement.py --clusters 100 --nodes 5000 --racks 8

`--racks 8` puts the nodes 8 to a rack and also times every gang with a required (`req`) and
a preferred (`pref`) whole-gang rack (the policy's gangTopology), warm and cold (`reqc`,
`prefc`); its `nodes` and `cold` rows are the same gangs without topology on the racked fleet.

Every run is a fresh process, so its RSS (after the build, minus the interpreter's own at start)
is the snapshots' and nothing left over from an earlier point.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.core.arrivals import RecentArrivals
from fleet.core.constraints import PodConstraints
from fleet.core.estimate import NODES, SUM, Estimator
from fleet.core.fragmentation import WorkloadMix
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.placement import place
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration
from fleet.core.topology import PREFERRED, REQUIRED, TopologyRule
from fleet.core.workload import Component, Gang

GiB = 1 << 30
GPU = "nvidia.com/gpu"
GPU_TAINT = Taint(GPU, "NoSchedule", "present")
TOLERATE_GPU = (Toleration(GPU, "Exists"),)
ZONES = ("zone-a", "zone-b", "zone-c")
RACK = "topology.kubernetes.io/rack"


@dataclass(frozen=True)
class NodeType:
    name: str
    share: float
    cpu: int
    memory_gib: int
    gpus: int


NODE_TYPES = (
    NodeType("a100x8", 0.35, 96, 768, 8),
    NodeType("t4x4", 0.20, 48, 192, 4),
    NodeType("cpu", 0.45, 64, 256, 0),
)
DAEMONSETS = Resources({"cpu": 500, "memory": GiB // 2, "pods": 3})


def make_cluster(name: str, nodes: int, rng: random.Random, racks: int = 0) -> ClusterSnapshot:
    """One member cluster; its utilisation level is drawn per cluster (some nearly full). With
    `racks`, nodes are `racks` to a rack in creation order (`<cluster>-r<k>`), each rack in one
    zone (racks take the zones in turn)."""
    snap = ClusterSnapshot(name, {"region": rng.choice(["cn-hangzhou", "cn-beijing"])})
    busy = rng.choice([0.3, 0.6, 0.8, 0.9, 0.95])
    for i in range(nodes):
        kind = rng.choices(NODE_TYPES, [t.share for t in NODE_TYPES])[0]
        node_name = f"{name}-{kind.name}-{i}"
        alloc = Resources(
            {
                "cpu": kind.cpu * 1000 - 1000,
                "memory": (kind.memory_gib - 8) * GiB,
                GPU: kind.gpus,
                "pods": 110,
                "ephemeral-storage": 400 * GiB,
            }
        )
        labels = {
            "kubernetes.io/hostname": node_name,
            "topology.kubernetes.io/zone": rng.choice(ZONES),
            "node.kubernetes.io/instance-type": kind.name,
        }
        if racks:
            rack = i // racks
            labels[RACK] = f"{name}-r{rack}"
            labels["topology.kubernetes.io/zone"] = ZONES[rack % len(ZONES)]
        if kind.gpus:
            labels["gpu-type"] = "a100" if kind.gpus == 8 else "t4"
        snap.upsert_node(
            NodeInfo(
                node_name,
                alloc,
                labels,
                (GPU_TAINT,) if kind.gpus else (),
                unschedulable=rng.random() < 0.02,
            )
        )
        # Occupancy: one pod holding what the node's running jobs use (decisions only see the
        # sum per node; pod-level cost is measured separately).
        used = DAEMONSETS
        if kind.gpus:
            gpus = min(kind.gpus, sum(rng.random() < busy for _ in range(kind.gpus)))
            if gpus:
                used = used + Resources(
                    {"cpu": 10_000 * gpus, "memory": 64 * GiB * gpus, GPU: gpus, "pods": 1}
                )
        cpu_jobs = sum(rng.random() < busy for _ in range(4))
        if cpu_jobs:
            size = rng.choice([2, 4, 8])
            used = used + Resources(
                {"cpu": 1000 * size * cpu_jobs, "memory": 4 * GiB * size * cpu_jobs}
            )
        snap.upsert_pod(PodInfo(f"{node_name}-usage", "bench", "usage", node_name, used))
    return snap


def make_gangs(rng: random.Random, count: int) -> list[Gang]:
    gangs = []
    for i in range(count):
        roll = rng.random()
        comps: list[Component]
        if roll < 0.45:  # distributed training: 1 master + N workers x 8 GPUs
            n = rng.choice([1, 2, 4, 8, 16])
            pin = PodConstraints.of(
                {"gpu-type": "a100"} if rng.random() < 0.5 else {}, tolerations=TOLERATE_GPU
            )
            comps = [
                Component("master", 1, Resources({"cpu": 8000, "memory": 32 * GiB, "pods": 1})),
                Component(
                    "worker",
                    n,
                    Resources({"cpu": 80_000, "memory": 600 * GiB, GPU: 8, "pods": 1}),
                    pin,
                ),
            ]
        elif roll < 0.85:  # small jobs: 1-2 workers x 1-2 GPUs
            g = rng.choice([1, 2])
            comps = [
                Component(
                    "worker",
                    rng.choice([1, 2]),
                    Resources({"cpu": 8000 * g, "memory": 48 * GiB * g, GPU: g, "pods": 1}),
                    PodConstraints.of(tolerations=TOLERATE_GPU),
                )
            ]
        else:  # CPU-only job
            comps = [
                Component("master", 1, Resources({"cpu": 4000, "memory": 16 * GiB, "pods": 1})),
                Component(
                    "worker",
                    rng.choice([4, 8, 16]),
                    Resources({"cpu": 16_000, "memory": 64 * GiB, "pods": 1}),
                ),
            ]
        gangs.append(Gang.of(*comps, name=f"gang-{i}"))
    return gangs


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def time_decisions(
    gangs: list[Gang],
    fleet: list[ClusterSnapshot],
    estimator: Estimator,
    mix: WorkloadMix | None = None,
) -> tuple[list[float], list[float], int]:
    """Per decision: wall ms, CPU ms of this thread; and how many gangs were placed."""
    wall, cpu = [], []
    placed = 0
    for gang in gangs:
        start_cpu = time.thread_time_ns()
        start = time.perf_counter_ns()
        decision = place(gang, fleet, estimator=estimator, mix=mix)
        wall.append((time.perf_counter_ns() - start) / 1e6)
        cpu.append((time.thread_time_ns() - start_cpu) / 1e6)
        placed += decision.fits
    return wall, cpu, placed


def update_costs(snap: ClusterSnapshot, rng: random.Random, rounds: int) -> tuple[float, float]:
    """Median µs of one node update (allocatable change) and one pod update (bind/unbind)."""
    nodes = list(snap.nodes())
    node_times = []
    for _ in range(rounds):
        info = rng.choice(nodes)
        changed = NodeInfo(
            info.name,
            info.allocatable + Resources(cpu=rng.choice([-100, 100])),
            info.labels,
            info.taints,
            info.unschedulable,
        )
        start = time.perf_counter_ns()
        snap.upsert_node(changed)
        node_times.append((time.perf_counter_ns() - start) / 1000)
    pod_times = []
    requests = Resources({"cpu": 2000, "memory": 8 * GiB, "pods": 1})
    for i in range(rounds):
        target = rng.choice(nodes).name
        pod = PodInfo(f"bench-{i % 50}", "bench", "p", target if i % 2 == 0 else None, requests)
        start = time.perf_counter_ns()
        snap.upsert_pod(pod)
        pod_times.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(node_times), statistics.median(pod_times)


def grid(clusters: list[int], nodes: list[int], max_nodes: int) -> Iterator[tuple[int, int]]:
    for n in nodes:
        for c in clusters:
            if c * n <= max_nodes:
                yield c, n


@dataclass
class Run:
    """One build and timing of one grid point."""

    estimator: str
    wall_p50: float
    wall_p99: float
    cpu_p50: float
    cpu_p99: float
    placed: int
    groups: float
    build_s: float
    rss_mib: float
    snap_mib: float
    node_us: float
    pod_us: float
    #: 1-minute load average when the row's decisions were done.
    load: float = 0.0


def run_point(
    c: int,
    n: int,
    decisions: int,
    seed: int,
    with_sum: bool,
    fragmentation: bool = False,
    racks: int = 0,
) -> list[Run]:
    gc.collect()
    before = rss_mib()
    rng = random.Random(seed)
    start = time.perf_counter()
    fleet = [make_cluster(f"member-{i:04d}", n, rng, racks) for i in range(c)]
    build = time.perf_counter() - start
    total = rss_mib()
    rss = total - before
    # What a long-running controller does once its snapshots are built: the cyclic GC then
    # never walks the millions of long-lived objects during a decision.
    gc.freeze()
    groups = statistics.mean(sum(1 for _ in s.groups()) for s in fleet)
    gangs = make_gangs(random.Random(seed + 1), decisions)
    node_us, pod_us = update_costs(fleet[0], random.Random(seed + 2), 2000)
    # The same gangs, each made unlike any other (a component name of its own), so no decision
    # can reuse an earlier one's per-cluster verdicts: the cold cost of a new kind of job.
    unique = [
        Gang.of(
            *(dataclasses.replace(comp, name=f"{comp.name}{i}") for comp in gang.components),
            name=gang.ref.name,
        )
        for i, gang in enumerate(gangs)
    ]
    arrivals = RecentArrivals()
    for gang in gangs:
        arrivals.observe(gang)
    mix = arrivals.mix()
    runs = []
    plan: list[tuple[Estimator, str, list[Gang], WorkloadMix | None]] = [
        (NODES, "nodes", gangs, None),
        (NODES, "cold", unique, None),
    ]
    if with_sum:
        plan += [(SUM, "sum", gangs, None), (SUM, "scold", unique, None)]
    if fragmentation:
        plan += [(NODES, "fgd", gangs, mix), (NODES, "fcold", unique, mix)]
    if racks:
        # Topology on: every gang asks for one rack (a policy's gangTopology), required or
        # preferred; warm (a sweep's shapes) and cold (every gang unlike any other).
        for mode, label in ((REQUIRED, "req"), (PREFERRED, "pref")):
            rule = TopologyRule(RACK, mode)
            plan += [
                (NODES, label, [g.with_topology(rule) for g in gangs], None),
                (NODES, f"{label}c", [g.with_topology(rule) for g in unique], None),
            ]
    for estimator, label, batch, batch_mix in plan:
        place(batch[0], fleet, estimator=estimator, mix=batch_mix)  # warm caches
        wall, cpu, placed = time_decisions(batch, fleet, estimator, batch_mix)
        runs.append(
            Run(
                label,
                statistics.median(wall),
                percentile(wall, 0.99),
                statistics.median(cpu),
                percentile(cpu, 0.99),
                placed,
                groups,
                build,
                total,
                rss,
                node_us,
                pod_us,
                os.getloadavg()[0],
            )
        )
    return runs


def run_in_child(
    c: int, n: int, decisions: int, seed: int, with_sum: bool, fragmentation: bool, racks: int = 0
) -> list[Run]:
    flags = f"{c},{n},{decisions},{seed},{int(with_sum)},{int(fragmentation)},{racks}"
    cmd = [sys.executable, __file__, "--one", flags]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [Run(**fields) for fields in json.loads(out.splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small grid, about a minute")
    parser.add_argument("--clusters", default="10,100,1000")
    parser.add_argument("--nodes", default="100,1000,5000")
    parser.add_argument("--decisions", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3, help="builds per point (median shown)")
    parser.add_argument(
        "--max-total-nodes",
        type=int,
        default=1_100_000,
        help="skip grid points with more nodes in total (RAM)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--sum", action="store_true", help="also time the sum estimator")
    parser.add_argument(
        "--fragmentation",
        action="store_true",
        help="also time the fragmentation-aware ranking, with its ratio to best fit",
    )
    parser.add_argument(
        "--racks",
        type=int,
        default=0,
        help="topology on: N nodes to a rack (label topology.kubernetes.io/rack) and rows "
        "req/reqc (every gang required in one rack, warm/cold) and pref/prefc (preferred)",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # c,n,decisions,seed,sum,frag,racks
    args = parser.parse_args()
    if args.one:
        c, n, decisions, seed, with_sum, fragmentation, racks = (
            int(x) for x in args.one.split(",")
        )
        runs = run_point(c, n, decisions, seed, bool(with_sum), bool(fragmentation), racks)
        print(json.dumps([dataclasses.asdict(r) for r in runs]))
        return
    clusters = [int(x) for x in args.clusters.split(",")]
    nodes = [int(x) for x in args.nodes.split(",")]
    decisions = args.decisions
    if args.quick:
        clusters, nodes, decisions = [10, 100], [100, 1000], 100

    print(
        f"machine: {os.cpu_count()} CPUs, load average at start "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; median of {args.runs} runs"
    )
    print(
        f"{'clusters':>8} {'nodes':>6} {'est':>5} {'wall p50':>8} {'wall p99':>8} "
        f"{'cpu p50':>8} {'cpu p99':>8} {'placed':>7} {'groups/cl':>9} {'build s':>8} "
        f"{'RSS MiB':>8} {'snap MiB':>8} {'node µs':>8} {'pod µs':>7} {'load':>5}  (times in ms)"
    )
    for c, n in grid(clusters, nodes, args.max_total_nodes):
        per_run = [
            run_in_child(
                c, n, decisions, args.seed + 1000 * k, args.sum, args.fragmentation, args.racks
            )
            for k in range(args.runs)
        ]
        for i, first in enumerate(per_run[0]):
            runs = [r[i] for r in per_run]

            def med(attr: str, runs: list[Run] = runs) -> float:
                return statistics.median(getattr(r, attr) for r in runs)

            print(
                f"{c:>8} {n:>6} {first.estimator:>5} {med('wall_p50'):>8.2f} "
                f"{med('wall_p99'):>8.2f} {med('cpu_p50'):>8.2f} {med('cpu_p99'):>8.2f} "
                f"{med('placed'):>4.0f}/{decisions:<3}{med('groups'):>9.0f} {med('build_s'):>8.1f} "
                f"{med('rss_mib'):>8.0f} {med('snap_mib'):>8.0f} {med('node_us'):>8.1f} "
                f"{med('pod_us'):>7.1f} {med('load'):>5.1f}",
                flush=True,
            )
        _print_targets(c, n, args.racks, per_run)
        if args.fragmentation:
            _print_ratios(c, n, per_run)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"peak RSS of one run: {peak:.0f} MiB; load average at end "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )


#: Issue 35's targets for a decision with a topology rule, CPU p99 in ms, by fleet size.
TOPOLOGY_TARGETS = {(100, 5000): 3.0, (1000, 5000): 10.0}


def _print_targets(c: int, n: int, racks: int, per_run: list[list[Run]]) -> None:
    """Whether the topology rows' CPU p99 (median over runs) meets the target for this size."""
    target = TOPOLOGY_TARGETS.get((c, n))
    if target is None or not racks:
        return
    for label in ("req", "reqc", "pref", "prefc"):
        values = [r.cpu_p99 for runs in per_run for r in runs if r.estimator == label]
        p99 = statistics.median(values)
        verdict = "met" if p99 <= target else "NOT met"
        print(
            f"{c:>8} {n:>6} {label:>5} target cpu p99 <= {target:g} ms: {verdict} ({p99:.2f} ms)",
            flush=True,
        )


def _print_ratios(c: int, n: int, per_run: list[list[Run]]) -> None:
    """Fragmentation-aware over best fit, CPU time, per run (same fleet, same gangs), median."""
    for fast, slow in (("nodes", "fgd"), ("cold", "fcold")):
        for attr in ("cpu_p50", "cpu_p99"):
            ratios = []
            for runs in per_run:
                by = {r.estimator: r for r in runs}
                ratios.append(getattr(by[slow], attr) / max(getattr(by[fast], attr), 1e-9))
            print(
                f"{c:>8} {n:>6} {slow}/{fast} {attr}: {statistics.median(ratios):.2f}x "
                f"(runs {', '.join(f'{x:.2f}' for x in ratios)})",
                flush=True,
            )


if __name__ == "__main__":
    main()
