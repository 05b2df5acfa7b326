"""A member cluster as its own gang scheduler sees it.

What the sandbox shows: a dispatched gang starts only when the member's gang scheduler can bind
every pod, node by node; until then it waits holding nothing (no partial starts). The member's
check is the engine's `nodes` estimator (screen, then packing) run against the member's
*actual* free capacity (its own `ClusterSnapshot` of bound pods, no fleet reservations), and the
pods go where that assignment puts them (best fit, as a GPU bin-packing scheduler would).
Waiting gangs are tried in dispatch order; see `queueing.ShapeFifo` for backfill versus strict
order.
"""

from __future__ import annotations

from fleet.core.assignment import Assignment
from fleet.core.estimate import NODES
from fleet.core.fragmentation import WorkloadMix
from fleet.core.inventory import PodInfo
from fleet.core.packing import pack
from fleet.core.resources import GPU
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang
from fleet.simulate.fleets import MemberSpec
from fleet.simulate.jobs import Copy, SimJob
from fleet.simulate.queueing import ShapeFifo


class Member:
    def __init__(self, spec: MemberSpec, *, strict: bool = False) -> None:
        self.name = spec.name
        self.gpus = spec.total(GPU)
        #: The member's truth: nodes and bound pods only.
        self.snapshot = ClusterSnapshot.build(spec.name, spec.nodes, labels=spec.labels)
        self.waiting: ShapeFifo[SimJob] = ShapeFifo(strict=strict)
        self.down = False
        #: Jobs whose current copy is here (waiting, running or failed), in arrival order.
        self.jobs: dict[SimJob, None] = {}
        #: Live copies by attempt key, including ones left behind by a failover.
        self.copies: dict[str, Copy] = {}
        #: Gangs whose Reservations are Pending here (the scheduler retries them), in order.
        self.reserving: dict[SimJob, None] = {}

    def fits(self, gang: Gang, mix: WorkloadMix | None = None) -> Assignment | None:
        """Where the gang scheduler would bind every pod now, or None. This is the `nodes`
        estimator's screen and its packing (by fragmentation for `mix`, else best fit);
        `NODES.check` would add the sentence explaining a failure, which a member never reads
        and which costs more than the packing itself."""
        if NODES.screen(gang, self.snapshot) is not None:
            return None
        result = pack(self.snapshot, gang, mix)
        return result if isinstance(result, Assignment) else None

    def bind(self, job: SimJob, assignment: Assignment, now: float) -> tuple[Copy, list[PodInfo]]:
        """Bind the gang's pods as `assignment` says; the pods carry the placement's owner key
        so the fleet's reservation is consumed when it sees them."""
        pods: list[PodInfo] = []
        for slot in assignment:
            for _ in range(slot.pods):
                name = f"{job.key}-{len(pods)}"
                pods.append(
                    PodInfo(name, job.spec.team, name, slot.node, slot.requests, owner_key=job.key)
                )
        for pod in pods:
            self.snapshot.upsert_pod(pod)
        copy = Copy(job, job.key, self.name, [p.uid for p in pods], job.gpus, now)
        self.copies[job.key] = copy
        return copy, pods

    def unbind(self, copy: Copy) -> None:
        for uid in copy.pods:
            self.snapshot.remove_pod(uid)
        del self.copies[copy.key]

    def __repr__(self) -> str:
        return f"Member({self.name}, waiting={len(self.waiting)}, down={self.down})"
