"""Injected faults (member outages, job failures) and the failover decisions they trigger.

Failover decisions are `fleet.core.failover` itself: the simulation keeps each job's persisted
`Timers`, asks `judge` whenever what it observes changes (and at the `recheck_at` it is told),
and applies `exclusion_until`, `delete_before_placing` and `purge_old_copy` to copies left
behind. `FailoverJudge` is the plug point for an alternative rule.

Faults are properties of the trace, not of the policy: which attempt fails, and when, depends
only on the seed, the job and the attempt number, and outages are fixed before the run, so every
policy faces the same faults.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from fleet.core.failover import FailoverSettings, Observation, Timers, Verdict, judge


@dataclass(frozen=True)
class Outage:
    """`member` is unreachable and schedules nothing from `start` for `duration` seconds;
    pods already running there keep running."""

    member: str
    start: float
    duration: float

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass(frozen=True)
class Faults:
    #: Chance that one run attempt of a job fails (at a uniform point of its run).
    failure_probability: float = 0.0
    outages: tuple[Outage, ...] = ()
    settings: FailoverSettings = field(default_factory=FailoverSettings)
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.failure_probability <= 1.0:
            raise ValueError(
                f"failure probability must be in [0, 1], got {self.failure_probability}"
            )

    @property
    def enabled(self) -> bool:
        return self.failure_probability > 0 or bool(self.outages)

    def failure_point(self, job_id: str, attempt: int) -> float | None:
        """The fraction of its run after which this attempt fails, or None if it does not."""
        if self.failure_probability <= 0:
            return None
        rng = random.Random(f"{self.seed}/{job_id}/{attempt}")
        if rng.random() >= self.failure_probability:
            return None
        return rng.random()


class FailoverJudge(Protocol):
    def __call__(
        self, observed: Observation, timers: Timers, now: float, *, failovers: int, cluster: str
    ) -> Verdict: ...


def core_judge(settings: FailoverSettings) -> FailoverJudge:
    """`fleet.core.failover.judge` with the job's settings bound."""

    def decide(
        observed: Observation, timers: Timers, now: float, *, failovers: int, cluster: str
    ) -> Verdict:
        return judge(settings, observed, timers, now, failovers=failovers, cluster=cluster)

    return decide


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """`90`, `90s`, `15m`, `6h`, `2d` -> seconds."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"expected a duration such as 300, 15m, 6h or 2d, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def parse_outages(
    text: str,
    members: Sequence[str],
    *,
    span: float,
    seed: int = 0,
    duration: float = 6 * 3600.0,
) -> tuple[Outage, ...]:
    """`MEMBER@START+DURATION,...` (times like `2d`, `6h`) or `random:N` (N outages of
    `duration` at uniform times over the trace's `span`, on uniform members, seeded)."""
    text = text.strip()
    if not text:
        return ()
    if text.startswith("random:"):
        try:
            n = int(text.removeprefix("random:"))
        except ValueError:
            raise ValueError(f"expected random:N, got {text!r}") from None
        if n < 0:
            raise ValueError(f"expected random:N with N >= 0, got {text!r}")
        rng = random.Random(f"outages/{seed}")
        picks = [
            Outage(rng.choice(list(members)), rng.uniform(0, span), duration) for _ in range(n)
        ]
        return tuple(sorted(picks, key=lambda o: (o.start, o.member)))
    out = []
    for part in text.split(","):
        member, at, rest = part.strip().partition("@")
        start, plus, length = rest.partition("+")
        if not at or not plus:
            raise ValueError(f"expected MEMBER@START+DURATION, got {part.strip()!r}")
        if member not in members:
            raise ValueError(f"outage names unknown member {member!r}")
        out.append(Outage(member, parse_duration(start), parse_duration(length)))
    return tuple(sorted(out, key=lambda o: (o.start, o.member)))
