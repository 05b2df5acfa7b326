"""Small random clusters and gangs, shared by the property tests and the false-no-fit survey."""

from __future__ import annotations

import random

from fleet.core.constraints import PodConstraints
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration
from fleet.core.workload import Component, Gang

from .builders import GiB, node, pod

GPU_TAINT = Taint("nvidia.com/gpu", "NoSchedule")


def random_cluster(rng: random.Random, name: str = "c", max_nodes: int = 5) -> ClusterSnapshot:
    snap = ClusterSnapshot(name)
    for i in range(rng.randint(1, max_nodes)):
        gpu = rng.choice([0, 0, 1, 2, 4, 8])
        snap.upsert_node(
            node(
                f"n{i}",
                cpu=rng.choice([2, 4, 8, 16]),
                memory=rng.choice([8, 16, 32]),
                gpu=gpu,
                pods=rng.choice([2, 110, 110]),
                labels={"pool": rng.choice("ab"), "kubernetes.io/hostname": f"n{i}"},
                taints=(GPU_TAINT,) if gpu and rng.random() < 0.5 else (),
                unschedulable=rng.random() < 0.1,
            )
        )
        for j in range(rng.randint(0, 2)):
            snap.upsert_pod(
                pod(
                    f"p{i}-{j}",
                    f"n{i}",
                    cpu_m=rng.choice([0, 500, 1000, 2000]),
                    memory=rng.choice([0, 1, 4]),
                    gpu=rng.choice([0, 0, 1, 2]),
                )
            )
    return snap


def random_gang(rng: random.Random) -> Gang:
    components = []
    for index in range(rng.randint(1, 3)):
        requests = Resources(
            {
                "cpu": rng.choice([0, 500, 1000, 2000, 4000, 8000]),
                "memory": rng.choice([0, 1, 4, 8, 16]) * GiB,
                "nvidia.com/gpu": rng.choice([0, 0, 1, 2, 4, 8]),
                "pods": 1,
            }
        )
        selector = {"pool": rng.choice("ab")} if rng.random() < 0.3 else {}
        if rng.random() < 0.05:
            selector = {"kubernetes.io/hostname": f"n{rng.randint(0, 4)}"}
        tolerations = (Toleration("nvidia.com/gpu", "Exists"),) if rng.random() < 0.6 else ()
        components.append(
            Component(
                f"role{index}",
                rng.randint(1, 4),
                requests,
                PodConstraints.of(selector, None, tolerations),
            )
        )
    total = sum(c.replicas for c in components)
    return Gang.of(*components, min_member=rng.randint(1, total))
