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

import heapq
import math
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from fleet.core.admission.decisions import (
    Backoff,
    Dequeue,
    Evict,
    Notice,
    NoticeKind,
    Plan,
    Requeue,
    WaitReason,
)
from fleet.core.admission.fit import asleep, first_short, fits
from fleet.core.admission.line import Line
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
from fleet.core.admission.reclaim import (
    PREEMPT,
    RECLAIM,
    Choice,
    Claim,
    EvictionKind,
    GangOf,
    MembersFor,
    Placed,
    Runner,
    Scratch,
    choose,
    fits_within_min,
)
from fleet.core.admission.settings import AdmissionSettings
from fleet.core.admission.unit import OrderKey, Unit, demand_of
from fleet.core.admission.usage import QuotaUsage
from fleet.core.quota import MAX_JOBS, QuotaTree, TreeCheck, check_tree, describe_amount
from fleet.core.resources import Resources

__all__ = ["Admission"]


class Admission:
    """The queue's in-memory state and its decisions; see the module docstring.

    Public methods are the shell's whole interface. Every method is O(path length) or
    O(log units) except `set_tree` and the reporting helpers (`waiting`), which walk all units.
    """

    def __init__(self, settings: AdmissionSettings | None = None) -> None:
        self.settings = settings if settings is not None else AdmissionSettings()
        self._tree: QuotaTree | None = None
        #: False until `set_tree` was called once (even with None): no dequeue pass before the
        #: shell knows whether a tree exists, so a restart never releases jobs on a partial view.
        self._tree_known = False
        self._units: dict[str, Unit] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._lines: dict[str, Line] = {}
        self._active: dict[str, Line] = {}
        #: Enqueued units with no quota node, and units that can never fit; both in arrival order.
        self._homeless: dict[str, None] = {}
        self._oversized: dict[str, str] = {}
        self._queues: dict[str, tuple[str, int]] = {}
        self._timeouts: list[tuple[float, int, str]] = []
        self._backoffs: list[tuple[float, int, str]] = []
        self._notices: dict[str, Notice] = {}
        #: Units for which evictions were made and that are not placed yet: they claim nothing
        #: more until then (so a gang waiting for its victims to leave never evicts twice).
        self._claimed: set[str] = set()
        #: Claims no eviction could satisfy, and when to try them again.
        self._retry: dict[str, float] = {}
        #: The Dequeued units (a reclaim looks at them without walking every unit).
        self._dequeued: dict[str, None] = {}
        #: Dequeued units waiting for their victims' copies to go (from the shell): their
        #: placement does not time out meanwhile (the room is theirs once the copies are gone).
        self._awaiting_room: set[str] = set()

    # --- The tree ------------------------------------------------------------------------------
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
        self._claimed.discard(key)
        self._retry.pop(key, None)
        return True

    def charge_running(self, key: str, now: float) -> Charge:
        """The unit's job was placed, or runs (module `recharge`): a Dequeued unit is Running;
        a Running one stays so; one the queue no longer has Dequeued (its placement timed out
        while it was placed, or a reclaim evicted it after it had moved) is Running and charged
        again only where every `max` on its path allows it. Refused: nothing changes."""
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
        self._claimed.discard(key)
        self._retry.pop(key, None)
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
        plan.wake_at = self._next_wake()
        return plan

    def reclaim(
        self,
        now: float,
        running: Mapping[str, Placed],
        gang_of: GangOf,
        members_for: MembersFor,
        *,
        in_flight: Collection[str] = (),
    ) -> Plan:
        """Evict running gangs whole where that lets a waiting gang start (module `reclaim`):
        a unit waiting within its quota node's min takes back what others borrow; with
        `preemption` on, a unit also evicts lower-priority gangs of its own queue. Applied in
        memory like `plan`: each victim's quota is released and it is back in its queue at its
        original place (Enqueued), and a claimant that now fits its quota is dequeued. The shell
        records each eviction on the victim's binding before it deletes anything.

        `running`: the Running units' copies (cluster, owner key, start, opt-out), from the
        shell; `gang_of(key)`: a claimant's gang; `members_for(key)`: the member snapshots it
        may go to; `in_flight`: claimants whose victims are still leaving (from the bindings,
        after a restart). O(claims x victims in a member x a packing)."""
        plan = Plan()
        settings = self.settings
        if self._tree is None or not (settings.reclaim or settings.preemption):
            return plan
        runners = self._runners(running)
        if not runners:
            return plan
        skip = self._claimed | set(in_flight)
        skip |= {k for k, until in self._retry.items() if until > now}
        tried = 0
        scratch = Scratch()
        for kind, claim in self._claims(now, skip, gang_of):
            if tried >= settings.reclaim_claims_per_pass:
                break
            tried += 1
            choice = choose(
                kind,
                self._tree,
                self._used,
                claim,
                runners,
                members_for(claim.key),
                now,
                scratch=scratch,
            )
            if choice is None:
                self._retry[claim.key] = now + settings.reclaim_retry
                continue
            self._retry.pop(claim.key, None)
            self._apply(choice, now, plan)
            scratch.commit(choice, now + settings.placement_timeout)
            gone = {v.key for v in choice.victims}
            runners = [r for r in runners if r.key not in gone]
        plan.wake_at = self._next_claim(now, skip)
        return plan

    def _next_claim(self, now: float, skip: Collection[str]) -> float | None:
        """When the next claim may be tried: a dequeued, unplaced unit's `reclaim_delay` ends,
        or a claim that found nothing is due again."""
        delay = self.settings.reclaim_delay
        if not self.settings.reclaim_unplaced:
            return min((u for u in self._retry.values() if u > now), default=None)
        due = [
            unit.dequeued_at + delay
            for unit in (self._units[k] for k in self._dequeued)
            if unit.phase == DEQUEUED
            and unit.dequeued_at is not None
            and unit.dequeued_at + delay > now
            and unit.spec.key not in skip
            and unit.spec.key not in self._claimed
        ]
        due += [until for until in self._retry.values() if until > now]
        return min(due, default=None)

    def awaiting_room(self, keys: Collection[str]) -> None:
        """The units whose victims' copies are still being deleted (the shell reads them from
        the victims' bindings before every pass): their placement does not time out until
        the room they evicted for is free."""
        self._awaiting_room = {k for k in keys if k in self._units}

    def waiting_units(self) -> bool:
        """Whether any unit waits in a line or is dequeued (cheap: a reclaim needs one)."""
        return bool(self._active) or bool(self._timeouts)

    def _runners(self, running: Mapping[str, Placed]) -> list[Runner]:
        out = []
        for key, placed in running.items():
            unit = self._units.get(key)
            if unit is None or unit.phase != RUNNING or unit.charged is None:
                continue
            out.append(
                Runner(
                    key,
                    unit.charged,
                    unit.demand,
                    unit.spec.priority,
                    placed.started,
                    placed.cluster,
                    placed.owner,
                    placed.protected or not unit.spec.borrows,
                )
            )
        return out

    def _claims(
        self, now: float, skip: Collection[str], gang_of: GangOf
    ) -> Iterator[tuple[EvictionKind, Claim]]:
        """Units that may evict, best first: per waiting line, the best unit of each demand
        that would run within its node's min (a reclaim; a Block line: its head only) or, with
        preemption on, the line's head (a preemption); then dequeued units placement has not
        placed for `reclaim_delay`. Each is judged again as the claims before it are applied."""
        assert self._tree is not None
        tree = self._tree
        found: list[tuple[tuple[int, int, OrderKey], EvictionKind, Unit]] = []
        for line in list(self._active.values()):
            heads = line.heads[:1] if line.policy == BLOCK else line.heads
            for order, demand in heads:
                unit = self._units[order[2]]
                if unit.spec.key in skip:
                    continue
                if self.settings.reclaim and fits_within_min(tree, self._used, line.path, demand):
                    found.append((self._rank(line, unit), RECLAIM, unit))
            if self.settings.preemption and line.heads:
                unit = self._units[line.heads[0][0][2]]
                if unit.spec.key not in skip:
                    found.append((self._rank(line, unit), PREEMPT, unit))
        delay = self.settings.reclaim_delay
        unplaced = self._dequeued if self.settings.reclaim_unplaced else {}
        for unit in (self._units[k] for k in unplaced):
            if (
                unit.phase != DEQUEUED
                or unit.charged is None
                or unit.spec.key in skip
                or unit.dequeued_at is None
                or now - unit.dequeued_at < delay
            ):
                continue
            if self.settings.reclaim and self._holds_within_min(unit):
                found.append(((0, 0, (0, unit.spec.submitted, unit.spec.key)), RECLAIM, unit))
        found.sort(key=lambda item: item[0])
        for _, kind, unit in found:
            # Judged again now: an earlier claim of this pass may have changed the usage.
            if unit.phase == ENQUEUED and unit.quota is not None:
                if kind == RECLAIM and not fits_within_min(
                    tree, self._used, unit.quota, unit.demand
                ):
                    continue
            elif unit.phase == DEQUEUED and unit.charged is not None:
                if not self._holds_within_min(unit):
                    continue
            else:
                continue
            gang = gang_of(unit.spec.key)
            quota = unit.charged or unit.quota
            if gang is None or quota is None:
                continue
            yield (
                kind,
                Claim(
                    unit.spec.key,
                    quota,
                    unit.demand,
                    unit.spec.priority,
                    gang,
                    holds=unit.charged is not None,
                ),
            )

    def _holds_within_min(self, unit: Unit) -> bool:
        """A dequeued unit runs on its node's guarantee if, without it, it would fit the min."""
        assert self._tree is not None and unit.charged is not None
        path = unit.charged
        without = {path: {r: a - unit.demand.get(r, 0) for r, a in self._used[path].items()}}
        return fits_within_min(self._tree, without, path, unit.demand)

    def _apply(self, choice: Choice, now: float, plan: Plan) -> None:
        assert self._tree is not None
        claimant = self._units[choice.claim]
        quota = claimant.quota or ""
        gpus = sum(v.demand.get("nvidia.com/gpu", 0) for v in choice.victims)
        what = "reclaims" if choice.kind == RECLAIM else "preempts"
        for victim in choice.victims:
            unit = self._units[victim.key]
            self._release(unit)
            self._set_phase(unit, ENQUEUED)
            unit.dequeued_at = None
            self._enqueue(unit)
            lost = victim.lost(now)
            if choice.kind == RECLAIM:
                why = (
                    f"reclaimed by {choice.claim}: quota {quota} is below its min and needs "
                    f"{_describe(claimant.demand)} of it back; quota {victim.quota} borrows "
                    f"({_describe(self._used.get(victim.quota or '', {}), victim.demand)} in use "
                    f"with this gang, min {_describe(self._tree.nodes[victim.quota or ''].min)})"
                )
            else:
                why = (
                    f"preempted by {choice.claim} (priority {claimant.spec.priority} over "
                    f"{victim.priority}) in quota {quota}"
                )
            plan.evict.append(
                Evict(
                    victim.key,
                    choice.claim,
                    choice.kind,
                    choice.cluster,
                    f"{why}; evicted whole from {choice.cluster}, back in its queue at its "
                    f"original place ({lost:.2f} GPU-hours of work lost)",
                    lost,
                )
            )
        self._claimed.add(choice.claim)
        self._awaiting_room.add(choice.claim)
        message = (
            f"{what} {len(choice.victims)} gang(s) ({gpus} GPUs) in {choice.cluster} so that its "
            f"{_describe(claimant.demand)} fit there"
        )
        if claimant.phase == ENQUEUED:
            line = self._lines[quota]
            line.discard(claimant)
            if not line:
                self._active.pop(line.path, None)
            self._admit(claimant, now)
            plan.dequeue.append(
                Dequeue(choice.claim, quota, f"dequeued from quota {quota}: {message}")
            )
        else:
            plan.notices.append(Notice(choice.claim, "Queued", message))

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
            self._release(unit)
            self._set_phase(unit, TIMEOUT_BACKOFF)
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

    def _may_borrow(self, line: Line, unit: Unit) -> bool:
        """A unit that opted out of reclaim goes only while its node stays within its min."""
        if unit.spec.borrows:
            return True
        assert self._tree is not None
        return fits_within_min(self._tree, self._used, line.path, unit.demand)

    def _rank(self, line: Line, unit: Unit) -> tuple[int, int, OrderKey]:
        assert unit.order is not None
        return (0 if self._within_min(line.path, unit.demand) else 1, -line.priority, unit.order)

    def _within_min(self, path: str, demand: Resources) -> bool:
        """Whether the node is still below its min in every resource its min lists and `demand`
        asks: it is using its guarantee, not borrowing. The job's size does not matter, so a big
        gang of a team under its min is not ranked behind small jobs of teams over theirs. A node
        with no min (or none in what the job asks) is never below it: nothing is guaranteed."""
        assert self._tree is not None
        minimum = self._tree.nodes[path].min
        used = self._used[path]
        asked = False
        for resource, amount in demand.items():
            low = minimum.get(resource, None)
            if low is None or amount <= 0:
                continue
            if used.get(resource, 0) >= low:
                return False
            asked = True
        return asked

    def _headroom(self, lineage: tuple[str, ...]) -> dict[str, int]:
        assert self._tree is not None
        nodes = self._tree.nodes
        headroom: dict[str, int] = {}
        for path in lineage:
            used = self._used[path]
            for resource, cap in nodes[path].max.items():
                left = cap - used.get(resource, 0)
                before = headroom.get(resource)
                if before is None or left < before:
                    headroom[resource] = left
        return headroom

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

    # --- Bookkeeping -------------------------------------------------------------------------
    def _quota_of(self, spec: UnitSpec) -> str | None:
        if self._tree is None:
            return None
        return self._tree.quota_by_label(spec.quota_label, spec.namespace)

    def _set_phase(self, unit: Unit, phase: Phase) -> None:
        unit.phase = phase
        unit.token += 1
        if phase == DEQUEUED:
            self._dequeued[unit.spec.key] = None
        else:
            self._dequeued.pop(unit.spec.key, None)

    def _admit(self, unit: Unit, now: float) -> None:
        self._set_phase(unit, DEQUEUED)
        unit.dequeued_at = now
        unit.attempts += 1
        self._charge(unit)
        self._arm_timeout(unit, now + self.settings.placement_timeout)

    def _arm_timeout(self, unit: Unit, deadline: float) -> None:
        heapq.heappush(self._timeouts, (deadline, unit.token, unit.spec.key))

    def _arm_backoff(self, unit: Unit, until: float | None) -> None:
        unit.backoff_until = until
        heapq.heappush(
            self._backoffs, (-math.inf if until is None else until, unit.token, unit.spec.key)
        )

    def _charge(self, unit: Unit) -> None:
        if unit.quota is None or self._tree is None or unit.charged is not None:
            return
        for path in self._tree.nodes[unit.quota].lineage:
            used = self._used[path]
            for resource, amount in unit.demand.items():
                used[resource] = used.get(resource, 0) + amount
        unit.charged = unit.quota

    def _release(self, unit: Unit) -> None:
        if unit.charged is None or self._tree is None:
            unit.charged = None
            return
        for path in self._tree.nodes[unit.charged].lineage:
            used = self._used[path]
            for resource, amount in unit.demand.items():
                left = used[resource] - amount
                if left:
                    used[resource] = left
                else:
                    del used[resource]
        unit.charged = None

    def _enqueue(self, unit: Unit) -> None:
        """Put an Enqueued unit where it waits: its line, or aside (no quota, never fits)."""
        key = unit.spec.key
        if unit.quota is None:
            self._homeless[key] = None
            if self._tree_known:
                self._notify(unit, "NoQuota", self._no_quota_text(unit))
            return
        too_big = self._never_fits(unit)
        if too_big is not None:
            self._oversized[key] = too_big
            self._notify(unit, "NeverFits", too_big)
            return
        line = self._lines.get(unit.quota)
        if line is None:
            assert self._tree is not None
            policy, priority = self._queues.get(unit.quota, (PRIORITY, 0))
            line = Line(unit.quota, self._tree.nodes[unit.quota].lineage, policy, priority)
            self._lines[unit.quota] = line
        line.add(unit)
        self._active[unit.quota] = line
        if unit.stuck is not None:
            self._notify(unit, "Queued", f"waits in the queue of quota {unit.quota}")

    def _dequeue_from_lines(self, unit: Unit) -> None:
        key = unit.spec.key
        self._homeless.pop(key, None)
        self._oversized.pop(key, None)
        if unit.order is not None and unit.quota is not None:
            line = self._lines[unit.quota]
            line.discard(unit)
            if not line:
                self._active.pop(line.path, None)

    def _notify(self, unit: Unit, kind: NoticeKind, message: str) -> None:
        if kind == "Queued":
            unit.stuck = None
        elif unit.stuck == kind:
            return
        else:
            unit.stuck = kind
        self._notices[unit.spec.key] = Notice(unit.spec.key, kind, message)

    def _never_fits(self, unit: Unit) -> str | None:
        assert self._tree is not None and unit.quota is not None
        for path in self._tree.nodes[unit.quota].lineage:
            cap = self._tree.nodes[path].max
            for resource, amount in unit.demand.items():
                limit = cap.get(resource, None)
                if limit is not None and amount > limit:
                    return (
                        f"asks {describe_amount(resource, amount)} but the max of quota {path} "
                        f"is {describe_amount(resource, limit)}: it can never be dequeued "
                        "unless the tree changes"
                    )
        return None

    def _no_quota_text(self, unit: Unit) -> str:
        spec = unit.spec
        if self._tree is None:
            return "there is no ElasticQuotaTree in force, so no queue can hold the job"
        if spec.quota_label:
            return f"its quota label names {spec.quota_label!r}, which is no node of the tree"
        return f"namespace {spec.namespace!r} is in no quota node of the ElasticQuotaTree"

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
        the shell asks when it writes a unit's status."""
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
        assert unit.quota is not None
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
            node = self._tree.nodes[unit.quota] if self._tree is not None else None
            held = self._used.get(unit.quota, {})
            return WaitReason(
                "Quota",
                f"opted out of reclaim, so it never borrows: quota {unit.quota} holds "
                f"{_describe(held)} of min {_describe(node.min if node else {})} and it needs "
                f"{_describe(unit.demand)} more",
                unit.quota,
            )
        return self._shortage(unit) or WaitReason(
            "Ready", "fits its quota now: dequeued at the next pass", unit.quota
        )

    def _shortage(self, unit: Unit) -> WaitReason | None:
        assert self._tree is not None and unit.quota is not None
        for path in self._tree.nodes[unit.quota].lineage:
            node = self._tree.nodes[path]
            used = self._used[path]
            for resource, amount in sorted(unit.demand.items()):
                cap = node.max.get(resource, None)
                if cap is None:
                    continue
                held = used.get(resource, 0)
                if held + amount > cap:
                    if resource == MAX_JOBS:
                        text = (
                            f"quota {path}: {held} of max {cap} jobs already dequeued "
                            f"(kube-queue/max-jobs)"
                        )
                    else:
                        text = (
                            f"quota {path}: {describe_amount(resource, held)} of max "
                            f"{describe_amount(resource, cap)} in use, needs "
                            f"{describe_amount(resource, amount)} more"
                        )
                    return WaitReason("Quota", text, path, resource)
        return None

    def waiting(self, now: float) -> dict[str, WaitReason]:
        """Every waiting unit's reason (O(units): for reports and tests, not every pass)."""
        out: dict[str, WaitReason] = {}
        for key in self._units:
            reason = self.why(key, now)
            if reason is not None:
                out[key] = reason
        return out


def _describe(used: Mapping[str, int], plus: Mapping[str, int] | None = None) -> str:
    """`4 GPUs` (or the whole vector when it asks no GPU): amounts in numbers for messages."""
    amounts = dict(used)
    for resource, amount in (plus or {}).items():
        amounts[resource] = amounts.get(resource, 0) + amount
    amounts.pop(MAX_JOBS, None)
    if amounts.get("nvidia.com/gpu"):
        return describe_amount("nvidia.com/gpu", amounts["nvidia.com/gpu"])
    return ", ".join(describe_amount(r, a) for r, a in sorted(amounts.items())) or "nothing"
