"""Placing a gang's pod sets each inside one topology domain of a member, node by node.

The rules are the gang's (`Gang.topology`, see `fleet.core.topology`). For each rule, the
domains of its level (`ClusterSnapshot.domains`) are sized from their free vectors: how many of
the rule's pods each has room for, counting each node's room for each pod shape (an upper bound
of what packing can do, so a domain it rules out surely cannot hold them). Domains with room for
every pod are then packed in best-fit order (fewest free accelerators first, so whole racks stay
whole for the big gangs), with the same packer as the whole member (`packing`), restricted to
the domain's nodes; the first domain where every pod gets a node wins. Rules are placed largest
first and each sees what the previous ones took; the gang's components under no rule are placed
anywhere after them.

Costs: the per-domain free vectors are built once per snapshot version and level (O(groups)),
the rooms once per version and demand (both in `ClusterSnapshot.memo`), so a sweep of
look-alike gangs pays them once per member change.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from fleet.core.assignment import Assignment, Domain
from fleet.core.explain import Reason, Sentence, clip, roster
from fleet.core.fragmentation import WorkloadMix
from fleet.core.packing import Item, Unplaced, _Packer
from fleet.core.resources import CPU, MEMORY, Resources
from fleet.core.snapshot import ClusterSnapshot, Signature
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


def _domain_frees(
    snapshot: ClusterSnapshot, level: str
) -> Mapping[str, tuple[int, dict[Resources, int]]]:
    """Per domain of `level`: (free accelerators, free vector -> nodes)."""
    table = snapshot.memo()
    key = ("topology-frees", level)
    found = table.get(key)
    if found is not None:
        return cast(Mapping[str, tuple[int, dict[Resources, int]]], found)
    out: dict[str, tuple[int, dict[Resources, int]]] = {}
    for value, sigs in snapshot.domains(level).items():
        frees: dict[Resources, int] = {}
        total = 0
        for sig in sigs:
            for amount, bucket in sig.buckets.items():
                for free, group in bucket.items():
                    n = len(group)
                    frees[free] = frees.get(free, 0) + n
                    total += amount * n
        out[value] = (total, frees)
    table[key] = out
    return out


def rooms(snapshot: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> tuple[Room, ...]:
    """Every domain of the rule's level with its room, best fit first among those with room for
    all the rule's pods (fewest free accelerators, then name), then the others by room."""
    table = snapshot.memo()
    key = ("topology-rooms", rule, gang.demand_key)
    found = table.get(key)
    if found is not None:
        return cast(tuple[Room, ...], found)
    items = rule_items(gang, rule)
    pods = sum(item.count for item in items)
    total_need: dict[str, int] = {}
    for item in items:
        for name, amount in item.requests.items():
            total_need[name] = total_need.get(name, 0) + amount * item.count
    out = []
    for value, (accel_free, frees) in _domain_frees(snapshot, rule.level).items():
        holds = _holds(items, frees)
        if holds >= pods and not _totals_cover(total_need, frees):
            holds = pods - 1  # each shape has room alone, not all of them together
        out.append(Room(value, min(holds, pods), pods, accel_free))
    out.sort(key=lambda r: (not r.fits, r.accelerator_free if r.fits else -r.holds, r.value))
    result = tuple(out)
    table[key] = result
    return result


def _holds(items: Sequence[Item], frees: Mapping[Resources, int]) -> int:
    """Pods of `items` the domain has room for, each shape counted on its own (an upper bound)."""
    held = 0
    for item in items:
        room = 0
        for free, nodes in frees.items():
            copies = item.requests.copies_in(free)
            if copies > 0:
                room += copies * nodes
                if room >= item.count:
                    break
        held += min(room, item.count)
    return held


def _totals_cover(need: Mapping[str, int], frees: Mapping[Resources, int]) -> bool:
    for name, amount in need.items():
        if sum(free.get(name, 0) * n for free, n in frees.items()) < amount:
            return False
    return True


def largest(found: Sequence[Room]) -> Room | None:
    """The domain with room for the most pods (then the most free accelerators, then name)."""
    if not found:
        return None
    return min(found, key=lambda r: (-r.holds, -r.accelerator_free, r.value))


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
        found = rooms(snapshot, gang, rule)
        if not any(r.fits for r in found):
            return miss_sentence(
                DomainMiss(rule, _parts(gang, rule), largest(found), len(found), 0)
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
    index = snapshot.domains
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
        found = rooms(snapshot, gang, rule)
        tried = 0
        chosen: _Packer | None = None
        value = ""
        domains = index(rule.level)
        for room in found:
            if not room.fits:
                break
            tried += 1
            sigs: Collection[Signature] = domains.get(room.value, ())
            trial = packer.fork()
            if all(trial.place(item, sigs) == 0 for item in items):
                chosen, value = trial, room.value
                break
        if chosen is None:
            return DomainMiss(rule, _parts(gang, rule), largest(found), len(found), tried)
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
