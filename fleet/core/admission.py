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

import bisect
import heapq
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from fleet.core.quota import MAX_JOBS, Caps, QuotaTree, TreeCheck, check_tree, describe_amount
from fleet.core.resources import Resources

__all__ = [
    "BLOCK",
    "DEQUEUED",
    "ENQUEUED",
    "FAILED",
    "FIFO",
    "HOLDING",
    "PHASES",
    "PRIORITY",
    "RUNNING",
    "SUCCEED",
    "TERMINAL",
    "TIMEOUT_BACKOFF",
    "Admission",
    "AdmissionSettings",
    "Backoff",
    "Dequeue",
    "NoQuotaMode",
    "Notice",
    "Phase",
    "Plan",
    "QueuePolicy",
    "QuotaUsage",
    "Requeue",
    "UnitSpec",
    "UnitState",
    "WaitReason",
    "order_key",
]

Phase = Literal["Enqueued", "Dequeued", "Running", "Succeed", "Failed", "TimeoutBackoff"]
ENQUEUED: Final = "Enqueued"
DEQUEUED: Final = "Dequeued"
RUNNING: Final = "Running"
SUCCEED: Final = "Succeed"
FAILED: Final = "Failed"
TIMEOUT_BACKOFF: Final = "TimeoutBackoff"
PHASES: Final[tuple[Phase, ...]] = (ENQUEUED, DEQUEUED, RUNNING, SUCCEED, FAILED, TIMEOUT_BACKOFF)
HOLDING: Final = frozenset({DEQUEUED, RUNNING})
"""Phases that hold quota."""
TERMINAL: Final = frozenset({SUCCEED, FAILED})

QueuePolicy = Literal["Priority", "Block", "FIFO"]
PRIORITY: Final = "Priority"
BLOCK: Final = "Block"
FIFO: Final = "FIFO"
_POLICIES: Final = frozenset({PRIORITY, BLOCK, FIFO})

NoQuotaMode = Literal["wait", "bypass"]

WaitKind = Literal["NoQuota", "NeverFits", "Quota", "Behind", "Backoff", "Ready", "NoTree"]
NoticeKind = Literal["NoQuota", "NeverFits", "Queued"]


@dataclass(frozen=True, slots=True)
class UnitSpec:
    """What the queue needs to know about one queued job (a QueueUnit's spec, resolved)."""

    key: str
    """Unique id chosen by the caller (e.g. `<namespace>/<unit name>` or the job's UID)."""
    namespace: str
    """The job's namespace: picks the quota node when no quota label is set."""
    resources: Resources
    """The whole gang's total (every replica of every role)."""
    submitted: float
    """Submission time, seconds; the order's tie breaker after priority."""
    priority: int = 0
    """Higher goes first (the PriorityClass value, or the unit's own priority)."""
    quota_label: str | None = None
    """Value of the job's `quota.scheduling.alibabacloud.com/name` label, if any."""


@dataclass(frozen=True, slots=True)
class UnitState:
    """What the shell persists on the QueueUnit's status, so a restart rebuilds the queue."""

    phase: Phase = ENQUEUED
    dequeued_at: float | None = None
    """When the unit was last dequeued (or failed over); starts the placement timeout.
    Required with phase Dequeued."""
    backoff_until: float | None = None
    """With phase TimeoutBackoff: when the unit returns to its queue (absent = at once)."""
    attempts: int = 0
    """How many times the unit was dequeued; the backoff doubles with each."""


@dataclass(frozen=True)
class AdmissionSettings:
    placement_timeout: float = 300.0
    """Seconds a dequeued unit may stay unplaced before it goes to TimeoutBackoff."""
    backoff_seconds: float = 60.0
    """The first backoff; each later one doubles, up to `backoff_limit`."""
    backoff_limit: float = 900.0
    no_quota: NoQuotaMode = "wait"
    """What a unit in no quota node does: wait (reported) or bypass the queue (reported)."""

    def __post_init__(self) -> None:
        if not self.placement_timeout > 0:
            raise ValueError(f"placement_timeout must be positive, got {self.placement_timeout}")
        if self.backoff_seconds < 0 or self.backoff_limit < self.backoff_seconds:
            raise ValueError("need 0 <= backoff_seconds <= backoff_limit")
        if self.no_quota not in ("wait", "bypass"):
            raise ValueError(f"no_quota must be wait or bypass, got {self.no_quota!r}")

    def backoff(self, attempts: int) -> float:
        """The backoff after the `attempts`-th dequeue timed out."""
        if attempts <= 1:
            return self.backoff_seconds
        return min(self.backoff_limit, self.backoff_seconds * 2.0 ** min(attempts - 1, 60))


@dataclass(frozen=True, slots=True)
class Dequeue:
    """Release the unit's job to gang placement (phase Dequeued; it holds its quota now)."""

    key: str
    quota: str | None
    """Path of the quota node charged; None when a unit with no quota bypassed the queue."""
    message: str


@dataclass(frozen=True, slots=True)
class Backoff:
    """The unit was not placed in time: suspend its job again (phase TimeoutBackoff)."""

    key: str
    until: float
    message: str


@dataclass(frozen=True, slots=True)
class Requeue:
    """The unit's backoff ended: it is back in its queue (phase Enqueued)."""

    key: str
    message: str


@dataclass(frozen=True, slots=True)
class Notice:
    """A unit entered or left a state the user must hear about (a condition and an Event):
    `NoQuota` (its namespace or label matches no quota node), `NeverFits` (it asks more than a
    max on its path), `Queued` (back to normal: clear the condition)."""

    key: str
    kind: NoticeKind
    message: str


@dataclass(frozen=True, slots=True)
class WaitReason:
    """Why a unit is not dequeued (see `Admission.why`)."""

    kind: WaitKind
    message: str
    node: str | None = None
    """Path of the quota node that holds the unit back, when one does."""
    resource: str | None = None
    """The resource that is short there (`kube-queue/max-jobs` for the job count)."""


@dataclass
class Plan:
    """What one `plan(now)` decided. Already applied in memory; the shell persists each unit's new
    phase (and times) before acting on it, so a crash in between is replayed, never lost."""

    dequeue: list[Dequeue] = field(default_factory=list)
    backoff: list[Backoff] = field(default_factory=list)
    requeue: list[Requeue] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    wake_at: float | None = None
    """When to call `plan` again even if nothing happens (next timeout or backoff end)."""

    def __bool__(self) -> bool:
        return bool(self.dequeue or self.backoff or self.requeue or self.notices)


@dataclass(frozen=True, slots=True)
class QuotaUsage:
    """What one quota node holds now."""

    path: str
    used: Resources
    """Charged by Dequeued and Running units below it (max-jobs: how many of them)."""
    min: Resources
    max: Caps

    @property
    def jobs(self) -> int:
        return int(self.used.get(MAX_JOBS, 0))

    @property
    def borrowed(self) -> Resources:
        """What it holds beyond its min, per resource (a resource its min does not list is all
        borrowed; the job count is not a capacity and is left out)."""
        return Resources(
            {
                r: a - self.min.get(r, 0)
                for r, a in self.used.items()
                if r != MAX_JOBS and a > self.min.get(r, 0)
            }
        )


# --- Internal state --------------------------------------------------------------------------

OrderKey = tuple[int, float, str]


def order_key(policy: str, spec: UnitSpec) -> OrderKey:
    """A unit's place in its queue: priority (higher first; ignored by FIFO), then submission
    time, then key. Sorting waiting units by it gives the order the queue takes them in."""
    priority = 0 if policy == FIFO else -spec.priority
    return (priority, spec.submitted, spec.key)


class _Unit:
    __slots__ = (
        "attempts",
        "backoff_until",
        "charged",
        "demand",
        "dequeued_at",
        "order",
        "phase",
        "quota",
        "spec",
        "stuck",
        "token",
    )

    def __init__(self, spec: UnitSpec, state: UnitState) -> None:
        self.spec = spec
        self.demand = _demand(spec.resources)
        self.phase: Phase = state.phase
        self.dequeued_at = state.dequeued_at
        self.backoff_until = state.backoff_until
        self.attempts = state.attempts
        self.quota: str | None = None
        #: Path whose lineage holds this unit's charge (None: holds nothing).
        self.charged: str | None = None
        #: Key in its line while Enqueued there.
        self.order: OrderKey | None = None
        #: The last NoQuota/NeverFits notice given (None: none, or cleared).
        self.stuck: NoticeKind | None = None
        #: Bumped on every phase change; stale heap entries carry an old token.
        self.token = 0


def _demand(resources: Resources) -> Resources:
    """What a unit holds while dequeued: its resources and one job."""
    amounts = {r: a for r, a in resources.items() if a > 0 and r != MAX_JOBS}
    amounts[MAX_JOBS] = 1
    return Resources(amounts)


class _Line:
    """The waiting units of one quota node, grouped by demand, each group sorted by order; the
    groups' heads are kept sorted too, so the best unit that fits is the first fitting head."""

    __slots__ = (
        "_amounts",
        "_askers",
        "_lows",
        "count",
        "heads",
        "lineage",
        "path",
        "policy",
        "priority",
        "shapes",
        "wake",
    )

    def __init__(self, path: str, lineage: tuple[str, ...], policy: str, priority: int) -> None:
        self.path = path
        self.lineage = lineage
        self.policy = policy
        self.priority = priority
        self.count = 0
        #: Demand -> sorted order keys of the units asking exactly that.
        self.shapes: dict[Resources, list[OrderKey]] = {}
        #: (order key, demand) of every group's first unit, sorted: heads[0] is the line's head.
        self.heads: list[tuple[OrderKey, Resources]] = []
        #: After a fruitless look: per resource, the least headroom at which some unit could fit
        #: (each waiting demand was short in at least one resource; the smallest amount short
        #: per resource). Below every threshold nothing here fits. None: look again.
        self.wake: dict[str, int] | None = None
        #: Per resource: how many groups ask each amount, and a min-heap of those amounts
        #: (entries whose count fell to zero are dropped lazily), for the floor.
        self._amounts: dict[str, dict[int, int]] = {}
        self._lows: dict[str, list[int]] = {}
        #: Per resource, how many groups ask some of it.
        self._askers: dict[str, int] = {}

    def floor(self) -> dict[str, int]:
        """The least any waiting unit asks, per resource every group asks: when the headroom is
        below it in any resource, nothing here fits, whatever the groups. O(resources)."""
        groups = len(self.shapes)
        out: dict[str, int] = {}
        for resource, counts in self._amounts.items():
            if self._askers[resource] != groups:
                continue  # some group asks none of it
            low = self._lows[resource]
            while not counts.get(low[0]):
                heapq.heappop(low)
            out[resource] = low[0]
        return out

    def _count(self, demand: Resources, step: int) -> None:
        for resource, amount in demand.items():
            self._askers[resource] = self._askers.get(resource, 0) + step
            counts = self._amounts.setdefault(resource, {})
            now = counts.get(amount, 0) + step
            if now:
                if not counts.get(amount):
                    heapq.heappush(self._lows.setdefault(resource, []), amount)
                counts[amount] = now
            else:
                del counts[amount]
                if not counts:
                    del self._amounts[resource]
                    del self._lows[resource]

    def order_of(self, spec: UnitSpec) -> OrderKey:
        return order_key(self.policy, spec)

    def add(self, unit: _Unit) -> None:
        key = self.order_of(unit.spec)
        unit.order = key
        demand = unit.demand
        group = self.shapes.get(demand)
        if group is None:
            self.shapes[demand] = [key]
            bisect.insort(self.heads, (key, demand))
            self._count(demand, 1)
        else:
            if key < group[0]:
                _remove_sorted(self.heads, (group[0], demand))
                bisect.insort(self.heads, (key, demand))
            bisect.insort(group, key)
        self.count += 1
        self.wake = None

    def discard(self, unit: _Unit) -> None:
        key = unit.order
        if key is None:
            return
        unit.order = None
        demand = unit.demand
        group = self.shapes[demand]
        if group[0] == key:
            _remove_sorted(self.heads, (key, demand))
            del group[0]
            if group:
                bisect.insort(self.heads, (group[0], demand))
            else:
                del self.shapes[demand]
                self._count(demand, -1)
        else:
            _remove_sorted(group, key)
        self.count -= 1
        self.wake = None

    def head(self) -> OrderKey | None:
        return self.heads[0][0] if self.heads else None

    def units(self) -> list[str]:
        """Keys of every waiting unit, in order."""
        return [k[2] for k in sorted(k for group in self.shapes.values() for k in group)]

    def __len__(self) -> int:
        return self.count


def _remove_sorted(items: list[Any], key: Any) -> None:
    i = bisect.bisect_left(items, key)
    if i < len(items) and items[i] == key:
        del items[i]


def _fits(demand: Mapping[str, int], headroom: Mapping[str, int]) -> bool:
    for resource, amount in demand.items():
        left = headroom.get(resource)
        if left is not None and amount > left:
            return False
    return True


def _short(demand: Mapping[str, int], headroom: Mapping[str, int]) -> str | None:
    """The first resource `demand` does not fit in `headroom` (None: it fits)."""
    for resource, amount in demand.items():
        left = headroom.get(resource)
        if left is not None and amount > left:
            return resource
    return None


def _asleep(wake: Mapping[str, int], headroom: Mapping[str, int]) -> bool:
    """Whether the headroom is still below every wake threshold (nothing can fit yet)."""
    return all(headroom.get(resource, math.inf) < need for resource, need in wake.items())


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
        self._units: dict[str, _Unit] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._lines: dict[str, _Line] = {}
        self._active: dict[str, _Line] = {}
        #: Enqueued units with no quota node, and units that can never fit; both in arrival order.
        self._homeless: dict[str, None] = {}
        self._oversized: dict[str, str] = {}
        self._queues: dict[str, tuple[str, int]] = {}
        self._timeouts: list[tuple[float, int, str]] = []
        self._backoffs: list[tuple[float, int, str]] = []
        self._notices: dict[str, Notice] = {}

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
        if policy not in _POLICIES:
            raise ValueError(
                f"Queue for {path}: queuePolicy {policy!r} is not one of {sorted(_POLICIES)}"
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
            unit = _Unit(spec, state)
            self._units[spec.key] = unit
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
        unit.demand = _demand(spec.resources)
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
        return True

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
        self._dequeue_from_lines(unit)
        self._release(unit)
        unit.token += 1
        self._notices.pop(key, None)
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
            self._release(unit)
            self._set_phase(unit, TIMEOUT_BACKOFF)
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
            if line.wake is not None and _asleep(line.wake, headroom):
                continue
            self._offer(line, headroom, heap)
        while heap:
            rank, key = heapq.heappop(heap)
            unit = self._units[key]
            line = self._lines[unit.quota or ""]
            headroom = self._headroom(line.lineage)
            if unit.order is None or not _fits(unit.demand, headroom):
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
        line: _Line,
        headroom: dict[str, int],
        heap: list[tuple[tuple[int, int, OrderKey], str]],
    ) -> None:
        """Push the line's best unit that fits `headroom`, or remember (as wake thresholds) what
        it would take for one to fit."""
        if not line.heads:
            return
        floor = line.floor()
        short = _short(floor, headroom)
        if short is not None:  # even the cheapest demand of that resource does not fit
            line.wake = {short: floor[short]}
            return
        wake: dict[str, int] = {}
        heads = line.heads[:1] if line.policy == BLOCK else line.heads
        for head, demand in heads:
            short = _short(demand, headroom)
            if short is None:
                unit = self._units[head[2]]
                heapq.heappush(heap, (self._rank(line, unit), head[2]))
                return
            need = demand[short]
            if need < wake.get(short, math.inf):
                wake[short] = need
        line.wake = wake

    def _rank(self, line: _Line, unit: _Unit) -> tuple[int, int, OrderKey]:
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

    def _set_phase(self, unit: _Unit, phase: Phase) -> None:
        unit.phase = phase
        unit.token += 1

    def _admit(self, unit: _Unit, now: float) -> None:
        self._set_phase(unit, DEQUEUED)
        unit.dequeued_at = now
        unit.attempts += 1
        self._charge(unit)
        self._arm_timeout(unit, now + self.settings.placement_timeout)

    def _arm_timeout(self, unit: _Unit, deadline: float) -> None:
        heapq.heappush(self._timeouts, (deadline, unit.token, unit.spec.key))

    def _arm_backoff(self, unit: _Unit, until: float | None) -> None:
        unit.backoff_until = until
        heapq.heappush(
            self._backoffs, (-math.inf if until is None else until, unit.token, unit.spec.key)
        )

    def _charge(self, unit: _Unit) -> None:
        if unit.quota is None or self._tree is None or unit.charged is not None:
            return
        for path in self._tree.nodes[unit.quota].lineage:
            used = self._used[path]
            for resource, amount in unit.demand.items():
                used[resource] = used.get(resource, 0) + amount
        unit.charged = unit.quota

    def _release(self, unit: _Unit) -> None:
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

    def _enqueue(self, unit: _Unit) -> None:
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
            line = _Line(unit.quota, self._tree.nodes[unit.quota].lineage, policy, priority)
            self._lines[unit.quota] = line
        line.add(unit)
        self._active[unit.quota] = line
        if unit.stuck is not None:
            self._notify(unit, "Queued", f"waits in the queue of quota {unit.quota}")

    def _dequeue_from_lines(self, unit: _Unit) -> None:
        key = unit.spec.key
        self._homeless.pop(key, None)
        self._oversized.pop(key, None)
        if unit.order is not None and unit.quota is not None:
            line = self._lines[unit.quota]
            line.discard(unit)
            if not line:
                self._active.pop(line.path, None)

    def _notify(self, unit: _Unit, kind: NoticeKind, message: str) -> None:
        if kind == "Queued":
            unit.stuck = None
        elif unit.stuck == kind:
            return
        else:
            unit.stuck = kind
        self._notices[unit.spec.key] = Notice(unit.spec.key, kind, message)

    def _never_fits(self, unit: _Unit) -> str | None:
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

    def _no_quota_text(self, unit: _Unit) -> str:
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
        return self._shortage(unit) or WaitReason(
            "Ready", "fits its quota now: dequeued at the next pass", unit.quota
        )

    def _shortage(self, unit: _Unit) -> WaitReason | None:
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
