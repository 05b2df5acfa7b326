"""The hold (fleet.core.admission.hold): the room a reclaim frees is its claimant's until the
claimant is placed or gives up, and the hold ends on every exit, restarts included. One clock:
the hold has no deadline of its own; it lasts while the victims' pods leave, however long, and
ends at the latest with the claimant's placement timeout, counted from when they are gone.

The world: one member `m` of two 8-GPU nodes; team a (min 8) runs two 8-GPU gangs, borrowing
8; team b (min 8) submits an 8-GPU gang within its min, which reclaims a's younger gang. Team c
(min 0) has a gang of its own queued that would fit the freed room as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.admission import (
    DEQUEUED,
    TIMEOUT_BACKOFF,
    Admission,
    AdmissionSettings,
    Placed,
    UnitSpec,
)
from fleet.core.admission.hold import (
    HOLD_PREFIX,
    Hold,
    ended,
    held_domains,
    hold_for,
    hold_key,
    placement_order,
    restore,
    sync,
)
from fleet.core.assignment import Assignment, Domain, Slot
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.packing import pack
from fleet.core.quota import check_tree
from fleet.core.resources import GPU, Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.topology import PREFERRED, TopologyRule
from fleet.core.workload import Component, Gang

GPU8 = Resources({GPU: 8, "cpu": 1000})


def gang(key: str) -> Gang:
    return Gang.of(Component("worker", 1, GPU8), name=key)


def member() -> ClusterSnapshot:
    nodes = [NodeInfo(f"n{i}", Resources({GPU: 8, "cpu": 8000, "pods": 110})) for i in (1, 2)]
    return ClusterSnapshot.build("m", nodes)


TREE: dict[str, Any] = {
    "root": {
        "name": "root",
        "min": {GPU: 16},
        "max": {GPU: 24},
        "children": [
            {"name": "a", "namespaces": ["a"], "min": {GPU: 8}, "max": {GPU: 16}},
            {"name": "b", "namespaces": ["b"], "min": {GPU: 8}, "max": {GPU: 16}},
            {"name": "c", "namespaces": ["c"], "min": {GPU: 0}, "max": {GPU: 8}},
        ],
    }
}


@dataclass
class World:
    """The admission, the member as the shell sees it (holds reserved), what runs where."""

    admission: Admission = field(default_factory=lambda: Admission(AdmissionSettings()))
    view: ClusterSnapshot = field(default_factory=member)
    running: dict[str, Placed] = field(default_factory=dict)
    specs: dict[str, UnitSpec] = field(default_factory=dict)
    #: The hold records the shell persists (what a restart reads back).
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        tree = check_tree(TREE).tree
        assert tree is not None
        self.admission.set_tree(tree)

    def submit(self, key: str, team: str, at: float) -> None:
        spec = UnitSpec(key, team, Resources({GPU: 8, "cpu": 1000}), at)
        self.specs[key] = spec
        self.admission.upsert(spec)

    def place(self, key: str, now: float) -> bool:
        """Place `key` as the simulator does: its own hold taken back, its member first."""
        hold = self.admission.hold_of(key)
        taken = self.view.hold_back(hold.key) if hold is not None else None
        found = pack(self.view, gang(key))
        if not isinstance(found, Assignment):
            if taken is not None:
                self.view.put_back(taken)
            return False
        for n, slot in enumerate(found):
            uid = f"{key}-{n}"
            self.view.upsert_pod(PodInfo(uid, "", uid, slot.node, slot.requests, owner_key=key))
        self.running[key] = Placed("m", key, now)
        assert self.admission.placed(key, now)
        self.sync()
        return True

    def leave(self, key: str) -> None:
        """The victim's copy is deleted: its pods leave the member."""
        for pod in [p for p in self.view.pods() if p.owner_key == key]:
            self.view.remove_pod(pod.uid)

    def sync(self) -> None:
        """The shell's rule: its view reserves exactly `room_held()`; records follow."""
        held = self.admission.room_held()
        release, reserve = sync(self.view.reservations(), held)
        for key in release:
            self.view.release(key)
        for hold in reserve:
            self.view.reserve(hold.key, hold.assignment(), math.inf)
        self.records = {k: h.record() for k, h in held.items()}

    def tick(self, now: float) -> None:
        """A pass, as the shell makes it: the claimant waits for room while its victim's pods
        are in the member's view (its binding keeps the eviction until then)."""
        self.admission.awaiting_room([] if self.gone("a2") else ["b1"], now)
        self.admission.plan(now)
        self.sync()

    def gone(self, key: str) -> bool:
        return not [p for p in self.view.pods() if p.owner_key == key]

    def restart(self, now: float) -> None:
        """A new controller: units from their persisted state, holds from their records."""
        old = self.admission
        fresh = Admission(old.settings)
        tree = old.tree
        for key, spec in self.specs.items():
            state = old.state(key)
            if state is not None:
                fresh.upsert(spec, state)
        fresh.set_tree(tree)
        fresh.restore_holds(restore(self.records.values()).values(), now)
        self.admission = fresh
        self.sync()


def reclaimed_world() -> tuple[World, Hold]:
    """a1, a2 run; c1 is dequeued but the member is full; b1 reclaims a2: b1 holds a2's room."""
    w = World()
    w.submit("a1", "a", 0.0)
    w.submit("a2", "a", 1.0)
    w.admission.plan(2.0)
    assert w.place("a1", 2.0) and w.place("a2", 2.5)
    w.submit("c1", "c", 3.0)
    assert [d.key for d in w.admission.plan(4.0).dequeue] == ["c1"]
    assert not w.place("c1", 4.0)
    w.submit("b1", "b", 5.0)
    w.admission.plan(6.0)
    plan = w.admission.reclaim(6.0, dict(w.running), lambda k: gang(k), lambda _k: [w.view])
    assert [(e.key, e.by) for e in plan.evict] == [("a2", "b1")]
    del w.running["a2"]
    assert [h.claimant for h in plan.hold] == ["b1"]
    w.sync()
    hold = w.admission.hold_of("b1")
    assert hold is not None and hold.cluster == "m" and hold.victims == ("a2",)
    return w, hold


def moved_world() -> tuple[World, ClusterSnapshot]:
    """a1 runs in m; a2 ran there too but failed over to m2 (its pods left m), and c1 took its
    node in m; the root is full (24 of 24 GPUs) and b1, within its min, claims."""
    w = World()
    for key, team, at in (("a1", "a", 0.0), ("a2", "a", 1.0), ("c1", "c", 2.0)):
        w.submit(key, team, at)
    w.admission.plan(3.0)
    assert w.place("a1", 3.0) and w.place("a2", 3.0)
    w.leave("a2")
    m2 = ClusterSnapshot.build("m2", [NodeInfo("x1", Resources({GPU: 8, "cpu": 8000}))])
    m2.upsert_pod(PodInfo("a2-0", "", "a2-0", "x1", GPU8, owner_key="a2"))
    w.running["a2"] = Placed("m2", "a2", 5.5)  # restarted there: the least work lost
    assert w.place("c1", 4.0)
    w.submit("b1", "b", 5.0)
    assert not w.admission.plan(6.0).dequeue
    return w, m2


def test_a_victim_that_moved_is_evicted_where_it_runs_only_if_that_frees_the_claimants_room():
    """Issue 36: the proof counts only the pods a runner has in the member it proves on, so a
    gang that moved is no victim for room in the member it left; where it runs now it is one
    only when evicting it there lets the claimant fit there (and the hold is there)."""
    w, m2 = moved_world()
    plan = w.admission.reclaim(6.0, dict(w.running), gang, lambda _k: [w.view])
    assert plan.evict and "a2" not in {e.key for e in plan.evict}
    assert {e.cluster for e in plan.evict} == {"m"} and plan.hold[0].cluster == "m"

    w, m2 = moved_world()  # b1 may go to m2 only: a2's eviction frees its room there
    plan = w.admission.reclaim(6.0, dict(w.running), gang, lambda _k: [m2])
    assert [(e.key, e.cluster) for e in plan.evict] == [("a2", "m2")]
    assert plan.hold[0].cluster == "m2"


def test_the_room_a_reclaim_frees_goes_to_the_claimant_not_to_an_older_gang():
    w, _ = reclaimed_world()
    w.leave("a2")
    # c1 was dequeued first and fits the freed node as well: it is refused the held room.
    assert not w.place("c1", 40.0)
    assert w.place("b1", 40.0)
    assert w.admission.hold_of("b1") is None and not w.admission.room_held()
    assert not [k for k in w.view.reservations() if k.startswith(HOLD_PREFIX)]


def test_without_the_hold_the_older_gang_takes_the_room():
    w = World(Admission(AdmissionSettings(hold=False)))
    w.submit("a1", "a", 0.0)
    w.submit("a2", "a", 1.0)
    w.admission.plan(2.0)
    assert w.place("a1", 2.0) and w.place("a2", 2.5)
    w.submit("c1", "c", 3.0)
    w.admission.plan(4.0)
    w.submit("b1", "b", 5.0)
    w.admission.plan(6.0)
    plan = w.admission.reclaim(6.0, dict(w.running), lambda k: gang(k), lambda _k: [w.view])
    assert plan.evict and not plan.hold
    w.leave("a2")
    assert w.place("c1", 40.0)
    assert not w.place("b1", 40.0)


def test_the_hold_ends_when_its_claimant_is_deleted():
    w, hold = reclaimed_world()
    w.admission.remove("b1")
    assert w.admission.plan(7.0).unhold == [(hold, "Gone")]
    w.sync()
    w.leave("a2")
    assert w.place("c1", 40.0)


def test_the_hold_ends_when_its_member_is_lost():
    w, hold = reclaimed_world()
    assert w.admission.member_lost("m", 7.0).unhold == [(hold, "MemberLost")]
    assert w.admission.member_lost("other", 7.0).unhold == []


#: Longer than the hold's old bound of its own (360 s from the eviction decision): a victim
#: whose pods checkpoint on SIGTERM within a terminationGracePeriodSeconds of an hour.
SLOW = 3600.0


def test_the_hold_outlives_a_victim_whose_pods_take_longer_than_the_old_bound_to_stop():
    w, hold = reclaimed_world()
    timeout = w.admission.settings.placement_timeout
    for now in range(10, int(6 + SLOW), 50):  # passes while a2's pods stop, an hour long
        w.tick(float(now))
        assert w.admission.hold_of("b1") == hold, now
        assert w.admission.phase("b1") == DEQUEUED, now
        assert hold.key in w.view.reservations()
    w.leave("a2")
    assert not w.place("c1", 6 + SLOW)  # the room is free, and b1's: c1 is refused it
    freed = 6 + SLOW + 1
    w.tick(freed)  # the pass that sees the pods gone: the one clock starts
    held = w.admission.hold_of("b1")
    assert held is not None and held.freed == freed and held.same(hold)
    assert held.deadline(timeout) == freed + timeout
    assert w.records["b1"]["freed"] == freed  # on record: a restart keeps the clock
    w.tick(freed + timeout - 1)
    assert w.admission.hold_of("b1") == held and w.admission.phase("b1") == DEQUEUED
    plan = w.admission.plan(freed + timeout)
    assert [b.key for b in plan.backoff] == ["b1"]  # its placement timed out: both end
    assert plan.unhold == [(held, "BackedOff")]
    w.sync()
    assert hold.key not in w.view.reservations()


def test_the_claimant_placed_in_the_held_room_however_late_its_victim_left():
    w, _ = reclaimed_world()
    w.tick(6 + SLOW)
    w.leave("a2")
    w.tick(6 + SLOW + 1)
    assert not w.place("c1", 6 + SLOW + 2)
    assert w.place("b1", 6 + SLOW + 2)
    assert w.admission.hold_of("b1") is None


def test_a_restart_while_the_victims_leave_keeps_the_hold_and_its_clock_stopped():
    w, hold = reclaimed_world()
    timeout = w.admission.settings.placement_timeout
    w.tick(100.0)
    w.restart(1000.0)  # long past the old bound, a2's pods still stopping
    assert w.admission.hold_of("b1") == hold and hold.key in w.view.reservations()
    w.tick(2000.0)
    assert w.admission.hold_of("b1") == hold and w.admission.phase("b1") == DEQUEUED
    w.leave("a2")
    w.tick(2001.0)
    w.restart(2100.0)  # the room was freed before this one: its moment is on record
    held = w.admission.hold_of("b1")
    assert held is not None and held.freed == 2001.0
    w.tick(2001.0 + timeout - 1)
    assert w.admission.hold_of("b1") == held
    w.tick(2001.0 + timeout)
    assert w.admission.phase("b1") == TIMEOUT_BACKOFF and w.admission.hold_of("b1") is None


def test_a_restart_that_finds_the_victims_gone_gives_the_claimant_its_whole_timeout():
    """The record says they were still leaving (the controller died before it saw them go):
    the restarted queue's first pass is the moment it knows the room is free."""
    w, _ = reclaimed_world()
    timeout = w.admission.settings.placement_timeout
    w.tick(500.0)
    w.leave("a2")
    w.restart(900.0)
    w.tick(901.0)
    held = w.admission.hold_of("b1")
    assert held is not None and held.freed == 901.0
    w.tick(901.0 + timeout - 1)
    assert w.admission.phase("b1") == DEQUEUED and w.admission.hold_of("b1") == held


def test_a_claimant_named_again_as_waiting_stops_its_clock():
    """A victim's record the shell sees late (a restart's first pass before its caches have
    every binding): the room is not free after all, and the timeout waits again."""
    w, hold = reclaimed_world()
    timeout = w.admission.settings.placement_timeout
    w.admission.awaiting_room([], 10.0)
    assert w.admission.hold_of("b1") == Hold(**{**_fields(hold), "freed": 10.0})
    w.admission.awaiting_room(["b1"], 20.0)
    assert w.admission.hold_of("b1") == hold
    w.admission.plan(10.0 + timeout + 100)
    assert w.admission.phase("b1") == DEQUEUED and w.admission.hold_of("b1") == hold


def _fields(hold: Hold) -> dict[str, Any]:
    return {name: getattr(hold, name) for name in Hold.__dataclass_fields__}


def test_a_hold_is_plain_values():
    slots = (Slot("worker", "n1", 2, Resources({GPU: 4})), Slot("worker", None, 1, GPU8))
    hold = hold_for("ns/u", "m", Assignment(slots), ["v1", "v2"], 10.0)
    assert hold.freed is None and hold.deadline(300.0) is None
    assert Hold.from_record(hold.record()) == hold
    assert hold.assignment() == Assignment(slots)
    assert hold.key == hold_key("ns/u")
    freed = Hold(**{**_fields(hold), "freed": 50.0})
    assert Hold.from_record(freed.record()) == freed and freed.deadline(300.0) == 350.0
    assert freed.same(hold) and hold.same(freed) and freed != hold
    assert restore([hold.record()]) == {"ns/u": hold}
    # A record an older controller wrote (a bound of its own, no `freed`): victims leaving.
    old = {k: v for k, v in hold.record().items() if k != "freed"} | {"until": 370.0}
    assert Hold.from_record(old) == hold


def test_ended_names_every_exit():
    hold = hold_for("u", "m", Assignment(()), [], 0.0)
    assert ended(hold) is None
    assert ended(hold, placed=True) == "Placed"
    assert ended(hold, gone=True) == "Gone"
    assert ended(hold, backed_off=True) == "BackedOff"
    assert ended(hold, lost_members=["m"]) == "MemberLost"
    assert ended(hold, lost_members=["x"]) is None


def test_the_claimant_tries_its_held_member_first():
    hold = hold_for("u", "m2", Assignment(()), [], 0.0)
    assert placement_order(hold, ["m1", "m2", "m3"]) == [["m2"], ["m1", "m2", "m3"]]
    assert placement_order(None, ["m1", "m2"]) == [["m1", "m2"]]
    assert placement_order(hold, ["m1"]) == [["m1"]]  # its member is not offered: all


def test_sync_releases_ended_holds_and_reserves_new_ones():
    old = hold_for("u1", "m", Assignment(()), [], 0.0)
    new = hold_for("u2", "m", Assignment(()), [], 0.0)
    release, reserve = sync([old.key, "ns/placed-gang"], {"u2": new})
    assert release == [old.key] and reserve == [new]


# Event orders, with restarts (hypothesis) ----------------------------------------------------

EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.floats(min_value=1.0, max_value=400.0)),
        st.tuples(st.sampled_from(["leave", "place", "place-c1", "remove", "lost", "restart"])),
    ),
    max_size=14,
)


@settings(max_examples=200, deadline=None)
@given(EVENTS)
def test_the_hold_ends_on_every_exit_whatever_the_order(events: list[tuple[Any, ...]]):
    """Whatever happens and in whatever order, with controller restarts in between: while the
    hold stands, no other gang takes b1's room; the hold stands exactly while b1 waits for it
    (Dequeued, neither deleted nor its member lost), however long a2's pods take to stop; each
    exit ends it, the last one its placement timeout counted from the pass that saw a2's pods
    gone, never earlier; a restart neither loses nor invents one, nor moves its clock."""
    w, hold = reclaimed_world()
    timeout = w.admission.settings.placement_timeout
    now = 6.0
    exited = False
    freed: float | None = None  # the pass that saw a2's pods gone
    for event in events:
        kind = event[0]
        if kind == "tick":
            now += event[1]
            if freed is None and w.gone("a2"):
                freed = now
            w.tick(now)
        elif kind == "leave":
            w.leave("a2")
        elif kind == "place" and w.admission.phase("b1") == DEQUEUED:
            w.place("b1", now)
        elif kind == "place-c1" and w.admission.phase("c1") == DEQUEUED:
            took = w.place("c1", now)
            if took and w.admission.hold_of("b1") is not None:
                # c1 found room that is not b1's: b1 must still fit once a2 is gone
                w.leave("a2")
                taken = w.view.hold_back(hold.key)
                assert isinstance(pack(w.view, gang("b1")), Assignment)
                if taken is not None:
                    w.view.put_back(taken)
        elif kind == "remove" and "b1" in w.specs:
            w.admission.remove("b1")
            del w.specs["b1"]
        elif kind == "lost":
            w.admission.member_lost("m", now)
        elif kind == "restart":
            w.restart(now)
        w.sync()
        current = w.admission.hold_of("b1")
        phase = w.admission.phase("b1")
        if phase == TIMEOUT_BACKOFF and not exited:
            # backed off: only by its timeout, counted from the room freed
            assert freed is not None and now >= freed + timeout, f"backed off early: {event}"
        if kind in ("remove", "lost") or phase != DEQUEUED:
            exited = True  # deleted, member lost; placed, backed off
        if exited:
            assert current is None, f"hold survives after {event}"
        else:
            assert current is not None and current.same(hold), f"hold lost after {event}"
            assert current.freed == freed, f"hold's clock is not the pass's: {event}"
            if freed is not None:
                assert now < freed + timeout
        held = [k for k in w.view.reservations() if k.startswith(HOLD_PREFIX)]
        assert held == ([hold.key] if current is not None else [])


def test_a_claimant_has_its_whole_placement_timeout_from_the_moment_its_victims_are_gone():
    """The member stops a deleted copy's pods a moment after the copy is gone: a claimant timed
    out in that moment would give its held room away and evict a second victim."""
    w, _ = reclaimed_world()
    timeout = w.admission.settings.placement_timeout
    w.admission.awaiting_room(["b1"], 6.0)
    w.admission.plan(6.0 + timeout + 1)  # its victims still leaving: it keeps waiting
    assert w.admission.phase("b1") == DEQUEUED
    gone = 6.0 + timeout + 2
    w.admission.awaiting_room([], gone)
    w.admission.plan(gone + timeout - 1)
    assert w.admission.phase("b1") == DEQUEUED
    plan = w.admission.plan(gone + timeout + 1)
    assert [b.key for b in plan.backoff] == ["b1"]


RACK = "topology.kubernetes.io/rack"
RACKS = {"n1": {RACK: "r1"}, "n2": {RACK: "r1"}, "n3": {RACK: "r2"}}


def held_on(*slots: tuple[str, str | None]) -> Hold:
    """A hold whose room is one pod of each (component, node)."""
    return hold_for(
        "b", "m", Assignment(tuple(Slot(c, n, 1, GPU8) for c, n in slots)), ["a"], now=0.0
    )


def racks(node: str) -> dict[str, str]:
    return RACKS.get(node, {})


def test_a_rack_bound_claimants_hold_is_pinned_to_the_rack_its_room_is_in():
    hold = held_on(("master", "n1"), ("worker", "n2"))
    assert held_domains(hold, [TopologyRule(RACK)], racks) == (Domain(RACK, "r1"),)
    # A rule on one component: that component's nodes alone, its components kept.
    hold = held_on(("master", "n3"), ("worker", "n1"))
    rule = TopologyRule(RACK, components=("worker",))
    assert held_domains(hold, [rule], racks) == (Domain(RACK, "r1", ("worker",)),)


def test_a_hold_gives_no_domain_to_pin_when_its_room_is_in_none():
    across = held_on(("master", "n1"), ("worker", "n3"))  # two racks: none to pin
    assert held_domains(across, [TopologyRule(RACK)], racks) == ()
    unlabelled = held_on(("master", "n1"), ("worker", "n9"))
    assert held_domains(unlabelled, [TopologyRule(RACK)], racks) == ()
    counted = held_on(("master", None))  # the sum estimator's proof: no nodes
    assert held_domains(counted, [TopologyRule(RACK)], racks) == ()
    same = held_on(("master", "n1"), ("worker", "n2"))
    assert held_domains(same, [TopologyRule(RACK, PREFERRED)], racks) == ()
    assert held_domains(same, [], racks) == ()
