"""Reservation-backed placement: what to reserve in a member for a gang, and when to give up.

ACK's `enableReservation`: before a gang is dispatched to a Koordinator member, fleet reserves
the member's capacity for it, one Koordinator Reservation per pod of the gang's minimum set, so
nothing that lands in the member between fleet's decision and the job's arrival can leave the
gang waiting there. Their owners select exactly the gang's pods of that role, so only those pods
consume them.

All or nothing is fleet's doing, not the member's: the gang is dispatched only once every
Reservation is Available, and they are all deleted when one fails or the wait runs out. The
Reservations carry no Koordinator gang annotations (koord-queue's pattern: one Reservation per
replica, wait for all). As one gang, koord-scheduler v1.8.0 retries unschedulable Reservations
in a tight loop: each attempt rewrites a Reservation's status, which requeues the rest of the
gang (1,634 attempts in 14.3 s for a 3-Reservation gang that could not fit, on the sandbox; 3
without the annotations), for as long as the gang cannot fit. The cost: Reservations that fit
hold their capacity until the wait runs out.

Pure: the plan (names, roles, owners, TTL) and the verdict on what the member reports.
The shell (`fleet.controller.reserving`) creates, watches and deletes the objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from fleet.core.workload import Gang

ReservationPhase = Literal["Pending", "Available", "Succeeded", "Failed"]

#: How long Reservations live if the gang never consumes them (Koordinator's `spec.ttl`).
DEFAULT_TTL_SECONDS = 600
#: How long fleet waits for every Reservation of a gang to be Available before it falls back.
DEFAULT_WAIT_SECONDS = 60.0
#: How long a member whose reservation failed is avoided by that gang's next placements.
DEFAULT_RETRY_AFTER_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class PlannedReservation:
    """One Reservation of a gang: for one pod of role `role`."""

    name: str
    role: str
    index: int


@dataclass(frozen=True, slots=True)
class ReservationPlan:
    """Every Reservation a gang needs in one member."""

    uid: str
    #: What every Reservation's name starts with (`fleet-<uid>`).
    prefix: str
    reservations: tuple[PlannedReservation, ...]
    ttl_seconds: int

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.reservations)


def reserves(*, supported: bool, member_enabled: bool, policy: str | None) -> bool:
    """Whether a gang placed in a member is reserved there before it is dispatched: never where
    the member's scheduler has no Reservations; else as the policy says (`Enabled` /
    `Disabled`); else as the member's own switch says."""
    if not supported:
        return False
    if policy is not None:
        return policy == "Enabled"
    return member_enabled


def reservation_name(uid: str, role: str, index: int) -> str:
    """Deterministic, so a restarted controller finds (and adopts or deletes) what it made.
    Reservations are cluster-scoped: the fleet UID keeps names of different gangs apart."""
    return f"fleet-{uid}-{role.lower()}-{index}"


def plan_reservations(
    gang: Gang, uid: str, *, ttl_seconds: int = DEFAULT_TTL_SECONDS
) -> ReservationPlan:
    """One Reservation per pod of the gang's minimum set (what must start together)."""
    planned: list[PlannedReservation] = []
    for component, count in gang.minimum:
        for index in range(count):
            planned.append(
                PlannedReservation(
                    reservation_name(uid, component.name, index), component.name, index
                )
            )
    return ReservationPlan(
        uid=uid,
        prefix=f"fleet-{uid}",
        reservations=tuple(planned),
        ttl_seconds=ttl_seconds,
    )


@dataclass(frozen=True, slots=True)
class SeenReservation:
    """What the member reports of one Reservation (None phase: not created yet, or no status)."""

    phase: ReservationPhase | None = None
    node: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class Reserved:
    """Every Reservation is Available: dispatch the gang; its pods consume them."""


@dataclass(frozen=True, slots=True)
class KeepWaiting:
    """Not all Available yet: look again at `recheck_at` (or on the next report)."""

    available: int
    total: int
    recheck_at: float

    @property
    def progress(self) -> str:
        return f"{self.available} of {self.total} Reservations Available"


@dataclass(frozen=True, slots=True)
class FallBack:
    """Delete them all, avoid this member for a while, and place the gang elsewhere."""

    reason: str


ReservationVerdict = Reserved | KeepWaiting | FallBack


def judge_reservations(
    plan: ReservationPlan,
    seen: Mapping[str, SeenReservation],
    *,
    since: float,
    now: float,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
) -> ReservationVerdict:
    """Dispatch when all are Available; fall back when one Failed (or was consumed by someone
    else: Succeeded before dispatch) or the wait ran out; otherwise keep waiting."""
    names = plan.names
    for name in names:
        state = seen.get(name)
        if state is not None and state.phase in ("Failed", "Succeeded"):
            why = f": {state.message}" if state.message else ""
            return FallBack(f"Reservation {name} is {state.phase}{why}")
    available = sum(1 for n in names if (seen.get(n) or SeenReservation()).phase == "Available")
    if available == len(names):
        return Reserved()
    deadline = since + wait_seconds
    if now >= deadline:
        return FallBack(
            f"only {available} of {len(names)} Reservations became Available within "
            f"{wait_seconds:.0f}s"
        )
    return KeepWaiting(available, len(names), deadline)
