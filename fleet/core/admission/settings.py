"""The admission's settings: placement timeout, backoff, and what a unit with no quota does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NoQuotaMode = Literal["wait", "bypass"]


@dataclass(frozen=True)
class AdmissionSettings:
    placement_timeout: float = 300.0
    """Seconds a dequeued unit may stay unplaced before it goes to TimeoutBackoff."""
    backoff_seconds: float = 60.0
    """The first backoff; each later one doubles, up to `backoff_limit`."""
    backoff_limit: float = 900.0
    no_quota: NoQuotaMode = "wait"
    """What a unit in no quota node does: wait (reported) or bypass the queue (reported)."""
    reclaim: bool = True
    """A unit waiting within its quota node's min evicts gangs that borrow (module `reclaim`)."""
    preemption: bool = False
    """A unit evicts lower-priority gangs of its own queue (off by default: PriorityClass
    `preemptionPolicy` is the user's opt-in, and evicting a team's own work is its call)."""
    reclaim_unplaced: bool = True
    """Also let a unit that holds its quota but that placement cannot place (no member has the
    nodes) claim node capacity from borrowers. On by default since the hold keeps the freed
    room for the claimant: it cut the min-guarantee violation on both replays
    (docs/queue.md, "Simulated: reclaim"); without the hold it thrashed (other gangs took the
    room). A shell that does not carry the hold must keep it off (the controller and the
    simulator both carry it)."""
    reclaim_delay: float = 240.0
    """With `reclaim_unplaced`: a dequeued unit that placement has not placed for this long may
    claim (before that, placement may simply not have run yet, and jobs that end may free the
    room). 4 minutes: with 10 s, node claims on the Philly replay evicted gangs that room
    freed a few minutes later would have spared (docs/queue.md, "The loss budget"); it stays
    within the placement timeout (300 s), which does not run while the victims leave."""
    hold: bool = True
    """The room an eviction frees is held for its claimant (module `hold`) until it is placed or
    gives up, so no other gang of the fleet takes it. No bound of its own: it ends, at the
    latest, with the claimant's placement timeout, which counts from when its victims' pods
    are gone (one clock)."""
    reclaim_worth: bool = False
    """An eviction is made only when it is worth its cost (module `worth`): the work the
    victims lose since their last checkpoint against the claimant's wait it saves. Off by
    default: it cut the work lost on both replays but let the `lenders` violation rise far
    above what reclaim gives without it (docs/queue.md)."""
    reclaim_lookahead: float = 1800.0
    """Seconds of wait an eviction is taken to save on top of the claimant's wait so far, when
    a victim declares no run-time limit."""
    reclaim_min_saving: float = 300.0
    """No eviction when every victim ends by its declared limit within this many seconds."""
    reclaim_loss_per_gpu: float = 24 * 3600.0
    """Seconds of work one eviction may destroy per GPU its claimant asks (module `budget`): a
    runner that alone would lose more is spared, and so is a set of victims that would (inf:
    no limit). A day by default: on the Philly replay it more than halved the work reclaim
    loses, and on `lenders` it keeps the min-guarantee violation within what reclaim gave
    before the hold (docs/queue.md, "The loss budget")."""
    reclaim_claims_per_pass: int = 4
    """At most this many claims are tried per reclaim (best first): a proof packs gangs, and a
    pass must stay cheap with thousands of units waiting (bench/queue.py)."""
    reclaim_retry: float = 30.0
    """A claim no eviction could satisfy is tried again after this long, so the claims behind
    it get their turn."""

    def __post_init__(self) -> None:
        if not self.placement_timeout > 0:
            raise ValueError(f"placement_timeout must be positive, got {self.placement_timeout}")
        if self.backoff_seconds < 0 or self.backoff_limit < self.backoff_seconds:
            raise ValueError("need 0 <= backoff_seconds <= backoff_limit")
        if not self.reclaim_loss_per_gpu > 0:
            raise ValueError(
                f"reclaim_loss_per_gpu must be positive, got {self.reclaim_loss_per_gpu}"
            )
        if self.no_quota not in ("wait", "bypass"):
            raise ValueError(f"no_quota must be wait or bypass, got {self.no_quota!r}")

    def backoff(self, attempts: int) -> float:
        """The backoff after the `attempts`-th dequeue timed out."""
        if attempts <= 1:
            return self.backoff_seconds
        return min(self.backoff_limit, self.backoff_seconds * 2.0 ** min(attempts - 1, 60))
