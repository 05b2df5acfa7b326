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

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

from fleet.core.assignment import Assignment
from fleet.core.domains import screen as preferred_miss
from fleet.core.domains import tightest_room
from fleet.core.domainwait import WAITING_FOR_DOMAIN, DomainWait, wait_at, waiting_sentence
from fleet.core.domainwait import summary as waiting_summary
from fleet.core.estimate import NODES, SUM, Estimator
from fleet.core.explain import Fact, Reason, Sentence, clip, facts_of
from fleet.core.fragmentation import WorkloadMix, assignment_delta, estimated_delta
from fleet.core.scoring import Score, Scorer, best_fit, fragmentation_text
from fleet.core.selectors import LabelSelector, Requirement
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration, untolerated
from fleet.core.topology import level_word
from fleet.core.workload import Gang

NOT_READY = "NotReady"
FAILED_OVER = "FailedOver"
TAINTED = "TaintUntolerated"
AFFINITY = "ClusterAffinity"
#: The member does not run the job's kind (its CRD is not there, so no operator serves it).
KIND_MISSING = "KindNotServed"
#: The cluster refused the gang (a dependency there is not fleet's): the code it gave.
DEPENDENCY_CONFLICT = "DependencyConflict"
#: The cluster refused the gang: the job's namespace there is neither fleet's nor opened to it.
NAMESPACE_NOT_OPEN = "NamespaceNotOpen"
INSUFFICIENT = "Insufficient"
OUTRANKED = "Outranked"
#: Every rejection code, in the order the filters apply.
CODES = (
    NOT_READY,
    KIND_MISSING,
    DEPENDENCY_CONFLICT,
    NAMESPACE_NOT_OPEN,
    FAILED_OVER,
    TAINTED,
    AFFINITY,
    INSUFFICIENT,
    OUTRANKED,
    WAITING_FOR_DOMAIN,
)
_PURE = (NODES, SUM)


@dataclass(frozen=True, slots=True)
class ClusterAffinity:
    """Karmada's `placement.clusterAffinity`, already converted from the policy model."""

    cluster_names: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    label_selector: LabelSelector | None = None
    #: `fieldSelector.matchExpressions` over the cluster's provider / region / zone.
    field_selector: tuple[Requirement, ...] = ()

    def rejection(self, cluster: ClusterSnapshot) -> str | None:
        if cluster.name in self.exclude:
            return "excluded by clusterAffinity (listed in exclude)"
        if self.label_selector is not None:
            miss = self.label_selector.first_mismatch(cluster.labels)
            if miss is not None:
                return f"excluded by clusterAffinity (labelSelector needs {miss})"
        for req in self.field_selector:
            if not req.matches(cluster.fields):
                return f"excluded by clusterAffinity (fieldSelector needs {req})"
        if self.cluster_names and cluster.name not in self.cluster_names:
            return "excluded by clusterAffinity (not in clusterNames)"
        return None


@dataclass(frozen=True, slots=True)
class Placement:
    """The chosen cluster, the replicas it gets, and the assignment that proves the fit."""

    cluster: str
    components: tuple[tuple[str, int], ...]
    multi_role: bool
    assignment: Assignment
    score: Score
    estimator: str
    #: The next cluster in rank order and its score (None when no other cluster passed the
    #: screen): what `why` compares the winner with.
    runner_up: tuple[str, Score] | None = None
    #: Fragmentation ranking: clusters passed over on their estimate alone (not packed).
    unmeasured: int = 0

    @property
    def why(self) -> str:
        """Why this cluster won, in numbers: `fragmentation +0.8 GPU vs +3.1 GPU on member-2`,
        `hole fit 100% vs 50% on member-2`, or `the only cluster that may fit`; with a
        topology, the domain first (`rack r7 holds the gang; hole fit ...`)."""
        where = "; ".join(
            f"{level_word(d.level)} {d.value} holds "
            f"{'the gang' if not d.components else ' + '.join(d.components)}"
            for d in self.assignment.domains
        )
        return f"{where}; {self._why}" if where else self._why

    @property
    def _why(self) -> str:
        if self.runner_up is None:
            if self.score.fragmentation is not None:
                alone = (
                    f"the only fit of the clusters measured ({self.unmeasured} more ranked "
                    "lower by estimate)"
                    if self.unmeasured
                    else "the only cluster that fits"
                )
                return f"fragmentation {fragmentation_text(self.score.fragmentation)}; {alone}"
            return "the only cluster that may fit"
        other, score = self.runner_up
        return f"{_versus(self.score, score, other)}"

    @property
    def replicas(self) -> int:
        return sum(n for _, n in self.components)

    def __str__(self) -> str:
        """As ACK prints it: `{member-1:0,[{master 1} {worker 2}]}`; `{member-1:4}` for kinds
        with a single pod template (Karmada's replica form)."""
        if not self.multi_role:
            return f"{{{self.cluster}:{self.replicas}}}"
        inner = " ".join(f"{{{name} {n}}}" for name, n in self.components)
        return f"{{{self.cluster}:0,[{inner}]}}"


class Rejection(NamedTuple):
    """Why one cluster was not chosen: a code for machines and a sentence for people. (A named
    tuple: a decision over a thousand clusters makes a thousand of them.)"""

    cluster: str
    why: Reason
    #: One of CODES: NotReady, FailedOver, TaintUntolerated, ClusterAffinity, Insufficient,
    #: Outranked, WaitingForDomain.
    category: str

    @property
    def reason(self) -> str:
        """The sentence (formatted on first read), without the cluster name."""
        return str(self.why)

    @property
    def facts(self) -> Mapping[str, Fact]:
        """The numbers the sentence is made of (`resource`, `needed`, `free`, ...); empty for
        the filters' rejections, whose code says everything."""
        return facts_of(self.why)

    def __str__(self) -> str:
        return f"{self.cluster}: {self.why}"


@dataclass(frozen=True, slots=True)
class Decision:
    placement: Placement | None
    rejections: tuple[Rejection, ...]
    #: Not placed because the gang fits only spread and waits for one domain of its preferred
    #: rule (`fleet.core.domainwait`): since and until when. None otherwise.
    domain_wait: DomainWait | None = None

    @property
    def fits(self) -> bool:
        return self.placement is not None

    def sentences(self) -> list[str]:
        """`member-2: needs ...`: one line per rejected cluster, sorted by cluster name."""
        return [str(r) for r in self.rejections]

    def closest(self, limit: int) -> tuple[Rejection, ...]:
        """The `limit` rejected clusters that came closest to taking the gang: the furthest
        along the order of work (outranked or waiting for a domain, then short of capacity,
        then ruled out by the filters, the last filter first: CODES backwards; a code not in
        CODES last), then by name."""
        return tuple(sorted(self.rejections, key=_closeness)[: max(limit, 0)])

    def counts(self) -> dict[str, int]:
        """How many rejected clusters gave each code (every one of them), in CODES order (a
        code not in CODES last)."""
        counts = Counter(r.category for r in self.rejections)
        return {code: counts[code] for code in sorted(counts, key=_code_order)}

    def summary(self, limit: int = 1024) -> str:
        """A message for an Event or condition: the result, or why no cluster fits."""
        if self.placement is not None:
            return f"Result: {self.placement}"
        considered = len(self.rejections)
        head = f"0/{considered} clusters can take the gang"
        if self.domain_wait is not None:
            head = waiting_summary(self.domain_wait)
        return clip("; ".join([head, *self.sentences()]), limit)


_ORDER = {code: i for i, code in enumerate(CODES)}


def _code_order(code: str) -> tuple[int, str]:
    """A code's place in the order of work (CODES); a code not in CODES after them."""
    return (_ORDER.get(code, len(CODES)), code)


def _closeness(rejection: Rejection) -> tuple[int, str]:
    """Closer first: the furthest along the order of work (CODES backwards; a code not in
    CODES after them), then by name."""
    rank = _ORDER.get(rejection.category, -1)
    return (-rank, rejection.cluster)


def filter_rejection(
    cluster: ClusterSnapshot,
    *,
    affinity: ClusterAffinity | None = None,
    failed_over: Mapping[str, str] | None = None,
    not_ready: Collection[str] | Mapping[str, str] = (),
    taints: Mapping[str, Sequence[Taint]] | None = None,
    tolerations: Sequence[Toleration] = (),
) -> Rejection | None:
    """The first filter (step 1 of the module docstring) that rules `cluster` out for a gang,
    before any capacity is looked at; None when it may hold it. `place` applies it to every
    cluster; a reclaim uses it to look for room only where the gang may go."""
    name = cluster.name
    if name in not_ready:
        why = not_ready.get(name) if isinstance(not_ready, Mapping) else None
        return Rejection(name, f"not ready ({why})" if why else "not ready", NOT_READY)
    if failed_over and name in failed_over:
        why = failed_over[name]
        text = f"the job failed over from it ({why})" if why else "the job failed over from it"
        return Rejection(name, clip(text), FAILED_OVER)
    cluster_taints = (taints or {}).get(name)
    if cluster_taints:
        blocking = untolerated(tolerations, cluster_taints)
        if blocking is not None:
            text = f"has the taint {blocking}, which the policy does not tolerate"
            return Rejection(name, clip(text), TAINTED)
    if affinity is not None:
        excluded = affinity.rejection(cluster)
        if excluded is not None:
            return Rejection(name, excluded, AFFINITY)
    return None


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


def _fragmentation_fit(
    gang: Gang, cluster: ClusterSnapshot, mix: WorkloadMix, score: Score
) -> tuple[Assignment | Reason, Score]:
    """The gang packed with the mix, and its score with the fragmentation it adds. A
    preferred topology is tried first (the choice then puts in-domain fits first)."""
    result = NODES.check(gang, cluster, mix=mix, preferred=True)
    if not isinstance(result, Assignment) and any(not r.required for r in gang.topology):
        result = NODES.check(gang, cluster, mix=mix)
    if not isinstance(result, Assignment):
        return result, score
    frees = []
    for node, used in result.per_node().items():
        assert node is not None
        before = cluster.free(node)
        assert before is not None
        frees.append((before, before - used))
    delta = round(assignment_delta(mix, frees, cluster.accelerator), 6) + 0.0
    return result, Score(score.hole_fit, score.share, delta)


#: At most this many clusters are packed (measured exactly) per round of the fragmentation
#: ranking, in the order of their estimate; the next round runs only if none of them fits.
#: Fleets this small or smaller are measured completely.
MEASURED_PER_ROUND = 4


def _choose_least_fragmenting(
    gang: Gang,
    candidates: list[tuple[tuple[float, float, float], str, Score, ClusterSnapshot]],
    rejections: list[Rejection],
    mix: WorkloadMix,
    fit_key: _MemoKey,
    explain_all: bool,
) -> Decision:
    """Rank by the estimate, pack the best `MEASURED_PER_ROUND` (more rounds while none fits,
    all with `explain_all`), and choose the measured fit that adds least fragmentation; the
    other fits are outranked with both exact figures, the unmeasured by their estimates."""
    candidates.sort(key=lambda entry: (entry[0], entry[1]))
    fits: list[tuple[tuple[int, float, float, float, float], str, Score, Assignment]] = []
    done = 0
    while done < len(candidates) and (not fits or explain_all):
        for estimate, name, score, cluster in candidates[done : done + MEASURED_PER_ROUND]:
            table = cluster.memo()
            found = cast(tuple[Assignment | Reason, Score] | None, table.get(fit_key))
            if found is None:
                found = table[fit_key] = _fragmentation_fit(gang, cluster, mix, score)
            result, exact = found
            if isinstance(result, Assignment):
                assert exact.fragmentation is not None
                key = (
                    _preferred_missed(gang, result),
                    exact.fragmentation,
                    -exact.hole_fit,
                    -exact.share,
                    estimate[0],
                )
                fits.append((key, name, exact, result))
            else:
                rejections.append(Rejection(name, result, INSUFFICIENT))
        done += MEASURED_PER_ROUND
    fits.sort(key=lambda entry: (entry[0], entry[1]))
    chosen: Placement | None = None
    if fits:
        _, name, score, assignment = fits[0]
        assert score.fragmentation is not None
        unmeasured = candidates[done:]
        chosen = Placement(
            cluster=name,
            components=tuple((c.name, c.replicas) for c in gang.components),
            multi_role=gang.multi_role,
            assignment=assignment,
            score=score,
            estimator=NODES.name,
            runner_up=(fits[1][1], fits[1][2]) if len(fits) > 1 else None,
            unmeasured=len(unmeasured),
        )
        for _, other, other_score, _ in fits[1:]:
            mine = other_score.fragmentation
            assert mine is not None
            rejections.append(
                Rejection(
                    other,
                    Sentence(
                        _fits_too,
                        chosen,
                        other_score,
                        facts={
                            "fragmentation": f"{mine:.3f}",
                            "chosen": name,
                            "chosenFragmentation": f"{score.fragmentation:.3f}",
                        },
                    ),
                    OUTRANKED,
                )
            )
        best_estimate = min((e[0][0] for e in candidates[:done] if e[1] == name), default=math.nan)
        for estimate, other, _, _ in unmeasured:
            rejections.append(
                Rejection(
                    other,
                    Sentence(_unmeasured, name, estimate[0], best_estimate),
                    OUTRANKED,
                )
            )
    rejections.sort(key=lambda r: r.cluster)
    return Decision(chosen, tuple(rejections))


def _preferred_missed(gang: Gang, assignment: Assignment) -> int:
    """How many preferred topology rules `assignment` does not keep (0: all kept)."""
    wanted = sum(1 for rule in gang.topology if not rule.required)
    kept = sum(1 for domain in assignment.domains if not domain.required)
    return wanted - kept


def _unmeasured(chosen: str, estimate: float, chosen_estimate: float) -> str:
    return (
        f"not checked: ranks below {chosen} by estimated fragmentation "
        f"({fragmentation_text(estimate)} vs {fragmentation_text(chosen_estimate)})"
    )


def _fits_too(chosen: Placement, score: Score) -> str:
    return f"fits too, but {chosen.cluster} fits better ({_versus(score, chosen.score)})"


class _MemoKey:
    """An estimator and a gang's demand, hashed once per decision (a tuple would hash its
    parts again for every cluster looked up)."""

    __slots__ = ("_hash", "parts")

    def __init__(self, estimator: str, demand: tuple[object, ...]) -> None:
        self.parts = (estimator, demand)
        self._hash = hash(self.parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _MemoKey) and (other is self or other.parts == self.parts)


def _outranked(lead: str, chosen: Placement, score: Score) -> str:
    return f"{lead} {chosen.cluster} ({_versus(score, chosen.score)})"


def _versus(mine: Score, best: Score, where: str | None = None) -> str:
    """`mine` against `best`; with `where`, `best` is the other cluster's score (`... on
    member-2`), else the winner's."""
    at = f" on {where}" if where else ""
    if mine.fragmentation is not None and best.fragmentation is not None:
        if round(mine.fragmentation, 1) != round(best.fragmentation, 1):
            return (
                f"fragmentation {fragmentation_text(mine.fragmentation)} vs "
                f"{fragmentation_text(best.fragmentation)}{at}"
            )
        if mine.fragmentation != best.fragmentation:
            return (
                f"fragmentation {mine.fragmentation:+.3f} GPU vs {best.fragmentation:+.3f} GPU{at}"
            )
        # Equal fragmentation: best fit decides, and the sentence says both.
        same = f"fragmentation {fragmentation_text(mine.fragmentation)} on both"
        return f"{same}, then {_best_fit_versus(mine, best, where, at)}"
    return _best_fit_versus(mine, best, where, at)


def _best_fit_versus(mine: Score, best: Score, where: str | None, at: str) -> str:
    if mine.hole_fit != best.hole_fit:
        return f"hole fit {mine.hole_fit:.0%} vs {best.hole_fit:.0%}{at}"
    if mine.share != best.share:
        return f"share of free capacity {mine.share:.0%} vs {best.share:.0%}{at}"
    return f"same score as {where}; names break ties" if where else "same score; names break ties"


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
