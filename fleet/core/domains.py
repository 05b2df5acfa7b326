"""Placing a gang's pod sets each inside one topology domain of a member, node by node.

The rules are the gang's (`Gang.topology`, see `fleet.core.topology`). For each rule, the
domains of its level (`ClusterSnapshot.domains`) are sized from their nodes' free vectors: how
many of the rule's pods each has room for, counting for each pod shape the nodes whose
signature admits it (an upper bound of what packing can do, so a domain it rules out surely
cannot hold them). Domains with room for every pod are packed in best-fit order (fewest free
accelerators first, so whole racks stay whole for the big gangs) with the same packer as the
whole member (`packing`), restricted to the domain's signatures; the first domain where every
pod gets a node wins. Rules are placed largest first and each sees what the previous ones took;
the gang's components under no rule are placed anywhere after them.

Costs: the domains' free vectors are indexed once per snapshot version and level (O(groups),
in `ClusterSnapshot.memo`); sizing is lazy: domains without the accelerators the rule needs in
total are skipped at a comparison each, and the first domain with room ends the search. The
largest domain (for the sentence) is found by branch and bound on free accelerators.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from fleet.core.assignment import Assignment, Domain
from fleet.core.explain import Reason, Sentence, clip, roster
from fleet.core.fragmentation import WorkloadMix
from fleet.core.packing import Item, NodesIn, Unplaced, _Packer
from fleet.core.resources import CPU, MEMORY, Resources
from fleet.core.snapshot import ClusterSnapshot, ShapeGroup, Signature
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


@dataclass(frozen=True, slots=True)
class DomainMiss:
    """No domain of `rule`'s level holds its pods: the largest room, and how many domains had
    room by their free vectors but failed node by node."""

    rule: TopologyRule
    parts: tuple[tuple[str, int], ...]
    largest: Room | None
    domains: int
    packed_and_failed: int


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


class _Domain:
    """One domain's free capacity: its free accelerators and (signature, free vector, nodes),
    the latter built on first use (a domain too small for a gang is never looked into)."""

    __slots__ = ("_entries", "_nodes", "accelerator_free", "slots", "value")

    def __init__(
        self,
        value: str,
        accelerator_free: int,
        entries: tuple[tuple[Signature, Resources, int], ...] | None = None,
        nodes: tuple[ClusterSnapshot, Mapping[str, None]] | None = None,
        slots: Mapping[int, int] | None = None,
    ) -> None:
        self.value = value
        self.accelerator_free = accelerator_free
        self._entries = entries
        self._nodes = nodes
        #: Free accelerator amount -> nodes with it (indexed levels only).
        self.slots = slots

    def too_small(self, demand: _Demand) -> bool:
        """Whether the domain surely cannot hold the demand, by free accelerators alone: in
        total, or for some item, counting each node's free amount as whole pods (O(amounts))."""
        if self.accelerator_free < demand.need_accelerator:
            return True
        slots = self.slots
        if slots is None:
            return False
        for per_pod, count in zip(demand.accelerators, demand.counts, strict=True):
            if per_pod and sum(n * (a // per_pod) for a, n in slots.items()) < count:
                return True
        return False

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

    def within(self, snapshot: ClusterSnapshot, level: str) -> Collection[Signature] | NodesIn:
        """What packing is restricted to for this domain of `level`."""
        if self._nodes is not None:
            return NodesIn(self._nodes[1])
        return snapshot.domains(level).get(self.value, ())


def _index(snapshot: ClusterSnapshot, level: str) -> tuple[_Domain, ...]:
    """Every domain of `level`, fewest free accelerators first (then by name): built once per
    snapshot version and level. For an indexed level (`ClusterSnapshot.indexed`) from the
    per-level index and its free accelerator totals, O(domains); else from the signatures."""
    table = snapshot.per_version()
    key = ("topology-domains", level)
    found = table.get(key)
    if found is not None:
        return cast(tuple[_Domain, ...], found)
    out = []
    if snapshot.indexed(level):
        accelerators = snapshot.domain_accelerators(level)
        slots = snapshot.domain_slots(level)
        for value, names in snapshot.domain_nodes(level).items():
            out.append(
                _Domain(
                    value,
                    accelerators.get(value, 0),
                    nodes=(snapshot, names),
                    slots=slots.get(value, {}),
                )
            )
    else:
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


#: Distinct pod shapes whose per-domain room a snapshot keeps per version (then it starts over).
_SHAPES_PER_VERSION = 256


class _ShapeRoom:
    """For pods shaped like one item (requests and constraints): per domain, how many its nodes
    could hold at most, each node a separate bin and only nodes whose signature admits them
    (every node when the constraints look at per-node facts, judged node by node in packing).
    Sized lazily per domain. Once per snapshot version, level and shape, shared by every gang
    with pods of that shape."""

    __slots__ = ("constraints", "identity", "level", "requests", "room", "snapshot")

    def __init__(self, snapshot: ClusterSnapshot, level: str, item: Item) -> None:
        self.snapshot = snapshot
        self.level = level
        self.requests = item.requests
        self.constraints = item.constraints
        self.identity = item.constraints.needs_node_identity(snapshot.per_node_label_keys)
        self.room: dict[str, int] = {}

    def of(self, domain: _Domain) -> int:
        found = self.room.get(domain.value)
        if found is not None:
            return found
        requests, constraints, identity = self.requests, self.constraints, self.identity
        total = 0
        for sig, free, nodes in domain.entries:
            copies = requests.copies_in(free)
            if copies > 0 and (identity or sig.rejection(constraints) is None):
                total += copies * nodes
        self.room[domain.value] = total
        return total


def _shape_room(snapshot: ClusterSnapshot, level: str, item: Item) -> _ShapeRoom:
    table = snapshot.per_version()
    key = ("topology-room", level, item.requests, item.constraints)
    found = table.get(key)
    if found is not None:
        return cast(_ShapeRoom, found)
    if len(table) >= _SHAPES_PER_VERSION:
        table.clear()
    result = _ShapeRoom(snapshot, level, item)
    table[key] = result
    return result


@dataclass(frozen=True, slots=True)
class _Demand:
    """A rule's pods as the sizing needs them: its items (the largest first), their pod
    counts, their per-domain room, and what they need in total."""

    items: tuple[Item, ...]
    counts: tuple[int, ...]
    rooms: tuple[_ShapeRoom, ...]
    #: Accelerators per pod of each item.
    accelerators: tuple[int, ...]
    pods: int
    need: Mapping[str, int]
    need_accelerator: int


def _demand(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> _Demand:
    accel = snapshot.accelerator
    items = sorted(rule_items(gang, rule), key=lambda item: _size(item, accel), reverse=True)
    need: dict[str, int] = {}
    for item in items:
        for name, amount in item.requests.items():
            need[name] = need.get(name, 0) + amount * item.count
    counts = tuple(item.count for item in items)
    shaped = tuple(_shape_room(snapshot, rule.level, item) for item in items)
    return _Demand(
        tuple(items),
        counts,
        shaped,
        tuple(item.requests.get(accel, 0) for item in items),
        sum(counts),
        need,
        need.get(accel, 0),
    )


def _room(demand: _Demand, domain: _Domain) -> Room:
    """How many of the rule's pods the domain has room for: per item, what its nodes could
    hold (`_shape_room`), each item counted on its own; and no more than the pods minus one
    when the domain's free totals cannot cover them all at once. An upper bound of what
    packing can place there."""
    held = sum(
        min(room.of(domain), count) for room, count in zip(demand.rooms, demand.counts, strict=True)
    )
    if held >= demand.pods:
        for name, amount in demand.need.items():
            if sum(free.get(name, 0) * n for _, free, n in domain.entries) < amount:
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


def _level_bound(snapshot: ClusterSnapshot, level: str, per_pod: int) -> int:
    """For an indexed level: the most pods of `per_pod` accelerators any one domain could take
    by its free-accelerator counts. Once per snapshot version, level and per-pod amount (a
    handful: 1, 2, 4, 8), shared by every pod shape."""
    table = snapshot.per_version()
    key = ("topology-level-bound", level, per_pod)
    found = table.get(key)
    if found is not None:
        return cast(int, found)
    best = 0
    for slots in snapshot.domain_slots(level).values():
        best = max(best, sum(n * (a // per_pod) for a, n in slots.items()))
    table[key] = best
    return best


def _ceiling(snapshot: ClusterSnapshot, level: str, demand: _Demand) -> int:
    """An upper bound of the pods of the demand any one domain of `level` holds: for an
    indexed level, each item no more than the best domain's counts allow for its per-pod
    accelerators (O(items) once the level's bounds are known); else every pod."""
    if not snapshot.indexed(level):
        return demand.pods
    return sum(
        count if not per_pod else min(count, _level_bound(snapshot, level, per_pod))
        for per_pod, count in zip(demand.accelerators, demand.counts, strict=True)
    )


def _slot_bound(demand: _Demand, slots: Mapping[int, int]) -> int:
    """How many of the demand's pods an indexed domain's free-accelerator counts allow, each
    node's free amount counted as whole pods: never less than its room. O(amounts)."""
    bound = 0
    for per_pod, count in zip(demand.accelerators, demand.counts, strict=True):
        if per_pod:
            count = min(count, sum(n * (a // per_pod) for a, n in slots.items()))
        bound += count
    return bound


def _free_keys(snapshot: ClusterSnapshot, level: str) -> list[int]:
    """The free accelerators of `_index`'s domains, in its order (for bisection)."""
    table = snapshot.per_version()
    key = ("topology-free-keys", level)
    found = table.get(key)
    if found is None:
        found = table[key] = [d.accelerator_free for d in _index(snapshot, level)]
    return cast(list[int], found)


def _fitting(
    snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule
) -> Iterator[tuple[Room, _Domain]]:
    demand = _demand(snapshot, gang, rule)
    if _ceiling(snapshot, rule.level, demand) < demand.pods:
        return
    index = _index(snapshot, rule.level)
    start = bisect_left(_free_keys(snapshot, rule.level), demand.need_accelerator)
    for domain in index[start:]:
        if domain.too_small(demand):
            continue
        room = _room(demand, domain)
        if room.fits:
            yield room, domain


def fitting(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> Iterator[Room]:
    """The domains with room for every pod of the rule, best fit first (fewest free
    accelerators, then name), sized lazily: a domain is looked at only when the previous ones
    did not do, and one without the accelerators the rule needs in total is skipped unseen."""
    return (room for room, _ in _fitting(snapshot, gang, rule))


def any_fits(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> bool:
    """Whether some domain has room for every pod of the rule: domains by most free
    accelerators first (the likeliest to hold them; fewest first for pods that need none),
    stopping at the first with room or at the
    first without the accelerators needed (per shape, each domain's room is sized at most once
    per snapshot version). The answer is kept per snapshot version for the rule's pod shapes and
    counts, so the gangs of a sweep ask once."""
    demand = _demand(snapshot, gang, rule)
    table = snapshot.per_version()
    key = (
        "topology-fits",
        rule.level,
        tuple((i.requests, i.constraints, i.count) for i in demand.items),
    )
    found = table.get(key)
    if found is not None:
        return cast(bool, found)
    answer = False
    if _ceiling(snapshot, rule.level, demand) < demand.pods:
        table[key] = answer  # no domain's free accelerators could hold them
        return answer
    index = _index(snapshot, rule.level)
    # Pods with no accelerators: the domains with the fewest first, where nodes without
    # accelerators (and without their taints) are; the most first would try every GPU rack
    # before the first CPU one.
    for domain in index if not demand.need_accelerator else reversed(index):
        if domain.accelerator_free < demand.need_accelerator:
            break
        if not domain.too_small(demand) and _room(demand, domain).fits:
            answer = True
            break
    if len(table) >= _SHAPES_PER_VERSION:
        table.clear()
    table[key] = answer
    return answer


def largest(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> Room | None:
    """The domain with room for the most of the rule's pods (then the most free accelerators,
    then name); None when the level has no domain. Domains are looked at by most free
    accelerators first, skipped when their free-accelerator counts cannot beat the best found,
    and the search stops when their free accelerators alone cannot."""
    demand = _demand(snapshot, gang, rule)
    ceiling = _ceiling(snapshot, rule.level, demand)
    best: Room | None = None
    for domain in reversed(_index(snapshot, rule.level)):
        if best is not None:
            if best.holds >= ceiling and domain.accelerator_free < best.accelerator_free:
                break  # none holds more, and the rest have fewer free accelerators
            if _accelerator_bound(demand, domain.accelerator_free) < best.holds:
                break  # domains come with fewer free accelerators from here on
            if domain.slots is not None and _slot_bound(demand, domain.slots) < best.holds:
                continue
        room = _room(demand, domain)
        key = (-room.holds, -room.accelerator_free, room.value)
        if best is None or key < (-best.holds, -best.accelerator_free, best.value):
            best = room
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
    table = snapshot.per_version()
    key = (
        "topology-tightest",
        rule.level,
        rule.components,
        tuple(gang.minimum_parts),
        _shapes(gang),
    )
    if key in table:
        return cast(int | None, table[key])
    room = next(fitting(snapshot, gang, rule), None)
    answer = None if room is None else room.accelerator_free
    if len(table) >= _SHAPES_PER_VERSION:
        table.clear()
    table[key] = answer
    return answer


def _shapes(gang: Gang) -> tuple[object, ...]:
    return tuple((c.name, c.requests, c.constraints) for c, _ in gang.minimum)


def _domain_count(snapshot: ClusterSnapshot, level: str) -> int:
    return len(_index(snapshot, level))


def applicable(gang: Gang, preferred: bool) -> tuple[TopologyRule, ...]:
    """The rules a check enforces: the required ones, and the preferred ones if `preferred`;
    largest pod count first."""
    rules = [r for r in gang.topology if r.required or preferred]
    counts = {c.name: n for c, n in gang.minimum}
    return tuple(
        sorted(
            rules,
            key=lambda r: -sum(n for name, n in counts.items() if r.covers(name)),
        )
    )


def screen(gang: Gang, snapshot: ClusterSnapshot, preferred: bool = False) -> Reason | None:
    """Why no domain of some rule can hold its pods, judged on free vectors (never rejects what
    `pack_in_domains` would place); None when every rule has a domain with room."""
    for rule in applicable(gang, preferred):
        if not any_fits(snapshot, gang, rule):
            return miss_sentence(
                DomainMiss(
                    rule,
                    _parts(gang, rule),
                    largest(snapshot, gang, rule),
                    _domain_count(snapshot, rule.level),
                    0,
                )
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
            return DomainMiss(
                rule,
                _parts(gang, rule),
                largest(snapshot, gang, rule),
                _domain_count(snapshot, rule.level),
                tried,
            )
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
    rule, room = miss.rule, miss.largest
    facts: dict[str, int | str] = {
        "topologyLevel": rule.level,
        "topologyMode": rule.mode,
        "pods": sum(n for _, n in miss.parts),
        "domains": miss.domains,
    }
    if room is not None:
        facts["largestDomain"] = room.value
        facts["podsThatFit"] = room.holds
    return Sentence(_miss_text, miss, facts=facts)


def _miss_text(miss: DomainMiss) -> str:
    rule, room = miss.rule, miss.largest
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
    assert room is not None
    what = miss.parts[-1][0] if len(miss.parts) == 1 else "pods"
    what = what if what.endswith("s") else f"{what}s"
    return clip(
        f"{head}; largest {word} ({room.value}) holds {room.holds} of {pods} {what} "
        f"(of {miss.domains} {word}{'s' if miss.domains != 1 else ''})"
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
