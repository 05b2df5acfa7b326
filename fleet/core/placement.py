"""Choose ONE member cluster for a gang, or explain, cluster by cluster, why none can take it.

Order of work (cheap before expensive):

1. filters, each with its sentence: clusters marked not ready, clusters the job failed over
   from, cluster taints the policy does not tolerate (NoSchedule and NoExecute, as Karmada's
   TaintToleration filter), then the policy's cluster affinity (Karmada semantics: exclude, then
   labelSelector, fieldSelector and clusterNames must all hold);
2. the estimator's `screen` on per-cluster aggregates;
3. the survivors are ranked by the scorer (best fit by default, see `scoring`), ties by name;
4. the estimator's full `check` runs in rank order; the first cluster that really fits wins.

Clusters ranked below the winner are not checked in full unless `explain_all=True`; their
sentence says so.

With a workload mix (`mix=`, the `nodes` estimator only) the ranking is fragmentation-aware
(FGD, see `fragmentation`): clusters that pass the screen are ranked by the fragmentation the
gang would add as estimated from their free-accelerator histograms; the best
`MEASURED_PER_ROUND` are packed with the mix (the next ones only if none of them fits), and the
one whose real assignment least increases the cluster's expected fragmentation wins (then best
fit, the estimate, the name). Each other fitting cluster's sentence gives both numbers, and
`Placement.why` says why the winner won: `fragmentation +0.8 GPU vs +3.1 GPU on member-2`.

`place_in_groups` runs `place` over Karmada's ordered `clusterAffinities`. `place` is pure: it
never modifies a snapshot. To hold the capacity until the member shows the pods, call
`snapshot.reserve(key, decision.placement.assignment, expires_at)`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from fleet.core.assignment import Assignment
from fleet.core.decision import (
    AFFINITY,
    CODES,
    DEPENDENCY_CONFLICT,
    FAILED_OVER,
    INSUFFICIENT,
    KIND_MISSING,
    NAMESPACE_NOT_OPEN,
    NOT_READY,
    OUTRANKED,
    TAINTED,
    Decision,
    Placement,
    Rejection,
    _preferred_missed,
    _versus,
)
from fleet.core.domains import screen as preferred_miss
from fleet.core.domains import tightest_room
from fleet.core.domainwait import WAITING_FOR_DOMAIN, DomainWait, wait_at, waiting_sentence
from fleet.core.estimate import NODES, SUM, Estimator
from fleet.core.explain import Reason, Sentence, clip
from fleet.core.filters import ClusterAffinity, filter_rejection
from fleet.core.fragmentation import WorkloadMix, estimated_delta
from fleet.core.ranking import MEASURED_PER_ROUND, _choose_least_fragmenting, _MemoKey
from fleet.core.scoring import Score, Scorer, best_fit
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration
from fleet.core.workload import Gang

__all__ = [
    "AFFINITY",
    "CODES",
    "DEPENDENCY_CONFLICT",
    "FAILED_OVER",
    "INSUFFICIENT",
    "KIND_MISSING",
    "MEASURED_PER_ROUND",
    "NAMESPACE_NOT_OPEN",
    "NOT_READY",
    "OUTRANKED",
    "TAINTED",
    "WAITING_FOR_DOMAIN",
    "AffinityGroup",
    "ClusterAffinity",
    "Decision",
    "DomainWait",
    "GroupDecision",
    "Placement",
    "Rejection",
    "filter_rejection",
    "place",
    "place_in_groups",
]

_PURE = (NODES, SUM)


def place(
    gang: Gang,
    clusters: Iterable[ClusterSnapshot],
    *,
    estimator: Estimator = NODES,
    affinity: ClusterAffinity | None = None,
    failed_over: Mapping[str, str] | None = None,
    not_ready: Collection[str] | Mapping[str, str] = (),
    taints: Mapping[str, Sequence[Taint]] | None = None,
    tolerations: Sequence[Toleration] = (),
    scorer: Scorer = best_fit,
    explain_all: bool = False,
    mix: WorkloadMix | None = None,
    lacking: Mapping[str, str] | None = None,
    refused: Mapping[str, tuple[str, str]] | None = None,
    now: float | None = None,
    domain_wait_since: float | None = None,
) -> Decision:
    """Pick one cluster for `gang` (see the module docstring for the order of work).

    `failed_over` maps cluster -> reason the job left it; `not_ready` lists clusters (or maps
    them to a reason) that must not receive work now; `taints` maps cluster -> its taints, which
    the policy's `tolerations` must tolerate; `lacking` maps cluster -> why it cannot run the
    gang's kind at all; `refused` maps cluster -> (code, why) for a cluster that refused this
    gang (a dependency there is not fleet's), reported under that code. `mix` (with the `nodes`
    estimator) ranks by fragmentation; the `sum` estimator has no nodes to measure and ignores
    it. `now` (epoch seconds) turns on the wait of a preferred rule that has one
    (`domainwait`): a gang that fits only spread is not placed while it waits, and the decision
    carries the wait (`domain_wait_since`: when it started, None if it has not); without `now`
    a preferred gang is placed spread at once.
    """
    fragmented = mix is not None and bool(mix) and estimator is NODES
    failed_over = failed_over or {}
    lacking = lacking or {}
    refused = refused or {}
    taints = taints or {}
    rejections: list[Rejection] = []
    ranked: list[tuple[tuple[float, float], str, Score, ClusterSnapshot]] = []
    seen: set[str] = set()
    # Only the built-in estimators and best fit are known to be pure functions of aggregates
    # (a simulator's random scorer is not).
    demand = gang.demand_key + ((gang.topology,) if gang.topology else ())
    memo_key = (
        _MemoKey(estimator.name, demand) if scorer is best_fit and estimator in _PURE else None
    )
    fit_key = (
        _MemoKey("nodes+fragmentation", (demand, _constraints_of(gang), mix))
        if fragmented
        else None
    )
    estimate_key = (
        _MemoKey("nodes+fragmentation-estimate", (gang.demand_key, mix)) if fragmented else None
    )
    candidates: list[tuple[tuple[float, float, float], str, Score, ClusterSnapshot]] = []
    for cluster in clusters:
        name = cluster.name
        if name in seen:
            raise ValueError(f"cluster {name!r} given twice")
        seen.add(name)
        filtered = filter_rejection(
            cluster,
            affinity=affinity,
            failed_over=failed_over,
            not_ready=not_ready,
            taints=taints,
            tolerations=tolerations,
        )
        if filtered is not None:
            rejections.append(filtered)
            continue
        if name in lacking:
            rejections.append(Rejection(name, clip(lacking[name]), KIND_MISSING))
            continue
        if name in refused:
            code, why = refused[name]
            rejections.append(Rejection(name, clip(why), code))
            continue
        if memo_key is not None:
            # The screen and best fit read only the cluster's aggregates and the gang's
            # demand: while the cluster is unchanged, a gang of the same demand (the next job
            # of a sweep) gets the same answer without recomputing it.
            table = cluster.memo()
            found = cast(tuple[Reason | None, Score | None] | None, table.get(memo_key))
            if found is None:
                short = estimator.screen(gang, cluster)
                found = table[memo_key] = (short, None if short else scorer(gang, cluster))
            short, score_or_none = found
        else:
            short = estimator.screen(gang, cluster)
            score_or_none = None if short else scorer(gang, cluster)
        if short is not None:
            rejections.append(Rejection(name, short, INSUFFICIENT))
            continue
        assert score_or_none is not None
        score = score_or_none
        if estimate_key is not None:
            assert mix is not None
            table = cluster.memo()
            estimate = cast(float | None, table.get(estimate_key))
            if estimate is None:
                estimate = table[estimate_key] = round(estimated_delta(gang, cluster, mix), 6)
            key = (estimate, -score.hole_fit, -score.share)
            candidates.append((key, name, score, cluster))
            continue
        ranked.append(((-score.hole_fit, -score.share), name, score, cluster))

    if fit_key is not None:
        assert mix is not None
        decision = _choose_least_fragmenting(
            gang, candidates, rejections, mix, fit_key, explain_all
        )
        measured = ((name, cluster) for _, name, _, cluster in candidates)
        return _unless_waiting(gang, decision, measured, {}, now, domain_wait_since)
    ranked.sort(key=lambda entry: (entry[0], entry[1]))
    chosen: Placement | None = None
    # A preferred topology: the first cluster in rank order that holds the gang in one domain
    # wins; the clusters ranked above it could not (their sentence says so). Only when none
    # can is the gang placed as if it had no preference.
    no_domain: dict[str, Reason] = {}
    if estimator is NODES and any(not rule.required for rule in gang.topology):
        # The members whose tightest domain with room leaves the fewest free accelerators
        # unused are tried first (best fit across members, as inside one), then by rank.
        tightest = {name: tightest_room(cluster, gang) for _, name, _, cluster in ranked}
        by_domain = sorted(ranked, key=lambda e: (tightest[e[1]] is None, tightest[e[1]] or 0))
        for _, name, score, cluster in by_domain:
            if tightest[name] is None:
                break  # no domain has room by free vectors: none of the rest holds it
            result = NODES.check(gang, cluster, preferred=True)
            if isinstance(result, Assignment):
                chosen = _placement(gang, name, result, score, estimator, ranked)
                break
            no_domain[name] = result
        if chosen is not None:
            for _, name, _, cluster in ranked:
                if name == chosen.cluster:
                    break
                if name in no_domain:
                    continue
                if tightest[name] is None:
                    no_domain[name] = preferred_miss(gang, cluster, True) or "no domain holds it"
                else:
                    no_domain[name] = (
                        f"{chosen.cluster} has a tighter one ({tightest[chosen.cluster]} "
                        f"free GPUs vs {tightest[name]})"
                    )
    for _, name, score, cluster in ranked:
        if chosen is not None and name == chosen.cluster:
            continue
        if chosen is not None and name in no_domain:
            rejections.append(
                Rejection(name, Sentence(_no_preferred_domain, no_domain[name]), OUTRANKED)
            )
            continue
        if chosen is not None and not explain_all:
            rejections.append(
                Rejection(
                    name,
                    Sentence(_outranked, "not checked: ranks below", chosen, score),
                    OUTRANKED,
                )
            )
            continue
        result = estimator.check(gang, cluster)
        if not isinstance(result, Assignment):
            rejections.append(Rejection(name, result, INSUFFICIENT))
        elif chosen is None:
            chosen = _placement(gang, name, result, score, estimator, ranked)
        else:
            rejections.append(
                Rejection(
                    name,
                    f"fits too, but {chosen.cluster} fits better ({_versus(score, chosen.score)})",
                    OUTRANKED,
                )
            )
    rejections.sort(key=lambda r: r.cluster)
    decision = Decision(chosen, tuple(rejections))
    if estimator is not NODES:
        return decision
    screened = ((name, cluster) for _, name, _, cluster in ranked)
    return _unless_waiting(gang, decision, screened, no_domain, now, domain_wait_since)


def _unless_waiting(
    gang: Gang,
    decision: Decision,
    screened: Iterable[tuple[str, ClusterSnapshot]],
    no_domain: Mapping[str, Reason],
    now: float | None,
    since: float | None,
) -> Decision:
    """`decision`, unless it places the gang spread while the gang waits for a domain of its
    preferred rule (`domainwait.wait_at`): then no placement, and every member that passed the
    screens and was not found too small is told that the gang waits, until when, and why no
    domain of it holds the gang (`no_domain`, else its screen). `screened`: the members that
    passed the screens, read only when the gang waits (a decision's hot path builds nothing)."""
    spread = decision.placement
    if spread is None or now is None or not _preferred_missed(gang, spread.assignment):
        return decision
    wait = wait_at(gang, since, now)
    if wait is None:
        return decision
    snapshots = dict(screened)
    rejections = decision.rejections
    out = [r for r in rejections if r.category != OUTRANKED]
    others = [r.cluster for r in rejections if r.category == OUTRANKED]
    for name in (spread.cluster, *others):
        why = no_domain.get(name)
        if why is None:
            why = preferred_miss(gang, snapshots[name], True) or "none holds it node by node"
        out.append(Rejection(name, waiting_sentence(wait, why), WAITING_FOR_DOMAIN))
    out.sort(key=lambda r: r.cluster)
    return Decision(None, tuple(out), wait)


def _placement(
    gang: Gang,
    name: str,
    assignment: Assignment,
    score: Score,
    estimator: Estimator,
    ranked: list[tuple[tuple[float, float], str, Score, ClusterSnapshot]],
) -> Placement:
    return Placement(
        cluster=name,
        components=tuple((c.name, c.replicas) for c in gang.components),
        multi_role=gang.multi_role,
        assignment=assignment,
        score=score,
        estimator=estimator.name,
        runner_up=_runner_up(ranked, name),
    )


def _no_preferred_domain(why: Reason) -> str:
    return clip(f"ranked after a member with one domain for the gang (preferred): {why}")


def _runner_up(
    ranked: list[tuple[tuple[float, float], str, Score, ClusterSnapshot]], chosen: str
) -> tuple[str, Score] | None:
    """The cluster ranked right after the chosen one."""
    names = [entry[1] for entry in ranked]
    index = names.index(chosen) + 1
    return (names[index], ranked[index][2]) if index < len(names) else None


def _constraints_of(gang: Gang) -> tuple[object, ...]:
    return tuple(c.constraints for c, _ in gang.minimum)


def _outranked(lead: str, chosen: Placement, score: Score) -> str:
    return f"{lead} {chosen.cluster} ({_versus(score, chosen.score)})"


@dataclass(frozen=True, slots=True)
class AffinityGroup:
    """One of Karmada's `clusterAffinities` terms: a named affinity."""

    name: str
    affinity: ClusterAffinity


@dataclass(frozen=True, slots=True)
class GroupDecision:
    """A decision over ordered affinity groups, and the group it came from."""

    decision: Decision
    #: The group the placement (or, when nothing fits, the last search) used; None without
    #: clusterAffinities.
    group: str | None


def place_in_groups(
    gang: Gang,
    clusters: Iterable[ClusterSnapshot],
    groups: Sequence[AffinityGroup],
    *,
    start_at: str | None = None,
    affinity: ClusterAffinity | None = None,
    estimator: Estimator = NODES,
    failed_over: Mapping[str, str] | None = None,
    not_ready: Collection[str] | Mapping[str, str] = (),
    taints: Mapping[str, Sequence[Taint]] | None = None,
    tolerations: Sequence[Toleration] = (),
    mix: WorkloadMix | None = None,
    lacking: Mapping[str, str] | None = None,
    refused: Mapping[str, tuple[str, str]] | None = None,
    now: float | None = None,
    domain_wait_since: float | None = None,
) -> GroupDecision:
    """Karmada's `clusterAffinities`: try each group in order, from `start_at` (the group the
    previous placement used, so a failover searches its current group first, then the later
    ones) or from the first; the first group with a cluster that fits wins.

    When no group fits, each cluster is explained by the first group that admits it (so its
    reason is about capacity or health, not affinity), and clusters no group admits by why the
    first group refused them. Without groups, `affinity` (Karmada's single clusterAffinity)
    applies. A group where the gang fits only spread while it waits for a domain ends the
    search as a fit would (the groups order members; the wait is for a domain among them).
    The other arguments are `place`'s.
    """
    snapshots = list(clusters)

    def attempt(affinity: ClusterAffinity | None) -> Decision:
        return place(
            gang,
            snapshots,
            estimator=estimator,
            affinity=affinity,
            failed_over=failed_over,
            not_ready=not_ready,
            taints=taints,
            tolerations=tolerations,
            mix=mix,
            lacking=lacking,
            refused=refused,
            now=now,
            domain_wait_since=domain_wait_since,
        )

    if not groups:
        return GroupDecision(attempt(affinity), None)
    names = [g.name for g in groups]
    first = names.index(start_at) if start_at in names else 0
    tried: list[tuple[AffinityGroup, Decision]] = []
    for group in groups[first:]:
        decision = attempt(group.affinity)
        if decision.placement is not None or decision.domain_wait is not None:
            return GroupDecision(decision, group.name)
        tried.append((group, decision))
    explained: dict[str, Rejection] = {}
    for _group, decision in tried:
        for rejection in decision.rejections:
            held = explained.get(rejection.cluster)
            if held is None or (held.category == AFFINITY and rejection.category != AFFINITY):
                explained[rejection.cluster] = rejection
    rejections = tuple(explained[name] for name in sorted(explained))
    return GroupDecision(Decision(None, rejections), tried[-1][0].name)
