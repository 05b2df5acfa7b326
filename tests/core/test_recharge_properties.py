"""Late placements never take a quota node above its max; moved victims only by their own
charge (hypothesis).

The controller's reconciles and the queue's pass run concurrently, so two events reach the
admission out of turn (module `fleet.core.admission.recharge`, docs/queue.md "Late and moved
gangs"):

* a placement decided while the unit was Dequeued lands after the pass timed it out (it backs
  off, may be back in its queue, and its quota may be someone else's by then);
* a reclaim's victim had already moved: at the eviction's record it runs in another member,
  where evicting it would free nothing its claimant needs; the core charges it there, above a
  max if it must, as after a shrunk max.

Teams (leaves of a tree whose maxes are below the fleet's size, one with a max-jobs) submit
gangs; passes dequeue; placements are decided at once or left in flight and land later, after
the clock moved past the placement timeout; reclaims evict; gangs finish. After every step no
quota node holds more than its max but for the moved victims it keeps, each holds exactly what
its holders ask, and a gang runs only while its unit is Running and charged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fleet.core.admission import (
    DEQUEUED,
    HOLDING,
    RUNNING,
    Admission,
    AdmissionSettings,
    Placed,
    UnitSpec,
    charge_decision,
)
from fleet.core.assignment import Assignment
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.packing import pack
from fleet.core.quota import MAX_JOBS, QuotaTree, check_tree
from fleet.core.resources import GPU, Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Component, Gang

TEAMS = ("a", "b", "c")
TIMEOUT = 10.0


@dataclass
class World:
    tree: QuotaTree
    members: dict[str, ClusterSnapshot]
    admission: Admission = field(init=False)
    gangs: dict[str, Gang] = field(default_factory=dict)
    specs: dict[str, UnitSpec] = field(default_factory=dict)
    #: Where each gang runs (its pods bound there).
    running: dict[str, Placed] = field(default_factory=dict)
    #: Placements decided (pods reserved in the member) that have not landed yet.
    in_flight: dict[str, str] = field(default_factory=dict)
    clock: float = 0.0
    submitted: int = 0
    late: int = 0
    refused: int = 0
    #: Moved victims charged where they run (maybe above a max), while they run.
    kept: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.admission = Admission(
            AdmissionSettings(placement_timeout=TIMEOUT, backoff_seconds=1.0, backoff_limit=4.0)
        )
        self.admission.set_tree(self.tree)

    def submit(self, team: str, pods: int, gpus: int, priority: int) -> None:
        key = f"{team}/u{self.submitted}"
        self.submitted += 1
        self.clock += 1
        self.specs[key] = UnitSpec(key, team, Resources({GPU: pods * gpus}), self.clock, priority)
        self.gangs[key] = Gang.of(Component("worker", pods, Resources({GPU: gpus})), name=key)
        self.admission.upsert(self.specs[key])

    def run_pass(self, advance: float, leave_in_flight: int) -> None:
        """A pass at the clock advanced by `advance`; dequeued gangs are placed at once, but
        the first `leave_in_flight` of them only have their placement decided (in flight)."""
        self.clock += advance
        self.admission.plan(self.clock)
        for key in sorted(self.specs):
            if self.admission.phase(key) != DEQUEUED or key in self.in_flight:
                continue
            cluster = self.bind_anywhere(key)
            if cluster is None:
                continue
            if leave_in_flight > 0:
                leave_in_flight -= 1
                self.in_flight[key] = cluster
            else:
                self.land(key, cluster)

    def land_one(self, index: int, advance: float) -> None:
        """A placement decided earlier lands now (the controller's `placed`), maybe after a pass
        timed its unit out."""
        if not self.in_flight:
            return
        self.clock += advance
        self.admission.plan(self.clock)  # the pass ran first: it may have timed the unit out
        key = sorted(self.in_flight)[index % len(self.in_flight)]
        self.land(key, self.in_flight.pop(key))

    def land(self, key: str, cluster: str) -> None:
        if self.admission.phase(key) != DEQUEUED:
            self.late += 1
        charge = self.admission.charge_running(key, self.clock)
        if charge.granted:
            self.running[key] = Placed(cluster, key, self.clock)
        else:  # withdrawn before anything was sent: its reservation goes
            self.refused += 1
            self.unbind(key, cluster)

    def reclaim(self, moves: list[bool]) -> None:
        """A reclaim; each victim may have moved to another member before its eviction is
        recorded: then the core decides whether it is charged there, or evicted there too."""
        self.clock += 1
        members = list(self.members.values())
        plan = self.admission.reclaim(
            self.clock, dict(self.running), self.gangs.get, lambda _key: members
        )
        event(f"evictions: {min(len(plan.evict), 2)}")
        for n, evict in enumerate(plan.evict):
            placed = self.running.pop(evict.key)
            self.kept.discard(evict.key)
            self.unbind(evict.key, placed.cluster)
            if not (moves[n % len(moves)] if moves else False):
                continue
            # It had failed over and was placed elsewhere just before the reclaim decided.
            cluster = self.bind_anywhere(evict.key, besides=placed.cluster)
            if cluster is None:
                continue
            self.late += 1
            charge = self.admission.charge_running(evict.key, self.clock, moved=True)
            assert charge.granted  # never evicted where evicting it frees nothing
            self.running[evict.key] = Placed(cluster, evict.key, self.clock)
            self.kept.add(evict.key)

    def finish(self, index: int) -> None:
        if not self.running:
            return
        key = sorted(self.running)[index % len(self.running)]
        self.kept.discard(key)
        self.unbind(key, self.running.pop(key).cluster)
        self.clock += 1
        self.admission.finished(key, True, self.clock)

    def bind_anywhere(self, key: str, besides: str | None = None) -> str | None:
        for name, member in sorted(self.members.items()):
            if name == besides:
                continue
            found = pack(member, self.gangs[key])
            if isinstance(found, Assignment):
                n = 0
                for slot in found:
                    for _ in range(slot.pods):
                        uid = f"{key}-{n}"
                        n += 1
                        member.upsert_pod(
                            PodInfo(uid, "", uid, slot.node, slot.requests, owner_key=key)
                        )
                return name
        return None

    def unbind(self, key: str, cluster: str) -> None:
        member = self.members[cluster]
        for pod in [p for p in member.pods() if p.owner_key == key]:
            member.remove_pod(pod.uid)


def check(world: World) -> None:
    admission, tree = world.admission, world.tree
    expected: dict[str, dict[str, int]] = {path: {} for path in tree.nodes}
    # What moved victims kept where they run hold, per path: a node may be above its max by it.
    kept: dict[str, dict[str, int]] = {path: {} for path in tree.nodes}
    for key, spec in world.specs.items():
        phase = admission.phase(key)
        assert (key in world.running) == (phase == RUNNING), (key, phase)
        if phase in HOLDING:
            quota = admission.quota_of(key)
            assert quota is not None and admission.holds(key)
            for path in tree.nodes[quota].lineage:
                for used in (
                    (expected[path], kept[path]) if key in world.kept else (expected[path],)
                ):
                    for resource, amount in spec.resources.items():
                        used[resource] = used.get(resource, 0) + amount
                    used[MAX_JOBS] = used.get(MAX_JOBS, 0) + 1
    for path, node in tree.nodes.items():
        used = dict(admission.usage(path).used)
        assert used == {k: v for k, v in expected[path].items() if v}, path
        for resource, cap in node.max.items():
            beyond = used.get(resource, 0) - kept[path].get(resource, 0)
            assert beyond <= cap, f"{path} holds {used} above its max {node.max}"


@st.composite
def worlds(draw: st.DrawFn) -> World:
    members: dict[str, ClusterSnapshot] = {}
    total = 0
    for m in range(draw(st.integers(1, 3))):
        nodes = [
            NodeInfo(f"m{m}-n{i}", Resources({GPU: 8, "cpu": 64000, "pods": 110}))
            for i in range(draw(st.integers(1, 2)))
        ]
        total += 8 * len(nodes)
        members[f"m{m}"] = ClusterSnapshot.build(f"m{m}", nodes)
    children: list[dict[str, Any]] = []
    spare = total
    for team in TEAMS:
        low = min(spare, draw(st.integers(0, total // 2)))
        spare -= low
        high = draw(st.integers(max(low, 1), total))
        node: dict[str, Any] = {"name": team, "namespaces": [team], "min": {GPU: low}}
        node["max"] = {GPU: high}
        if draw(st.booleans()):
            node["max"][MAX_JOBS] = draw(st.integers(1, 3))
        children.append(node)
    # The root's max is below the fleet: members have room the quota does not allow.
    root_max = draw(st.integers(max(total - spare, 1), total))
    spec = {
        "root": {
            "name": "root",
            "min": {GPU: total - spare},
            "max": {GPU: root_max},
            "children": children,
        }
    }
    checked = check_tree(spec)
    assert checked.tree is not None, checked.errors
    return World(checked.tree, members)


submit = st.tuples(
    st.just("submit"),
    st.sampled_from(TEAMS),
    st.integers(1, 2),
    st.sampled_from([8, 4, 2, 1]),
    st.integers(0, 2),
)
in_flight = st.tuples(st.just("pass"), st.sampled_from([0.0, 1.0, TIMEOUT + 1]), st.integers(0, 2))
land = st.tuples(st.just("land"), st.integers(0, 9), st.sampled_from([0.0, TIMEOUT + 1, 30.0]))
steps = st.one_of(
    submit,
    submit,
    submit,
    in_flight,
    in_flight,
    land,
    land,
    st.tuples(st.just("reclaim"), st.lists(st.booleans(), min_size=1, max_size=3)),
    st.tuples(st.just("finish"), st.integers(0, 9)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.lists(steps, min_size=10, max_size=60))
def test_no_quota_node_is_ever_above_its_max(world: World, plan: list[tuple[Any, ...]]) -> None:
    for step in plan:
        if step[0] == "submit":
            world.submit(*step[1:])
        elif step[0] == "pass":
            world.run_pass(step[1], step[2])
        elif step[0] == "land":
            world.land_one(step[1], step[2])
        elif step[0] == "reclaim":
            world.reclaim(step[1])
        else:
            world.finish(step[1])
        check(world)
    event(f"late or moved: {min(world.late, 2)}, refused: {min(world.refused, 1)}")


def tree_of(leaf_max: int) -> QuotaTree:
    spec = {
        "root": {
            "name": "root",
            "min": {GPU: 16},
            "max": {GPU: 16},
            "children": [
                {"name": "a", "namespaces": ["a"], "min": {GPU: 0}, "max": {GPU: leaf_max}}
            ],
        }
    }
    tree = check_tree(spec).tree
    assert tree is not None
    return tree


def test_a_late_placement_is_charged_when_its_quota_has_room_and_refused_when_not() -> None:
    admission = Admission(AdmissionSettings(placement_timeout=TIMEOUT))
    admission.set_tree(tree_of(8))
    late = UnitSpec("a/late", "a", Resources({GPU: 8}), 1.0)
    other = UnitSpec("a/other", "a", Resources({GPU: 8}), 2.0)
    admission.upsert(late)
    admission.plan(3.0)
    assert admission.phase("a/late") == DEQUEUED
    admission.plan(3.0 + TIMEOUT + 1)  # times out: quota released
    assert admission.phase("a/late") == "TimeoutBackoff"

    charge = admission.charge_running("a/late", 20.0)  # lands now: room is free
    assert charge.granted and admission.phase("a/late") == RUNNING and admission.holds("a/late")
    assert admission.usage("root/a").used[GPU] == 8

    admission.finished("a/late", True, 21.0)
    again = UnitSpec("a/again", "a", Resources({GPU: 8}), 22.0)
    admission.upsert(again)
    admission.plan(23.0)
    admission.plan(23.0 + TIMEOUT + 1)  # times out
    admission.upsert(other)
    admission.plan(23.0 + TIMEOUT + 1)  # `other` takes the quota
    assert admission.phase("a/other") == DEQUEUED

    refused = admission.charge_running("a/again", 40.0)
    assert not refused.granted
    assert (refused.node, refused.resource) == ("root/a", GPU)
    assert "quota root/a holds 8 GPUs of max 8 GPUs" in refused.message
    assert admission.phase("a/again") == "TimeoutBackoff" and not admission.holds("a/again")
    assert admission.usage("root/a").used[GPU] == 8


def test_the_charge_decision_respects_min_for_a_unit_that_never_borrows_and_no_quota() -> None:
    tree = tree_of(16)
    used = {"root": {GPU: 0}, "root/a": {GPU: 0}}
    demand = {GPU: 4, MAX_JOBS: 1}
    kw: dict[str, Any] = {"within_min": False, "borrows": False, "bypass": False}
    assert not charge_decision("k", tree, used, "root/a", demand, **kw).granted
    kw["borrows"] = True
    assert charge_decision("k", tree, used, "root/a", demand, **kw).granted
    assert not charge_decision("k", tree, used, None, demand, **kw).granted
    kw["bypass"] = True
    assert charge_decision("k", tree, used, None, demand, **kw).granted


def test_a_moved_victim_is_charged_where_it_runs_even_above_the_max() -> None:
    tree = tree_of(8)
    used = {"root": {GPU: 8, MAX_JOBS: 1}, "root/a": {GPU: 8, MAX_JOBS: 1}}
    demand = {GPU: 4, MAX_JOBS: 1}
    kw: dict[str, Any] = {"within_min": False, "borrows": True, "bypass": False}
    assert not charge_decision("k", tree, used, "root/a", demand, **kw).granted
    kept = charge_decision("k", tree, used, "root/a", demand, above_max=True, **kw)
    assert kept.granted and (kept.node, kept.resource) == ("root/a", GPU)
    assert "frees nothing its claimant needs, so it is charged all the same" in kept.message
    homeless = charge_decision("k", tree, used, None, demand, above_max=True, **kw)
    assert homeless.granted and homeless.message.endswith("so it runs uncharged")
