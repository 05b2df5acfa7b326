"""The topology index (`fleet.core.levels`): what the snapshot keeps per domain, event by event,
equals a full recount after any sequence of node and pod events, and a gang placed with the
index goes where a scan over every domain would put it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core import domains
from fleet.core.assignment import Assignment, Slot
from fleet.core.constraints import PodConstraints
from fleet.core.inventory import NodeInfo
from fleet.core.levels import TRACKED_PER_POD, recount
from fleet.core.placement import place
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration
from fleet.core.topology import PREFERRED, REQUIRED, TopologyRule
from fleet.core.workload import Component, Gang

from .builders import node, pod

GPU = "nvidia.com/gpu"
RACK = "topology.kubernetes.io/rack"
NODES = [f"n{i}" for i in range(6)]
PODS = [f"p{i}" for i in range(10)]
#: Per-pod amounts checked: the tracked ones, and one counted on first ask.
PER_POD = (*TRACKED_PER_POD, 3)

nodes_st = st.builds(
    node,
    st.sampled_from(NODES),
    cpu=st.sampled_from([4, 16]),
    memory=st.sampled_from([16, 64]),
    gpu=st.sampled_from([0, 1, 4, 8]),
    labels=st.sampled_from(
        [{}, {RACK: "r1"}, {RACK: "r2"}, {RACK: "r3", "pool": "a"}, {RACK: "r2", "pool": "a"}]
    ),
    taints=st.sampled_from([(), (Taint(GPU, "NoSchedule"),)]),
    unschedulable=st.booleans(),
)
pods_st = st.builds(
    pod,
    st.sampled_from(PODS),
    st.sampled_from([None, *NODES]),
    cpu_m=st.sampled_from([0, 2000]),
    memory=st.sampled_from([0, 8]),
    gpu=st.sampled_from([0, 1, 2, 4]),
    terminal=st.booleans(),
    owner=st.sampled_from([None, "job-a"]),
)
plan_st = st.lists(st.tuples(st.sampled_from([None, *NODES]), st.integers(1, 2)), max_size=3)
events_st = st.lists(
    st.one_of(
        st.tuples(st.just("upsert_node"), nodes_st),
        st.tuples(st.just("remove_node"), st.sampled_from(NODES)),
        st.tuples(st.just("cordon"), st.sampled_from(NODES)),
        st.tuples(st.just("upsert_pod"), pods_st),
        st.tuples(st.just("remove_pod"), st.sampled_from(PODS)),
        st.tuples(st.just("reserve"), plan_st),
        st.tuples(st.just("release"), st.just("job-a")),
        st.tuples(st.just("size"), st.just(None)),
    ),
    max_size=40,
)

ONE_GPU = Resources({"cpu": 1000, GPU: 1, "pods": 1})
TOLERATE = PodConstraints.of(tolerations=(Toleration(GPU, "Exists"),))


def apply(snap: ClusterSnapshot, op: str, arg: Any) -> None:
    if op == "cordon":
        info = snap.node(arg)
        if info is not None:
            snap.upsert_node(NodeInfo(info.name, info.allocatable, info.labels, info.taints, True))
    elif op == "reserve":
        slots = tuple(Slot("worker", n if snap.node(n or "") else None, k, ONE_GPU) for n, k in arg)
        snap.reserve("job-a", Assignment(slots), 100.0)
    elif op == "size":
        # Size every domain for a few shapes, so kept sizings exist when the next event comes.
        for gang in _gangs():
            for rule in domains.applicable(gang, True):
                domains.any_fits(snap, gang, rule)
                list(domains.fitting(snap, gang, rule))
    else:
        getattr(snap, op)(arg)


def _gangs() -> list[Gang]:
    def gang(*components: Component, mode: str = REQUIRED) -> Gang:
        return Gang.of(*components).with_topology(TopologyRule(RACK, mode))

    gpu = Resources({"cpu": 1000, "memory": 1 << 30, GPU: 4, "pods": 1})
    cpu = Resources({"cpu": 2000, "memory": 4 << 30, "pods": 1})
    return [
        gang(Component("worker", 2, gpu, TOLERATE)),
        gang(Component("worker", 3, ONE_GPU, TOLERATE), mode=PREFERRED),
        gang(Component("master", 1, cpu), Component("worker", 2, gpu, TOLERATE)),
        gang(Component("worker", 4, cpu)),
        gang(Component("worker", 1, Resources({"cpu": 1000, GPU: 3, "pods": 1}), TOLERATE)),
    ]


def recounted(snap: ClusterSnapshot) -> dict[str, Any]:
    """What the index keeps, counted again from every node's free vector."""
    members: dict[str, list[str]] = {}
    for info in snap.nodes():
        value = info.labels.get(RACK)
        if value is not None:
            members.setdefault(value, []).append(info.name)
    free = {name: snap.free(name) or Resources() for names in members.values() for name in names}
    accel = {name: vector.get(GPU, 0) for name, vector in free.items()}
    totals: dict[str, dict[str, int]] = {}
    slots: dict[str, dict[int, int]] = {}
    for value, names in members.items():
        total = totals.setdefault(value, {})
        slot = slots.setdefault(value, {})
        for name in names:
            for resource, amount in free[name].items():
                total[resource] = total.get(resource, 0) + amount
            if accel[name]:
                slot[accel[name]] = slot.get(accel[name], 0) + 1
    gpus = {v: sum(accel[n] for n in names) for v, names in members.items()}
    nodes = {v: dict.fromkeys(names) for v, names in members.items()}
    return {
        "nodes": {v: sorted(names) for v, names in members.items()},
        "accelerators": gpus,
        "free": {v: {r: a for r, a in t.items() if a} for v, t in totals.items()},
        "slots": slots,
        "order": sorted((gpus[v], v) for v in members),
        "capacity": {p: recount(nodes, accel, p) for p in PER_POD},
        "best": {p: max(recount(nodes, accel, p).values(), default=0) for p in PER_POD},
    }


def kept(snap: ClusterSnapshot) -> dict[str, Any]:
    level = snap.level(RACK)
    if level is None:
        return recounted(ClusterSnapshot("empty"))
    caps = {p: level.capacity(p) for p in PER_POD}
    for capacity in caps.values():  # the domains by capacity agree with the per-domain counts
        assert {v: c for c, vs in capacity.by_capacity.items() for v in vs} == capacity.of
    return {
        "nodes": {v: sorted(names) for v, names in level.nodes.items()},
        "accelerators": dict(level.accelerators),
        "free": {v: dict(t) for v, t in level.free.items()},
        "slots": {v: dict(s) for v, s in level.slots.items()},
        "order": list(level.order),
        "capacity": {p: dict(c.of) for p, c in caps.items()},
        "best": {p: c.best() for p, c in caps.items()},
    }


@settings(max_examples=200, deadline=None)
@given(events_st)
def test_kept_per_domain_capacities_equal_a_full_recount(events: list[tuple[str, Any]]) -> None:
    snap = ClusterSnapshot("c")
    for op, arg in events:
        apply(snap, op, arg)
    assert kept(snap) == recounted(snap)
    # A domain's kept sizing (kept until one of its nodes changes) is what sizing it afresh gives.
    fresh = ClusterSnapshot.build("c", list(snap.nodes()), list(snap.pods()))
    for res in snap.reservations().values():
        fresh.put_back(res)
    for gang in _gangs():
        for rule in domains.applicable(gang, True):
            assert list(domains.fitting(snap, gang, rule)) == list(
                domains.fitting(fresh, gang, rule)
            )
            assert domains.largest(snap, gang, rule) == domains.largest(fresh, gang, rule)


# -- the index against a scan ------------------------------------------------------------------


def scan_rooms(snap: ClusterSnapshot, gang: Gang, rule: TopologyRule) -> list[domains.Room]:
    """Every domain's room, sized from scratch from its nodes (the definition the index keeps
    answers for), in best-fit order: fewest free accelerators, then name."""
    items = domains.rule_items(gang, rule)
    pods = sum(item.count for item in items)
    need: dict[str, int] = {}
    for item in items:
        for name, amount in item.requests.items():
            need[name] = need.get(name, 0) + amount * item.count
    members: dict[str, list[NodeInfo]] = {}
    for info in snap.nodes():
        value = info.labels.get(rule.level)
        if value is not None:
            members.setdefault(value, []).append(info)
    rooms = []
    for value, infos in members.items():
        frees = [snap.free(info.name) or Resources() for info in infos]
        held = 0
        for item in items:
            identity = item.constraints.needs_node_identity(snap.per_node_label_keys)
            room = sum(
                item.requests.copies_in(free)
                for info, free in zip(infos, frees, strict=True)
                if identity
                or item.constraints.rejection(info.labels, info.taints, info.unschedulable) is None
            )
            held += min(room, item.count)
        if held >= pods and any(sum(f.get(r, 0) for f in frees) < a for r, a in need.items()):
            held = pods - 1
        gpus = sum(f.get(GPU, 0) for f in frees)
        rooms.append(domains.Room(value, held, pods, gpus))
    rooms.sort(key=lambda r: (r.accelerator_free, r.value))
    return rooms


gang_st = st.builds(
    lambda workers, gpus, master, mode: Gang.of(
        *(
            [Component("master", 1, Resources({"cpu": 2000, "memory": 4 << 30, "pods": 1}))]
            if master
            else []
        ),
        Component("worker", workers, Resources({"cpu": 1000, GPU: gpus, "pods": 1}), TOLERATE),
    ).with_topology(TopologyRule(RACK, mode)),
    st.integers(1, 6),
    st.sampled_from([0, 1, 2, 3, 4, 8]),
    st.booleans(),
    st.sampled_from([REQUIRED, PREFERRED]),
)


@settings(max_examples=200, deadline=None)
@given(events_st, gang_st)
def test_the_index_finds_what_a_scan_of_every_domain_finds(
    events: list[tuple[str, Any]], gang: Gang
) -> None:
    snap = ClusterSnapshot("c")
    for op, arg in events:
        apply(snap, op, arg)
    (rule,) = gang.topology
    rooms = scan_rooms(snap, gang, rule)
    fits = [room for room in rooms if room.fits]
    # Packing tries the domains in this order: the same order, the same domain chosen.
    assert list(domains.fitting(snap, gang, rule)) == fits
    assert domains.any_fits(snap, gang, rule) == bool(fits)
    best = min(rooms, key=lambda r: (-r.holds, -r.accelerator_free, r.value), default=None)
    assert domains.largest(snap, gang, rule) == best
    if rule.mode == PREFERRED:
        assert domains.tightest_room(snap, gang) == (fits[0].accelerator_free if fits else None)
    # The placement keeps to the first domain of the scan's order where packing succeeds.
    decision = place(gang, [snap])
    if decision.placement is not None and decision.placement.assignment.domains:
        (chosen,) = decision.placement.assignment.domains
        assert chosen.value in [room.value for room in fits]
        before = [room.value for room in fits][: [room.value for room in fits].index(chosen.value)]
        for value in before:  # each domain tried before it could not hold the gang
            alone = ClusterSnapshot.build(
                "rack",
                [n for n in snap.nodes() if n.labels.get(RACK) == value],
                [p for p in snap.pods()],
            )
            for res in snap.reservations().values():
                alone.put_back(res)
            assert place(gang.with_topology(), [alone]).placement is None, value
