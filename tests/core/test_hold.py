"""The hold (fleet.core.admission.hold): the room a reclaim frees is its claimant's until the
claimant is placed or gives up, and the hold ends on every exit, restarts included.

The world: one member `m` of two 8-GPU nodes; team a (min 8) runs two 8-GPU gangs, borrowing
8; team b (min 8) submits an 8-GPU gang within its min, which reclaims a's younger gang. Team c
(min 0) has a gang of its own queued that would fit the freed room as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.admission import (
    DEQUEUED,
    Admission,
    AdmissionSettings,
    Placed,
    UnitSpec,
)
from fleet.core.admission.hold import (
    HOLD_PREFIX,
    Hold,
    ended,
    hold_for,
    hold_key,
    placement_order,
    restore,
    sync,
)
from fleet.core.assignment import Assignment, Slot
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.packing import pack
from fleet.core.quota import check_tree
from fleet.core.resources import GPU, Resources
from fleet.core.snapshot import ClusterSnapshot
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
            self.view.reserve(hold.key, hold.assignment(), hold.until)
        self.records = {k: h.record() for k, h in held.items()}

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
        fresh.restore_holds(restore(self.records.values(), now).values(), now)
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


def test_the_hold_ends_at_its_bound_when_the_victims_never_leave():
    w, hold = reclaimed_world()
    plan = w.admission.plan(hold.until - 1)
    assert plan.wake_at is not None and plan.wake_at <= hold.until
    assert w.admission.hold_of("b1") is not None
    assert w.admission.plan(hold.until).unhold == [(hold, "Expired")]


def test_a_hold_is_plain_values():
    slots = (Slot("worker", "n1", 2, Resources({GPU: 4})), Slot("worker", None, 1, GPU8))
    hold = hold_for("ns/u", "m", Assignment(slots), ["v1", "v2"], 10.0, 300.0)
    assert Hold.from_record(hold.record()) == hold
    assert hold.assignment() == Assignment(slots)
    assert hold.key == hold_key("ns/u") and hold.until == 310.0
    assert restore([hold.record()], 309.0) == {"ns/u": hold}
    assert restore([hold.record()], 310.0) == {}


def test_ended_names_every_exit():
    hold = hold_for("u", "m", Assignment(()), [], 0.0, 10.0)
    assert ended(hold, 1.0) is None
    assert ended(hold, 1.0, placed=True) == "Placed"
    assert ended(hold, 1.0, gone=True) == "Gone"
    assert ended(hold, 1.0, backed_off=True) == "BackedOff"
    assert ended(hold, 1.0, lost_members=["m"]) == "MemberLost"
    assert ended(hold, 1.0, lost_members=["x"]) is None
    assert ended(hold, 10.0) == "Expired"


def test_the_claimant_tries_its_held_member_first():
    hold = hold_for("u", "m2", Assignment(()), [], 0.0, 10.0)
    assert placement_order(hold, ["m1", "m2", "m3"]) == [["m2"], ["m1", "m2", "m3"]]
    assert placement_order(None, ["m1", "m2"]) == [["m1", "m2"]]
    assert placement_order(hold, ["m1"]) == [["m1"]]  # its member is not offered: all


def test_sync_releases_ended_holds_and_reserves_new_ones():
    old = hold_for("u1", "m", Assignment(()), [], 0.0, 10.0)
    new = hold_for("u2", "m", Assignment(()), [], 0.0, 10.0)
    release, reserve = sync([old.key, "ns/placed-gang"], {"u2": new})
    assert release == [old.key] and reserve == [new]


# Event orders, with restarts (hypothesis) ----------------------------------------------------

EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.floats(min_value=1.0, max_value=200.0)),
        st.tuples(st.sampled_from(["leave", "place", "place-c1", "remove", "lost", "restart"])),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(EVENTS)
def test_the_hold_ends_on_every_exit_whatever_the_order(events: list[tuple[Any, ...]]):
    """Whatever happens and in whatever order, with controller restarts in between: while the
    hold stands, no other gang takes b1's room; the hold stands only while b1 is Dequeued and
    none of its exits happened; each exit ends it; a restart neither loses nor invents one."""
    w, hold = reclaimed_world()
    now = 6.0
    exited = False
    for event in events:
        kind = event[0]
        if kind == "tick":
            now += event[1]
            # the shell's rule: a claimant whose victims' copies are still there does not time out
            gone = not [p for p in w.view.pods() if p.owner_key == "a2"]
            w.admission.awaiting_room(() if gone else ["b1"], now)
            w.admission.plan(now)
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
        if kind in ("remove", "lost") or now >= hold.until:
            exited = True
        if w.admission.phase("b1") != DEQUEUED:
            exited = True  # placed, backed off or gone
        if exited:
            assert current is None, f"hold survives after {event}"
        else:
            assert current == hold, f"hold lost after {event}"
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
