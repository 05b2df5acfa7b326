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
  capacity frees (a give-up always frees its copy).

Trees: `load_tree` reads an ElasticQuotaTree YAML (the object, its spec, or just the root);
`philly_teams_tree` builds the `philly-teams` dataset's tree from the Philly VC sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from fleet.core.admission import (
    DEQUEUED,
    RUNNING,
    SUCCEED,
    Admission,
    AdmissionSettings,
    UnitSpec,
    unit_end,
)
from fleet.core.quota import QuotaTree, check_tree
from fleet.core.resources import GPU, Resources
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
    "QuotaQueue",
    "load_tree",
    "parse_queue_modes",
    "philly_teams_tree",
    "quota_tree",
    "replay_queued",
]

NO_QUEUE = "no queue"
QUEUE_MODES: tuple[str, ...] = (NO_QUEUE, "Priority", "Block")
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
        if mode not in (*QUEUE_MODES, "FIFO"):
            raise ValueError(f"unknown queue mode {part!r} (expected none, Priority, Block, FIFO)")
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
            ("dequeues", "timeouts", "requeues", "no_quota", "never_fits", "bypassed"), 0
        )

    def __len__(self) -> int:
        return len(self._unplaced)

    @staticmethod
    def _unit(job: SimJob) -> UnitSpec:
        shape = job.spec.shape
        total = Resources(shape.per_worker) * shape.workers
        return UnitSpec(job.spec.id, job.spec.team, total, job.spec.submit)

    def push(self, job: SimJob, now: float) -> None:
        key = job.spec.id
        if key not in self._jobs:
            self._jobs[key] = job
            self._unplaced.add(key)
            self.admission.upsert(self._unit(job))
            return
        # Known: a failover (it ran) keeps its quota and goes straight back to placement; a
        # dequeued job re-keyed by the simulation is offered again under its new key.
        self._unplaced.add(key)
        phase = self.admission.phase(key)
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
            self._unplaced.discard(key)
            self._end(key, None, gave_up=True, now=None)

    def capacity_freed(self) -> None:
        self._released.reopen()
        if self.watch_give_ups:
            for job in [j for j in self._jobs.values() if j.state is State.GAVE_UP]:
                self.remove(job)

    def drain(self, attempt: Callable[[SimJob], bool], now: float) -> None:
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
            self._unplaced.discard(key)
            self.admission.placed(key, now)
            return True

        self._released.drain(place)

    def finished(self, job: SimJob, now: float) -> None:
        """The job's copy completed: the simulation's jobs only complete by succeeding."""
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

    def _release(self, job: SimJob) -> None:
        key = job.spec.id
        if key in self._released_under:
            return
        self._released_under[key] = job.queue_key
        self._released.push(job, job.queue_key, job.seq)

    def _withdraw(self, job: SimJob) -> None:
        under = self._released_under.pop(job.spec.id, None)
        if under is not None:
            self._released.remove(job, under)

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
        queue = QuotaQueue(tree, policy=mode, settings=settings, watch_give_ups=faults.enabled)
    result = simulate(fleet, trace, policy, config, queue=queue)
    result.policy = label or mode
    if queue is not None:
        result.counters.update({f"queue_{k}": v for k, v in queue.counters.items()})
    return result
