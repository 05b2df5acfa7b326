"""Kube Queue in the simulator: the controller's admission code behind the `FleetQueue` plug point.

`QuotaQueue` runs `fleet.core.admission.Admission` unchanged: a job pushed on the fleet becomes a
queue unit (namespace = the trace's team, resources = the whole gang), `drain` calls `plan(now)`,
and the units it dequeues are offered to placement. A dequeued job placement cannot place stays
dequeued, holding its quota, and is offered again whenever capacity frees; after the placement
timeout the admission backs it off (`TimeoutBackoff`) and its quota goes to others. A job that
fails over is pushed again: it keeps its quota (`unplaced`) and is not re-queued.

What the plug point cannot carry, and how that is handled:

* the simulation schedules no wake-up for the queue, so a placement timeout or a backoff end
  takes effect at the next event after it is due (events are dense in the traces: seconds apart
  under load);
* the simulation does not tell the queue when a job gives up after too many failovers; with
  faults on (`watch_give_ups`) the queue looks for given-up jobs among its holders whenever
  capacity frees (a give-up always frees its copy);
* the simulation's steps do not interleave as the controller's reconciles and passes do: a
  placed job is charged by the controller's rule (`Admission.charge_running`), but a placement
  that lands after its unit timed out, or a reclaim's victim found running elsewhere, cannot
  happen here (docs/queue.md, "Late and moved gangs").

Trees: `load_tree` reads an ElasticQuotaTree YAML (the object, its spec, or just the root);
`philly_teams_tree` builds the `philly-teams` dataset's tree from the Philly VC sizes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from fleet.core.admission import (
    DEQUEUED,
    RUNNING,
    SUCCEED,
    Admission,
    AdmissionSettings,
    Placed,
    UnitSpec,
    unit_end,
)
from fleet.core.admission.hold import Hold
from fleet.core.quota import QuotaTree, check_tree
from fleet.core.resources import GPU, Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.simulate.errors import DataError
from fleet.simulate.fleets import FleetSpec
from fleet.simulate.jobs import SimJob, State
from fleet.simulate.metrics import RunResult
from fleet.simulate.policies import PlacementPolicy
from fleet.simulate.queueing import ShapeFifo
from fleet.simulate.simulation import SimConfig, simulate
from fleet.simulate.trace import JobSpec

__all__ = [
    "NO_QUEUE",
    "QUEUE_MODES",
    "RECLAIM_MODE",
    "QuotaQueue",
    "load_tree",
    "parse_queue_modes",
    "philly_teams_tree",
    "quota_tree",
    "replay_queued",
]

NO_QUEUE = "no queue"
#: Kube Queue's Priority policy with reclaim on (the other modes run without it).
RECLAIM_MODE = "Priority+reclaim"
QUEUE_MODES: tuple[str, ...] = (NO_QUEUE, "Priority", "Block")
#: A reclaim is looked for at most this often (simulated seconds): the controller looks on every
#: pass, but a reclaim's proof packs gangs, and the traces' events come seconds apart.
RECLAIM_INTERVAL = 30.0
#: The victim's copy is deleted this long after its eviction (the controller's default).
RECLAIM_GRACE = 30.0
"""What `--queue` compares by default: the fleet's FIFO queue, then Kube Queue with each policy."""

#: The philly-teams tree: a team may hold up to this many times its VC's GPUs (borrowing).
PHILLY_TEAM_MAX_FACTOR = 2
#: A leaf for the trace's teams that are in no VC of the VC list (min 0: they only borrow).
PHILLY_OTHER_TEAMS = "other"
PHILLY_OTHER_MAX_GPUS = 64


def parse_queue_modes(text: str) -> list[str]:
    """`none,Priority,Block` (any subset, in that spelling; `none` = no queue)."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        mode = NO_QUEUE if part in ("none", NO_QUEUE) else part
        if mode not in (*QUEUE_MODES, "FIFO", RECLAIM_MODE):
            raise ValueError(
                f"unknown queue mode {part!r} (expected none, Priority, Block, FIFO, "
                f"{RECLAIM_MODE})"
            )
        if mode not in out:
            out.append(mode)
    if not out:
        raise ValueError("no queue mode given")
    return out


def quota_tree(spec: Mapping[str, Any], source: str) -> QuotaTree:
    """Check a tree spec; every problem is an error here (a simulation needs a tree in force)."""
    check = check_tree(spec)
    if check.tree is None:
        problems = "; ".join(str(p) for p in check.errors)
        raise DataError(source, None, f"invalid ElasticQuotaTree: {problems}")
    return check.tree


def load_tree(path: str | Path) -> dict[str, Any]:
    """An ElasticQuotaTree spec from YAML: the whole object, its `spec`, or a bare root node."""
    path = Path(path)
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as err:
        raise DataError(path, None, f"cannot read: {err.strerror or err}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise DataError(path, line, f"not YAML: {getattr(err, 'problem', err)}") from err
    trees = [d for d in docs if isinstance(d, Mapping) and d.get("kind") == "ElasticQuotaTree"]
    doc: Any = trees[0] if trees else (docs[0] if len(docs) == 1 else None)
    if not isinstance(doc, Mapping):
        raise DataError(path, None, "expected one ElasticQuotaTree (or its spec, or a root node)")
    if "spec" in doc:
        doc = doc["spec"]
    spec = dict(doc) if "root" in doc else {"root": dict(doc)}
    quota_tree(spec, str(path))  # fail early, with the file named
    return spec


def philly_teams_tree(
    vcs: Sequence[tuple[str, int]], teams: Iterable[str], total: int
) -> dict[str, Any]:
    """Philly's virtual clusters as teams: each a leaf (namespace = the VC) with min = its VC's
    GPUs and max = `PHILLY_TEAM_MAX_FACTOR` times that (capped at the fleet); the root's min and
    max are all the fleet's GPUs; teams of the trace in no VC share an `other` leaf with min 0."""
    children: list[dict[str, Any]] = []
    known = set()
    for vc, gpus in vcs:
        known.add(vc)
        children.append(
            {
                "name": vc,
                "namespaces": [vc],
                "min": {GPU: gpus},
                "max": {GPU: min(total, PHILLY_TEAM_MAX_FACTOR * gpus)},
            }
        )
    others = sorted(set(teams) - known)
    if others:
        children.append(
            {
                "name": PHILLY_OTHER_TEAMS,
                "namespaces": others,
                "min": {GPU: 0},
                "max": {GPU: min(total, PHILLY_OTHER_MAX_GPUS)},
            }
        )
    return {
        "root": {"name": "root", "min": {GPU: total}, "max": {GPU: total}, "children": children}
    }


def fleet_vcs(fleet: FleetSpec) -> list[tuple[str, int]]:
    """(member, GPUs) of a fleet whose members are Philly's VCs."""
    return [(m.name, m.total(GPU)) for m in fleet.members]


class Reclaimer(Protocol):
    """What the simulation offers a queue that evicts."""

    def running_copies(self) -> dict[str, Placed]: ...

    def reclaim_snapshots(self) -> list[ClusterSnapshot]: ...

    def evict_by_queue(
        self, job: SimJob, *, preempted: bool, by: str, message: str, grace: float
    ) -> None: ...

    def sync_holds(self, holds: dict[str, Hold]) -> None: ...


class QuotaQueue:
    """The fleet queue with Kube Queue admission in front of placement (see module docstring)."""

    def __init__(
        self,
        tree: QuotaTree,
        *,
        policy: str = "Priority",
        settings: AdmissionSettings | None = None,
        watch_give_ups: bool = False,
    ) -> None:
        self.admission = Admission(settings)
        self.admission.set_tree(tree)
        for path in tree.nodes:
            self.admission.configure_queue(path, policy)
        self.policy = policy
        self.watch_give_ups = watch_give_ups
        #: Every job the queue knows and has not seen end, by unit key.
        self._jobs: dict[str, SimJob] = {}
        #: Dequeued, not yet placed: offered to placement whenever capacity frees.
        self._released: ShapeFifo[SimJob] = ShapeFifo()
        self._released_under: dict[str, object] = {}
        #: Jobs not placed yet (waiting, backing off or released): what `len` reports.
        self._unplaced: set[str] = set()
        self.counters = dict.fromkeys(
            (
                "dequeues",
                "timeouts",
                "requeues",
                "no_quota",
                "never_fits",
                "bypassed",
                "reclaims",
                "preemptions",
                "holds",
            ),
            0,
        )
        self.tree = tree
        #: The simulation, when it lets the queue evict (reclaim on).
        self._sim: Reclaimer | None = None
        self._next_reclaim = -math.inf
        #: Gangs that reclaimed, until their victims' copies are deleted (the grace period).
        self._room: dict[str, float] = {}
        #: Per team (quota path): GPUs of its placed gangs, and a count of the GPU demands of
        #: its jobs not placed yet (the smallest tells whether one would fit within its min).
        self._placed_gpus: dict[str, int] = {}
        self._waiting: dict[str, dict[int, int]] = {}
        self._last = 0.0
        #: Per team: GPU-seconds below its min while a job that would fit within it waited;
        #: gangs evicted; GPU-seconds of work they lost.
        self.violation: dict[str, float] = {}
        self.evicted: dict[str, int] = {}
        self.lost: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._unplaced)

    def attach(self, sim: Reclaimer) -> None:
        """The simulation offers to carry out evictions: used when reclaim is on."""
        if self.admission.settings.reclaim or self.admission.settings.preemption:
            self._sim = sim

    # -- per-team accounting (the min-guarantee violation) --------------------------------------

    def _team(self, key: str) -> str | None:
        return self.admission.quota_of(key)

    def _wait(self, key: str) -> None:
        if key in self._unplaced:
            return
        self._unplaced.add(key)
        team, gpus = self._team(key), self._gpus(key)
        if team is not None:
            counts = self._waiting.setdefault(team, {})
            counts[gpus] = counts.get(gpus, 0) + 1

    def _unwait(self, key: str) -> None:
        if key not in self._unplaced:
            return
        self._unplaced.discard(key)
        team, gpus = self._team(key), self._gpus(key)
        counts = self._waiting.get(team or "")
        if counts is not None and counts.get(gpus):
            counts[gpus] -= 1
            if not counts[gpus]:
                del counts[gpus]

    def _gpus(self, key: str) -> int:
        job = self._jobs.get(key)
        return job.gpus if job is not None else 0

    def _account(self, now: float) -> None:
        """Add, per team, the GPU-seconds since the last event that it spent below its min while
        a job of it that would fit within the min waited."""
        width = now - self._last
        self._last = now
        if width <= 0:
            return
        for path, node in self.tree.nodes.items():
            low = int(node.min.get(GPU, 0))
            have = self._placed_gpus.get(path, 0)
            counts = self._waiting.get(path)
            if low <= have or not counts:
                continue
            if min(counts) <= low - have:
                self.violation[path] = self.violation.get(path, 0.0) + (low - have) * width

    def _placed(self, key: str, delta: int) -> None:
        team = self._team(key)
        if team is not None:
            self._placed_gpus[team] = self._placed_gpus.get(team, 0) + delta * self._gpus(key)

    @staticmethod
    def _unit(job: SimJob) -> UnitSpec:
        shape = job.spec.shape
        total = Resources(shape.per_worker) * shape.workers
        return UnitSpec(job.spec.id, job.spec.team, total, job.spec.submit)

    def push(self, job: SimJob, now: float) -> None:
        key = job.spec.id
        self._account(now)
        if key not in self._jobs:
            self._jobs[key] = job
            self.admission.upsert(self._unit(job))
            self._wait(key)
            return
        # Known: a failover (it ran) keeps its quota and goes straight back to placement; a
        # dequeued job re-keyed by the simulation is offered again under its new key.
        phase = self.admission.phase(key)
        if phase == RUNNING:
            self._placed(key, -1)
        self._wait(key)
        if phase == RUNNING:
            self.admission.unplaced(key, now)
            self._release(job)
        elif phase == DEQUEUED:
            self._release(job)

    def remove(self, job: SimJob) -> None:
        """The simulation calls this to re-key a pending job (a push follows) and, in principle,
        for a job that gave up; only the latter leaves the queue."""
        key = job.spec.id
        self._withdraw(job)
        if job.state is State.GAVE_UP:
            self._unwait(key)
            self._end(key, None, gave_up=True, now=None)

    def capacity_freed(self) -> None:
        self._released.reopen()
        if self.watch_give_ups:
            for job in [j for j in self._jobs.values() if j.state is State.GAVE_UP]:
                self.remove(job)

    def drain(self, attempt: Callable[[SimJob], bool], now: float) -> None:
        # As the controller does: a gang whose victims' copies are still there keeps its quota
        # past the placement timeout.
        self._room = {k: until for k, until in self._room.items() if until > now}
        self.admission.awaiting_room(self._room, now)
        plan = self.admission.plan(now)
        counters = self.counters
        for backoff in plan.backoff:
            self._withdraw(self._jobs[backoff.key])
            counters["timeouts"] += 1
        counters["requeues"] += len(plan.requeue)
        for notice in plan.notices:
            if notice.kind == "NoQuota":
                counters["no_quota"] += 1
            elif notice.kind == "NeverFits":
                counters["never_fits"] += 1
        for dequeue in plan.dequeue:
            counters["dequeues"] += 1
            if dequeue.quota is None:
                counters["bypassed"] += 1
            self._release(self._jobs[dequeue.key])

        def place(job: SimJob) -> bool:
            if not attempt(job):
                return False
            key = job.spec.id
            self._released_under.pop(key, None)
            self._unwait(key)
            # The controller's rule for a gang that runs (`Admission.charge_running`). Here a
            # released job is always Dequeued when it is placed: a backoff withdraws it first
            # and an eviction is carried out in the same step that decides it, so the
            # refusal (a late placement, a victim that had moved) cannot happen; the core's
            # tests drive those interleavings (tests/core/test_recharge_properties.py).
            charge = self.admission.charge_running(key, now)
            assert charge.granted, charge.message
            self._placed(key, +1)
            return True

        self._account(now)
        self._sync_holds()
        self._released.drain(place)
        if self._sim is not None and now >= self._next_reclaim and self._unplaced:
            self._next_reclaim = now + RECLAIM_INTERVAL
            if self._reclaim(now):
                self._sync_holds()
                self._released.drain(place)
        self._sync_holds()

    def _sync_holds(self) -> None:
        """The simulation's views hold what the admission holds (as the controller's do)."""
        if self._sim is not None:
            self._sim.sync_holds(dict(self.admission.room_held()))

    def member_lost(self, name: str, now: float) -> None:
        """A member went down: the room held in it for claimants is given up."""
        self.admission.member_lost(name, now)
        self._sync_holds()

    def _reclaim(self, now: float) -> bool:
        """Evict as the core decides (`Admission.reclaim`), through the simulation."""
        sim = self._sim
        assert sim is not None
        snapshots = sim.reclaim_snapshots()
        plan = self.admission.reclaim(
            now,
            sim.running_copies(),
            lambda key: self._jobs[key].spec.shape.gang if key in self._jobs else None,
            lambda _key: snapshots,
        )
        for evict in plan.evict:
            job = self._jobs[evict.key]
            team = self._team(evict.key) or ""
            self._placed(evict.key, -1)
            sim.evict_by_queue(
                job,
                preempted=evict.kind == "Preempt",
                by=evict.by,
                message=evict.message,
                grace=RECLAIM_GRACE,
            )
            self._wait(evict.key)
            self.counters["reclaims" if evict.kind == "Reclaim" else "preemptions"] += 1
            self.evicted[team] = self.evicted.get(team, 0) + 1
            self.lost[team] = self.lost.get(team, 0.0) + evict.lost_gpu_hours * 3600.0
        for evict in plan.evict:
            self._room[evict.by] = now + RECLAIM_GRACE
        for dequeue in plan.dequeue:
            self.counters["dequeues"] += 1
            self._release(self._jobs[dequeue.key])
        for hold in plan.hold:
            # A claimant is no longer interchangeable with gangs of its shape (the room held
            # is its own): it waits in a line of its own, so theirs failing does not block it.
            job = self._jobs[hold.claimant]
            self._withdraw(job)
            self._release(job, line=("held", hold.claimant))
        self.counters["holds"] += len(plan.hold)
        return bool(plan.dequeue or plan.hold)

    def finished(self, job: SimJob, now: float) -> None:
        """The job's copy completed: the simulation's jobs only complete by succeeding."""
        self._account(now)
        if self.admission.phase(job.spec.id) == RUNNING:
            self._placed(job.spec.id, -1)
        self._end(job.spec.id, "Succeeded", gave_up=False, now=now)

    def _end(self, key: str, phase: str | None, *, gave_up: bool, now: float | None) -> None:
        """The job ended, by the controller's rule (`unit_end`): its unit goes Succeed or
        Failed, releasing its quota once, and the simulation forgets it. A job that fails in
        its member is failed over by the simulation (`push`), which the rule does not end."""
        end = unit_end(phase, gave_up=gave_up, retried_on_failure=True)
        if end is None:
            return
        self.admission.finished(key, end == SUCCEED, now if now is not None else 0.0)
        self._jobs.pop(key, None)
        self.admission.remove(key)

    def _release(self, job: SimJob, line: object = None) -> None:
        key = job.spec.id
        if key in self._released_under:
            return
        under = job.queue_key if line is None else line
        self._released_under[key] = under
        self._released.push(job, under, job.seq)

    def _withdraw(self, job: SimJob) -> None:
        under = self._released_under.pop(job.spec.id, None)
        if under is not None:
            self._released.remove(job, under)

    def team_figures(self, end: float) -> dict[str, dict[str, float]]:
        """Per quota path: the min-guarantee violation, gangs evicted, work lost (hours)."""
        self._account(end)
        return {
            path: {
                "violation_gpu_hours": self.violation.get(path, 0.0) / 3600.0,
                "evicted": float(self.evicted.get(path, 0)),
                "lost_gpu_hours": self.lost.get(path, 0.0) / 3600.0,
            }
            for path in self.tree.nodes
        }

    def holding(self) -> list[str]:
        """Keys of the jobs that hold quota now (for tests)."""
        return [k for k in self._jobs if self.admission.holds(k)]

    def running(self) -> list[str]:
        return [k for k in self._jobs if self.admission.phase(k) == RUNNING]


def replay_queued(
    fleet: FleetSpec,
    trace: Sequence[JobSpec],
    policy: PlacementPolicy,
    config: SimConfig,
    *,
    tree: QuotaTree,
    mode: str,
    settings: AdmissionSettings | None = None,
    label: str | None = None,
) -> RunResult:
    """One run under queue `mode`: `no queue` (the fleet's FIFO) or a Kube Queue policy. The
    result is labelled `label` (default: the mode) and carries the queue's counters."""
    faults = config.faults
    queue: QuotaQueue | None = None
    if mode != NO_QUEUE:
        base = settings if settings is not None else AdmissionSettings()
        reclaim = mode == RECLAIM_MODE
        queue = QuotaQueue(
            tree,
            policy="Priority" if reclaim else mode,
            settings=dataclasses.replace(base, reclaim=reclaim, preemption=False),
            watch_give_ups=faults.enabled,
        )
    result = simulate(fleet, trace, policy, config, queue=queue)
    result.policy = label or mode
    if queue is not None:
        result.counters.update({f"queue_{k}": v for k, v in queue.counters.items()})
        result.teams = queue.team_figures(result.end)
    return result
