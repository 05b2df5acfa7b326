"""A job's life in the simulation, and the copies it leaves in member clusters.

States: PENDING (no member fits; waits on the fleet) -> [RESERVING (with reservations: the
member reserves the gang's capacity; on failure or timeout back to PENDING)] -> WAITING
(dispatched; sits in its member until the member's gang scheduler can bind every pod) ->
RUNNING -> DONE. Failure injection adds FAILED (the member copy failed; the failover clock
runs) and GAVE_UP (failed over too often).
A failover sends the job back to PENDING with its failed cluster excluded.

A `Copy` is what one attempt holds in a member. It outlives a failover when the cluster was lost
(the pods keep running there, unseen) until the purge mode deletes it.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import Enum

from fleet.core import lifecycle
from fleet.core.assignment import Domain
from fleet.simulate.trace import JobSpec


class State(Enum):
    PENDING = "pending"
    #: Placed in a member whose Reservations are being made; dispatched once all are Available.
    RESERVING = "reserving"
    WAITING = "waiting"
    RUNNING = "running"
    FAILED = "failed"
    DONE = "done"
    GAVE_UP = "gave-up"


class Copy:
    """The pods of one attempt in one member."""

    __slots__ = ("alive", "evicted_at", "gpus", "job", "key", "member", "pods", "started", "zombie")

    def __init__(
        self, job: SimJob, key: str, member: str, pods: list[str], gpus: int, started: float
    ) -> None:
        self.job = job
        self.key = key
        self.member = member
        self.pods = pods
        self.gpus = gpus
        self.started = started
        #: Left behind by a failover; holds its nodes until purged or finished.
        self.zombie = False
        self.evicted_at = 0.0
        self.alive = True


class SimJob:
    """Mutable per-run state of one `JobSpec`; `seq` is its arrival order (FIFO key)."""

    __slots__ = (
        "arrived",
        "attempt",
        "copy",
        "dispatched_at",
        "domains",
        "domains_used",
        "end",
        "first_decision",
        "first_start",
        "gen",
        "key",
        "life",
        "lost_gpu_seconds",
        "member",
        "mis_dispatches",
        "misdispatched",
        "nodes_used",
        "pending_since",
        "pending_total",
        "progress",
        "queue_key",
        "sat",
        "seq",
        "spec",
        "state",
        "stuck_in",
    )

    def __init__(self, spec: JobSpec, seq: int) -> None:
        self.spec = spec
        self.seq = seq
        self.state = State.PENDING
        self.attempt = 0
        self.key = spec.id
        self.member: str | None = None
        self.copy: Copy | None = None
        self.dispatched_at = 0.0
        #: False while a dispatched gang is on its way to the member (dispatch latency).
        self.arrived = True
        #: When the fleet first chose a member for it (dispatch, or the start of reserving).
        self.first_decision: float | None = None
        self.first_start: float | None = None
        self.end: float | None = None
        #: Dispatches that did not start at once, and seconds spent in members after them.
        self.mis_dispatches = 0
        self.misdispatched = False
        self.sat = 0.0
        #: Where the job sits unstarted when the run ends (a mis-dispatch never resolved).
        self.stuck_in: str | None = None
        #: Seconds waiting on the fleet (no member fits).
        self.pending_since = spec.submit
        self.pending_total = 0.0
        #: The binding the controller would keep for this job: failovers, exclusions, timers
        #: and evictions change only through fleet.core.lifecycle, as in the controller.
        self.life = lifecycle.Binding()
        #: Bumped whenever scheduled failover checks become stale.
        self.gen = 0
        self.lost_gpu_seconds = 0.0
        #: Seconds of its work kept by checkpoints across evictions and failovers (its state
        #: preserved): a new copy runs only what is left.
        self.progress = 0.0
        self.queue_key: Hashable = spec.shape
        #: The topology domains of the fleet's last placement (the copy is pinned to them).
        self.domains: tuple[Domain, ...] = ()
        #: At its first start: how many nodes, and how many domains of the topology level,
        #: its pods were bound on (0 when the nodes have no such label).
        self.nodes_used = 0
        self.domains_used = 0

    @property
    def gpus(self) -> int:
        return self.spec.shape.gpus

    @property
    def member_key(self) -> Hashable:
        """The line it waits in at its member: its shape, and the domains its copy is pinned
        to (two gangs of one shape pinned to different racks are not interchangeable)."""
        return (self.spec.shape, self.domains) if self.domains else self.spec.shape

    @property
    def failovers(self) -> int:
        return self.life.failover_count

    def next_attempt(self) -> None:
        self.attempt += 1
        self.key = f"{self.spec.id}#{self.attempt}"

    def __repr__(self) -> str:
        return f"SimJob({self.spec.id}, {self.state.value}, member={self.member})"
