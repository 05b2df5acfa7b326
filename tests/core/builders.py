"""Small constructors for nodes, pods and snapshots in tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint

GiB = 1 << 30


def node(
    name: str,
    *,
    cpu: int = 32,
    memory: int = 128,
    gpu: int = 0,
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Taint] = (),
    unschedulable: bool = False,
) -> NodeInfo:
    """cpu in cores, memory in GiB."""
    return NodeInfo(
        name,
        Resources({"cpu": cpu * 1000, "memory": memory * GiB, "nvidia.com/gpu": gpu, "pods": pods}),
        dict(labels or {}),
        tuple(taints),
        unschedulable,
    )


def pod(
    uid: str,
    node_name: str | None,
    *,
    cpu_m: int = 0,
    memory: int = 0,
    gpu: int = 0,
    terminal: bool = False,
    owner: str | None = None,
) -> PodInfo:
    return PodInfo(
        uid,
        "default",
        uid,
        node_name,
        Resources({"cpu": cpu_m, "memory": memory * GiB, "nvidia.com/gpu": gpu, "pods": 1}),
        terminal,
        owner,
    )


def cluster(
    name: str, *nodes: NodeInfo, labels: Mapping[str, str] | None = None
) -> ClusterSnapshot:
    return ClusterSnapshot.build(name, nodes, labels=labels)
