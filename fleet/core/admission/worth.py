"""Whether an eviction is worth its cost, judged with what the controller knows at that moment.

An eviction throws away the victims' work since their last checkpoint, now; what it buys is the
claimant's wait until the victims would have ended anyway, later. The controller does not know
when a victim will end, only what the job declares and how long things have gone on:

* **cost**: work the victims lose, their size (module `work`: every resource counted, in
  GPU-equivalents) x time since their last reported checkpoint (since their start when they
  report none: `Runner.lost`);
* **wait saved**: a victim that declares a run-time limit (`activeDeadlineSeconds`, or the kind's
  equivalent) ends by it at the latest, so the eviction saves at most the latest of those ends
  (the claimant needs all the victims' room). When any victim declares none, the wait saved is
  unknown, and estimated from what has been seen: a job that has run for a while is likely to
  run about as long again (run times are heavy-tailed), and a wait that has gone on is likely to
  go on, so the longer of the victims' run time so far and the claimant's wait so far, plus a
  look-ahead (`reclaim_lookahead`) so that a gang that has barely started is not spared for it;
* **benefit**: the claimant's size (by the same rule) x the wait saved, doubled when the
  claimant's priority is above every victim's, halved when below one;
* the eviction is made when benefit >= cost, and never when every victim ends by its limit
  within `reclaim_min_saving` (they are about to finish: waiting costs less than any eviction).

Nothing here reads a trace's future (how long a job will really run): the simulator hands it
what the controller would have (start, declared limit, last checkpoint). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fleet.core.admission.reclaim import Runner


@dataclass(frozen=True, slots=True)
class Worth:
    """The verdict, with its numbers (for the claimant's message)."""

    worth: bool
    cost: float
    """GPU-equivalent hours of work the victims lose."""
    benefit: float
    """GPU-equivalent hours of the claimant's wait the eviction saves (weighted by priority)."""
    saved: float
    """Seconds of wait saved (inf: no victim declares a limit and nothing caps it)."""

    def describe(self) -> str:
        saved = "unknown" if math.isinf(self.saved) else f"{self.saved / 60:.0f} min"
        verdict = "worth it" if self.worth else "not worth it"
        return (
            f"{verdict}: {self.cost:.2f} GPU-hours of work lost against {self.benefit:.2f} "
            f"GPU-hours of waiting saved (wait saved {saved})"
        )


def wait_saved(victims: Sequence[Runner], now: float) -> float:
    """Seconds until the last victim ends by its declared limit (inf: one declares none)."""
    ends = []
    for victim in victims:
        if victim.limit is None:
            return math.inf
        ends.append(max(victim.started + victim.limit - now, 0.0))
    return max(ends, default=0.0)


def judge(
    size: float,
    priority: int,
    waited: float,
    victims: Sequence[Runner],
    now: float,
    *,
    lookahead: float,
    min_saving: float,
) -> Worth:
    """Whether evicting `victims` for a claimant of `size` GPU-equivalents (module `work`; of
    `priority`, waiting for `waited` seconds) is worth it at `now`; see the module docstring."""
    cost = sum(v.lost(now) for v in victims)
    bound = wait_saved(victims, now)
    if bound <= min_saving:
        return Worth(False, cost, 0.0, bound)
    seen = max([waited, *(now - v.started for v in victims)], default=0.0)
    saved = min(bound, max(seen, 0.0) + lookahead)
    weight = 1.0
    if victims and all(priority > v.priority for v in victims):
        weight = 2.0
    elif any(priority < v.priority for v in victims):
        weight = 0.5
    benefit = size * saved / 3600.0 * weight
    return Worth(benefit >= cost, cost, benefit, bound)


__all__ = ["Worth", "judge", "wait_saved"]
