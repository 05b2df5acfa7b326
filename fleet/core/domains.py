"""Placing a gang's pod sets each inside one topology domain of a member, node by node.

The rules are the gang's (`Gang.topology`, see `fleet.core.topology`). For each rule, the
domains of its level are sized from their nodes' free vectors: how many of the rule's pods each
has room for, counting for each pod shape the nodes whose signature admits it (an upper bound of
what packing can do, so a domain it rules out surely cannot hold them). Domains with room for
every pod are packed in best-fit order (fewest free accelerators first, so whole racks stay
whole for the big gangs) with the same packer as the whole member (`packing`), restricted to the
domain's signatures; the first domain where every pod gets a node wins. Rules are placed
largest first and each sees what the previous ones took; the gang's components under no rule
are placed anywhere after them.

Costs. For a level in the snapshot's topology index (`ClusterSnapshot.level`, the usual case:
racks, blocks, NVLink domains), nothing here walks the level's domains on a decision's hot
path: the snapshot keeps, per domain and per per-pod accelerator amount, how many such pods its
nodes could hold (`fleet.core.levels`), so the best domain's count is read, not searched, and
the domains that could hold a rule's pods are taken from that index (those holding enough of
its largest per-pod amount) rather than found by looking at each. A domain's sizing (its free
vectors and the room each pod shape has there) is kept with the domain until one of its nodes
changes: a change invalidates one domain, not the snapshot. What a gang's rules ask (its items,
counts, totals) is worked out once per gang (`Gang.derived`), not once per member. The largest
domain, which only a rejection's sentence names, is searched for only when the sentence is read
(`DomainMiss.largest`). A level outside the index is read from the signatures (once per
snapshot version), at the old cost.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import islice
from typing import cast

from fleet.core.assignment import Assignment, Domain
from fleet.core.constraints import PodConstraints
from fleet.core.explain import Fact, LazyFacts, Reason, Sentence, clip, roster
from fleet.core.fragmentation import WorkloadMix
from fleet.core.levels import Level, PodCapacity
from fleet.core.packing import Item, NodesIn, Unplaced, _Packer
from fleet.core.resources import CPU, MEMORY, Resources
from fleet.core.shapes import ShapeGroup, Signature
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.topology import TopologyRule, level_word
from fleet.core.workload import Component, Gang


@dataclass(frozen=True, slots=True)
class Room:
    """How many of a rule's `pods` one domain has room for, by its nodes' free vectors."""

    value: str
    holds: int
    pods: int
    accelerator_free: int

    @property
    def fits(self) -> bool:
        return self.holds >= self.pods


_UNKNOWN = object()


class DomainMiss:
    """No domain of `rule`'s level holds its pods: how many domains it has, how many had room
    by their free vectors but failed node by node, and the largest room (`largest`, searched
    for only when read, and only while the snapshot is still the one the miss was found on)."""

    __slots__ = (
        "_gang",
        "_largest",
        "_snapshot",
        "_version",
        "domains",
        "packed_and_failed",
        "parts",
        "rule",
    )

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        gang: Gang,
        rule: TopologyRule,
        domains: int,
        packed_and_failed: int,
    ) -> None:
        self.rule = rule
        self.parts = _parts(gang, rule)
        self.domains = domains
        self.packed_and_failed = packed_and_failed
        self._snapshot = snapshot
        self._gang = gang
        self._version = snapshot.version
        self._largest: object = _UNKNOWN

    @property
    def stale(self) -> bool:
        """Whether the snapshot changed before the largest domain was looked for (it is then
        not named: what it held then is no longer known)."""
        return self.largest is None and self._snapshot.version != self._version

    @property
    def largest(self) -> Room | None:
        """The domain with room for the most of the rule's pods (`largest`); None when the
        level has no domain, or when the snapshot changed before this was first read."""
        if self._largest is _UNKNOWN:
            self._largest = (
                largest(self._snapshot, self._gang, self.rule)
                if self._snapshot.version == self._version
                else None
            )
        return cast(Room | None, self._largest)


def rule_items(gang: Gang, rule: TopologyRule) -> list[Item]:
    """The minimum set's pods under `rule`, as items (largest accelerator demand first)."""
    return _items([(c, n) for c, n in gang.minimum if rule.covers(c.name)])


def _items(pairs: Sequence[tuple[Component, int]]) -> list[Item]:
    merged: dict[tuple[Resources, object], list[tuple[str, int]]] = {}
    keys: dict[tuple[Resources, object], Component] = {}
    for component, count in pairs:
        key = (component.requests, component.constraints)
        merged.setdefault(key, []).append((component.name, count))
        keys[key] = component
    items = [Item(keys[k].requests, keys[k].constraints, tuple(p)) for k, p in merged.items()]
    return items


def _size(item: Item, accel: str) -> tuple[int, int, int]:
    r = item.requests
    return (r.get(accel, 0), r.get(CPU, 0), r.get(MEMORY, 0))


@lru_cache(maxsize=1024)
def _needs_identity(constraints: PodConstraints, keys: frozenset[str]) -> bool:
    return constraints.needs_node_identity(keys)


class _Shape:
    """Pods shaped like one item, as a domain's room is sized for them: their requests and
    constraints, and whether the constraints look at per-node facts (then every node counts,
    judged node by node in packing). Hashed once (it keys every domain's sizing)."""

    __slots__ = ("_hash", "constraints", "identity", "requests")

    def __init__(self, requests: Resources, constraints: PodConstraints, identity: bool) -> None:
        self.requests = requests
        self.constraints = constraints
        self.identity = identity
        self._hash = hash((requests, constraints, identity))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Shape) and (
            other is self
            or (
                other._hash == self._hash
                and other.requests == self.requests
                and other.constraints == self.constraints
                and other.identity == self.identity
            )
        )


class _Key:
    """A tuple hashed once: what a demand's answers are kept under, per snapshot version."""

    __slots__ = ("_hash", "parts")

    def __init__(self, *parts: object) -> None:
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and (
            other is self or (other._hash == self._hash and other.parts == self.parts)
        )


#: Pod shapes whose room one domain keeps (then it starts over): bounds what an idle rack keeps
#: over a long-running controller's life.
_ROOMS_PER_DOMAIN = 64


class _Domain:
    """One domain's free capacity: its free accelerators and (signature, free vector, nodes),
    the latter built on first use (a domain too small for a gang is never looked into), and the
    room each pod shape has there, sized once. For an indexed level it is kept until one of the
    domain's nodes changes (`_domain`); otherwise for one snapshot version."""

    __slots__ = ("_entries", "_nodes", "_totals", "accelerator_free", "level", "rooms", "value")

    def __init__(
        self,
        value: str,
        accelerator_free: int,
        entries: tuple[tuple[Signature, Resources, int], ...] | None = None,
        nodes: tuple[ClusterSnapshot, Mapping[str, None]] | None = None,
        level: Level | None = None,
    ) -> None:
        self.value = value
        self.accelerator_free = accelerator_free
        self._entries = entries
        self._nodes = nodes
        self._totals: dict[str, int] | None = None
        #: The indexed level (its per-pod capacities bound the domain without its nodes).
        self.level = level
        self.rooms: dict[_Shape, int] = {}

    def capacity(self, per_pod: int) -> int:
        """Indexed levels: how many pods of `per_pod` accelerators its nodes' free amounts
        hold, each node a bin (kept by the snapshot, O(1))."""
        assert self.level is not None
        return self.level.capacity(per_pod).of.get(self.value, 0)

    def too_small(self, demand: _Demand) -> bool:
        """Whether the domain surely cannot hold the demand, without looking at its nodes: too
        few free accelerators in total, or for some item counting each node's free amount as
        whole pods; for an indexed level also any resource short in total (a domain `_room`
        would then find short too). O(items + resources)."""
        if self.accelerator_free < demand.need_accelerator:
            return True
        if self.level is None:
            return False
        for per_pod, count in zip(demand.accelerators, demand.counts, strict=True):
            if per_pod and self.capacity(per_pod) < count:
                return True
        free = self.level.free[self.value]
        return any(free.get(name, 0) < amount for name, amount in demand.need.items())

    @property
    def entries(self) -> tuple[tuple[Signature, Resources, int], ...]:
        if self._entries is None:
            assert self._nodes is not None
            snapshot, names = self._nodes
            counts: dict[ShapeGroup, int] = {}
            for name in names:
                group = snapshot.group_of(name)
                if group is not None:
                    counts[group] = counts.get(group, 0) + 1
            self._entries = tuple((g.signature, g.free, n) for g, n in counts.items())
        return self._entries

    def total(self, resource: str) -> int:
        """Free `resource` summed over the domain's nodes (kept by the snapshot for an indexed
        level)."""
        if self.level is not None:
            return self.level.free[self.value].get(resource, 0)
        totals = self._totals
        if totals is None:
            totals = self._totals = {}
            for _, free, n in self.entries:
                for name, amount in free.items():
                    totals[name] = totals.get(name, 0) + amount * n
        return totals.get(resource, 0)

    def room_of(self, shape: _Shape) -> int:
        """How many pods of `shape` the domain's nodes could hold at most, each node a separate
        bin and only nodes whose signature admits them. Sized once per shape."""
        found = self.rooms.get(shape)
        if found is not None:
            return found
        requests, constraints, identity = shape.requests, shape.constraints, shape.identity
        total = 0
        for sig, free, nodes in self.entries:
            copies = requests.copies_in(free)
            if copies > 0 and (identity or sig.rejection(constraints) is None):
                total += copies * nodes
        if len(self.rooms) >= _ROOMS_PER_DOMAIN:
            self.rooms.clear()  # a rack nobody changes keeps no more than this many shapes
        self.rooms[shape] = total
        return total

    def within(self, snapshot: ClusterSnapshot, level: str) -> Collection[Signature] | NodesIn:
        """What packing is restricted to for this domain of `level`."""
        if self._nodes is not None:
            return NodesIn(self._nodes[1])
        return snapshot.domains(level).get(self.value, ())


def _domain(snapshot: ClusterSnapshot, level: Level, value: str) -> _Domain:
    """Domain `value` of an indexed level, as sized so far: kept with the level until one of
    its nodes changes (its version), so a change elsewhere keeps it."""
    version = level.versions[value]
    found = level.memo.get(value)
    if found is not None and found[0] == version:
        return cast(_Domain, found[1])
    domain = _Domain(
        value, level.accelerators[value], nodes=(snapshot, level.nodes[value]), level=level
    )
    level.memo[value] = (version, domain)
    return domain


def _index(snapshot: ClusterSnapshot, level: str) -> tuple[_Domain, ...]:
    """Every domain of a level that is not indexed (a signature label), fewest free
    accelerators first (then by name), read from the signatures once per snapshot version."""
    table = snapshot.per_version()
    key = ("topology-domains", level)
    found = table.get(key)
    if found is not None:
        return cast(tuple[_Domain, ...], found)
    out = []
    for value, sigs in snapshot.domains(level).items():
        entries = []
        total = 0
        for sig in sigs:
            for amount, bucket in sig.buckets.items():
                for free, group in bucket.items():
                    n = len(group)
                    entries.append((sig, free, n))
                    total += amount * n
        out.append(_Domain(value, total, tuple(entries)))
    out.sort(key=lambda d: (d.accelerator_free, d.value))
    result = tuple(out)
    table[key] = result
    return result


@dataclass(frozen=True, slots=True)
class _Demand:
    """A rule's pods as the sizing needs them: its items (the largest first), their pod
    counts and shapes, and what they need in total. Worked out once per gang, rule and
    snapshot kind (accelerator, per-node label keys)."""

    items: tuple[Item, ...]
    counts: tuple[int, ...]
    shapes: tuple[_Shape, ...]
    #: Accelerators per pod of each item.
    accelerators: tuple[int, ...]
    pods: int
    need: Mapping[str, int]
    need_accelerator: int
    #: What every answer about the demand depends on: (requests, constraints, pods) per item.
    key: tuple[tuple[Resources, PodConstraints, int], ...]
    #: Per kind of answer (`fits`, `largest`, `tightest`) and level: `key`, hashed once.
    keys: dict[tuple[str, str], _Key]

    def key_for(self, answer: str, level: str) -> _Key:
        found = self.keys.get((answer, level))
        if found is None:
            found = self.keys[(answer, level)] = _Key(answer, level, self.key)
        return found


def _demand(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> _Demand:
    accel = snapshot.accelerator
    memo = gang.derived
    memo_key = ("topology-demand", rule, accel, snapshot.per_node_label_keys)
    found = memo.get(memo_key)
    if found is not None:
        return cast(_Demand, found)
    items = sorted(rule_items(gang, rule), key=lambda item: _size(item, accel), reverse=True)
    need: dict[str, int] = {}
    for item in items:
        for name, amount in item.requests.items():
            need[name] = need.get(name, 0) + amount * item.count
    counts = tuple(item.count for item in items)
    keys = snapshot.per_node_label_keys
    shapes = tuple(
        _Shape(item.requests, item.constraints, _needs_identity(item.constraints, keys))
        for item in items
    )
    demand = _Demand(
        tuple(items),
        counts,
        shapes,
        tuple(item.requests.get(accel, 0) for item in items),
        sum(counts),
        need,
        need.get(accel, 0),
        tuple((i.requests, i.constraints, i.count) for i in items),
        {},
    )
    memo[memo_key] = demand
    return demand


def _room(demand: _Demand, domain: _Domain) -> Room:
    """How many of the rule's pods the domain has room for: per item, what its nodes could
    hold (`_Domain.room_of`), each item counted on its own; and no more than the pods minus
    one when the domain's free totals cannot cover them all at once. An upper bound of what
    packing can place there."""
    held = sum(
        min(domain.room_of(shape), count)
        for shape, count in zip(demand.shapes, demand.counts, strict=True)
    )
    if held >= demand.pods:
        for name, amount in demand.need.items():
            if domain.total(name) < amount:
                held = demand.pods - 1  # each shape has room alone, not all together
                break
    return Room(domain.value, held, demand.pods, domain.accelerator_free)


def _accelerator_bound(demand: _Demand, free: int) -> int:
    """How many of the demand's pods `free` accelerators could hold at most (pods without
    accelerators all count): never less than a domain's room, and growing with `free`."""
    return sum(
        count if not per_pod else min(count, free // per_pod)
        for per_pod, count in zip(demand.accelerators, demand.counts, strict=True)
    )


def _ceiling(snapshot: ClusterSnapshot, level: str, demand: _Demand) -> int:
    """An upper bound of the pods of the demand any one domain of `level` holds: for an
    indexed level, each item no more than the best domain's count for its per-pod
    accelerators (kept by the snapshot: O(items)); else every pod."""
    index = snapshot.level(level)
    if index is None:
        return 0 if snapshot.indexed(level) else demand.pods
    return sum(
        count if not per_pod else min(count, index.capacity(per_pod).best())
        for per_pod, count in zip(demand.accelerators, demand.counts, strict=True)
    )


def _slot_bound(demand: _Demand, domain: _Domain) -> int:
    """How many of the demand's pods an indexed domain's per-pod capacities allow: never
    less than its room. O(items)."""
    bound = 0
    for per_pod, count in zip(demand.accelerators, demand.counts, strict=True):
        if per_pod:
            count = min(count, domain.capacity(per_pod))
        bound += count
    return bound


def _narrowest(level: Level, demand: _Demand) -> tuple[PodCapacity, int, int] | None:
    """Of the demand's items that need accelerators, the one whose pod count the fewest
    domains' per-pod capacities reach: (its capacities, its pods, how many domains reach
    it); None when no item needs accelerators."""
    chosen = None
    for per_pod, count in zip(demand.accelerators, demand.counts, strict=True):
        if per_pod:
            capacity = level.capacity(per_pod)
            reach = capacity.count_at_least(count)
            if chosen is None or reach < chosen[2]:
                chosen = (capacity, count, reach)
    return chosen


def _candidates(level: Level, demand: _Demand, need: int) -> list[tuple[int, str]] | None:
    """For an indexed level: the domains with at least `need` free accelerators that could
    hold the demand's narrowest item (`_narrowest`), as (free accelerators, value) sorted best
    fit first: read from the per-pod capacities, without looking at the other domains. None
    when that set is not much smaller than the range of `order` it would replace (walking the
    range, which stops at the first fit, is then as cheap)."""
    narrowest = _narrowest(level, demand)
    if narrowest is None:
        return None
    capacity, pods, reach = narrowest
    order = level.order
    if reach * 4 > len(order) - bisect_left(order, (need,)):
        return None
    free = level.accelerators
    return sorted((free[v], v) for v in capacity.at_least(pods) if free[v] >= need)


def _fitting(
    snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule
) -> Iterator[tuple[Room, _Domain]]:
    demand = _demand(snapshot, gang, rule)
    if _ceiling(snapshot, rule.level, demand) < demand.pods:
        return
    need = demand.need_accelerator
    level = snapshot.level(rule.level)
    domains: Iterable[_Domain]
    if level is not None:
        found = _candidates(level, demand, need)
        keys: Iterable[tuple[int, str]] = (
            found
            if found is not None
            else islice(level.order, bisect_left(level.order, (need,)), None)
        )
        domains = (_domain(snapshot, level, value) for _, value in keys)
    else:
        index = _index(snapshot, rule.level)
        start = bisect_left(_free_keys(snapshot, rule.level), need)
        domains = index[start:]
    for domain in domains:
        if domain.too_small(demand):
            continue
        room = _room(demand, domain)
        if room.fits:
            yield room, domain


def _free_keys(snapshot: ClusterSnapshot, level: str) -> list[int]:
    """The free accelerators of `_index`'s domains, in its order (for bisection)."""
    table = snapshot.per_version()
    key = ("topology-free-keys", level)
    found = table.get(key)
    if found is None:
        found = table[key] = [d.accelerator_free for d in _index(snapshot, level)]
    return cast(list[int], found)


def fitting(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> Iterator[Room]:
    """The domains with room for every pod of the rule, best fit first (fewest free
    accelerators, then name), sized lazily: a domain is looked at only when the previous ones
    did not do, and one without the accelerators the rule needs (in total, or per pod) is
    skipped unseen."""
    return (room for room, _ in _fitting(snapshot, gang, rule))


#: Distinct demands whose answers a snapshot keeps per version (then it starts over).
_SHAPES_PER_VERSION = 256


def any_fits(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> bool:
    """Whether some domain has room for every pod of the rule. For an indexed level, only the
    domains whose per-pod capacities could hold the rule's pods are looked at (most first); for
    pods that need no accelerator, the domains with the fewest free accelerators first (where
    the nodes without accelerators, and without their taints, are). The answer is kept per
    snapshot version for the rule's pod shapes and counts, so the gangs of a sweep ask once."""
    demand = _demand(snapshot, gang, rule)
    table = snapshot.per_version()
    key = demand.key_for("topology-fits", rule.level)
    found = table.get(key)
    if found is not None:
        return cast(bool, found)
    answer = False
    if _ceiling(snapshot, rule.level, demand) >= demand.pods:
        answer = any(
            not domain.too_small(demand) and _room(demand, domain).fits
            for domain in _likeliest(snapshot, rule.level, demand)
        )
    if len(table) >= _SHAPES_PER_VERSION:
        table.clear()
    table[key] = answer
    return answer


def _likeliest(snapshot: ClusterSnapshot, level_name: str, demand: _Demand) -> Iterator[_Domain]:
    """The domains `any_fits` looks at, likeliest first. For an indexed level and a demand of
    accelerators, only those whose per-pod capacity holds its narrowest item (`_narrowest`),
    the most first; else those with the free accelerators it needs, most first (fewest first
    for a demand of none)."""
    need = demand.need_accelerator
    level = snapshot.level(level_name)
    if level is None:
        index = _index(snapshot, level_name)
        for domain in index if not need else reversed(index):
            if domain.accelerator_free < need:
                return
            yield domain
        return
    narrowest = _narrowest(level, demand)
    if narrowest is not None:
        capacity, pods, _ = narrowest
        for value in capacity.at_least(pods):
            if level.accelerators[value] >= need:
                yield _domain(snapshot, level, value)
        return
    order = level.order
    if not need:
        yield from (_domain(snapshot, level, value) for _, value in order)
        return
    for free, value in reversed(order):
        if free < need:
            return
        yield _domain(snapshot, level, value)


def _by_most_free(snapshot: ClusterSnapshot, level_name: str) -> Iterator[_Domain]:
    level = snapshot.level(level_name)
    if level is None:
        yield from reversed(_index(snapshot, level_name))
        return
    for _, value in reversed(level.order):
        yield _domain(snapshot, level, value)


def largest(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> Room | None:
    """The domain with room for the most of the rule's pods (then the most free accelerators,
    then name); None when the level has no domain. Domains are looked at by most free
    accelerators first, skipped when their per-pod capacities cannot beat the best found,
    and the search stops when their free accelerators alone cannot. Only a sentence asks
    (`DomainMiss.largest`)."""
    demand = _demand(snapshot, gang, rule)
    table = snapshot.per_version()
    key = demand.key_for("topology-largest", rule.level)
    if key in table:
        return cast(Room | None, table[key])
    ceiling = _ceiling(snapshot, rule.level, demand)
    best: Room | None = None
    for domain in _by_most_free(snapshot, rule.level):
        if best is not None:
            if best.holds >= ceiling and domain.accelerator_free < best.accelerator_free:
                break  # none holds more, and the rest have fewer free accelerators
            if _accelerator_bound(demand, domain.accelerator_free) < best.holds:
                break  # domains come with fewer free accelerators from here on
            if domain.level is not None and _slot_bound(demand, domain) < best.holds:
                continue
        room = _room(demand, domain)
        rank = (-room.holds, -room.accelerator_free, room.value)
        if best is None or rank < (-best.holds, -best.accelerator_free, best.value):
            best = room
    if len(table) >= _SHAPES_PER_VERSION:
        table.clear()
    table[key] = best
    return best


def tightest_room(snapshot: ClusterSnapshot, gang: Gang) -> int | None:
    """For the gang's largest preferred rule: the free accelerators of the tightest domain
    with room for its pods by free vectors (the one packing tries first), or None when no
    domain has room. Lets placement give a preferred gang the member where it leaves the
    least of a rack unused, so whole racks stay whole for the gangs after it."""
    rules = [r for r in applicable(gang, True) if not r.required]
    if not rules:
        return None
    rule = rules[0]
    demand = _demand(snapshot, gang, rule)
    table = snapshot.per_version()
    key = demand.key_for("topology-tightest", rule.level)
    if key in table:
        return cast(int | None, table[key])
    room = next(fitting(snapshot, gang, rule), None)
    answer = None if room is None else room.accelerator_free
    if len(table) >= _SHAPES_PER_VERSION:
        table.clear()
    table[key] = answer
    return answer


def _domain_count(snapshot: ClusterSnapshot, level: str) -> int:
    if snapshot.indexed(level):
        index = snapshot.level(level)
        return len(index.nodes) if index is not None else 0
    return len(_index(snapshot, level))


def applicable(gang: Gang, preferred: bool) -> tuple[TopologyRule, ...]:
    """The rules a check enforces: the required ones, and the preferred ones if `preferred`;
    largest pod count first."""
    key = ("topology-applicable", preferred)
    found = gang.derived.get(key)
    if found is not None:
        return cast(tuple[TopologyRule, ...], found)
    rules = [r for r in gang.topology if r.required or preferred]
    counts = {c.name: n for c, n in gang.minimum}
    answer = tuple(
        sorted(
            rules,
            key=lambda r: -sum(n for name, n in counts.items() if r.covers(name)),
        )
    )
    gang.derived[key] = answer
    return answer


def screen(gang: Gang, snapshot: ClusterSnapshot, preferred: bool = False) -> Reason | None:
    """Why no domain of some rule can hold its pods, judged on free vectors (never rejects what
    `pack_in_domains` would place); None when every rule has a domain with room."""
    for rule in applicable(gang, preferred):
        if not any_fits(snapshot, gang, rule):
            return miss_sentence(
                DomainMiss(snapshot, gang, rule, _domain_count(snapshot, rule.level), 0)
            )
    return None


def _parts(gang: Gang, rule: TopologyRule) -> tuple[tuple[str, int], ...]:
    return tuple((c.name, n) for c, n in gang.minimum if rule.covers(c.name))


def pack_in_domains(
    snapshot: ClusterSnapshot,
    gang: Gang,
    rules: Sequence[TopologyRule],
    mix: WorkloadMix | None = None,
) -> Assignment | Unplaced | DomainMiss:
    """The minimum set on nodes with each rule's pods inside one domain of its level, or why
    not (the rule no domain holds, or the unconstrained item left without nodes)."""
    accel = snapshot.accelerator
    packer = _Packer(snapshot, mix)
    placed: list[Domain] = []
    covered: set[str] = set()
    for rule in rules:
        items = [
            item
            for item in rule_items(gang, rule)
            if not any(name in covered for name, _ in item.parts)
        ]
        covered.update(c.name for c, _ in gang.minimum if rule.covers(c.name))
        if not items:
            continue
        items.sort(key=lambda item: _size(item, accel), reverse=True)
        tried = 0
        chosen: _Packer | None = None
        value = ""
        for room, domain in _fitting(snapshot, gang, rule):
            tried += 1
            within = domain.within(snapshot, rule.level)
            trial = packer.fork()
            if all(trial.place(item, within) == 0 for item in items):
                chosen, value = trial, room.value
                break
        if chosen is None:
            return DomainMiss(snapshot, gang, rule, _domain_count(snapshot, rule.level), tried)
        packer = chosen
        placed.append(Domain(rule.level, value, rule.components, rule.required))
    rest = [(c, n) for c, n in gang.minimum if c.name not in covered]
    free_items = _items(rest)
    free_items.sort(key=lambda item: _size(item, accel), reverse=True)
    for item in free_items:
        missing = packer.place(item)
        if missing:
            return Unplaced(item, missing)
    return Assignment(tuple(packer.slots), tuple(placed))


def miss_sentence(miss: DomainMiss) -> Sentence:
    """The miss as a sentence; its words and its facts (`largestDomain`, `podsThatFit`) are
    worked out only when read."""
    return Sentence(_miss_text, miss, facts=LazyFacts(lambda: _miss_facts(miss)))


def _miss_facts(miss: DomainMiss) -> dict[str, Fact]:
    rule, room = miss.rule, miss.largest
    facts: dict[str, Fact] = {
        "topologyLevel": rule.level,
        "topologyMode": rule.mode,
        "pods": sum(n for _, n in miss.parts),
        "domains": miss.domains,
    }
    if room is not None:
        facts["largestDomain"] = room.value
        facts["podsThatFit"] = room.holds
    return facts


def _miss_text(miss: DomainMiss) -> str:
    rule = miss.rule
    word = level_word(rule.level)
    pods = sum(n for _, n in miss.parts)
    head = f"needs {roster(miss.parts)} in one {word} ({rule.level}, {rule.mode.lower()})"
    if miss.domains == 0:
        return clip(f"{head}; no node has the label {rule.level}")
    if miss.packed_and_failed:
        return clip(
            f"{head}; {miss.packed_and_failed} of {miss.domains} {word}s have room by their free "
            "totals but none holds them node by node"
        )
    room = miss.largest
    plural = "s" if miss.domains != 1 else ""
    if room is None:
        return clip(
            f"{head}; none of {miss.domains} {word}{plural} holds them (the cluster changed "
            "before this was explained)"
        )
    what = miss.parts[-1][0] if len(miss.parts) == 1 else "pods"
    what = what if what.endswith("s") else f"{what}s"
    return clip(
        f"{head}; largest {word} ({room.value}) holds {room.holds} of {pods} {what} "
        f"(of {miss.domains} {word}{plural})"
    )


def pinned(gang: Gang, placed: Sequence[Domain]) -> Gang:
    """`gang` as the member sees its pinned copy: each placed domain's components (all, for a
    whole-gang domain) carry a node selector on the domain's label value, which is what
    `topology.pin_pod_spec` writes as required node affinity. What the simulator's members
    schedule; a member honouring the affinity cannot place the pods anywhere else."""
    if not placed:
        return gang
    components = []
    for component in gang.components:
        selector = dict(component.constraints.node_selector)
        for domain in placed:
            if not domain.components or component.name in domain.components:
                selector[domain.level] = domain.value
        constraints = replace(component.constraints, node_selector=tuple(sorted(selector.items())))
        components.append(replace(component, constraints=constraints))
    return replace(gang, components=tuple(components), topology=())
