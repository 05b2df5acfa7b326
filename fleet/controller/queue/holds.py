"""The claimant's hold in the shell: the room a reclaim frees stays the claimant's.

The core decides (`fleet.core.admission.hold`, `Admission.room_held()`); this part makes the
controller's state follow it after every pass, from the admission's holds as they are now (so a
failed write is simply made again by the next pass, and nothing depends on seeing each change):

* **the members' views**: each hold is reserved in its member's snapshot under
  `hold_key(claimant)` (`hold.sync` says what to reserve and release, as in the simulator), so
  every placement but the claimant's sees that room taken; a member whose snapshot was rebuilt
  (reconnect) gets its holds again. The reservation has no deadline of its own (a hold has
  none: it ends with its claimant's placement timeout, counted from when its victims' pods are
  gone): it goes when the admission ends the hold. The claimant's own placement takes the room
  out (`hold.place_claimant`, in `placing`);
* **the record**: `Hold.record()` as JSON in the claimant's QueueUnit annotation
  `fleet.dev/hold`, beside the victims' eviction records on their bindings, written again when
  the room is freed (`Hold.freed`, the moment the claimant's timeout starts again); a restart
  reads the annotations back (`hold.restore`, `Admission.restore_holds`), and a hold that ended
  has its annotation removed;
* **the Events** on the claimant's job and unit: `RoomHeld` (the member and the victims) when
  the record is written, `HoldReleased` (why: Placed, Gone, BackedOff, MemberLost) when it is
  removed.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from fleet.api import constants as c
from fleet.controller.clock import Clock
from fleet.controller.events import EventRecorder
from fleet.controller.members.registry import MemberRegistry
from fleet.controller.queue.units import UNIT, Units, involved, key_of
from fleet.core.admission.hold import (
    HOLD_PREFIX,
    Hold,
    HoldEnd,
    restore,
    sync,
)
from fleet.core.snapshot import ClusterSnapshot
from fleet.kube import ApiError, Obj

log = logging.getLogger(__name__)

#: How long a member holding room may be NotReady (by the registry's verdict) before the hold is
#: given up: a reconnect's moment of syncing or a flap is not a loss; a member gone from the
#: fleet is lost at once.
MEMBER_LOST_SECONDS = 30.0

#: Why a hold ended, told in `HoldReleased`.
WHY: Mapping[str, str] = {
    "Placed": "the claimant was placed",
    "Gone": "the claimant was deleted or ended",
    "BackedOff": "the claimant's placement timed out (backed off)",
    "MemberLost": (
        f"the member has been NotReady for {MEMBER_LOST_SECONDS:.0f} s or left the fleet"
    ),
}


def record_of(unit: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hold record a unit's annotation keeps (None: none, or unreadable)."""
    text = ((unit.get("metadata") or {}).get("annotations") or {}).get(c.HOLD_ANNOTATION)
    if not text:
        return None
    try:
        record = json.loads(text)
        Hold.from_record(record)
    except (ValueError, KeyError, TypeError) as err:
        log.warning("%s: ignoring its hold record: %s", key_of(unit), err)
        return None
    return dict(record)


def restored(units: Iterable[Mapping[str, Any]]) -> dict[str, Hold]:
    """The holds the units' records keep (a restart)."""
    records = [r for r in (record_of(unit) for unit in units) if r is not None]
    return restore(records)


class Holds:
    """What the controller keeps of the admission's holds: views, records, Events."""

    def __init__(
        self,
        units: Units,
        events: EventRecorder,
        clock: Clock,
        members: MemberRegistry | None = None,
        placement_timeout: float = 300.0,
    ) -> None:
        self.units = units
        #: The claimants' placement timeout: a hold's end at the latest, from its room freed.
        self.placement_timeout = placement_timeout
        self.events = events
        self.clock = clock
        self.members = members
        #: Holds reserved in a member's view, by claimant, with the snapshot that holds them
        #: (a rebuilt snapshot does not).
        self.reserved: dict[str, tuple[Hold, ClusterSnapshot]] = {}
        #: Holds whose record is on the claimant's unit, by claimant.
        self.saved: dict[str, Hold] = {}
        #: Why each hold ended (`Plan.unhold`), until its record is removed.
        self.ended: dict[str, HoldEnd] = {}
        #: The claimant's job, for Events after its unit is gone.
        self._jobs: dict[str, Obj] = {}
        #: Undo what a hold made in its member beyond the view (Koordinator Reservations,
        #: `reserving.release_held`): (hold, why it ended, the claimant's job). Set by the
        #: operator (the queue knows nothing of members' objects).
        self.unreserve: Callable[[Hold, HoldEnd | None, Obj], Awaitable[None]] | None = None

    def clear(self) -> None:
        """A restart: records are read again; the views are re-reserved by `follow`."""
        for hold, snapshot in self.reserved.values():
            snapshot.release(hold.key)
        self.reserved.clear()
        self.saved.clear()
        self.ended.clear()
        self._jobs.clear()

    def restored(self, units: Iterable[Obj]) -> None:
        """After a restart: every record on the units is on record already; those the
        admission did not take back are removed by the next `follow` (they ended while the
        controller was away)."""
        for unit in units:
            record = record_of(unit)
            if record is None:
                continue
            hold = Hold.from_record(record)
            self.saved[hold.claimant] = hold
            self._jobs[hold.claimant] = involved(unit)

    def taken(self, claimant: str) -> None:
        """The claimant's placement took its held room out of the view and then failed to
        write: the next `follow` reserves it again."""
        self.reserved.pop(claimant, None)

    def ending(self, unhold: Iterable[tuple[Hold, HoldEnd]]) -> None:
        for hold, why in unhold:
            self.ended[hold.claimant] = why

    def snapshot_of(self, cluster: str) -> ClusterSnapshot | None:
        member = self.members.get(cluster) if self.members is not None else None
        return member.snapshot if member is not None else None

    def lost(self, holds: Mapping[str, Hold]) -> tuple[set[str], float | None]:
        """The members holding room that left the fleet or have been NotReady for
        MEMBER_LOST_SECONDS; and in how many seconds to look again at one NotReady for less.
        A member still Connecting (every member, for a moment, after a restart) is not lost:
        a restarted controller that gave up its holds then let the victims back into the
        room and evicted them a second time."""
        if self.members is None:
            return set(), None
        now = self.clock.monotonic()
        lost: set[str] = set()
        again: float | None = None
        for cluster in {h.cluster for h in holds.values()}:
            member = self.members.get(cluster)
            if member is None:
                lost.add(cluster)
                continue
            if member.ready or not member.known:
                continue
            left = member.health.since + MEMBER_LOST_SECONDS - now
            if left <= 0:
                lost.add(cluster)
            else:
                again = left if again is None else min(again, left)
        return lost, again

    async def follow(self, holds: Mapping[str, Hold]) -> None:
        """Make the views, records and Events follow `holds` (`Admission.room_held()`)."""
        self._views(holds)
        for claimant, hold in sorted(holds.items()):
            saved = self.saved.get(claimant)
            if saved == hold:
                continue
            if saved is not None and saved.same(hold):  # its clock moved: the room was freed
                await self._clock(hold)
                continue
            if saved is not None:  # an earlier hold ended, and a new one was made
                await self._remove(claimant)
            await self._save(hold)
        for claimant in sorted(set(self.saved) - set(holds)):
            await self._remove(claimant)

    def _views(self, holds: Mapping[str, Hold]) -> None:
        # A hold whose member's snapshot was rebuilt (or is gone) is no longer reserved there.
        for claimant, (hold, snapshot) in list(self.reserved.items()):
            if self.snapshot_of(hold.cluster) is not snapshot:
                del self.reserved[claimant]
                snapshot.release(hold.key)
        present = [hold.key for hold, _ in self.reserved.values()]
        release, reserve = sync(present, holds)
        for key in release:
            hold, snapshot = self.reserved.pop(key[len(HOLD_PREFIX) :])
            snapshot.release(key)
        for hold in reserve:
            view = self.snapshot_of(hold.cluster)
            if view is None:
                continue  # the member is gone: `lost` ends the hold
            # No expiry: the hold has no clock of its own, `sync` releases it when it ends.
            view.reserve(hold.key, hold.assignment(), math.inf)
            self.reserved[hold.claimant] = (hold, view)

    async def _save(self, hold: Hold) -> None:
        unit = self.units.get(hold.claimant)
        if unit is None:
            return  # not seen yet (or gone): the next pass
        self._jobs[hold.claimant] = involved(unit)
        await self._annotate(unit, json.dumps(hold.record(), sort_keys=True))
        self.saved[hold.claimant] = hold
        message = (
            f"room held in {hold.cluster} for this gang until it is placed: what its victims "
            f"({', '.join(hold.victims)}) free there goes to no other gang; held while their "
            f"pods leave, however long, then for its placement timeout "
            f"({self.placement_timeout:g} s) at most"
        )
        log.info("%s: %s", hold.claimant, message)
        await self._tell(hold.claimant, unit, "RoomHeld", message)

    async def _clock(self, hold: Hold) -> None:
        """The room was freed (or its victims are leaving again): the record follows, no
        Event (the hold goes on)."""
        unit = self.units.get(hold.claimant)
        if unit is None:
            return  # gone: the next pass ends the hold
        await self._annotate(unit, json.dumps(hold.record(), sort_keys=True))
        self.saved[hold.claimant] = hold
        if hold.freed is not None:
            log.info(
                "%s: the room held in %s is free (its victims' pods are gone): placed within "
                "%g s, or the hold ends with its placement timeout",
                hold.claimant,
                hold.cluster,
                self.placement_timeout,
            )

    async def _remove(self, claimant: str) -> None:
        hold = self.saved[claimant]
        unit = self.units.get(claimant)
        if unit is not None:
            await self._annotate(unit, None)
        del self.saved[claimant]
        why = self.ended.pop(claimant, None)
        told = WHY[why] if why is not None else "it ended while the controller was away"
        message = f"room held in {hold.cluster} released: {told}"
        log.info("%s: %s", claimant, message)
        job = self._jobs.get(claimant) or (involved(unit) if unit is not None else None)
        if self.unreserve is not None and job is not None:
            await self.unreserve(hold, why, job)
        await self._tell(claimant, unit, "HoldReleased", message)
        self._jobs.pop(claimant, None)

    async def _tell(self, claimant: str, unit: Obj | None, reason: str, message: str) -> None:
        job = self._jobs.get(claimant) or (involved(unit) if unit is not None else None)
        if job is not None and (job.get("metadata") or {}).get("uid"):
            await self.events.record(job, reason, message)
        if unit is not None:
            await self.events.record(unit, reason, message)

    async def _annotate(self, unit: Obj, text: str | None) -> None:
        meta = unit["metadata"]
        if ((meta.get("annotations") or {}).get(c.HOLD_ANNOTATION)) == text:
            return
        patch = {"metadata": {"annotations": {c.HOLD_ANNOTATION: text}}}
        try:
            updated = await self.units.fleet.patch(*UNIT, meta["name"], patch, meta["namespace"])
        except ApiError as err:
            if err.status == 404:
                return  # the unit is gone: so is its record
            raise
        self.units.offer(updated)
