"""Whether a member is Ready: a verdict from what its probe and its watches report, and when.

Pure: the connection reports facts (the probe answered or not, a watch is in sync or why not,
and whether a failure was the member refusing fleet's credentials) with the time they happened;
`verdict` turns them into Ready/NotReady with a reason. Unreachable is the probe's word. A watch
that breaks after it was in sync counts only once it has stayed broken past a grace period (it
relists by itself meanwhile), so one dropped connection never looks like a lost cluster, which
would start a failover.

Not Ready comes in two kinds, told apart by `credentials_refused`: a member that cannot be
reached may be down (its gangs fail over after tolerationSeconds), while a member that answers
but refuses fleet's credentials, or whose credentials fleet cannot use, is most likely up with
its copies running (its gangs stay: a second copy would run the job twice).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from fleet.api import constants as c

#: The Ready=False reasons of a member that is not known to be down: it answers but refuses
#: fleet's credentials (401/403), or fleet has no credential for it it may use (its kubeconfig
#: Secret is missing, unreadable, not watched or invalid, or was issued for another cluster, or
#: another MemberCluster is the same cluster). Every other Ready=False reason
#: (ClusterNotReachable, ClusterNotReady) may be a lost member.
CREDENTIALS_REFUSED_REASONS: frozenset[str] = frozenset(
    {
        c.REASON_CREDENTIALS_REFUSED,
        c.REASON_CLUSTER_ID_MISMATCH,
        c.REASON_KUBECONFIG_SECRET_MISSING,
        c.REASON_KUBECONFIG_SECRET_UNREADABLE,
        c.REASON_KUBECONFIG_SECRET_NOT_WATCHED,
        c.REASON_KUBECONFIG_INVALID,
        c.REASON_DUPLICATE_CLUSTER,
    }
)


def credentials_refused(reason: str) -> bool:
    """Whether a member NotReady for `reason` is up as far as fleet knows, but refuses fleet's
    credentials or has none fleet may use: not a lost member, so nothing is failed over on that
    ground (fleet.core.failover `Observation.cluster_refuses`)."""
    return reason in CREDENTIALS_REFUSED_REASONS


#: The reasons `fleet join` cures: run again for the member, under the same name, it makes
#: fleet's identity there again (ServiceAccount, RBAC), issues a new token and rewrites the
#: kubeconfig Secret (for the cluster the MemberCluster records).
REJOIN_CURES: frozenset[str] = frozenset(
    {
        c.REASON_CREDENTIALS_REFUSED,
        c.REASON_CLUSTER_ID_MISMATCH,
        c.REASON_KUBECONFIG_SECRET_MISSING,
        c.REASON_KUBECONFIG_INVALID,
    }
)


def recovery(name: str, reason: str) -> str | None:
    """How to give fleet a working credential for member `name` again, in one sentence, when
    `fleet join` is the cure for `reason` (None otherwise: the reason's message says what to
    do)."""
    if reason not in REJOIN_CURES:
        return None
    return (
        f"to recover, re-issue fleet's token: `fleet join {name} --kubeconfig <fleet "
        f"kubeconfig> --member-context <{name}'s context>` with the --label flags it was joined "
        "with (it rewrites the kubeconfig Secret and fails nothing over)"
    )


@dataclasses.dataclass(frozen=True)
class Probe:
    """The last probe of a member: it answered (`ok`), or why not, and whether the answer was a
    refusal of fleet's credentials (401/403) rather than no answer at all."""

    ok: bool
    why: str = ""
    refused: bool = False


@dataclasses.dataclass
class SourceState:
    """The health of one of a member's watches (nodes, pods), as last reported."""

    ok: bool = False
    why: str = "syncing"
    failing_since: float = 0.0
    synced_once: bool = False
    #: The last failure was the member refusing fleet's credentials (401/403).
    refused: bool = False

    def report(self, ok: bool, why: str, now: float, *, refused: bool = False) -> None:
        if ok:
            self.synced_once = True
        elif self.ok:
            self.failing_since = now  # the moment it broke; the grace counts from here
        self.ok, self.why, self.refused = ok, why, refused and not ok


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
    probe: Probe | None,
    sources: Mapping[str, SourceState],
    now: float,
    *,
    grace: float,
) -> tuple[bool, str, str]:
    """(ready, reason, message) for a member whose probe last said `probe` (None: not probed
    yet) and whose watches are `sources`. A refusal of fleet's credentials (401/403) is
    `CredentialsRefused`, not `ClusterNotReachable`: the member answered."""
    if probe is None:
        return False, "Connecting", "not probed yet"
    if not probe.ok:
        if probe.refused:
            return False, c.REASON_CREDENTIALS_REFUSED, probe.why
        return False, c.REASON_CLUSTER_NOT_REACHABLE, probe.why
    for kind, source in sources.items():
        broken = not source.ok and now - source.failing_since > grace
        if source.refused and (broken or not source.synced_once):
            return False, c.REASON_CREDENTIALS_REFUSED, f"{kind} watch: {source.why}"
        if not source.synced_once:
            return False, c.REASON_CLUSTER_NOT_READY, f"{kind}s syncing"
        if broken:
            return (
                False,
                c.REASON_CLUSTER_NOT_READY,
                f"{kind}s not in sync for {now - source.failing_since:.0f}s: {source.why}",
            )
    return True, c.REASON_CLUSTER_READY, "connected; nodes and pods in sync"


#: The longest health message kept (the MemberCluster's Ready condition carries it).
MESSAGE_LIMIT = 500


def next_health(current: Health, ready: bool, reason: str, message: str, now: float) -> Health:
    """The member's health after a verdict: `since` moves only when readiness or reason do."""
    if current.ready == ready and current.reason == reason:
        return dataclasses.replace(current, message=message[:MESSAGE_LIMIT])
    return Health(ready, reason, message[:MESSAGE_LIMIT], now)
