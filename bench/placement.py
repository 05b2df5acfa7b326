"""Benchmark of the gang placement engine (fleet.core).

Builds realistic fleets (GPU nodes of a few types, CPU-only nodes, random partial occupancy with
a fixed seed, zone/pool labels, GPU taints, a few cordoned nodes), then times `place()` for a
mix of gangs (1 master + N workers x 8 GPUs, small 1-2 GPU jobs, CPU-only jobs, some pinned to a
GPU type) over every cluster count x node count, and the cost of one incremental node update
and one pod update.

    .venv/bin/python bench/placement.py            # full grid (skips what would not fit in RAM)
    .venv/bin/python bench/placement.py --quick    # under a minute
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.core.constraints import PodConstraints
from fleet.core.estimate import NODES, SUM, Estimator
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.placement import place
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration
from fleet.core.workload import Component, Gang

GiB = 1 << 30
GPU = "nvidia.com/gpu"
GPU_TAINT = Taint(GPU, "NoSchedule", "present")
TOLERATE_GPU = (Toleration(GPU, "Exists"),)
ZONES = ("zone-a", "zone-b", "zone-c")


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


def make_cluster(name: str, nodes: int, rng: random.Random) -> ClusterSnapshot:
    """One member cluster; its utilisation level is drawn per cluster (some nearly full)."""
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
    gangs: list[Gang], fleet: list[ClusterSnapshot], estimator: Estimator
) -> tuple[list[float], int]:
    times = []
    placed = 0
    for gang in gangs:
        start = time.perf_counter()
        decision = place(gang, fleet, estimator=estimator)
        times.append((time.perf_counter() - start) * 1000)
        placed += decision.fits
    return times, placed


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small grid, under a minute")
    parser.add_argument("--clusters", default="10,100,1000")
    parser.add_argument("--nodes", default="100,1000,5000")
    parser.add_argument("--decisions", type=int, default=300)
    parser.add_argument(
        "--max-total-nodes",
        type=int,
        default=1_100_000,
        help="skip grid points with more nodes in total (RAM)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--sum", action="store_true", help="also time the sum estimator")
    args = parser.parse_args()
    clusters = [int(x) for x in args.clusters.split(",")]
    nodes = [int(x) for x in args.nodes.split(",")]
    decisions = args.decisions
    if args.quick:
        clusters, nodes, decisions = [10, 100], [100, 1000], 100

    print(
        f"{'clusters':>8} {'nodes':>6} {'est':>5} {'p50 ms':>8} {'p99 ms':>8} {'placed':>7} "
        f"{'groups/cl':>9} {'build s':>8} {'RSS MiB':>8} {'node µs':>8} {'pod µs':>7}"
    )
    for c, n in grid(clusters, nodes, args.max_total_nodes):
        gc.collect()
        before = rss_mib()
        rng = random.Random(args.seed)
        start = time.perf_counter()
        fleet = [make_cluster(f"member-{i:04d}", n, rng) for i in range(c)]
        build = time.perf_counter() - start
        rss = rss_mib() - before
        groups = statistics.mean(sum(1 for _ in s.groups()) for s in fleet)
        gangs = make_gangs(random.Random(args.seed + 1), decisions)
        node_us, pod_us = update_costs(fleet[0], random.Random(args.seed + 2), 2000)
        for estimator in (NODES, SUM) if args.sum else (NODES,):
            place(gangs[0], fleet, estimator=estimator)  # warm caches
            times, placed = time_decisions(gangs, fleet, estimator)
            print(
                f"{c:>8} {n:>6} {estimator.name:>5} {statistics.median(times):>8.2f} "
                f"{percentile(times, 0.99):>8.2f} {placed:>4}/{len(gangs):<3}{groups:>9.0f} "
                f"{build:>8.1f} {rss:>8.0f} {node_us:>8.1f} {pod_us:>7.1f}",
                flush=True,
            )
        del fleet
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the whole run: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
