"""The hold: the room an eviction frees is the claimant's until it is placed or gives up.

Without it, the room a reclaim frees goes to whichever gang placement tries first once the
victims' copies are gone, and the claimant, still waiting, claims again: on the Philly replay
node-level claims thrashed that way (docs/queue.md, "Simulated: reclaim"). The anchors: the
Kubernetes scheduler nominates a node for a preemptor (`nominatedNodeName`) and keeps it for it;
Kueue keeps a preempting workload's quota until its victims are gone.

A `Hold` is made at the eviction decision (`hold_for`): the member, and per node what the
claimant's proven assignment takes there. Until it ends:

* **fleet's placement does not give it to another gang**: the shell keeps it in its view of the
  member as an in-flight reservation under `hold_key(claimant)` (`ClusterSnapshot.reserve`, so
  every other placement sees that room taken, exactly as two placements a moment apart never
  count the same GPUs twice);
* **the claimant is placed to that member first**: its own placement takes the hold out of the
  view (`ClusterSnapshot.hold_back`), tries `hold.cluster` alone, then every member
  (`placement_order`); placed anywhere, the hold ends;
* on a member that takes Koordinator Reservations the shell reserves the same assignment there
  for the claimant, so member-local pods do not take it either.

**One clock.** A hold has no deadline of its own: it lasts exactly as long as its claimant
legitimately waits for the room. It ends (`ended`, and the `Admission` events that call it) on
every exit: the claimant is placed, deleted or ends, backs off, or its member is lost. The
claimant's placement timeout does not run while its victims leave (until their pods are gone
from the member's view, `Admission.awaiting_room`), and from that moment (`Hold.freed`) it has
its whole `placement_timeout` again: so the hold ends, at the latest, when that timeout backs the
claimant off, `placement_timeout` after the room was freed. A victim whose pods never leave keeps
its claimant waiting, and the hold with it (docs/queue.md, "The hold"). A hold is plain values
(`record` / `from_record`, `freed` included): the shell persists it beside the victims' eviction
records, and a restart rebuilds the same holds and the same clock (`restore`,
`Admission.restore_holds`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeVar

from fleet.core.assignment import Assignment, Domain, Slot
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.topology import TopologyRule

T = TypeVar("T")

#: Owner key of a hold's reservation in the fleet's view of a member (never a pod's owner).
HOLD_PREFIX: Final = "hold/"

#: Why a hold ended (there is no other way: a hold has no clock of its own).
HoldEnd = Literal["Placed", "Gone", "BackedOff", "MemberLost"]


@dataclass(frozen=True, slots=True)
class Hold:
    """Room held in `cluster` for `claimant` since `since` (see the module docstring)."""

    claimant: str
    cluster: str
    slots: tuple[tuple[str, str | None, int, Resources], ...]
    """The claimant's proven assignment: (component, node, pods, requests per pod)."""
    victims: tuple[str, ...]
    """The units evicted for it (what the shell's records name)."""
    since: float
    """When the eviction was decided."""
    freed: float | None = None
    """When its victims' pods were gone from the member's view, the moment its claimant's
    placement timeout starts again (None: they are still leaving, and the timeout waits)."""

    @property
    def key(self) -> str:
        return hold_key(self.claimant)

    def assignment(self) -> Assignment:
        """What to reserve in the view of `cluster` (and as Koordinator Reservations)."""
        return Assignment(tuple(Slot(*slot) for slot in self.slots))

    def record(self) -> dict[str, Any]:
        """Plain values for the shell to persist (JSON-safe)."""
        return {
            "claimant": self.claimant,
            "cluster": self.cluster,
            "slots": [
                {"component": component, "node": node, "pods": pods, "requests": dict(requests)}
                for component, node, pods, requests in self.slots
            ],
            "victims": list(self.victims),
            "since": self.since,
            "freed": self.freed,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Hold:
        """The hold `record()` wrote (a restart). A record an older controller wrote (with an
        `until` of its own and no `freed`) reads as victims still leaving: the next pass of the
        queue says whether they are (`Admission.awaiting_room`)."""
        freed = record.get("freed")
        return cls(
            str(record["claimant"]),
            str(record["cluster"]),
            tuple(
                (
                    str(n["component"]),
                    None if n.get("node") is None else str(n["node"]),
                    int(n["pods"]),
                    Resources({str(k): int(v) for k, v in n["requests"].items()}),
                )
                for n in record["slots"]
            ),
            tuple(str(v) for v in record["victims"]),
            float(record["since"]),
            None if freed is None else float(freed),
        )

    def same(self, other: Hold) -> bool:
        """The same hold, its clock aside (`freed` set since): a record to update, not a hold
        that ended and a new one."""
        return replace(other, freed=self.freed) == self

    def deadline(self, placement_timeout: float) -> float | None:
        """When the hold ends at the latest, with the claimant's placement timeout: that long
        after the room was freed (None: its victims are still leaving, no end in sight)."""
        return None if self.freed is None else self.freed + placement_timeout


def hold_key(claimant: str) -> str:
    """The reservation key a hold for `claimant` takes in a member's view."""
    return f"{HOLD_PREFIX}{claimant}"


def hold_for(
    claimant: str,
    cluster: str,
    assignment: Assignment,
    victims: Iterable[str],
    now: float,
) -> Hold:
    """The hold made at an eviction decision: the claimant's proof of fit, its victims still
    leaving."""
    return Hold(
        claimant,
        cluster,
        tuple((slot.component, slot.node, slot.pods, slot.requests) for slot in assignment),
        tuple(victims),
        now,
    )


def placement_order(hold: Hold | None, clusters: Sequence[str]) -> list[list[str]]:
    """The member sets a claimant's placement tries, in order: its held member alone, then all
    (no hold: all at once)."""
    if hold is None or hold.cluster not in clusters:
        return [list(clusters)]
    return [[hold.cluster], list(clusters)]


def place_claimant(
    hold: Hold | None,
    views: Mapping[str, ClusterSnapshot],
    decide: Callable[[list[str]], T],
    chosen: Callable[[T], str | None],
) -> T:
    """One placement of a gang, its hold honored (the controller's and the simulator's): the
    hold's room is taken out of its member's view for the claimant alone (`hold_back`), the
    member sets of `placement_order` are tried in turn (`decide` over member names; `chosen`:
    the member a result picked, or None). Placed, the hold's reservation stays out of the view
    (the caller reserves the claimant's own placement, and the queue ends the hold); not
    placed, it is put back. No hold: one `decide` over every member."""
    taken = None
    if hold is not None and hold.cluster in views:
        taken = views[hold.cluster].hold_back(hold.key)
    result: T | None = None
    for names in placement_order(hold, list(views)):
        result = decide(names)
        if chosen(result) is not None:
            return result
    if hold is not None and taken is not None:
        views[hold.cluster].put_back(taken)
    assert result is not None  # placement_order gives at least one set
    return result


def held_domains(
    hold: Hold, rules: Iterable[TopologyRule], labels: Callable[[str], Mapping[str, str]]
) -> tuple[Domain, ...]:
    """The domains the hold's room is in, for the claimant's required topology `rules` (the
    gang's, the policy's default included): per rule, the one value of its level that every
    node its components hold room on has (`labels`: a node's labels). What the Reservations
    made for the hold are pinned to, as the placement's are to the domains it chose, so the
    member does not reserve the room outside the domain the gang must run in. A rule whose room
    lies on no node (the `sum` estimator's proof), on nodes without the label, or across more
    than one domain gives no domain: nothing is pinned for it."""
    out: list[Domain] = []
    for rule in rules:
        if not rule.required:
            continue
        nodes = {
            node
            for component, node, _pods, _requests in hold.slots
            if not rule.components or component in rule.components
        }
        if not nodes or None in nodes:
            continue
        values = {labels(str(node)).get(rule.level) for node in nodes}
        if len(values) == 1 and (value := values.pop()) is not None:
            out.append(Domain(rule.level, value, rule.components, True))
    return tuple(out)


def ended(
    hold: Hold,
    *,
    placed: bool = False,
    gone: bool = False,
    backed_off: bool = False,
    lost_members: Iterable[str] = (),
) -> HoldEnd | None:
    """Whether (and why) the hold ends now; None: it holds on. No clock: `backed_off` is the
    claimant's placement timeout, the hold's only deadline."""
    if placed:
        return "Placed"
    if gone:
        return "Gone"
    if backed_off:
        return "BackedOff"
    if hold.cluster in set(lost_members):
        return "MemberLost"
    return None


def sync(present: Iterable[str], holds: Mapping[str, Hold]) -> tuple[list[str], list[Hold]]:
    """What a shell's views must change so they hold exactly `holds` (`Admission.room_held()`):
    the reservation keys to release (holds that ended) and the holds to reserve (new ones).
    `present`: the hold keys the views reserve now (`HOLD_PREFIX` reservations)."""
    wanted = {hold.key: hold for hold in holds.values()}
    have = {key for key in present if key.startswith(HOLD_PREFIX)}
    release = sorted(have - wanted.keys())
    reserve = [hold for key, hold in sorted(wanted.items()) if key not in have]
    return release, reserve


def restore(records: Iterable[Mapping[str, Any]]) -> dict[str, Hold]:
    """The holds the records keep after a restart, by claimant (`Admission.restore_holds`
    takes back those whose claimant still waits)."""
    out: dict[str, Hold] = {}
    for record in records:
        hold = Hold.from_record(record)
        out[hold.claimant] = hold
    return out


__all__ = [
    "HOLD_PREFIX",
    "Hold",
    "HoldEnd",
    "ended",
    "held_domains",
    "hold_for",
    "hold_key",
    "place_claimant",
    "placement_order",
    "restore",
    "sync",
]
