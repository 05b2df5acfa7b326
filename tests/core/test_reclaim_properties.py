"""Reclaim under random fleets, trees and event sequences (hypothesis).

Teams (leaves of a tree whose root max is the fleet's GPUs) submit gangs of 1-8 GPU pods; a
pass dequeues, the dequeued gangs are packed onto the members' nodes and run, gangs finish,
and a reclaim evicts (the victims' pods leave the member at once: grace period 0). After every
step:

* a gang within its own queue's min is never evicted: after every reclaim, each victim's quota
  node is still at or above its min;
* every eviction lets the waiting gang fit: with the victims' pods gone, the member the reclaim
  chose packs the claimant's whole gang, and the claimant holds its quota;
* no unit is lost or counted twice: every submitted unit is known, in one phase, and each quota
  node holds exactly the sum of what its holders ask; an evicted gang is back in its queue
  (Enqueued) with its original submission time;
* no eviction cycle: a reclaim right after another (nothing else happening) never evicts a
  gang the first one made room for, and no victim of the first reclaims anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fleet.core.admission import (
    ENQUEUED,
    HOLDING,
    RUNNING,
    Admission,
    AdmissionSettings,
    Placed,
    Plan,
    UnitSpec,
)
from fleet.core.assignment import Assignment
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.packing import pack
from fleet.core.quota import MAX_JOBS, QuotaTree, check_tree
from fleet.core.resources import GPU, Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Component, Gang

TEAMS = ("a", "b", "c")


def gang_of(key: str, pods: int, gpus: int) -> Gang:
    return Gang.of(Component("worker", pods, Resources({GPU: gpus, "cpu": 1000})), name=key)


@dataclass
class World:
    tree: QuotaTree
    members: dict[str, ClusterSnapshot]
    preemption: bool
    admission: Admission = field(init=False)
    gangs: dict[str, Gang] = field(default_factory=dict)
    specs: dict[str, UnitSpec] = field(default_factory=dict)
    running: dict[str, Placed] = field(default_factory=dict)
    clock: float = 0.0
    submitted: int = 0

    def __post_init__(self) -> None:
        self.admission = Admission(
            AdmissionSettings(preemption=self.preemption, reclaim_unplaced=True, reclaim_delay=2.0)
        )
        self.admission.set_tree(self.tree)

    def submit(self, team: str, pods: int, gpus: int, priority: int) -> None:
        key = f"{team}/u{self.submitted}"
        self.submitted += 1
        self.clock += 1
        total = Resources({GPU: pods * gpus, "cpu": 1000 * pods})
        spec = UnitSpec(key, team, total, self.clock, priority)
        self.specs[key] = spec
        self.gangs[key] = gang_of(key, pods, gpus)
        self.admission.upsert(spec)

    def run_pass(self) -> None:
        self.clock += 1
        self.admission.plan(self.clock)
        self.place()

    def place(self) -> None:
        for key in sorted(self.specs):
            if self.admission.phase(key) != "Dequeued":
                continue
            for member in self.members.values():
                found = pack(member, self.gangs[key])
                if isinstance(found, Assignment):
                    self.bind(member, key, found)
                    self.admission.placed(key, self.clock)
                    self.running[key] = Placed(member.name, key, self.clock)
                    break

    def bind(self, member: ClusterSnapshot, key: str, assignment: Assignment) -> None:
        n = 0
        for slot in assignment:
            for _ in range(slot.pods):
                uid = f"{key}-{n}"
                n += 1
                member.upsert_pod(PodInfo(uid, "", uid, slot.node, slot.requests, owner_key=key))

    def unbind(self, key: str) -> None:
        placed = self.running.pop(key)
        member = self.members[placed.cluster]
        for pod in [p for p in member.pods() if p.owner_key == key]:
            member.remove_pod(pod.uid)

    def finish(self, index: int) -> None:
        keys = sorted(self.running)
        if not keys:
            return
        key = keys[index % len(keys)]
        self.unbind(key)
        self.clock += 1
        self.admission.finished(key, True, self.clock)

    def reclaim(self) -> Plan:
        self.clock += 1
        members = list(self.members.values())
        return self.admission.reclaim(
            self.clock, dict(self.running), self.gangs.get, lambda _key: members
        )


def check_usage(world: World) -> None:
    admission, tree = world.admission, world.tree
    expected: dict[str, dict[str, int]] = {path: {} for path in tree.nodes}
    for key, spec in world.specs.items():
        assert key in admission, f"{key} lost"
        phase = admission.phase(key)
        assert phase is not None
        if phase in HOLDING:
            assert admission.holds(key)
            quota = admission.quota_of(key)
            assert quota is not None
            for path in tree.nodes[quota].lineage:
                used = expected[path]
                for resource, amount in spec.resources.items():
                    used[resource] = used.get(resource, 0) + amount
                used[MAX_JOBS] = used.get(MAX_JOBS, 0) + 1
        else:
            assert not admission.holds(key)
        assert (phase == RUNNING) == (key in world.running), key
    for path in tree.nodes:
        assert dict(admission.usage(path).used) == {k: v for k, v in expected[path].items() if v}


def check_reclaim(world: World, plan: Plan, before: dict[str, int]) -> None:
    admission, tree = world.admission, world.tree
    claimants = {e.by for e in plan.evict}
    # (a preemption in the same reclaim may move its own queue's usage either way)
    reclaims_only = all(e.kind == "Reclaim" for e in plan.evict)
    for evict in plan.evict:
        assert admission.phase(evict.key) == ENQUEUED
        assert evict.key not in claimants
        quota = admission.quota_of(evict.key)
        assert quota is not None
        # never within its own queue's min: still at or above it after the reclaim
        if evict.kind == "Reclaim":
            if reclaims_only:
                used = admission.usage(quota).used.get(GPU, 0)
                assert used >= tree.nodes[quota].min.get(GPU, 0)
        else:
            assert world.specs[evict.key].priority < world.specs[evict.by].priority
    # the victims' pods leave (grace period 0)
    for evict in plan.evict:
        world.unbind(evict.key)
    for claimant in claimants:
        assert admission.holds(claimant)
        cluster = next(e.cluster for e in plan.evict if e.by == claimant)
        found = pack(world.members[cluster], world.gangs[claimant])
        assert isinstance(found, Assignment), f"{claimant} does not fit {cluster}"
        quota = admission.quota_of(claimant)
        assert quota is not None
        kinds = {e.kind for e in plan.evict if e.by == claimant}
        if kinds == {"Reclaim"} and reclaims_only:
            # it runs within its own min
            assert admission.usage(quota).used.get(GPU, 0) <= tree.nodes[quota].min.get(GPU, 0)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    members: dict[str, ClusterSnapshot] = {}
    total = 0
    for m in range(draw(st.integers(1, 2))):
        nodes = [
            NodeInfo(f"m{m}-n{i}", Resources({GPU: 8, "cpu": 64000, "pods": 110}))
            for i in range(draw(st.integers(1, 2)))
        ]
        total += 8 * len(nodes)
        members[f"m{m}"] = ClusterSnapshot.build(f"m{m}", nodes)
    shares = draw(st.lists(st.integers(2, 3), min_size=len(TEAMS), max_size=len(TEAMS)))
    spare = total
    children: list[dict[str, Any]] = []
    for team, share in zip(TEAMS, shares, strict=True):
        low = min(spare, share * total // 8)
        spare -= low
        children.append(
            {"name": team, "namespaces": [team], "min": {GPU: low}, "max": {GPU: total}}
        )
    spec = {
        "root": {"name": "root", "min": {GPU: total}, "max": {GPU: total}, "children": children}
    }
    check = check_tree(spec)
    assert check.tree is not None, check.errors
    return World(check.tree, members, draw(st.booleans()))


submits = st.tuples(
    st.just("submit"),
    st.sampled_from(TEAMS),
    st.integers(1, 2),
    st.sampled_from([8, 4, 2, 1]),
    st.integers(0, 2),
)
events = st.one_of(
    submits,
    submits,
    st.tuples(st.just("pass")),
    st.tuples(st.just("pass")),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("reclaim")),
    st.tuples(st.just("reclaim")),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    worlds(),
    st.sampled_from(TEAMS),
    st.sampled_from([8, 4, 2]),
    st.lists(events, min_size=10, max_size=50),
)
def test_reclaim_keeps_every_promise(
    world: World, borrower: str, size: int, steps: list[tuple[Any, ...]]
) -> None:
    # One team borrows the whole fleet first (as often as not), then anything happens.
    total = sum(m.total_free(GPU) for m in world.members.values())
    for _ in range(total // size):
        world.submit(borrower, 1, size, 0)
        world.run_pass()
    for step in steps:
        if step[0] == "submit":
            world.submit(*step[1:])
        elif step[0] == "pass":
            world.run_pass()
        elif step[0] == "finish":
            world.finish(step[1])
        else:
            before = {k: world.specs[k].priority for k in world.running}
            plan = world.reclaim()
            event(f"evictions: {min(len(plan.evict), 2)}")
            check_reclaim(world, plan, before)
            check_usage(world)
            world.place()
            # no cycle: right after, nothing takes back what this reclaim gave
            again = world.reclaim()
            # (a gang that got in by preempting its own queue may borrow: fair game)
            claimants = {e.by for e in plan.evict if e.kind == "Reclaim"}
            reclaimed = {e.key for e in plan.evict if e.kind == "Reclaim"}
            assert not {e.key for e in again.evict if e.kind == "Reclaim"} & claimants
            assert not {e.by for e in again.evict if e.kind == "Reclaim"} & reclaimed
            check_reclaim(world, again, {})
            world.place()
        check_usage(world)
    # evicted gangs kept their original place: their spec (submission time) never changed
    for key, spec in world.specs.items():
        assert world.admission.phase(key) is not None and spec.submitted > 0


def test_a_borrower_is_evicted_whole_for_a_team_within_its_min() -> None:
    nodes = [NodeInfo(f"n{i}", Resources({GPU: 8, "cpu": 64000, "pods": 110})) for i in range(2)]
    member = ClusterSnapshot.build("m0", nodes)
    spec = {
        "root": {
            "name": "root",
            "min": {GPU: 16},
            "max": {GPU: 16},
            "children": [
                {"name": "a", "namespaces": ["a"], "min": {GPU: 8}, "max": {GPU: 16}},
                {"name": "b", "namespaces": ["b"], "min": {GPU: 8}, "max": {GPU: 16}},
            ],
        }
    }
    tree = check_tree(spec).tree
    assert tree is not None
    world = World(tree, {"m0": member}, False)
    world.submit("a", 1, 8, 0)
    world.run_pass()
    world.submit("a", 1, 8, 0)
    world.run_pass()
    assert len(world.running) == 2  # team a borrows the whole fleet
    world.submit("b", 1, 4, 0)
    world.run_pass()
    assert world.admission.phase("b/u2") == ENQUEUED
    plan = world.reclaim()
    (evict,) = plan.evict
    assert (evict.key, evict.by, evict.kind, evict.cluster) == ("a/u1", "b/u2", "Reclaim", "m0")
    assert "reclaimed by b/u2" in evict.message and "GPU-hours of work lost" in evict.message
    assert [d.key for d in plan.dequeue] == ["b/u2"]
    check_reclaim(world, plan, {})
    world.place()
    assert world.admission.phase("b/u2") == RUNNING
    # a's gang waits at its original place; it runs again when room returns
    assert world.admission.phase("a/u1") == ENQUEUED
    assert not world.reclaim().evict
    world.finish(sorted(world.running).index("b/u2"))
    world.run_pass()
    assert world.admission.phase("a/u1") == RUNNING
