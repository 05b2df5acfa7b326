"""Which pods of a gang go where: the proof behind a "fits", and what a snapshot reserves.

`node` is None for pods an estimator counted against the cluster as a whole (the `sum` rule
never picks nodes); such pods are reserved against the cluster's totals only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fleet.core.resources import EMPTY, Resources


@dataclass(frozen=True, slots=True)
class Slot:
    """`pods` pods of `component`, each needing `requests`, on `node`."""

    component: str
    node: str | None
    pods: int
    requests: Resources


@dataclass(frozen=True, slots=True)
class Domain:
    """The one topology domain a gang's pods (or some of its components') were placed in:
    nodes whose `level` label is `value` (see `fleet.core.topology`)."""

    level: str
    value: str
    #: The components placed there; empty: the whole gang.
    components: tuple[str, ...] = ()
    required: bool = True


def whole_gang_level(domains: Iterable[Domain], components: Iterable[str]) -> str | None:
    """The level of the required domain that holds every one of the gang's `components` (the
    policy's whole-gang rule, or Kueue pod sets grouped into one), else None: what a member
    whose gang scheduler places a whole group in one domain (Kubernetes' PodGroup
    `schedulingConstraints.topology`) is told. A rule on some pod sets only is not its to
    keep: those stay pinned by node affinity alone."""
    names = set(components)
    for d in domains:
        if d.required and (not d.components or names <= set(d.components)):
            return d.level
    return None


@dataclass(frozen=True, slots=True)
class Assignment:
    slots: tuple[Slot, ...] = ()
    #: Topology domains the assignment keeps to (empty when the gang asked for none, or when a
    #: preferred domain could not be had).
    domains: tuple[Domain, ...] = ()

    def __iter__(self) -> Iterator[Slot]:
        return iter(self.slots)

    @property
    def pods(self) -> int:
        return sum(s.pods for s in self.slots)

    @property
    def placed_on_nodes(self) -> bool:
        """True when every pod has a concrete node (a real, checkable assignment)."""
        return all(s.node is not None for s in self.slots)

    def per_node(self) -> dict[str | None, Resources]:
        out: dict[str | None, Resources] = {}
        for slot in self.slots:
            out[slot.node] = out.get(slot.node, EMPTY) + slot.requests * slot.pods
        return out

    def per_component(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for slot in self.slots:
            out[slot.component] = out.get(slot.component, 0) + slot.pods
        return out

    def total(self) -> Resources:
        out = EMPTY
        for slot in self.slots:
            out = out + slot.requests * slot.pods
        return out

    def __str__(self) -> str:
        return ", ".join(
            f"{s.pods} {s.component} on {s.node if s.node is not None else '(cluster)'}"
            for s in self.slots
        )
