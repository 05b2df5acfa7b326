"""Kube Queue admission: which queued jobs are released to gang placement, and when.

One `Admission` holds, in memory, every queue unit the controller knows, the quota tree in force
and what each quota node holds. The shell feeds it events (`upsert`, `placed`, `unplaced`,
`finished`, `remove`, `set_tree`, `configure_queue`) and calls `plan(now)` after them; `plan`
decides, records the decisions in memory and returns them for the shell to persist and act on.
Time is always passed in. Nothing here does I/O.

Rules (docs/queue.md has the long form):

* **Admission.** A unit is dequeued only when, on every node from its quota node to the root,
  what the node holds plus the unit stays within the node's `max` (a resource a node does not
  list is not capped there), counting `kube-queue/max-jobs` as a resource every dequeued unit
  holds one of. Dequeued and Running units hold their quota; nothing else does.
* **Borrowing.** A node may hold more than its `min` as long as every `max` up to the root allows
  it: it borrows what others leave idle. Borrowed capacity is **not reclaimed** (no preemption):
  a borrower keeps it until its job ends. What `min` buys instead: when capacity frees, units
  whose quota node is still below its `min` go first, across all queues.
* **Order.** Within a queue: priority (higher first), then submission time, then key. Across
  queues: quota nodes below their min first, then the Queue's priority, then the same order.
* **Policies** (`Queue.spec.queuePolicy`). `Priority` (default): the first unit *in order that
  fits* goes; a head that does not fit does not block smaller units behind it. `Block`: only the
  head may go; nothing passes it. `FIFO` (kube-queue's): as `Priority`, ordered by submission
  time alone. A unit that can never fit (it asks more than some `max` on its path even with the
  quota empty) is set aside and reported, so it neither blocks a `Block` queue forever nor is
  retried on every pass.
* **TimeoutBackoff.** A dequeued unit that placement has not placed within
  `placement_timeout` seconds loses its quota, goes to `TimeoutBackoff` for a backoff that
  doubles with each attempt, then returns to its queue with its original submission time.
* **Release.** `finished` (Succeed/Failed) and `remove` (deleted) release at once, exactly once.
  A failover (`unplaced`) keeps the quota and restarts the placement clock; it is never re-queued.
* **No quota.** A unit whose quota label or namespace matches no node waits (reason `NoQuota`)
  unless `AdmissionSettings.no_quota` is `"bypass"`, which dequeues it without charging anything.
  Either way it is reported once in `Plan.notices`.
* **Tree changes.** `set_tree` recomputes every charge from the units that hold quota; a shrunk
  `max` never releases or loses a job (a node may then hold more than its max until jobs end).
  An invalid tree never reaches `set_tree` (`apply_tree_spec` refuses it).
* **Restart.** `upsert(spec, state)` with the persisted phase and times rebuilds the same
  state: Dequeued and Running units hold quota again, backoffs and placement timeouts resume.

Speed. Units of one queue are grouped by their demand vector, each group sorted by order, and the
groups' heads are sorted too: the best unit that fits is the first head that fits, and a queue
whose cheapest demand per resource (its floor) does not fit is rejected without looking at any
group. A queue that found nothing remembers, per resource, the least amount a waiting unit was
short of; it is skipped until its headroom reaches one of those thresholds (nothing can fit before).
A pass costs about (queues with waiting units x path length) + (units dequeued x heads tried); it
does not grow with the number of units waiting (bench/queue.py).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fleet.core.admission.claims import Claims
from fleet.core.admission.decisions import Backoff, Dequeue, Plan, Requeue, WaitReason
from fleet.core.admission.explain import opted_out, shortage
from fleet.core.admission.fit import asleep, first_short, fits
from fleet.core.admission.hold import Hold, ended
from fleet.core.admission.line import Line
from fleet.core.admission.minimum import fits_within_min
from fleet.core.admission.phases import (
    DEQUEUED,
    ENQUEUED,
    FAILED,
    HOLDING,
    RUNNING,
    SUCCEED,
    TERMINAL,
    TIMEOUT_BACKOFF,
    Phase,
    UnitSpec,
    UnitState,
)
from fleet.core.admission.policies import BLOCK, POLICIES, PRIORITY
from fleet.core.admission.recharge import Charge, charge_decision
from fleet.core.admission.unit import OrderKey, Unit, demand_of
from fleet.core.admission.usage import QuotaUsage
from fleet.core.quota import QuotaTree, TreeCheck, check_tree
from fleet.core.resources import Resources

__all__ = ["Admission"]


class Admission(Claims):
    """The queue's in-memory state and its decisions; see the module docstring.

    Public methods are the shell's whole interface. Every method is O(path length) or
    O(log units) except `set_tree` and the reporting helpers (`waiting`), which walk all units.
    """

    @property
    def tree(self) -> QuotaTree | None:
        return self._tree

    def apply_tree_spec(self, spec: Mapping[str, Any] | None) -> TreeCheck:
        """Check an ElasticQuotaTree spec and put it in force only if it is valid; the last valid
        tree stays otherwise. Returns the check (problems for the tree's status and Events)."""
        check = check_tree(spec)
        if check.tree is not None:
            self.set_tree(check.tree)
        return check

    def set_tree(self, tree: QuotaTree | None) -> dict[str, str | None]:
        """Put a (valid) tree in force, or None when there is no tree. Every charge is recomputed
        from the units holding quota, so nothing is released or lost. Returns the units whose quota
        node changed (key -> new path), for the shell to update their `spec.queue`."""
        self._tree = tree
        self._tree_known = True
        self._used = {path: {} for path in tree.nodes} if tree else {}
        self._lines = {}
        self._active = {}
        self._homeless = {}
        self._oversized = {}
        moved: dict[str, str | None] = {}
        waiting = []
        for unit in self._units.values():
            quota = self._quota_of(unit.spec)
            if quota != unit.quota:
                moved[unit.spec.key] = quota
            unit.quota = quota
            unit.order = None
            unit.charged = None
            if unit.phase in HOLDING:
                self._charge(unit)
            elif unit.phase == ENQUEUED:
                waiting.append(unit)
        waiting.sort(key=lambda u: (u.spec.submitted, u.spec.key))
        for unit in waiting:
            self._enqueue(unit)
        return moved

    def configure_queue(self, path: str, policy: str = PRIORITY, priority: int = 0) -> None:
        """The Queue of quota node `path` has `queuePolicy` and `priority` (from its spec)."""
        if policy not in POLICIES:
            raise ValueError(
                f"Queue for {path}: queuePolicy {policy!r} is not one of {sorted(POLICIES)}"
            )
        if self._queues.get(path) == (policy, priority):
            return
        self._queues[path] = (policy, priority)
        line = self._lines.get(path)
        if line is None:
            return
        units = [self._units[key] for key in line.units()]
        for unit in units:
            line.discard(unit)
        line.policy, line.priority = policy, priority
        for unit in units:
            line.add(unit)

    # --- Units -----------------------------------------------------------------------------
    def upsert(self, spec: UnitSpec, state: UnitState | None = None) -> None:
        """A unit appeared or changed. `state` is read only for a unit this Admission does not
        know yet (a restart restores it from the unit's persisted status); a known unit keeps
        its phase, and a change to its resources re-charges it if it holds quota."""
        unit = self._units.get(spec.key)
        if unit is None:
            state = state if state is not None else UnitState()
            if state.phase == DEQUEUED and state.dequeued_at is None:
                raise ValueError(f"unit {spec.key}: phase Dequeued needs dequeued_at")
            unit = Unit(spec, state)
            self._units[spec.key] = unit
            if unit.phase == DEQUEUED:
                self._dequeued[spec.key] = None
            unit.quota = self._quota_of(spec)
            if unit.phase in HOLDING:
                self._charge(unit)
                if unit.phase == DEQUEUED:
                    assert unit.dequeued_at is not None
                    self._arm_timeout(unit, unit.dequeued_at + self.settings.placement_timeout)
            elif unit.phase == ENQUEUED:
                self._enqueue(unit)
            elif unit.phase == TIMEOUT_BACKOFF:
                self._arm_backoff(unit, unit.backoff_until)
            return
        if unit.spec == spec:
            return
        enqueued = unit.phase == ENQUEUED
        if enqueued:
            self._dequeue_from_lines(unit)
        holding = unit.charged is not None
        if holding:
            self._release(unit)
        unit.spec = spec
        unit.demand = demand_of(spec.resources)
        unit.quota = self._quota_of(spec)
        if unit.phase in HOLDING:
            self._charge(unit)
        elif enqueued:
            self._enqueue(unit)

    def placed(self, key: str, now: float) -> bool:
        """Gang placement placed the unit's job (Dequeued -> Running). False if it was not
        Dequeued (nothing changes)."""
        unit = self._units.get(key)
        if unit is None or unit.phase != DEQUEUED:
            return False
        self._set_phase(unit, RUNNING)
        self._end_hold(key, "Placed")
        self._claimed.discard(key)
        self._room_freed.pop(key, None)
        self._retry.pop(key, None)
        self.over_budget.pop(key, None)
        return True

    def charge_running(self, key: str, now: float, *, moved: bool = False) -> Charge:
        """The unit's job was placed, or runs (module `recharge`): a Dequeued unit is Running;
        a Running one stays so; one the queue no longer has Dequeued (its placement timed out
        while it was placed) is Running and charged again only where every `max` on its path
        allows it. Refused: nothing changes. `moved`: a reclaim evicted it after it had moved
        elsewhere: it is charged where it runs, above a max if it must (never refused)."""
        unit = self._units.get(key)
        if unit is None or unit.phase in TERMINAL:
            return Charge(key, False, None, "its unit is unknown or ended: nothing to charge")
        if unit.phase == RUNNING or self.placed(key, now):
            return Charge(key, True, unit.quota, "runs, holding its quota")
        tree, quota = self._tree, unit.quota
        within_min = (
            tree is not None
            and quota is not None
            and fits_within_min(tree, self._used, quota, unit.demand)
        )
        charge = charge_decision(
            key,
            tree,
            self._used,
            quota,
            unit.demand,
            within_min=within_min,
            borrows=unit.spec.borrows,
            bypass=self.settings.no_quota == "bypass",
            above_max=moved,
        )
        if charge.granted:
            self._dequeue_from_lines(unit)
            self._set_phase(unit, RUNNING)
            unit.dequeued_at = now
            unit.backoff_until = None
            unit.attempts = max(unit.attempts, 1)
            self._charge(unit)
            self._claimed.discard(key)
            self._retry.pop(key, None)
            self.over_budget.pop(key, None)
        return charge

    def unplaced(self, key: str, now: float) -> bool:
        """The unit's job fails over (Running -> Dequeued): it keeps its quota, is not re-queued,
        and placement has `placement_timeout` again to place it."""
        unit = self._units.get(key)
        if unit is None or unit.phase != RUNNING:
            return False
        self._set_phase(unit, DEQUEUED)
        unit.dequeued_at = now
        self._arm_timeout(unit, now + self.settings.placement_timeout)
        return True

    def finished(self, key: str, succeeded: bool, now: float) -> bool:
        """The unit's job ended (or can no longer run): phase Succeed or Failed, quota released
        at once. False if the unit is unknown or already ended (released only once)."""
        unit = self._units.get(key)
        if unit is None or unit.phase in TERMINAL:
            return False
        self._dequeue_from_lines(unit)
        self._release(unit)
        self._set_phase(unit, SUCCEED if succeeded else FAILED)
        self._end_hold(key, "Gone")
        return True

    def remove(self, key: str) -> bool:
        """The unit (or its job) was deleted: release whatever it holds and forget it."""
        unit = self._units.pop(key, None)
        if unit is None:
            return False
        self._dequeued.pop(key, None)
        self._dequeue_from_lines(unit)
        self._release(unit)
        unit.token += 1
        self._notices.pop(key, None)
        self._end_hold(key, "Gone")
        self._claimed.discard(key)
        self._room_freed.pop(key, None)
        self._retry.pop(key, None)
        self.over_budget.pop(key, None)
        return True

    # --- Deciding --------------------------------------------------------------------------
    def plan(self, now: float) -> Plan:
        """Decide at `now`: expired backoffs return to their queues, dequeued units past the
        placement timeout back off (releasing their quota), then every unit that may go is
        dequeued. Decisions are applied in memory and returned."""
        plan = Plan()
        self._expire_backoffs(now, plan)
        self._expire_timeouts(now, plan)
        if self._tree_known:
            self._bypass(now, plan)
            self._pass(now, plan)
        if self._notices:
            plan.notices = list(self._notices.values())
            self._notices.clear()
        self._flush_holds(plan)
        plan.wake_at = self._next_wake()  # a hold ends with its claimant's timeout: no clock
        return plan

    # --- Holds (module `hold`) ----------------------------------------------------------------
    def room_held(self) -> Mapping[str, Hold]:
        """The room held now, by claimant: what the shell's views must reserve (`hold.sync`)."""
        return dict(self._holds)

    def hold_of(self, key: str) -> Hold | None:
        """The room held for unit `key`, if any: its placement tries `hold.cluster` first."""
        return self._holds.get(key)

    def member_lost(self, cluster: str, now: float) -> Plan:
        """Member `cluster` is lost (not Ready, or left the fleet): the holds in it end."""
        for key, hold in list(self._holds.items()):
            if ended(hold, lost_members=(cluster,)) is not None:
                self._end_hold(key, "MemberLost")
        plan = Plan()
        self._flush_holds(plan)
        return plan

    def restore_holds(self, holds: Iterable[Hold], now: float) -> None:
        """After a restart: the holds the shell persisted (`Hold.record`), for units that are
        still Dequeued (any other one ended while the controller was down: dropped), with
        their clock: a hold whose room was freed gives its claimant's placement timeout that
        moment to count from (`Hold.freed`); one whose victims were still leaving keeps the
        timeout waiting until the shell's next `awaiting_room` says they are gone (from then:
        the whole timeout)."""
        for hold in holds:
            unit = self._units.get(hold.claimant)
            if unit is None or unit.phase != DEQUEUED:
                continue
            self._holds[hold.claimant] = hold
            self._claimed.add(hold.claimant)
            if hold.freed is None:
                self._awaiting_room.add(hold.claimant)
            else:
                self._room_freed[hold.claimant] = hold.freed

    def _flush_holds(self, plan: Plan) -> None:
        if self._unheld:
            plan.unhold.extend(self._unheld)
            self._unheld = []

    def _expire_backoffs(self, now: float, plan: Plan) -> None:
        heap = self._backoffs
        while heap and heap[0][0] <= now:
            _, token, key = heapq.heappop(heap)
            unit = self._units.get(key)
            if unit is None or unit.token != token or unit.phase != TIMEOUT_BACKOFF:
                continue
            self._set_phase(unit, ENQUEUED)
            unit.backoff_until = None
            self._enqueue(unit)
            plan.requeue.append(
                Requeue(key, f"backoff over after attempt {unit.attempts}: back in its queue")
            )

    def _expire_timeouts(self, now: float, plan: Plan) -> None:
        heap = self._timeouts
        timeout = self.settings.placement_timeout
        while heap and heap[0][0] <= now:
            _, token, key = heapq.heappop(heap)
            unit = self._units.get(key)
            if unit is None or unit.token != token or unit.phase != DEQUEUED:
                continue
            if key in self._awaiting_room:
                self._arm_timeout(unit, now + timeout)  # its victims are still leaving
                continue
            freed = self._room_freed.pop(key, None)
            if freed is not None and freed + timeout > now:
                self._arm_timeout(unit, freed + timeout)  # the room is free only since then
                continue
            self._release(unit)
            self._set_phase(unit, TIMEOUT_BACKOFF)
            self._end_hold(key, "BackedOff")  # the hold's one deadline: this timeout
            self._claimed.discard(key)
            attempts = max(unit.attempts, 1)
            until = now + self.settings.backoff(attempts)
            self._arm_backoff(unit, until)
            plan.backoff.append(
                Backoff(
                    key,
                    until,
                    f"dequeued but not placed within {timeout:g} s (no member cluster could hold "
                    f"the gang); quota released, retried after {until - now:g} s "
                    f"(attempt {attempts})",
                )
            )

    def _bypass(self, now: float, plan: Plan) -> None:
        if self.settings.no_quota != "bypass" or not self._homeless:
            return
        for key in list(self._homeless):
            unit = self._units[key]
            del self._homeless[key]
            self._admit(unit, now)
            plan.dequeue.append(
                Dequeue(key, None, f"{self._no_quota_text(unit)}; bypasses the queue")
            )

    def _pass(self, now: float, plan: Plan) -> None:
        """Dequeue every unit that may go, best first across queues (see the module docstring)."""
        heap: list[tuple[tuple[int, int, OrderKey], str]] = []
        for line in self._active.values():
            headroom = self._headroom(line.lineage)
            if line.wake is not None and asleep(line.wake, headroom):
                continue
            self._offer(line, headroom, heap)
        while heap:
            rank, key = heapq.heappop(heap)
            unit = self._units[key]
            line = self._lines[unit.quota or ""]
            headroom = self._headroom(line.lineage)
            if (
                unit.order is None
                or not fits(unit.demand, headroom)
                or not self._may_borrow(line, unit)
            ):
                self._offer(line, headroom, heap)  # taken by a better unit: offer the next
                continue
            current = self._rank(line, unit)
            if current != rank:  # its node reached its min since it was offered: rank it again
                heapq.heappush(heap, (current, key))
                continue
            line.discard(unit)
            if not line:
                self._active.pop(line.path, None)
            self._admit(unit, now)
            plan.dequeue.append(Dequeue(key, line.path, f"dequeued from quota {line.path}"))
            if line:
                self._offer(line, self._headroom(line.lineage), heap)

    def _offer(
        self,
        line: Line,
        headroom: dict[str, int],
        heap: list[tuple[tuple[int, int, OrderKey], str]],
    ) -> None:
        """Push the line's best unit that fits `headroom`, or remember (as wake thresholds) what
        it would take for one to fit."""
        if not line.heads:
            return
        floor = line.floor()
        short = first_short(floor, headroom)
        if short is not None:  # even the cheapest demand of that resource does not fit
            line.wake = {short: floor[short]}
            return
        wake: dict[str, int] | None = {}
        heads = line.heads[:1] if line.policy == BLOCK else line.heads
        for head, demand in heads:
            short = first_short(demand, headroom)
            if short is None:
                unit = self._units[head[2]]
                if not self._may_borrow(line, unit):
                    wake = None  # held by its min, not by the headroom: look again next pass
                    continue
                heapq.heappush(heap, (self._rank(line, unit), head[2]))
                return
            need = demand[short]
            if wake is not None and need < wake.get(short, math.inf):
                wake[short] = need
        line.wake = wake

    def _next_wake(self) -> float | None:
        best: float | None = None
        for heap, phase in ((self._timeouts, DEQUEUED), (self._backoffs, TIMEOUT_BACKOFF)):
            while heap:
                when, token, key = heap[0]
                unit = self._units.get(key)
                if unit is not None and unit.token == token and unit.phase == phase:
                    best = when if best is None else min(best, when)
                    break
                heapq.heappop(heap)
        return best

    # --- Reading -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._units)

    def __contains__(self, key: object) -> bool:
        return key in self._units

    def __iter__(self) -> Iterator[str]:
        """The keys of every unit known (ended ones included, until removed)."""
        return iter(self._units)

    def phase(self, key: str) -> Phase | None:
        unit = self._units.get(key)
        return unit.phase if unit is not None else None

    def state(self, key: str) -> UnitState | None:
        """The unit's persistable state (what to write on its status)."""
        unit = self._units.get(key)
        if unit is None:
            return None
        return UnitState(unit.phase, unit.dequeued_at, unit.backoff_until, unit.attempts)

    def quota_of(self, key: str) -> str | None:
        """Path of the unit's quota node (None: no quota, or unknown unit)."""
        unit = self._units.get(key)
        return unit.quota if unit is not None else None

    def holds(self, key: str) -> bool:
        """Whether the unit holds quota now."""
        unit = self._units.get(key)
        return unit is not None and unit.charged is not None

    def usage(self, path: str) -> QuotaUsage:
        """What quota node `path` holds now."""
        if self._tree is None or path not in self._tree:
            raise KeyError(f"no quota node {path!r} in the tree in force")
        node = self._tree.nodes[path]
        return QuotaUsage(path, Resources(dict(self._used[path])), node.min, node.max)

    def why(self, key: str, now: float) -> WaitReason | None:
        """Why the unit waits (None when it does not: it holds quota, ended, or is unknown).
        O(path length); kept out of `plan` so a pass over thousands of waiting units stays cheap:
        the shell asks when it writes a unit's status. The words are module `explain`'s."""
        unit = self._units.get(key)
        if unit is None or unit.phase in HOLDING or unit.phase in TERMINAL:
            return None
        if unit.phase == TIMEOUT_BACKOFF:
            until = unit.backoff_until
            when = "now" if until is None or until <= now else f"in {until - now:.0f} s"
            return WaitReason(
                "Backoff",
                f"TimeoutBackoff after attempt {unit.attempts}: back in its queue {when}",
                unit.quota,
            )
        if not self._tree_known:
            return WaitReason("NoTree", "waiting for the ElasticQuotaTree to be read")
        if key in self._homeless:
            return WaitReason("NoQuota", self._no_quota_text(unit))
        if key in self._oversized:
            return WaitReason("NeverFits", self._oversized[key], unit.quota)
        assert unit.quota is not None and self._tree is not None
        line = self._lines[unit.quota]
        head_key = line.head()
        if line.policy == BLOCK and head_key is not None and head_key != unit.order:
            head = head_key[2]
            return WaitReason(
                "Behind",
                f"Block queue of quota {line.path}: waits behind {head}, which goes first",
                line.path,
            )
        if not self._may_borrow(line, unit):  # first: no free capacity would let it go
            return opted_out(self._tree, self._used, unit.quota, unit.demand)
        reason = shortage(self._tree, self._used, unit.quota, unit.demand) or WaitReason(
            "Ready", "fits its quota now: dequeued at the next pass", unit.quota
        )
        spared = self.over_budget.get(key)
        if spared is not None:  # why its reclaim evicted nothing (module `budget`)
            reason = dataclasses.replace(reason, message=f"{reason.message}; {spared}")
        return reason

    def waiting(self, now: float) -> dict[str, WaitReason]:
        """Every waiting unit's reason (O(units): for reports and tests, not every pass)."""
        out: dict[str, WaitReason] = {}
        for key in self._units:
            reason = self.why(key, now)
            if reason is not None:
                out[key] = reason
        return out
