"""The event engine: one policy, one fleet, one trace, simulated time.

Fleet side (the controller's view): one `ClusterSnapshot` per member holding bound pods *and*
in-flight reservations. A job is placed with the policy (`place` underneath), the assignment is
reserved for `reservation_ttl` seconds, and the gang joins its member's line. When the member
binds the pods they carry the placement's owner key, which consumes the reservation, exactly as
the controller's informer events do. A job nothing fits waits on the fleet queue and is retried
when capacity frees (a job ends or fails, a reservation expires, a member comes back, an
exclusion ends): event driven, never polled.

Reservations (a policy written `nodes+reserve`, ACK's `enableReservation`): the fleet's choice
becomes Koordinator Reservations in the member first. After `reservation_latency` the member's
scheduler reserves the whole gang if it still fits there; until then, and while it does not fit,
the Reservations stay Pending (the scheduler retries them as capacity frees). The verdict is
`fleet.core.reservation.judge_reservations` and the binding's transitions are
`fleet.core.lifecycle.reserving / reserved / reservation_failed`, as in the controller: all
Available dispatches the gang, whose pods then take the reserved capacity with no race; the wait
running out (`reservation_wait`) releases everything, avoids the member for `reservation_retry`
seconds and places the gang again. Reserved capacity counts as allocated from the moment it is
reserved. `dispatch_latency` is the time from the fleet's dispatch until the gang's pods reach
the member's scheduler (0: at once); member-local pods (`localload`) arriving in that window
are the race.

Member side: see `member`. The engine is a heap of timed events plus the sorted trace read in
step (arrivals are never pushed on the heap); all events of one instant are applied before the
members and then the fleet act on the new state.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from fleet.core import lifecycle
from fleet.core.admission import Placed
from fleet.core.admission.hold import Hold, place_claimant, sync
from fleet.core.assignment import Assignment
from fleet.core.domains import pinned
from fleet.core.domainwait import DEFAULT_WAIT_SECONDS as DEFAULT_DOMAIN_WAIT_SECONDS
from fleet.core.failover import GiveUp, Move, Observation, Stay, delete_before_placing
from fleet.core.inventory import PodInfo
from fleet.core.placement import Decision
from fleet.core.reservation import (
    DEFAULT_RETRY_AFTER_SECONDS,
    DEFAULT_WAIT_SECONDS,
    FallBack,
    Reserved,
    SeenReservation,
    judge_reservations,
    plan_reservations,
)
from fleet.core.snapshot import ClusterSnapshot
from fleet.simulate.faults import FailoverJudge, Faults, core_judge
from fleet.simulate.fleets import RACK_LABEL, FleetSpec
from fleet.simulate.jobs import Copy, SimJob, State
from fleet.simulate.localload import HORIZON_AFTER_LAST_ARRIVAL, ArrivalStream, LocalSource
from fleet.simulate.member import Member
from fleet.simulate.metrics import RunResult
from fleet.simulate.policies import PlacementPolicy
from fleet.simulate.queueing import FifoQueue, FleetQueue
from fleet.simulate.trace import JobSpec

# Event kinds, in the order they apply within one instant: capacity first, arrivals last.
(
    FINISH,
    FAIL,
    LOCAL_END,
    OUTAGE_END,
    PURGE,
    EXPIRE,
    UNEXCLUDE,
    DOMAIN_WAIT_END,
    OUTAGE_START,
    CHECK,
    RESERVE_DEADLINE,
    RESERVE,
    ARRIVE,
    LOCAL_START,
) = range(14)


@dataclass(frozen=True)
class SimConfig:
    #: How long the fleet holds a placement for pods that have not shown up bound. The
    #: controller has no fixed value yet; 60 s is the default here.
    reservation_ttl: float = 60.0
    #: "backfill" (coscheduling: an unstartable gang does not block younger ones) or "strict".
    member_order: str = "backfill"
    faults: Faults = field(default_factory=Faults)
    #: Seconds from the fleet's dispatch until the gang's pods reach the member's scheduler.
    dispatch_latency: float = 0.0
    #: Member-local pods competing for capacity (None: the fleet is the members' only user).
    local_load: LocalSource | None = None
    #: With a `+reserve` policy: seconds until the member has reserved a gang that fits.
    reservation_latency: float = 1.0
    #: How long the fleet waits for every Reservation to be Available before falling back.
    reservation_wait: float = DEFAULT_WAIT_SECONDS
    #: How long a member whose reservation failed is avoided by that gang.
    reservation_retry: float = DEFAULT_RETRY_AFTER_SECONDS
    #: Seconds between a job's checkpoints, its state preserved across evictions and failovers
    #: (its policy's statePreservation carries the checkpoint to the next copy): a new copy
    #: resumes from the last one. 0: no checkpoint, every new copy reruns from the start.
    checkpoint_interval: float = 0.0
    #: Per team, overriding `checkpoint_interval`.
    checkpoint_teams: Mapping[str, float] = field(default_factory=dict)

    def checkpoint_of(self, team: str) -> float:
        """The checkpoint interval of `team`'s jobs (0: none)."""
        return self.checkpoint_teams.get(team, self.checkpoint_interval)

    #: The node label the report counts domains by (racks from `fleets.with_racks`).
    topology_level: str = RACK_LABEL
    #: With a `+preferred` policy: seconds a gang that fits only spread waits for one domain
    #: (`gangTopology.waitSeconds`; `cli.replay` makes the policy with it).
    topology_wait: float = DEFAULT_DOMAIN_WAIT_SECONDS

    def __post_init__(self) -> None:
        if self.member_order not in ("backfill", "strict"):
            raise ValueError(f"member order must be backfill or strict, got {self.member_order!r}")
        if self.reservation_ttl < 0:
            raise ValueError("reservation TTL must not be negative")
        for name in ("dispatch_latency", "reservation_latency", "reservation_retry"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', ' ')} must not be negative")
        if self.reservation_wait <= 0:
            raise ValueError("reservation wait must be positive")
        if self.checkpoint_interval < 0 or any(v < 0 for v in self.checkpoint_teams.values()):
            raise ValueError("checkpoint interval must not be negative")
        if self.topology_wait < 0:
            raise ValueError("topology wait must not be negative")


class Simulation:
    def __init__(
        self,
        fleet: FleetSpec,
        trace: Sequence[JobSpec],
        policy: PlacementPolicy,
        config: SimConfig | None = None,
        *,
        queue: FleetQueue | None = None,
        judge: FailoverJudge | None = None,
    ) -> None:
        self.config = config if config is not None else SimConfig()
        self.policy = policy
        self.fleet = fleet
        self.trace = sorted(trace, key=lambda j: j.submit)
        strict = self.config.member_order == "strict"
        self.members = {m.name: Member(m, strict=strict) for m in fleet.members}
        #: The controller's view: what members report plus in-flight reservations.
        self.views = {
            m.name: ClusterSnapshot.build(m.name, m.nodes, labels=m.labels) for m in fleet.members
        }
        self._view_list = list(self.views.values())
        self.queue: FleetQueue = queue if queue is not None else FifoQueue()
        attach = getattr(self.queue, "attach", None)
        if attach is not None:
            attach(self)  # a queue that reclaims evicts through the simulation
        faults = self.config.faults
        self.judge = judge if judge is not None else core_judge(faults.settings)
        self.now = 0.0
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = itertools.count()
        self._down: set[str] = set()
        self._outages: dict[str, int] = {}
        self._dirty: dict[Member, None] = {}
        self._freed = False
        self._zombies: dict[SimJob, list[Copy]] = {}
        self._allocated = 0
        #: Room held for claimants of a reclaim (`fleet.core.admission.hold`), as reserved in
        #: the views: by claimant (the queue's unit key, the job's id).
        self._held: dict[str, Hold] = {}
        #: Jobs whose wait for a domain started in this drain: re-keyed after it (their line
        #: is their wait's, see `_queue_key`).
        self._rekey: list[SimJob] = []
        #: When a job last changed state; the run "ends" there (bookkeeping events after it,
        #: such as a reservation expiring with nothing left to place, do not count).
        self._last_change = 0.0
        self._ran = False
        self.samples: list[tuple[float, int]] = [(0.0, 0)]
        self.counters = dict.fromkeys(
            (
                "decisions",
                "dispatches",
                "mis_dispatches",
                "failovers",
                "failures",
                "purged",
                "reservation_attempts",
                "reservation_fallbacks",
                "local_started",
                "local_turned_away",
                "preemptions",
            ),
            0,
        )
        #: Seconds from the start of reserving until every Reservation was Available.
        self.time_to_available: list[float] = []
        self._local: dict[str, ArrivalStream] = {}
        self._local_until = 0.0
        self._handlers: dict[int, Callable[[Any], None]] = {
            FINISH: self._on_finish,
            FAIL: self._on_fail,
            OUTAGE_END: self._on_outage_end,
            PURGE: self._on_purge,
            EXPIRE: self._on_expire,
            UNEXCLUDE: self._on_unexclude,
            DOMAIN_WAIT_END: self._on_domain_wait_end,
            OUTAGE_START: self._on_outage_start,
            CHECK: self._on_check,
            RESERVE_DEADLINE: self._on_reserve_deadline,
            RESERVE: self._on_reserve,
            ARRIVE: self._on_arrive,
            LOCAL_START: self._on_local_start,
            LOCAL_END: self._on_local_end,
        }

    # The loop ---------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Replay the whole trace; a `Simulation` runs once."""
        if self._ran:
            raise RuntimeError("a Simulation runs once; build a new one")
        self._ran = True
        started = time.perf_counter()
        jobs = [SimJob(spec, i) for i, spec in enumerate(self.trace)]
        for outage in self.config.faults.outages:
            if outage.member not in self.members:
                raise ValueError(f"outage names unknown member {outage.member!r}")
            self._push(outage.start, OUTAGE_START, outage.member)
            self._push(outage.end, OUTAGE_END, outage.member)
        load = self.config.local_load
        if load is not None:
            last = self.trace[-1].submit if self.trace else 0.0
            self._local_until = last + HORIZON_AFTER_LAST_ARRIVAL
            for name in self.members:
                stream = self._local[name] = load.stream(name)
                self._push(stream.gap(), LOCAL_START, name)
        heap = self._heap
        handlers = self._handlers
        n = len(jobs)
        i = 0
        while True:
            arrival = jobs[i].spec.submit if i < n else math.inf
            event = heap[0][0] if heap else math.inf
            now = min(arrival, event)
            if now == math.inf:
                break
            self.now = now
            while heap and heap[0][0] <= now:
                _, kind, _, payload = heapq.heappop(heap)
                handlers[kind](payload)
            while i < n and jobs[i].spec.submit <= now:
                job = jobs[i]
                job.pending_since = now
                self.policy.observe(job.spec.shape.gang)
                self.queue.push(job, now)
                i += 1
            self._settle()
        end = max(self._last_change, self.trace[-1].submit if self.trace else 0.0)
        for job in jobs:
            if job.state is State.WAITING:
                job.stuck_in = job.member
                if job.misdispatched:
                    job.sat += end - job.dispatched_at
            elif job.state is State.PENDING:
                job.pending_total += end - job.pending_since
        return RunResult(
            policy=self.policy.name,
            jobs=jobs,
            samples=self.samples,
            total_gpus=self.fleet.total(),
            end=end,
            counters=dict(self.counters),
            wall_seconds=time.perf_counter() - started,
            time_to_available=self.time_to_available,
        )

    def _push(self, when: float, kind: int, payload: Any) -> None:
        heapq.heappush(self._heap, (when, kind, next(self._seq), payload))

    def _settle(self) -> None:
        """Members first (gangs already dispatched have first claim), then the fleet queue."""
        if self._dirty:
            dirty = list(self._dirty)
            self._dirty.clear()
            for member in dirty:
                if not member.down:
                    for job in list(member.reserving):  # Pending Reservations retried first
                        self._try_reserve(member, job)
                    member.waiting.reopen()
                    member.waiting.drain(partial(self._try_start, member))
        if self._freed:
            self._freed = False
            self.queue.capacity_freed()
        if len(self.queue):
            self.queue.drain(self._try_dispatch, self.now)
        while self._rekey:
            # A gang whose wait for a domain started moves to its wait's line, and the line it
            # left is tried again: the controller tries every pending gang, so the gangs of
            # its shape behind it start their own waits now, not after it is placed.
            for job in self._rekey:
                if job.state is State.PENDING:
                    self.queue.remove(job)
                    job.queue_key = self._queue_key(job)
                    self.queue.push(job, self.now)
            self._rekey.clear()
            self.queue.capacity_freed()
            self.queue.drain(self._try_dispatch, self.now)

    # Fleet side -------------------------------------------------------------------------------
    def _try_dispatch(self, job: SimJob) -> bool:
        now = self.now
        self.counters["decisions"] += 1
        failed_over = job.life.excluded(now)
        hold = self._held.get(job.spec.id)

        def decide(names: list[str]) -> Decision:
            views = self._view_list if len(names) > 1 else [self.views[n] for n in names]
            return self.policy.decide(
                job.spec.shape.gang,
                views,
                not_ready=self._down,
                failed_over=failed_over,
                now=now,
                domain_wait_since=job.life.domain_wait_since,
            )

        # The claimant's held room is its own, and its member tried first (as the controller).
        decision = place_claimant(hold, self.views, decide, _chosen_cluster)
        placement = decision.placement
        if placement is None:
            wait = decision.domain_wait
            if wait is not None and job.life.domain_wait_since != wait.since:
                job.life = lifecycle.waiting_for_domain(job.life, wait.since)
                self._push(wait.until, DOMAIN_WAIT_END, (job, wait.since))
                self._rekey.append(job)
            return False
        if hold is not None:
            del self._held[job.spec.id]  # the queue ends it when it hears of the placement
            if placement.cluster != hold.cluster:
                self._freed = True
        name = placement.cluster
        config = self.config
        self.views[name].reserve(job.key, placement.assignment, now + config.reservation_ttl)
        job.pending_total += now - job.pending_since
        if job.first_decision is None:
            job.first_decision = now
        job.member = name
        job.domains = placement.assignment.domains
        self._last_change = now
        if self.policy.reserve:
            job.state = State.RESERVING
            job.life = lifecycle.reserving(job.life, name, now)
            job.gen += 1
            self.counters["reservation_attempts"] += 1
            self._push(now + config.reservation_latency, RESERVE, (job, job.gen))
            self._push(now + config.reservation_wait, RESERVE_DEADLINE, (job, job.gen))
            return True
        job.life = lifecycle.scheduled(job.life, name, now)
        self._dispatch(job, self.members[name])
        return True

    def _dispatch(self, job: SimJob, member: Member) -> None:
        """The gang's copy is sent to `member`; its pods arrive after the dispatch latency."""
        now = self.now
        self.counters["dispatches"] += 1
        job.state = State.WAITING
        job.dispatched_at = now
        member.jobs[job] = None
        if self.config.dispatch_latency > 0:
            job.arrived = False
            self._push(now + self.config.dispatch_latency, ARRIVE, (job, job.gen))
        else:
            self._arrive(job, member)

    def _arrive(self, job: SimJob, member: Member) -> None:
        job.arrived = True
        member.waiting.push(job, job.member_key, job.seq)
        if not member.down:
            member.waiting.drain(partial(self._try_start, member))
        if job.state is State.WAITING:
            job.mis_dispatches += 1
            job.misdispatched = True
            self.counters["mis_dispatches"] += 1
            self._push(self.now + self.config.reservation_ttl, EXPIRE, member.name)

    def _on_arrive(self, payload: tuple[SimJob, int]) -> None:
        job, gen = payload
        if gen == job.gen and job.state is State.WAITING and not job.arrived:
            assert job.member is not None
            self._arrive(job, self.members[job.member])

    # Reservations -----------------------------------------------------------------------------
    def _on_reserve(self, payload: tuple[SimJob, int]) -> None:
        """The member's scheduler takes up the gang's Reservations."""
        job, gen = payload
        if gen != job.gen or job.state is not State.RESERVING:
            return
        assert job.member is not None
        member = self.members[job.member]
        member.reserving[job] = None
        if not member.down:
            self._try_reserve(member, job)

    def _try_reserve(self, member: Member, job: SimJob) -> bool:
        """All or nothing: every Reservation of the gang binds now, or all stay Pending."""
        assignment = self._member_fit(member, job)
        if assignment is None:
            return False
        if job.first_start is None:
            self._record_spread(member, job, assignment)
        now = self.now
        since = job.life.reserving_since
        assert since is not None
        plan = plan_reservations(job.spec.shape.gang, job.key)
        seen = dict.fromkeys(plan.names, SeenReservation("Available"))
        verdict = judge_reservations(
            plan, seen, since=since, now=now, wait_seconds=self.config.reservation_wait
        )
        assert isinstance(verdict, Reserved)
        del member.reserving[job]
        self.time_to_available.append(now - since)
        job.life = lifecycle.reserved(job.life)
        self.counters["dispatches"] += 1
        job.dispatched_at = now
        member.jobs[job] = None
        # The reserved capacity is the gang's: its pods take it when they arrive, whatever
        # landed in the member meanwhile.
        copy, pods = member.bind(job, assignment, now)
        self._run(member, job, copy, pods, start=now + self.config.dispatch_latency)
        return True

    def _on_reserve_deadline(self, payload: tuple[SimJob, int]) -> None:
        job, gen = payload
        if gen != job.gen or job.state is not State.RESERVING:
            return
        assert job.member is not None and job.life.reserving_since is not None
        member = self.members[job.member]
        plan = plan_reservations(job.spec.shape.gang, job.key)
        verdict = judge_reservations(
            plan,
            {},  # none Available: the ones that were would have dispatched the gang
            since=job.life.reserving_since,
            now=self.now,
            wait_seconds=self.config.reservation_wait,
        )
        assert isinstance(verdict, FallBack)
        member.reserving.pop(job, None)
        if self.views[member.name].release(job.key):
            self._freed = True
        self.counters["reservation_fallbacks"] += 1
        job.life = lifecycle.reservation_failed(
            job.life, verdict.reason, self.now, retry_after=self.config.reservation_retry
        )
        job.gen += 1
        job.member = None
        job.state = State.PENDING
        job.pending_since = self.now
        self._push(self.now + self.config.reservation_retry, UNEXCLUDE, (job, member.name))
        job.queue_key = self._queue_key(job)
        self.queue.push(job, self.now)
        self._last_change = self.now

    # Member-local load ------------------------------------------------------------------------
    def _on_local_start(self, name: str) -> None:
        stream = self._local[name]
        pod_name, gang, duration = stream.next_pod()
        member = self.members[name]
        assignment = None if member.down else member.fits(gang, self.policy.member_mix())
        if assignment is None:
            self.counters["local_turned_away"] += 1
        else:
            (slot,) = assignment
            pod = PodInfo(pod_name, "local", pod_name, slot.node, slot.requests)
            member.snapshot.upsert_pod(pod)
            self.views[name].upsert_pod(pod)  # the fleet's watch sees it bound
            self.counters["local_started"] += 1
            self._push(self.now + duration, LOCAL_END, (name, pod_name))
        when = self.now + stream.gap()
        if when <= self._local_until:
            self._push(when, LOCAL_START, name)

    def _on_local_end(self, payload: tuple[str, str]) -> None:
        name, uid = payload
        member = self.members[name]
        member.snapshot.remove_pod(uid)
        self.views[name].remove_pod(uid)
        self._dirty[member] = None
        self._freed = True

    def _on_expire(self, name: str) -> None:
        if self.views[name].expire(self.now):
            self._freed = True

    # Member side ------------------------------------------------------------------------------
    def _member_fit(self, member: Member, job: SimJob) -> Assignment | None:
        """Where the member binds the gang now. The copy is pinned to the domain(s) the fleet
        chose (`domains.pinned`): required node affinity for a required rule; for a preferred
        one the member tries the domain first, then anywhere."""
        gang, mix = job.spec.shape.gang, self.policy.member_mix()
        if job.domains:
            assignment = member.fits(pinned(gang, job.domains), mix)
            if assignment is not None or any(d.required for d in job.domains):
                return assignment
        return member.fits(gang, mix)

    def _try_start(self, member: Member, job: SimJob) -> bool:
        assignment = self._member_fit(member, job)
        if assignment is None:
            return False
        if job.first_start is None:
            self._record_spread(member, job, assignment)
        copy, pods = member.bind(job, assignment, self.now)
        self._run(member, job, copy, pods, start=self.now)
        return True

    def _record_spread(self, member: Member, job: SimJob, assignment: Assignment) -> None:
        """How many nodes and domains (of `config.topology_level`) the gang's pods use."""
        nodes = {slot.node for slot in assignment if slot.node is not None}
        level = self.config.topology_level
        values = set()
        for name in nodes:
            info = member.snapshot.node(name)
            value = info.labels.get(level) if info is not None else None
            if value is not None:
                values.add(value)
        job.nodes_used = len(nodes)
        job.domains_used = len(values)

    def _run(
        self, member: Member, job: SimJob, copy: Copy, pods: list[PodInfo], *, start: float
    ) -> None:
        """The gang's pods are bound in `member`; they run from `start` (later than now when
        reserved capacity waits for the pods to arrive)."""
        now = self.now
        view = self.views[member.name]
        for pod in pods:
            view.upsert_pod(pod)
        job.state = State.RUNNING
        job.arrived = True
        job.copy = copy
        waited = now - job.dispatched_at
        if job.misdispatched:
            job.sat += waited
            job.misdispatched = False
        if job.first_start is None:
            job.first_start = start
        self._allocate(copy.gpus)
        duration = job.spec.duration - job.progress
        if math.isfinite(duration):
            point = self.config.faults.failure_point(job.spec.id, job.attempt)
            if point is not None:
                self._push(start + point * duration, FAIL, copy)
            else:
                self._push(start + duration, FINISH, copy)
        for old in self._zombies.get(job, ()):
            if old.alive and not self.members[old.member].down:
                self._purge(old)

    def _free(self, copy: Copy) -> None:
        if not copy.alive:
            return
        copy.alive = False
        member = self.members[copy.member]
        member.unbind(copy)
        view = self.views[copy.member]
        for uid in copy.pods:
            view.remove_pod(uid)
        self._allocate(-copy.gpus)
        self._dirty[member] = None
        self._freed = True

    def _allocate(self, gpus: int) -> None:
        self._allocated += gpus
        now = self.now
        self._last_change = now
        if self.samples[-1][0] == now:
            self.samples[-1] = (now, self._allocated)
        else:
            self.samples.append((now, self._allocated))

    def _on_finish(self, copy: Copy) -> None:
        if not copy.alive:
            return
        self._free(copy)
        if copy.zombie:
            return
        job = copy.job
        job.state = State.DONE
        job.end = self.now
        job.copy = None
        job.gen += 1
        self._leave_member(job)
        self.queue.finished(job, self.now)

    def _on_fail(self, copy: Copy) -> None:
        if not copy.alive or copy.zombie:
            return
        self._free(copy)
        self.counters["failures"] += 1
        job = copy.job
        job.state = State.FAILED
        job.copy = None
        self._stop(job, copy)
        self._judge(job)

    def _stop(self, job: SimJob, copy: Copy) -> None:
        """The copy stops before its end: the work since its last checkpoint is lost; what the
        checkpoints kept (state preserved) is the next copy's head start."""
        ran = max(self.now - copy.started, 0.0)
        saved = self._checkpointed(job, ran)
        job.progress += saved
        job.lost_gpu_seconds += (ran - saved) * copy.gpus

    def _checkpointed(self, job: SimJob, ran: float) -> float:
        """Seconds of a copy that has run `ran` kept by its last checkpoint."""
        interval = self.config.checkpoint_of(job.spec.team)
        if interval <= 0:
            return 0.0
        return min(math.floor(ran / interval) * interval, job.spec.duration - job.progress)

    def _leave_member(self, job: SimJob) -> None:
        if job.member is not None:
            self.members[job.member].jobs.pop(job, None)

    # Failover ---------------------------------------------------------------------------------
    def _judge(self, job: SimJob) -> None:
        assert job.member is not None
        member = self.members[job.member]
        observed = Observation(cluster_ready=not member.down, job_failed=job.state is State.FAILED)
        verdict = self.judge(
            observed, job.life.timers, self.now, failovers=job.failovers, cluster=job.member
        )
        if isinstance(verdict, Stay):
            job.life = lifecycle.with_timers(job.life, verdict.timers)
            job.gen += 1
            if verdict.recheck_at is not None:
                self._push(verdict.recheck_at, CHECK, (job, job.gen))
        elif isinstance(verdict, Move):
            self._last_change = self.now
            moved = lifecycle.failed_over(
                job.life,
                verdict,
                self.config.faults.settings,
                self.now,
                old_cluster_reachable=not member.down,
            )
            self._evict(job, delete_now=moved.delete_old_copy)
            self.counters["failovers"] += 1
            job.life = moved.binding
            until = moved.binding.exclusions[-1].until
            if until is not None:
                self._push(until, UNEXCLUDE, (job, job.member))
            self._leave_member(job)
            job.member = None
            job.next_attempt()
            job.state = State.PENDING
            job.pending_since = self.now
            job.queue_key = self._queue_key(job)
            self.queue.push(job, self.now)
        else:
            assert isinstance(verdict, GiveUp)
            self._last_change = self.now
            mode = self.config.faults.settings.purge_mode_for(verdict.reason)
            self._evict(
                job, delete_now=delete_before_placing(mode, old_cluster_reachable=not member.down)
            )
            self._leave_member(job)
            job.life = lifecycle.gave_up(job.life, verdict)
            job.state = State.GAVE_UP
            job.end = self.now

    def _evict(self, job: SimJob, *, delete_now: bool) -> None:
        """Take the job's current copy out of its member, as a failover or give-up does;
        `delete_now` as the lifecycle decided (purge mode Directly, cluster reachable)."""
        assert job.member is not None
        member = self.members[job.member]
        now = self.now
        job.gen += 1
        if job.state is State.WAITING:
            if job.arrived:
                member.waiting.remove(job, job.member_key)
            job.arrived = True
            if self.views[member.name].release(job.key):
                self._freed = True
            if job.misdispatched:
                job.sat += now - job.dispatched_at
                job.misdispatched = False
        elif job.state is State.RUNNING:
            copy = job.copy
            assert copy is not None
            job.copy = None
            self._stop(job, copy)
            copy.zombie = True
            copy.evicted_at = now
            if delete_now:
                self._free(copy)
                self.counters["purged"] += 1
            else:
                self._zombies.setdefault(job, []).append(copy)

    # Reclaim (the queue evicts) ------------------------------------------------------------------
    def running_copies(self) -> dict[str, Placed]:
        """Every running gang's copy: job id -> where, since when, under which owner key (the
        pods' owner in the member's snapshot), for the queue's reclaim."""
        out: dict[str, Placed] = {}
        for member in self.members.values():
            for copy in member.copies.values():
                if copy.alive and not copy.zombie and copy.job.copy is copy:
                    job = copy.job
                    ran = max(self.now - copy.started, 0.0)
                    saved = self._checkpointed(job, ran)
                    out[job.spec.id] = Placed(
                        member.name,
                        copy.key,
                        copy.started,
                        limit=job.spec.limit,
                        checkpoint=copy.started + saved if saved > 0 else None,
                    )
        return out

    def reclaim_snapshots(self) -> list[ClusterSnapshot]:
        """The controller's views of the members that are up (what a reclaim proves on)."""
        return [v for name, v in self.views.items() if name not in self._down]

    def evict_by_queue(
        self, job: SimJob, *, preempted: bool, by: str, message: str, grace: float
    ) -> None:
        """The queue evicted the job's running gang whole (reclaim or preemption): recorded as
        the controller records it (`lifecycle.evicted_by_queue`, no failover charged), the copy
        deleted after `grace`, the job pending again (the queue holds it, Enqueued)."""
        assert job.member is not None and job.state is State.RUNNING
        now = self.now
        self._last_change = now
        job.life = lifecycle.evicted_by_queue(
            job.life,
            preempted=preempted,
            evicted_for=by,
            message=message,
            now=now,
            grace_period_seconds=grace,
        )
        copy = job.copy
        self._evict(job, delete_now=grace <= 0)
        if grace > 0 and copy is not None:
            self._push(now + grace, PURGE, copy)
        self.counters["preemptions"] += 1
        self._leave_member(job)
        job.member = None
        job.next_attempt()
        job.state = State.PENDING
        job.pending_since = now
        job.queue_key = self._queue_key(job)

    def sync_holds(self, holds: dict[str, Hold]) -> None:
        """Make the views hold exactly the queue's holds (`hold.sync`): a hold that ended gives
        its room back to everyone; a new one is reserved under its own key until it ends (no
        expiry: a hold has no clock of its own, it ends with its claimant's placement timeout)."""
        present = {hold.key: claimant for claimant, hold in self._held.items()}
        release, reserve = sync(present, holds)
        for key in release:
            old = self._held.pop(present[key])
            if self.views[old.cluster].release(key):
                self._freed = True
        for hold in reserve:
            self._held[hold.claimant] = hold
            self.views[hold.cluster].reserve(hold.key, hold.assignment(), math.inf)

    def _purge(self, copy: Copy) -> None:
        """The binding's eviction for this copy decides, as in the controller: no eviction
        (purge mode Never) keeps it until it ends by itself."""
        job = copy.job
        evictions = [e for e in job.life.evictions if e.from_cluster == copy.member]
        plan = lifecycle.purge_plan(
            evictions,
            successor="Running" if job.state is State.RUNNING else None,
            now=self.now,
        )
        if plan.delete:
            self._free(copy)
            self.counters["purged"] += 1
            job.life = lifecycle.evictions_done(job.life, [copy.member])
        elif plan.recheck_at is not None:
            self._push(plan.recheck_at, PURGE, copy)

    def _on_purge(self, copy: Copy) -> None:
        if copy.alive and not self.members[copy.member].down:
            self._purge(copy)

    def _on_check(self, payload: tuple[SimJob, int]) -> None:
        job, gen = payload
        if gen == job.gen and job.state in (State.WAITING, State.RUNNING, State.FAILED):
            self._judge(job)

    def _on_unexclude(self, payload: tuple[SimJob, str]) -> None:
        job, name = payload
        if name in job.life.excluded(self.now):
            return  # excluded again (a later failover from the same cluster)
        if job.state is State.PENDING:
            self.queue.remove(job)
            job.queue_key = self._queue_key(job)
            self.queue.push(job, self.now)
        else:
            job.queue_key = self._queue_key(job)

    def _queue_key(self, job: SimJob) -> object:
        """Jobs are interchangeable on the fleet queue when shape, exclusions and the start of
        their wait for a domain (if any) agree."""
        excluded = job.life.excluded(self.now)
        key: object = job.spec.shape if not excluded else (job.spec.shape, frozenset(excluded))
        since = job.life.domain_wait_since
        return key if since is None else (key, "domain-wait", since)

    def _on_domain_wait_end(self, payload: tuple[SimJob, float]) -> None:
        """A gang's wait for a domain ran out: it is tried again (spread, if no domain holds
        it), as the controller requeues it at that time."""
        job, since = payload
        if job.state is State.PENDING and job.life.domain_wait_since == since:
            self._freed = True

    def _on_outage_start(self, name: str) -> None:
        self._outages[name] = self._outages.get(name, 0) + 1
        if self._outages[name] > 1:
            return
        member = self.members[name]
        member.down = True
        self._down.add(name)
        lost = getattr(self.queue, "member_lost", None)
        if lost is not None:
            lost(name, self.now)  # the holds in it end
        for job in list(member.jobs):
            self._judge(job)

    def _on_outage_end(self, name: str) -> None:
        self._outages[name] -= 1
        if self._outages[name] > 0:
            return
        member = self.members[name]
        member.down = False
        self._down.discard(name)
        self._dirty[member] = None
        self._freed = True
        for job in list(member.jobs):
            self._judge(job)
        for copy in [c for c in member.copies.values() if c.zombie]:
            self._purge(copy)


def simulate(
    fleet: FleetSpec,
    trace: Sequence[JobSpec],
    policy: PlacementPolicy,
    config: SimConfig | None = None,
    *,
    queue: FleetQueue | None = None,
    judge: FailoverJudge | None = None,
) -> RunResult:
    """Replay `trace` on `fleet` under `policy`; see the module docstring."""
    return Simulation(fleet, trace, policy, config, queue=queue, judge=judge).run()


def _chosen_cluster(decision: Decision) -> str | None:
    return decision.placement.cluster if decision.placement is not None else None
