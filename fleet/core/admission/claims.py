"""Reclaim's orchestration: which waiting units claim, in what order, and what an eviction
changes in the queue's books (victims back in their queues, the claimant dequeued).

`fleet.core.admission.reclaim` decides the victims of one claim (pure, over snapshots); `Claims`
finds the claims, hands each to it and applies the choice, as part of `Admission` (its
`reclaim` is the shell's entry point). docs/queue.md, "Reclaim", has the long form.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterator, Mapping

from fleet.core.admission.bookkeeping import Books
from fleet.core.admission.budget import LossBudget
from fleet.core.admission.decisions import Dequeue, Evict, Notice, Plan
from fleet.core.admission.explain import describe
from fleet.core.admission.hold import hold_for
from fleet.core.admission.minimum import fits_within_min, holds_within_min
from fleet.core.admission.phases import DEQUEUED, ENQUEUED, RUNNING
from fleet.core.admission.policies import BLOCK
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
    eligible,
)
from fleet.core.admission.unit import OrderKey, Unit
from fleet.core.admission.work import WorkWeights
from fleet.core.admission.worth import judge

__all__ = ["Claims"]


class Claims(Books):
    """Reclaim and preemption, on the admission's books (see the module docstring)."""

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
        weights = WorkWeights.of(self._tree)
        runners = self._runners(running, weights)
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
            size = weights.size(claim.demand)
            budget = LossBudget.of(size, settings.reclaim_loss_per_gpu)
            choice = choose(
                kind,
                self._tree,
                self._used,
                claim,
                runners,
                members_for(claim.key),
                now,
                scratch=scratch,
                budget=budget.gpu_hours,
            )
            if choice is None and not math.isinf(budget.gpu_hours):
                spared = [
                    lost
                    for r in runners
                    if eligible(kind, self._tree, claim, r)
                    and not budget.allows(lost := r.lost(now))
                ]
                if spared:
                    self.over_budget[claim.key] = budget.describe(spared)
            if choice is not None and settings.reclaim_worth and choice.victims:
                verdict = judge(
                    size,
                    claim.priority,
                    claim.waited,
                    choice.victims,
                    now,
                    lookahead=settings.reclaim_lookahead,
                    min_saving=settings.reclaim_min_saving,
                )
                if not verdict.worth:
                    self.not_worth += 1
                    choice = None
            if choice is None:
                self._retry[claim.key] = now + settings.reclaim_retry
                continue
            self._retry.pop(claim.key, None)
            self.over_budget.pop(claim.key, None)
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

    def awaiting_room(self, keys: Collection[str], now: float) -> None:
        """The units whose victims are still leaving: their evictions are not finished, or not
        even recorded yet (the shell reads them from the victims' bindings, which keep an
        eviction until its copy *and its pods* are gone from the member's view, before every
        pass). Their placement does not time out until the room they evicted for is free, and
        from then on has its whole `placement_timeout` again; their hold (module `hold`) lasts
        as long, and records the moment (`Hold.freed`), so a restart keeps the same clock. A
        victim's pods may take long to stop (a long `terminationGracePeriodSeconds`, a job
        that checkpoints on SIGTERM): a claimant timed out meanwhile gave its held room to
        another gang and evicted a second victim for itself (seen on a loaded clean-clone
        run). A unit named again after its room was freed (a record the shell saw late, a
        restart) waits again, its clock stopped."""
        waiting = {k for k in keys if k in self._units}
        for key in self._awaiting_room - waiting:
            if key in self._units:
                self._room_freed[key] = now
                self._clock_hold(key, now)
        for key in waiting - self._awaiting_room:
            self._room_freed.pop(key, None)
            self._clock_hold(key, None)
        self._awaiting_room = waiting

    def _clock_hold(self, key: str, freed: float | None) -> None:
        hold = self._holds.get(key)
        if hold is not None and hold.freed != freed:
            self._holds[key] = dataclasses.replace(hold, freed=freed)

    def waiting_units(self) -> bool:
        """Whether any unit waits in a line or is dequeued (cheap: a reclaim needs one)."""
        return bool(self._active) or bool(self._timeouts)

    def _runners(self, running: Mapping[str, Placed], weights: WorkWeights) -> list[Runner]:
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
                    weights.size(unit.demand),
                    protected=placed.protected or not unit.spec.borrows,
                    limit=placed.limit,
                    checkpoint=placed.checkpoint,
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
                    waited=now - unit.spec.submitted,
                ),
            )

    def _holds_within_min(self, unit: Unit) -> bool:
        assert self._tree is not None and unit.charged is not None
        return holds_within_min(self._tree, self._used, unit.charged, unit.demand)

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
                    f"{describe(claimant.demand)} of it back; quota {victim.quota} borrows "
                    f"({describe(self._used.get(victim.quota or '', {}), victim.demand)} in use "
                    f"with this gang, min {describe(self._tree.nodes[victim.quota or ''].min)})"
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
        if self.settings.hold:
            hold = hold_for(
                choice.claim,
                choice.cluster,
                choice.assignment,
                (v.key for v in choice.victims),
                now,
            )
            self._holds[choice.claim] = hold
            plan.hold.append(hold)
        message = (
            f"{what} {len(choice.victims)} gang(s) ({gpus} GPUs) in {choice.cluster} so that its "
            f"{describe(claimant.demand)} fit there"
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
