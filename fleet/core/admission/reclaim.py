"""Reclaim and preemption: which running gangs to evict so that a waiting gang starts.

**Reclaim.** A team's `min` is a guarantee. A unit that waits while its quota node is below its
`min`, and that would still be within that `min` once admitted, may take back capacity other
teams borrowed: their running gangs are evicted, whole, until the waiting gang fits.

**Preemption** (off by default, `AdmissionSettings.preemption`). A unit waiting behind running
gangs of *lower* priority in its own queue may evict them the same way.

Victims, and the proof (`choose`):

* a reclaim victim runs in another quota node, and evicting it leaves every node on its side of
  the tree (its lineage below the common ancestor) at or above its `min`: a gang that runs
  within its own queue's `min` is never evicted. A preemption victim runs in the same quota node
  with a lower priority. A gang whose policy or namespace opted out is never a victim;
* victims are taken in order: lowest priority, then least work lost (GPU-hours since it
  started), then the most recent start;
* all victims run in ONE member, and the eviction is made only if it lets the waiting gang fit
  there, node by node: the member's snapshot without the victims' pods packs the whole gang
  (`fleet.core.packing.pack`, the placement's own fit) and the quota, up to the root, holds it.
  An eviction that would not let the waiting gang start is not made;
* of the victims found, any whose eviction is not needed for that fit is dropped again (most
  precious first), so the set is minimal; across members, the fewest victims, then the least
  work lost, win.

Why there is no cycle: after a reclaim the victim's quota node is still at or above its min, so
the victim, back in its queue, never qualifies to reclaim (it would not be within its min); the
gang that reclaimed stays within its own min, so it is never a reclaim victim. A preemption
victim has a strictly lower priority than the gang that evicted it.

Pure: snapshots are copied, never changed; time is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from fleet.core.assignment import Assignment
from fleet.core.inventory import PodInfo
from fleet.core.packing import pack
from fleet.core.quota import MAX_JOBS, QuotaTree
from fleet.core.resources import GPU, Resources
from fleet.core.snapshot import ClusterSnapshot, Reservation
from fleet.core.workload import Gang

EvictionKind = Literal["Reclaim", "Preempt"]
RECLAIM: Final = "Reclaim"
PREEMPT: Final = "Preempt"

#: Used per quota path, per resource (what the admission holds).
Usage = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True, slots=True)
class Runner:
    """A running gang, as the reclaim sees it."""

    key: str
    quota: str | None
    """The quota node it is charged to (None: uncharged, never a victim)."""
    demand: Resources
    """What it is charged (its resources and one job)."""
    priority: int
    started: float
    """When it started running (work lost is counted from here)."""
    cluster: str
    owner: str
    """The owner key its pods carry in the member's snapshot."""
    protected: bool = False
    """Its policy or namespace opted out of being reclaimed."""

    def lost(self, now: float) -> float:
        """GPU-hours of work an eviction now throws away."""
        return int(self.demand.get(GPU, 0)) * max(now - self.started, 0.0) / 3600.0


@dataclass(frozen=True, slots=True)
class Placed:
    """What the shell knows of a Running unit's copy: where it runs, since when, and whether it
    may be evicted (the admission adds its quota, demand and priority)."""

    cluster: str
    owner: str
    started: float
    protected: bool = False


@dataclass(frozen=True, slots=True)
class Claim:
    """A waiting unit that may evict others: what it asks, where it may go."""

    key: str
    quota: str
    demand: Resources
    priority: int
    gang: Gang
    holds: bool = False
    """It already holds its quota (Dequeued, not placed): only the nodes stand in the way."""


@dataclass(frozen=True, slots=True)
class Choice:
    """The victims to evict in `cluster`, and the proof that the claim then fits there."""

    kind: EvictionKind
    claim: str
    cluster: str
    victims: tuple[Runner, ...]
    assignment: Assignment
    lost: float
    """GPU-hours of work the victims lose."""


def victim_order(runner: Runner, now: float) -> tuple[int, float, float, str]:
    """Lowest priority, then least work lost, then the most recent start (then the key)."""
    return (runner.priority, runner.lost(now), -runner.started, runner.key)


def fits_within_min(tree: QuotaTree, used: Usage, path: str, demand: Mapping[str, int]) -> bool:
    """Whether node `path`, holding `used` plus `demand`, stays within its min in every
    resource its min lists and `demand` asks (and `demand` asks at least one): the unit would
    run on the node's guarantee, not on borrowed capacity."""
    minimum = tree.nodes[path].min
    have = used.get(path, {})
    asked = False
    for resource, amount in demand.items():
        low = minimum.get(resource, None)
        if resource == MAX_JOBS or low is None or amount <= 0:
            continue
        if have.get(resource, 0) + amount > low:
            return False
        asked = True
    return asked


def _released(tree: QuotaTree, victims: Sequence[Runner]) -> dict[str, dict[str, int]]:
    """Per quota path, what evicting `victims` releases there."""
    out: dict[str, dict[str, int]] = {}
    for victim in victims:
        assert victim.quota is not None
        for path in tree.nodes[victim.quota].lineage:
            held = out.setdefault(path, {})
            for resource, amount in victim.demand.items():
                held[resource] = held.get(resource, 0) + amount
    return out


def keeps_min(tree: QuotaTree, used: Usage, claim_path: str, victims: Sequence[Runner]) -> bool:
    """Whether, with `victims` evicted, every quota node on a victim's side of the tree (its
    lineage up to, not including, the first node the claim shares) is still at or above its min
    in every resource its min lists: no victim ran within its own queue's min."""
    shared = set(tree.nodes[claim_path].lineage)
    released = _released(tree, victims)
    for victim in victims:
        assert victim.quota is not None
        for path in tree.nodes[victim.quota].lineage:
            if path in shared:
                break
            have = used.get(path, {})
            gone = released.get(path, {})
            for resource, low in tree.nodes[path].min.items():
                if resource == MAX_JOBS or low <= 0:
                    continue
                if have.get(resource, 0) - gone.get(resource, 0) < low:
                    return False
    return True


def quota_fits(tree: QuotaTree, used: Usage, claim: Claim, victims: Sequence[Runner]) -> bool:
    """Whether the claim fits every max up to the root once `victims` release their charge."""
    if claim.holds:
        return True
    released = _released(tree, victims)
    for path in tree.nodes[claim.quota].lineage:
        have = used.get(path, {})
        gone = released.get(path, {})
        for resource, cap in tree.nodes[path].max.items():
            amount = claim.demand.get(resource, 0)
            if amount and have.get(resource, 0) - gone.get(resource, 0) + amount > cap:
                return False
    return True


def eligible(kind: EvictionKind, tree: QuotaTree, claim: Claim, runner: Runner) -> bool:
    """Whether `runner` may be a victim of `claim` at all (before the set is checked)."""
    if runner.protected or runner.quota is None or runner.key == claim.key:
        return False
    if runner.quota not in tree.nodes:
        return False
    if kind == PREEMPT:
        return runner.quota == claim.quota and runner.priority < claim.priority
    claim_lineage = tree.nodes[claim.quota].lineage
    own = tree.nodes[runner.quota].lineage
    # Another branch of the tree: neither node is the other's ancestor.
    return runner.quota not in claim_lineage and claim.quota not in own


class _WhatIf:
    """A member's snapshot copy from which victims' pods are taken away and put back."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot.copy()
        self.pods: dict[str, list[PodInfo]] = {}
        self.held: dict[str, Reservation] = {}
        for pod in self.snapshot.pods():
            if pod.owner_key is not None:
                self.pods.setdefault(pod.owner_key, []).append(pod)

    def take(self, owner: str) -> None:
        """The owner's pods leave, and so does its in-flight placement (a gang placed a
        moment ago whose pods the member does not show yet)."""
        for pod in self.pods.get(owner, ()):
            self.snapshot.remove_pod(pod.uid)
        held = self.snapshot.hold_back(owner)
        if held is not None:
            self.held[owner] = held

    def give_back(self, owner: str) -> None:
        for pod in self.pods.get(owner, ()):
            self.snapshot.upsert_pod(pod)
        held = self.held.pop(owner, None)
        if held is not None:
            self.snapshot.put_back(held)

    def fit(self, gang: Gang) -> Assignment | None:
        result = pack(self.snapshot, gang)
        return result if isinstance(result, Assignment) else None


def choose(
    kind: EvictionKind,
    tree: QuotaTree,
    used: Usage,
    claim: Claim,
    runners: Sequence[Runner],
    snapshots: Sequence[ClusterSnapshot],
    now: float,
) -> Choice | None:
    """The smallest set of victims in one member whose eviction lets `claim` start there (see
    the module docstring), or None when no such set exists, or when none is needed (the gang
    already fits somewhere: placement, not eviction, is what it waits for)."""
    by_cluster: dict[str, list[Runner]] = {}
    for runner in runners:
        if eligible(kind, tree, claim, runner):
            by_cluster.setdefault(runner.cluster, []).append(runner)
    best: Choice | None = None
    for snapshot in snapshots:
        candidates = sorted(by_cluster.get(snapshot.name, ()), key=lambda r: victim_order(r, now))
        found = _in_member(kind, tree, used, claim, candidates, snapshot, now)
        if found is None:
            continue
        if not found.victims:
            return None  # it fits as things are: nothing to evict
        if best is None or (len(found.victims), found.lost) < (len(best.victims), best.lost):
            best = found
    return best


def _in_member(
    kind: EvictionKind,
    tree: QuotaTree,
    used: Usage,
    claim: Claim,
    candidates: Sequence[Runner],
    snapshot: ClusterSnapshot,
    now: float,
) -> Choice | None:
    whatif = _WhatIf(snapshot)

    def proof(victims: Sequence[Runner]) -> Assignment | None:
        if not quota_fits(tree, used, claim, victims):
            return None
        return whatif.fit(claim.gang)

    assignment = proof(())
    chosen: list[Runner] = []
    if assignment is None:
        for runner in candidates:
            trial = [*chosen, runner]
            if kind == RECLAIM and not keeps_min(tree, used, claim.quota, trial):
                continue
            chosen.append(runner)
            whatif.take(runner.owner)
            assignment = proof(chosen)
            if assignment is not None:
                break
        if assignment is None:
            return None
        # Minimal: give back every victim the fit does not need, most precious first.
        for runner in reversed(chosen[:-1]):
            whatif.give_back(runner.owner)
            rest = [r for r in chosen if r is not runner]
            kept = proof(rest)
            if kept is not None:
                chosen = rest
                assignment = kept
            else:
                whatif.take(runner.owner)
    return Choice(
        kind,
        claim.key,
        snapshot.name,
        tuple(chosen),
        assignment,
        sum(r.lost(now) for r in chosen),
    )


#: How the shell hands over a claim's gang and the members it may go to.
GangOf = Callable[[str], Gang | None]
MembersFor = Callable[[str], Sequence[ClusterSnapshot]]

__all__ = [
    "PREEMPT",
    "RECLAIM",
    "Choice",
    "Claim",
    "EvictionKind",
    "GangOf",
    "MembersFor",
    "Placed",
    "Runner",
    "choose",
    "eligible",
    "fits_within_min",
    "keeps_min",
    "quota_fits",
    "victim_order",
]
