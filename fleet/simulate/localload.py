"""Member-local load: pods that members' own users submit, which the fleet does not place.

They are the race that reservations exist for. The fleet decides on what its watch shows; a
local pod that binds in the member after that decision and before the gang's pods arrive takes
capacity the fleet counted, and the gang waits in the member. Local pods are single pods of a
few GPUs, arriving per member as a Poisson process and running an exponential time; one that
finds no node with room is turned away (the member's users try elsewhere), never queued.

The stream of each member depends only on the seed and the member's name, so every policy
compared in one report faces the same local arrivals.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from fleet.core.resources import GPU, PODS, Resources
from fleet.core.workload import Component, Gang

#: Local pods stop arriving this long after the trace's last job arrived (jobs still waiting
#: then are placed without local competition; the run must end).
HORIZON_AFTER_LAST_ARRIVAL = 6 * 3600.0


class ArrivalStream(Protocol):
    """One member's local pods, one after another."""

    def gap(self) -> float:
        """Seconds until the next local pod (infinity: no more)."""
        ...

    def next_pod(self) -> tuple[str, Gang, float]:
        """A unique name, the pod as a one-pod gang, and its run time in seconds."""
        ...


class LocalSource(Protocol):
    """Where members' local pods come from: `LocalLoad`, or a script in tests."""

    def stream(self, member: str) -> ArrivalStream: ...


@dataclass(frozen=True)
class LocalLoad:
    """`per_hour` local pods per member per hour, each asking one of `gpus` (uniformly) and
    running an exponential time of mean `mean_minutes`."""

    per_hour: float
    gpus: tuple[int, ...] = (1, 2, 4, 8)
    mean_minutes: float = 30.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.per_hour <= 0:
            raise ValueError(f"local load must be a positive rate per hour, got {self.per_hour}")
        if not self.gpus or any(g < 1 for g in self.gpus):
            raise ValueError(f"local pods ask at least 1 GPU each, got {self.gpus}")
        if self.mean_minutes <= 0:
            raise ValueError(f"local pods' mean run time must be positive: {self.mean_minutes}")

    def stream(self, member: str) -> LocalStream:
        return LocalStream(self, random.Random(f"local/{self.seed}/{member}"))


class LocalStream:
    """One member's local arrivals: the gap to the next pod, its size, its run time."""

    def __init__(self, load: LocalLoad, rng: random.Random) -> None:
        self.load = load
        self.rng = rng
        self.count = 0

    def gap(self) -> float:
        return self.rng.expovariate(self.load.per_hour / 3600.0)

    def next_pod(self) -> tuple[str, Gang, float]:
        """A name, the pod as a one-pod gang (what the member's scheduler fits), its run time."""
        self.count += 1
        gpus = self.rng.choice(self.load.gpus)
        duration = self.rng.expovariate(1.0 / (self.load.mean_minutes * 60.0))
        gang = Gang.of(Component("local", 1, Resources({GPU: gpus, PODS: 1})), name="local")
        return f"local-{self.count}", gang, duration


def parse_local_load(text: str, seed: int = 0) -> LocalLoad | None:
    """`RATE[:G1,G2,...[:MEAN_MINUTES]]`, e.g. `20`, `20:1,2,4`, `20:1,2,4,8:45`; '' is none."""
    text = text.strip()
    if not text:
        return None
    parts = text.split(":")
    if len(parts) > 3:
        raise ValueError(f"--local-load {text!r}: expected RATE[:GPUS[:MEAN_MINUTES]]")
    try:
        rate = float(parts[0])
        gpus = tuple(int(g) for g in parts[1].split(",")) if len(parts) > 1 else LocalLoad.gpus
        mean = float(parts[2]) if len(parts) > 2 else LocalLoad.mean_minutes
    except ValueError:
        raise ValueError(
            f"--local-load {text!r}: expected RATE[:GPUS[:MEAN_MINUTES]] with numbers, "
            "e.g. 20:1,2,4,8:30"
        ) from None
    return LocalLoad(rate, gpus, mean, seed)
