"""Placement policies compared by the simulator, all run through `fleet.core.placement.place`.

A policy is an estimator (which members can hold the gang: `sum` or `nodes`) and a scorer
(which of those to prefer). The engine's own pairs are `sum` and `nodes`, both with its best-fit
scorer. The baselines swap only the scorer, which is the engine's documented plug point, so
every policy filters, screens and checks with the very code the controller runs:

* `random` — a uniformly random fitting member (seeded): each candidate gets a random rank, and
  the engine's "first real fit in rank order" picks among the fitting ones;
* `first` — the first fitting member in the fleet's list order;
* `fgd` — the `nodes` estimator ranked by fragmentation (`place(..., mix=)`, after FGD, ATC
  '23): the member and the nodes where the gang least increases expected fragmentation, for the
  mix of pod shapes learned from recent arrivals (`fleet.core.arrivals.RecentArrivals`, fed
  every arrival). The members' schedulers then bind the pods by the same measure (the fleet's
  node plan and the member's agree), where the other policies' members bind by best fit;
  `fgd-fleet` ranks the same way but its members bind by best fit, which isolates what the
  member choice alone is worth.

Baselines use the `nodes` estimator unless written `random@sum` / `first@sum`. Any policy
written with `+reserve` (`nodes+reserve`) places the same way and then reserves the member's
capacity before dispatching (Koordinator Reservations; see `simulation`).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from fleet.core.arrivals import RecentArrivals, mix_of
from fleet.core.domainwait import DEFAULT_WAIT_SECONDS
from fleet.core.estimate import NODES, Estimator, estimator_named
from fleet.core.fragmentation import WorkloadMix
from fleet.core.placement import Decision, place
from fleet.core.scoring import Score, Scorer, best_fit
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.topology import PREFERRED, REQUIRED, TopologyRule
from fleet.core.workload import Gang
from fleet.simulate.fleets import RACK_LABEL

DEFAULT_POLICIES = ("sum", "nodes", "random", "first")
#: The comparison of issue 21: ACK's rule, today's node-level rule, and fragmentation-aware.
FRAGMENTATION_POLICIES = ("sum", "nodes", "fgd")
CHOOSERS = ("best", "random", "first")


class PlacementPolicy(Protocol):
    """Decides where a gang goes; `decide` has `place`'s signature minus the tuning knobs."""

    @property
    def name(self) -> str: ...

    @property
    def reserve(self) -> bool:
        """Reserve the chosen member's capacity before dispatching (ACK's enableReservation)."""
        ...

    def decide(
        self,
        gang: Gang,
        clusters: Sequence[ClusterSnapshot],
        *,
        not_ready: Collection[str],
        failed_over: Mapping[str, str],
        now: float | None = None,
        domain_wait_since: float | None = None,
    ) -> Decision:
        """`now` and `domain_wait_since` as `place` takes them (the wait for a domain)."""
        ...

    def observe(self, gang: Gang) -> None:
        """A job arrived (policies that learn from arrivals count it)."""
        ...

    def member_mix(self) -> WorkloadMix | None:
        """The workload mix the members' schedulers score nodes with (None: best fit)."""
        ...


@dataclass
class EnginePolicy:
    """`place` with a given estimator and scorer; with `arrivals`, ranked by fragmentation for
    the mix learned from them."""

    name: str
    estimator: Estimator
    scorer: Scorer = best_fit
    reserve: bool = False
    arrivals: RecentArrivals | None = None
    #: With `arrivals`: the members bind pods by the same fragmentation measure.
    members_by_fragmentation: bool = True
    #: The policy's gangTopology: applied to every gang (a policy-wide default).
    topology: TopologyRule | None = None

    def observe(self, gang: Gang) -> None:
        if self.arrivals is not None:
            self.arrivals.observe(gang)

    def member_mix(self) -> WorkloadMix | None:
        if self.arrivals is None or not self.members_by_fragmentation:
            return None
        return self.arrivals.mix()

    def decide(
        self,
        gang: Gang,
        clusters: Sequence[ClusterSnapshot],
        *,
        not_ready: Collection[str],
        failed_over: Mapping[str, str],
        now: float | None = None,
        domain_wait_since: float | None = None,
    ) -> Decision:
        mix = None
        if self.arrivals is not None:
            mix = self.arrivals.mix() or mix_of(gang)
        return place(
            gang.with_default_topology(self.topology),
            clusters,
            estimator=self.estimator,
            scorer=self.scorer,
            not_ready=not_ready,
            failed_over=failed_over,
            mix=mix,
            now=now,
            domain_wait_since=domain_wait_since,
        )


def first_in_list(members: Sequence[str]) -> Scorer:
    """Rank members by their position in the fleet list."""
    index = {name: float(i) for i, name in enumerate(members)}

    def score(gang: Gang, snapshot: ClusterSnapshot) -> Score:
        return Score(-index[snapshot.name], 0.0)

    return score


def random_rank(rng: random.Random) -> Scorer:
    """Rank members at random; the first fitting one in that order is a uniform pick."""

    def score(gang: Gang, snapshot: ClusterSnapshot) -> Score:
        return Score(rng.random(), 0.0)

    return score


#: Policy options (`nodes+required`): reserve first, and the whole-gang topology modes.
OPTIONS = ("reserve", REQUIRED.lower(), PREFERRED.lower())


def make_policy(
    spec: str,
    members: Sequence[str],
    seed: int = 0,
    *,
    level: str = RACK_LABEL,
    topology_wait: float = DEFAULT_WAIT_SECONDS,
) -> PlacementPolicy:
    """`sum`, `nodes`, `fgd`, `random`, `first`, or `<best|random|first>@<sum|nodes>`; any of
    them with `+reserve`, and with `+required` or `+preferred` (every gang in one domain of
    `level`, as a policy's gangTopology: the members are pinned to the domain chosen; a
    preferred gang that fits only spread waits up to `topology_wait` seconds for one, as
    `gangTopology.waitSeconds`, whose default it takes)."""
    name = spec.strip()
    text, *options = name.split("+")
    for option in options:
        if option not in OPTIONS:
            raise ValueError(
                f"unknown policy option {option!r} in {spec!r} (expected "
                f"{', '.join('+' + o for o in OPTIONS)})"
            )
    if REQUIRED.lower() in options and PREFERRED.lower() in options:
        raise ValueError(f"{spec!r}: +required or +preferred, not both")
    reserve = "reserve" in options
    mode = next((m for m in (REQUIRED, PREFERRED) if m.lower() in options), None)
    topology = (
        TopologyRule(
            level,
            mode,
            source="simulated policy",
            wait_seconds=topology_wait if mode == PREFERRED else 0.0,
        )
        if mode
        else None
    )
    if text in ("fgd", "fgd-fleet"):
        return EnginePolicy(
            name,
            NODES,
            best_fit,
            reserve=reserve,
            arrivals=RecentArrivals(),
            members_by_fragmentation=text == "fgd",
            topology=topology,
        )
    if text in ("sum", "nodes"):
        chooser, estimator_name = "best", text
    else:
        chooser, _, estimator_name = text.partition("@")
        estimator_name = estimator_name or "nodes"
    if chooser not in CHOOSERS:
        raise ValueError(
            f"unknown policy {spec!r} (expected sum, nodes, fgd, fgd-fleet, random, first, or "
            f"<{'|'.join(CHOOSERS)}>@<sum|nodes>)"
        )
    estimator = estimator_named(estimator_name)
    scorer: Scorer
    if chooser == "best":
        scorer = best_fit
    elif chooser == "first":
        scorer = first_in_list(members)
    else:
        scorer = random_rank(random.Random(seed))
    return EnginePolicy(name, estimator, scorer, reserve=reserve, topology=topology)


def parse_policies(text: str) -> list[str]:
    """`sum,nodes,random` -> names, checked, in order, without repeats."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise ValueError("no policy given")
    for name in names:
        make_policy(name, ["probe"])
    if len(set(names)) != len(names):
        raise ValueError(f"a policy is listed twice in {text!r}")
    return names
