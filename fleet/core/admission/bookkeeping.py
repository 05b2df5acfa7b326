"""The admission's state and its bookkeeping: units, the quota each node holds, the waiting
lines, timers and notices, and the small rules every part of the queue shares (a unit's rank
across queues, whether it may borrow, a line's headroom).

`Books` is the base of `Admission` (admission.py: events and the dequeue pass) and of `Claims`
(claims.py: reclaim's orchestration); the state lives here once, so both read the same books.
"""

from __future__ import annotations

import heapq
import math

from fleet.core.admission.decisions import Notice, NoticeKind
from fleet.core.admission.explain import never_fits_text, no_quota_text
from fleet.core.admission.hold import Hold, HoldEnd
from fleet.core.admission.line import Line
from fleet.core.admission.minimum import below_min, fits_within_min
from fleet.core.admission.phases import DEQUEUED, Phase, UnitSpec
from fleet.core.admission.policies import PRIORITY
from fleet.core.admission.settings import AdmissionSettings
from fleet.core.admission.unit import OrderKey, Unit
from fleet.core.quota import QuotaTree

__all__ = ["Books"]


class Books:
    """What the queue knows and holds (see the module docstring); no decisions."""

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
        #: When each claimant's victims finished leaving (`awaiting_room`): its placement
        #: timeout counts from then.
        self._room_freed: dict[str, float] = {}
        #: Room held for claimants (module `hold`), by claimant; and holds ended since the last
        #: plan, for the shell to release.
        self._holds: dict[str, Hold] = {}
        self._unheld: list[tuple[Hold, HoldEnd]] = []
        #: Evictions found but not made because they were not worth their cost (a counter).
        self.not_worth = 0
        #: Claims whose last try found no eviction within their loss budget (module `budget`),
        #: with the budget in words; dropped once an eviction is made for them.
        self.over_budget: dict[str, str] = {}

    # --- The tree ------------------------------------------------------------------------------
    @property
    def tree(self) -> QuotaTree | None:
        return self._tree

    def _may_borrow(self, line: Line, unit: Unit) -> bool:
        """A unit that opted out of reclaim goes only while its node stays within its min."""
        if unit.spec.borrows:
            return True
        assert self._tree is not None
        return fits_within_min(self._tree, self._used, line.path, unit.demand)

    def _rank(self, line: Line, unit: Unit) -> tuple[int, int, OrderKey]:
        assert unit.order is not None
        assert self._tree is not None
        within = below_min(self._tree, self._used, line.path, unit.demand)
        return (0 if within else 1, -line.priority, unit.order)

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
        return never_fits_text(self._tree, unit.quota, unit.demand)

    def _no_quota_text(self, unit: Unit) -> str:
        return no_quota_text(self._tree, unit.spec)

    def _end_hold(self, key: str, why: HoldEnd) -> None:
        hold = self._holds.pop(key, None)
        if hold is not None:
            self._unheld.append((hold, why))
