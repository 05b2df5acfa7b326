"""Tiny fleets and traces with answers you can work out by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fleet.core.inventory import NodeInfo
from fleet.core.resources import GPU, PODS, Resources
from fleet.simulate import FleetSpec, JobSpec, MemberSpec, Shape


def fleet_of(members: Mapping[str, Sequence[int]]) -> FleetSpec:
    """{"a": [8, 8], "b": [4]}: member a has two 8-GPU nodes, b one 4-GPU node."""
    return FleetSpec(
        tuple(
            MemberSpec(
                name,
                tuple(
                    NodeInfo(f"{name}-{i}", Resources({GPU: gpus, PODS: 110}))
                    for i, gpus in enumerate(nodes)
                ),
            )
            for name, nodes in members.items()
        )
    )


def job(name: str, submit: float, duration: float, workers: int, gpu: int) -> JobSpec:
    return JobSpec(name, submit, duration, "team", Shape(workers, Resources({GPU: gpu, PODS: 1})))


def by_id(result: object) -> dict[str, object]:
    return {j.spec.id: j for j in result.jobs}  # type: ignore[attr-defined]
