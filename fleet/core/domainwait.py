"""The bounded wait of a preferred topology: a gang that fits the fleet only spread over domains
waits a while for one domain (a rack) to hold it, then is placed spread.

Why: a preferred rule placed at once (Kueue's meaning) goes spread whenever no member has a
domain with room at the moment the gang is placed, and in a busy fleet that moment is often
right after some capacity freed here and there: racks free up minutes later. Waiting up to
`TopologyRule.wait_seconds` for one trades a bounded wait for the share of gangs kept in one
domain (docs/placement.md measures it).

The rule, one home for the controller and the simulator (both pass the time in; nothing here
reads a clock):

* it applies only when the gang fits some member spread and no member holds it in one domain
  of its preferred rules; a gang that does not fit at all waits for capacity as any gang, and
  its wait for a domain has not started;
* the wait starts the first time that happens (`since`, kept on the binding so a restarted
  controller neither resets nor forgets it) and ends `wait_seconds` later (`until`): from then
  on the gang is placed spread whenever no domain holds it, as without a wait;
* a domain that holds it at any time before `until` takes it at once.

So a gang waits at most `wait_seconds` more than it would have without the wait, once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fleet.core.explain import MAX_SENTENCE, Fact, Reason, Sentence, clip, facts_of
from fleet.core.topology import TopologyRule, level_word
from fleet.core.workload import Gang

#: The rejection code of a member that holds the gang only spread while it waits for a domain.
WAITING_FOR_DOMAIN = "WaitingForDomain"
#: `gangTopology.waitSeconds` when a Preferred policy gives none: 0, spread at once (Kueue's
#: meaning). Measured in docs/placement.md: on the congested Philly trace a wait alone barely
#: raises the share in one rack (freed nodes are taken by younger jobs meanwhile) and costs
#: the p90 wait, so no default wait meets both targets; a wait is the policy's choice.
DEFAULT_WAIT_SECONDS = 0


@dataclass(frozen=True, slots=True)
class DomainWait:
    """A gang waiting for one domain of `rule`'s level: since when, and until when."""

    rule: TopologyRule
    since: float
    until: float


def waiting_rule(gang: Gang) -> TopologyRule | None:
    """The preferred rule whose wait applies (the longest, when several have one); None when
    the gang has no preferred rule with a wait. A rule over one pod has none: one pod sits on
    one node, so it is never spread over domains."""
    rules = [
        r
        for r in gang.topology
        if not r.required
        and r.wait_seconds > 0
        and sum(n for c, n in gang.minimum if r.covers(c.name)) > 1
    ]
    return max(rules, key=lambda r: r.wait_seconds, default=None)


def wait_at(gang: Gang, since: float | None, now: float) -> DomainWait | None:
    """The wait a gang that fits only spread is in at `now` (`since`: when its wait started,
    None if it has not), or None when it has no wait or its wait ran out: place it spread."""
    rule = waiting_rule(gang)
    if rule is None:
        return None
    start = now if since is None else since
    until = start + rule.wait_seconds
    return DomainWait(rule, start, until) if now < until else None


def stamp(seconds: float) -> str:
    """`2025-01-02T03:04:05Z`: an epoch time as the binding's sentences print it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def waiting_sentence(wait: DomainWait, why: Reason) -> Sentence:
    """A member with no domain for the gang, while the gang waits: `no rack holds the gang
    (<why>); waits for one until <until> (preferred, up to 1800 s from <since>), then is placed
    spread`."""
    facts: dict[str, Fact] = {
        **facts_of(why),
        "topologyLevel": wait.rule.level,
        "topologyMode": wait.rule.mode,
        "waitingSince": stamp(wait.since),
        "waitingUntil": stamp(wait.until),
        "waitSeconds": int(wait.rule.wait_seconds),
    }
    return Sentence(_waiting_text, wait, why, facts=facts)


def _waiting_text(wait: DomainWait, why: Reason) -> str:
    word = level_word(wait.rule.level)
    return clip(
        f"waiting for one {word} until {stamp(wait.until)} (preferred, up to "
        f"{wait.rule.wait_seconds:.0f} s from {stamp(wait.since)}), then placed spread; "
        f"no {word} holds the gang here: {why}",
        limit=2 * MAX_SENTENCE,
    )


def summary(wait: DomainWait) -> str:
    """The head of the binding's Scheduled message while it waits."""
    word = level_word(wait.rule.level)
    return (
        f"waiting for one {word} ({wait.rule.level}, preferred) until {stamp(wait.until)}, "
        f"then placed spread: the gang fits only spread over {word}s"
    )
