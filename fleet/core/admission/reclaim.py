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
* victims are taken in order: lowest priority, then least work lost (its size, every resource
  counted, x hours since its last checkpoint or its start: module `work`), then the most
  recent start;
* all victims run in ONE member, and the eviction is made only if it lets the waiting gang fit
  there, node by node: the member's snapshot without the victims' pods packs the whole gang
  (`fleet.core.packing.pack`, the placement's own fit) and the quota, up to the root, holds it.
  An eviction that would not let the waiting gang start is not made;
* of the victims found, any whose eviction is not needed for that fit is dropped again (most
  precious first), so the set is minimal; across members, the fewest victims, then the least
  work lost, win.
* with a loss budget (module `budget`, GPU-equivalent hours passed in by the caller), a runner
  that alone would lose more is no candidate, and a set that would lose more is not chosen.

Bounded search (a reclaim runs in the dequeue pass, over thousands of units): the candidates of
the node that frees room for the gang's largest pod soonest go first, and a one-pod gang looks at
that node only; two O(1) bounds (largest free on a node, total free) come before any packing; a
member copy is made once per reclaim and shared by its claims (a one-pod gang: a copy of its one
node); at most `MAX_VICTIMS` gangs per eviction. So the set found is the smallest *this search*
finds, not always the smallest that exists.

Why there is no cycle: after a reclaim the victim's quota node is still at or above its min, so
the victim, back in its queue, never qualifies to reclaim (it would not be within its min); the
gang that reclaimed stays within its own min, so it is never a reclaim victim. A preemption
victim has a strictly lower priority than the gang that evicted it.

Pure: snapshots are copied, never changed; time is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from fleet.core.admission.minimum import (
    Usage,
    fits_within_min,
    fragile_depth,
    stays_at_min,
)
from fleet.core.assignment import Assignment
from fleet.core.inventory import PodInfo
from fleet.core.packing import pack
from fleet.core.quota import QuotaTree
from fleet.core.resources import GPU, Resources
from fleet.core.snapshot import ClusterSnapshot, Reservation
from fleet.core.workload import Gang

EvictionKind = Literal["Reclaim", "Preempt"]
RECLAIM: Final = "Reclaim"
PREEMPT: Final = "Preempt"

#: The most gangs one eviction takes in a member: room that needs more is not worth what it
#: destroys, and the search stays bounded (bench/queue.py --reclaim).
MAX_VICTIMS: Final = 16


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
    size: float
    """How much of the fleet it holds, every resource counted, in GPU-equivalents (module
    `work`: its dominant share of the quota tree's root)."""
    protected: bool = False
    """Its policy or namespace opted out of being reclaimed."""
    limit: float | None = None
    """The run time it declares at most, in seconds from its start (`activeDeadlineSeconds`
    or the kind's equivalent); None: none."""
    checkpoint: float | None = None
    """When it last reported a checkpoint its next copy resumes from (None: none)."""

    def lost(self, now: float) -> float:
        """Work an eviction now throws away, in GPU-equivalent hours (its `size` x hours): since
        its last checkpoint (one taken in this run), else since it started."""
        since = self.started
        if self.checkpoint is not None and self.checkpoint > since:
            since = min(self.checkpoint, now)
        return self.size * max(now - since, 0.0) / 3600.0


@dataclass(frozen=True, slots=True)
class Placed:
    """What the shell knows of a Running unit's copy: where it runs, since when, and whether it
    may be evicted (the admission adds its quota, demand and priority)."""

    cluster: str
    owner: str
    started: float
    """When its copy started running where it runs now (the controller: when the copy first
    reported Running in its current stay, `runningSince`)."""
    protected: bool = False
    limit: float | None = None
    """Its declared run-time limit in seconds from `started` (`activeDeadlineSeconds`...), if
    any."""
    checkpoint: float | None = None
    """When it last reported a checkpoint its next copy resumes from, if ever."""


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
    waited: float = 0.0
    """Seconds it has waited (since its submission): what the eviction's worth weighs."""


@dataclass(frozen=True, slots=True)
class Choice:
    """The victims to evict in `cluster`, and the proof that the claim then fits there."""

    kind: EvictionKind
    claim: str
    cluster: str
    victims: tuple[Runner, ...]
    assignment: Assignment
    lost: float
    """Work the victims lose, in GPU-equivalent hours."""


def victim_order(runner: Runner, now: float) -> tuple[int, float, float, str]:
    """Lowest priority, then least work lost, then the most recent start (then the key)."""
    return (runner.priority, runner.lost(now), -runner.started, runner.key)


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


def keeps_min(
    tree: QuotaTree,
    used: Usage,
    claim_path: str,
    victims: Sequence[Runner],
    released: Mapping[str, Mapping[str, int]] | None = None,
) -> bool:
    """Whether, with `victims` evicted, every quota node on a victim's side of the tree (its
    lineage up to, not including, the first node the claim shares) is still at or above its min
    in every resource its min lists: no victim ran within its own queue's min. `released`: what
    `victims` release per path, when the caller keeps it (else it is summed here)."""
    shared = set(tree.nodes[claim_path].lineage)
    if released is None:
        released = _released(tree, victims)
    for victim in victims:
        assert victim.quota is not None
        if not stays_at_min(tree, used, released, victim.quota, shared):
            return False
    return True


def quota_fits(
    tree: QuotaTree,
    used: Usage,
    claim: Claim,
    victims: Sequence[Runner],
    released: Mapping[str, Mapping[str, int]] | None = None,
) -> bool:
    """Whether the claim fits every max up to the root once `victims` release their charge."""
    if claim.holds:
        return True
    if released is None:
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
    if not _path_eligible(kind, tree, claim, runner.quota):
        return False
    return kind != PREEMPT or runner.priority < claim.priority


def _path_eligible(kind: EvictionKind, tree: QuotaTree, claim: Claim, path: str) -> bool:
    """Whether gangs of quota node `path` may be victims of `claim` (priority aside)."""
    if path not in tree.nodes:
        return False
    if kind == PREEMPT:
        return path == claim.quota
    # Another branch of the tree: neither node is the other's ancestor.
    return (
        path not in tree.nodes[claim.quota].lineage and claim.quota not in tree.nodes[path].lineage
    )


class _WhatIf:
    """A member's snapshot copy from which victims' pods are taken away and put back."""

    def __init__(self, snapshot: ClusterSnapshot, *, copied: bool = False) -> None:
        self.snapshot = snapshot if copied else snapshot.copy()
        self.pods: dict[str, list[PodInfo]] = {}
        self.held: dict[str, Reservation] = {}
        for pod in self.snapshot.pods():
            if pod.owner_key is not None:
                self.pods.setdefault(pod.owner_key, []).append(pod)

    @classmethod
    def of_node(cls, snapshot: ClusterSnapshot, node: str) -> _WhatIf:
        """A copy of one node of the member: its pods and what reservations hold on it."""
        info = snapshot.node(node)
        assert info is not None
        twin = ClusterSnapshot.build(
            snapshot.name,
            [info],
            snapshot.pods_on(node),
            snapshot.labels,
            fields=snapshot.fields,
            accelerator=snapshot.accelerator,
            identity_label_keys=snapshot.identity_label_keys,
        )
        for res in snapshot.reservations().values():
            pods: list[tuple[str | None, Resources]] = [(n, r) for n, r in res.pods if n == node]
            if pods:
                twin.put_back(Reservation(res.key, pods, res.expires_at, res.seq))
        return cls(twin, copied=True)

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

    def fit(self, gang: Gang, largest: int, total: int) -> Assignment | None:
        """Pack the gang, after two O(1) bounds (no node has the largest pod's GPUs free, or
        the member has fewer GPUs free than the gang asks) that spare most packings."""
        snapshot = self.snapshot
        if snapshot.max_free(GPU) < largest or snapshot.total_free(GPU) < total:
            return None
        result = pack(snapshot, gang)
        return result if isinstance(result, Assignment) else None


class Scratch:
    """Member copies shared by the claims of one reclaim, made only when a claim needs one.
    A choice that is made is kept in them (`commit`): its victims' pods are gone and the
    claimant's proof is held, so the next claim does not count the same room twice."""

    def __init__(self) -> None:
        self._copies: dict[str, _WhatIf] = {}
        #: One-node copies, per (member, node): each use gives back what it took.
        self._nodes: dict[tuple[str, str], _WhatIf] = {}
        self._where: dict[str, dict[str, list[tuple[str, int]]]] = {}
        self._fragile: dict[str, float] | None = None
        self._ordered: dict[str, list[Runner]] | None = None

    def fragile_of(
        self, tree: QuotaTree, used: Usage, runners: Sequence[Runner]
    ) -> dict[str, float]:
        """Per runner: how far up its lineage (0: its own node) lies the first node its
        eviction alone would take below its min (inf: none). Computed once per reclaim, on
        the usage at its start (a later choice only lowers the usage of victims' nodes, and
        the set's own check, `keeps_min`, is exact)."""
        if self._fragile is None:
            self._fragile = {}
            # Runners of one quota node asking the same are alike here: each pair once.
            alike: dict[tuple[str, Resources], float] = {}
            for runner in runners:
                assert runner.quota is not None
                shape = (runner.quota, runner.demand)
                found = alike.get(shape)
                if found is None:
                    found = alike[shape] = fragile_depth(tree, used, runner.quota, runner.demand)
                self._fragile[runner.key] = found
        return self._fragile

    def ordered(self, runners: Sequence[Runner], now: float) -> dict[str, list[Runner]]:
        """The runners per member, in victim order (sorted once per reclaim; the victims of a
        choice leave with `commit`)."""
        if self._ordered is None:
            self._ordered = {}
            for runner in sorted(runners, key=lambda r: victim_order(r, now)):
                self._ordered.setdefault(runner.cluster, []).append(runner)
        return self._ordered

    def where(self, snapshot: ClusterSnapshot) -> dict[str, list[tuple[str, int]]]:
        """Per owner key, the (node, GPUs) of its pods and in-flight placement in the member:
        read once per reclaim, without copying the snapshot."""
        found = self._where.get(snapshot.name)
        if found is None:
            found = self._where[snapshot.name] = {}
            for pod in snapshot.pods():
                if pod.owner_key is not None and pod.node_name is not None:
                    found.setdefault(pod.owner_key, []).append(
                        (pod.node_name, int(pod.requests.get(GPU, 0)))
                    )
            for key, res in snapshot.reservations().items():
                for node, requests in res.pods:
                    if node is not None:
                        found.setdefault(key, []).append((node, int(requests.get(GPU, 0))))
        return found

    def of(self, snapshot: ClusterSnapshot) -> _WhatIf:
        found = self._copies.get(snapshot.name)
        if found is None:
            found = self._copies[snapshot.name] = _WhatIf(snapshot)
        return found

    def of_node(self, snapshot: ClusterSnapshot, node: str) -> _WhatIf:
        """A copy of one node of the member, made once per reclaim: every claim that tries it
        gives back what it took, so the next one finds it as the member shows it."""
        found = self._nodes.get((snapshot.name, node))
        if found is None:
            found = self._nodes[(snapshot.name, node)] = _WhatIf.of_node(snapshot, node)
        return found

    def known(self, name: str) -> _WhatIf | None:
        return self._copies.get(name)

    def commit(self, choice: Choice, expires_at: float) -> None:
        """A choice was made: its victims are no candidates any more, and a shared copy of
        its member loses their pods and holds the claimant's proof. (A member with no shared
        copy keeps showing the victims' pods to later claims: they cannot count that room.)"""
        gone = {v.key for v in choice.victims}
        if self._ordered is not None and choice.cluster in self._ordered:
            self._ordered[choice.cluster] = [
                r for r in self._ordered[choice.cluster] if r.key not in gone
            ]
        whatif = self._copies.get(choice.cluster)
        if whatif is None:
            return
        for victim in choice.victims:
            whatif.take(victim.owner)
            whatif.pods.pop(victim.owner, None)
            whatif.held.pop(victim.owner, None)
        whatif.snapshot.reserve(f"reclaim:{choice.claim}", choice.assignment, expires_at)


def _largest_pod(gang: Gang) -> int:
    return max((int(c.requests.get(GPU, 0)) for c, _ in gang.minimum), default=0)


def choose(
    kind: EvictionKind,
    tree: QuotaTree,
    used: Usage,
    claim: Claim,
    runners: Sequence[Runner],
    snapshots: Sequence[ClusterSnapshot],
    now: float,
    *,
    scratch: Scratch | None = None,
    budget: float = math.inf,
) -> Choice | None:
    """The smallest set of victims in one member whose eviction lets `claim` start there (see
    the module docstring), or None when no such set exists, or when none is needed (the gang
    already fits somewhere: placement, not eviction, is what it waits for). `scratch`: member
    copies shared with the other claims of the same reclaim. `budget`: the GPU-equivalent hours
    of work the victims may lose at most (module `budget`): a runner that alone would lose more
    is no candidate, and a set found that loses more is not chosen."""
    scratch = scratch if scratch is not None else Scratch()
    shared = set(tree.nodes[claim.quota].lineage)
    # Per quota path: None if its gangs may not be victims, else how many nodes of its lineage
    # lie on its side of the tree (below the first node the claim shares).
    side: dict[str, int | None] = {}
    by_cluster: dict[str, list[Runner]] = {}
    fragile = scratch.fragile_of(tree, used, runners) if kind == RECLAIM else {}
    for cluster, ordered in scratch.ordered(runners, now).items():
        out = by_cluster[cluster] = []
        for runner in ordered:
            path = runner.quota
            if runner.protected or path is None or runner.key == claim.key:
                continue
            if path not in side:
                side[path] = (
                    next(i for i, p in enumerate(tree.nodes[path].lineage) if p in shared)
                    if _path_eligible(kind, tree, claim, path)
                    else None
                )
            depth = side[path]
            if depth is None:
                continue
            if kind == PREEMPT:
                if runner.priority >= claim.priority:
                    continue
            # One that alone would take a node on its side below its min can never go.
            elif fragile[runner.key] < depth:
                continue
            if runner.lost(now) > budget:
                continue
            out.append(runner)
    largest = _largest_pod(claim.gang)
    total = int(claim.demand.get(GPU, 0))
    best: Choice | None = None
    for snapshot in snapshots:
        candidates = by_cluster.get(snapshot.name, [])
        found = _in_member(
            kind, tree, used, claim, candidates, snapshot, now, scratch, largest, total
        )
        if found is None:
            continue
        if not found.victims:
            return None  # it fits as things are: nothing to evict
        if found.lost > budget:
            continue
        if best is None or (len(found.victims), found.lost) < (len(best.victims), best.lost):
            best = found
    return best


def _node_first(
    candidates: Sequence[Runner],
    where: Mapping[str, Sequence[tuple[str, int]]],
    snapshot: ClusterSnapshot,
    largest: int,
    single_pod: bool,
) -> tuple[list[Runner], str | None] | None:
    """The candidates to try, those of the node that frees room for the gang's largest pod
    soonest (in victim order) first: taking victims in plain order scatters the room over every
    node. For a one-pod gang only that node's candidates (no other eviction can help it). None
    when no node could hold that pod even with every candidate gone (O(their pods), no copy,
    no packing: most hopeless members end here)."""
    if largest <= 0:
        return list(candidates), None
    freed: dict[str, int] = {}
    on: dict[str, list[Runner]] = {}
    for runner in candidates:
        for node, gpus in where.get(runner.owner, ()):
            runners = on.setdefault(node, [])
            if not runners or runners[-1] is not runner:
                runners.append(runner)
            freed[node] = freed.get(node, 0) + gpus
            free = snapshot.free(node)
            if free is not None and free.get(GPU, 0) + freed[node] >= largest:
                if single_pod:
                    return runners, node
                first = set(map(id, runners))
                return [*runners, *(r for r in candidates if id(r) not in first)], None
    return (list(candidates), None) if snapshot.max_free(GPU) >= largest else None


def _add(tree: QuotaTree, released: dict[str, dict[str, int]], runner: Runner, sign: int) -> None:
    assert runner.quota is not None
    for path in tree.nodes[runner.quota].lineage:
        held = released.setdefault(path, {})
        for resource, amount in runner.demand.items():
            held[resource] = held.get(resource, 0) + sign * amount


def _in_member(
    kind: EvictionKind,
    tree: QuotaTree,
    used: Usage,
    claim: Claim,
    candidates: Sequence[Runner],
    snapshot: ClusterSnapshot,
    now: float,
    scratch: Scratch,
    largest: int,
    total: int,
) -> Choice | None:
    # As things are: on the copy if this reclaim made one (it holds earlier choices), else on
    # the member's own snapshot (packing never changes it).
    if quota_fits(tree, used, claim, ()):
        current = scratch.known(snapshot.name)
        if current is not None:
            fits = current.fit(claim.gang, largest, total)
        else:
            found = pack(snapshot, claim.gang)
            fits = found if isinstance(found, Assignment) else None
        if fits is not None:
            return Choice(kind, claim.key, snapshot.name, (), fits, 0.0)
    if not candidates:
        return None
    # Cheap bound before any copy: what the member has free plus all the candidates hold.
    if total and snapshot.total_free(GPU) + sum(r.demand.get(GPU, 0) for r in candidates) < total:
        return None
    single_pod = sum(n for _, n in claim.gang.minimum) == 1
    ordered = _node_first(candidates, scratch.where(snapshot), snapshot, largest, single_pod)
    if ordered is None:
        return None
    candidates, node = ordered
    # A one-pod gang needs one node: a copy of that node alone proves it (unless an earlier
    # choice of this reclaim changed the member: then the shared copy, which holds it).
    if node is not None and scratch.known(snapshot.name) is None:
        whatif = scratch.of_node(snapshot, node)
    else:
        whatif = scratch.of(snapshot)
    released: dict[str, dict[str, int]] = {}
    shared = set(tree.nodes[claim.quota].lineage)

    def proof() -> Assignment | None:
        if not quota_fits(tree, used, claim, chosen, released):
            return None
        return whatif.fit(claim.gang, largest, total)

    chosen: list[Runner] = []
    assignment: Assignment | None = None
    for runner in candidates:
        if len(chosen) >= MAX_VICTIMS:
            break
        if runner.owner not in whatif.pods and runner.owner not in whatif.snapshot.reservations():
            continue  # already gone (an earlier choice of this reclaim)
        _add(tree, released, runner, +1)
        assert runner.quota is not None
        if kind == RECLAIM and not stays_at_min(tree, used, released, runner.quota, shared):
            _add(tree, released, runner, -1)
            continue
        chosen.append(runner)
        whatif.take(runner.owner)
        assignment = proof()
        if assignment is not None:
            break
    if assignment is None:
        for runner in chosen:
            whatif.give_back(runner.owner)
        return None
    # Minimal: give back every victim the fit does not need, most precious first.
    for runner in reversed(chosen[:-1]):
        whatif.give_back(runner.owner)
        chosen.remove(runner)
        _add(tree, released, runner, -1)
        kept = proof()
        if kept is not None:
            assignment = kept
        else:
            chosen.append(runner)
            _add(tree, released, runner, +1)
            whatif.take(runner.owner)
    for runner in chosen:
        whatif.give_back(runner.owner)  # the copy stays as it was until `commit`
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
    "Scratch",
    "choose",
    "eligible",
    "fits_within_min",
    "keeps_min",
    "quota_fits",
    "victim_order",
]
