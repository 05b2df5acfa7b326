"""Whether a member is Ready: a verdict from what its probe and its watches report, and when.

Pure: the connection reports facts (the probe answered or not, a watch is in sync or why not)
with the time they happened; `verdict` turns them into Ready/NotReady with a reason. Unreachable
is the probe's word. A watch that breaks after it was in sync counts only once it has stayed
broken past a grace period (it relists by itself meanwhile), so one dropped connection never
looks like a lost cluster, which would start a failover.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from fleet.api import constants as c


@dataclasses.dataclass
class SourceState:
    """The health of one of a member's watches (nodes, pods), as last reported."""

    ok: bool = False
    why: str = "syncing"
    failing_since: float = 0.0
    synced_once: bool = False

    def report(self, ok: bool, why: str, now: float) -> None:
        if ok:
            self.synced_once = True
        elif self.ok:
            self.failing_since = now  # the moment it broke; the grace counts from here
        self.ok, self.why = ok, why


@dataclasses.dataclass(frozen=True)
class Health:
    """Ready or not, why, and since when (monotonic seconds)."""

    ready: bool = False
    reason: str = "Connecting"
    message: str = "not connected yet"
    since: float = 0.0

    @property
    def known(self) -> bool:
        """Whether anything was heard from the member since it was (re)connected."""
        return self.reason != "Connecting"


def verdict(
    probe: tuple[bool, str] | None,
    sources: Mapping[str, SourceState],
    now: float,
    *,
    grace: float,
) -> tuple[bool, str, str]:
    """(ready, reason, message) for a member whose probe last said `probe` (None: not probed
    yet) and whose watches are `sources`."""
    if probe is None:
        return False, "Connecting", "not probed yet"
    ok, why = probe
    if not ok:
        return False, c.REASON_CLUSTER_NOT_REACHABLE, why
    for kind, source in sources.items():
        if not source.synced_once:
            return False, c.REASON_CLUSTER_NOT_READY, f"{kind}s syncing"
        if not source.ok and now - source.failing_since > grace:
            return (
                False,
                c.REASON_CLUSTER_NOT_READY,
                f"{kind}s not in sync for {now - source.failing_since:.0f}s: {source.why}",
            )
    return True, c.REASON_CLUSTER_READY, "connected; nodes and pods in sync"


def next_health(current: Health, ready: bool, reason: str, message: str, now: float) -> Health:
    """The member's health after a verdict: `since` moves only when readiness or reason do."""
    if current.ready == ready and current.reason == reason:
        return dataclasses.replace(current, message=message[:500])
    return Health(ready, reason, message[:500], now)
