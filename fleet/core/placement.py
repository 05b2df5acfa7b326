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
sentence says so. `place_in_groups` runs `place` over Karmada's ordered `clusterAffinities`.
`place` is pure: it never modifies a snapshot. To hold the capacity until the
member shows the pods, call `snapshot.reserve(key, decision.placement.assignment, expires_at)`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

from fleet.core.assignment import Assignment
from fleet.core.estimate import NODES, SUM, Estimator
from fleet.core.explain import Fact, Reason, Sentence, clip, facts_of
from fleet.core.scoring import Score, Scorer, best_fit
from fleet.core.selectors import LabelSelector, Requirement
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration, untolerated
from fleet.core.workload import Gang

NOT_READY = "NotReady"
FAILED_OVER = "FailedOver"
TAINTED = "TaintUntolerated"
AFFINITY = "ClusterAffinity"
INSUFFICIENT = "Insufficient"
OUTRANKED = "Outranked"
#: Every rejection code, in the order the filters apply.
CODES = (NOT_READY, FAILED_OVER, TAINTED, AFFINITY, INSUFFICIENT, OUTRANKED)
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
    #: Outranked.
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

    @property
    def fits(self) -> bool:
        return self.placement is not None

    def sentences(self) -> list[str]:
        """`member-2: needs ...`: one line per rejected cluster, sorted by cluster name."""
        return [str(r) for r in self.rejections]

    def summary(self, limit: int = 1024) -> str:
        """A message for an Event or condition: the result, or why no cluster fits."""
        if self.placement is not None:
            return f"Result: {self.placement}"
        considered = len(self.rejections)
        head = f"0/{considered} clusters can take the gang"
        return clip("; ".join([head, *self.sentences()]), limit)


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
) -> Decision:
    """Pick one cluster for `gang` (see the module docstring for the order of work).

    `failed_over` maps cluster -> reason the job left it; `not_ready` lists clusters (or maps
    them to a reason) that must not receive work now; `taints` maps cluster -> its taints, which
    the policy's `tolerations` must tolerate.
    """
    failed_over = failed_over or {}
    taints = taints or {}
    rejections: list[Rejection] = []
    ranked: list[tuple[tuple[float, float], str, Score, ClusterSnapshot]] = []
    seen: set[str] = set()
    # Only the built-in estimators and best fit are known to be pure functions of aggregates
    # (a simulator's random scorer is not).
    memo_key = (
        _MemoKey(estimator.name, gang.demand_key)
        if scorer is best_fit and estimator in _PURE
        else None
    )
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
        ranked.append(((-score.hole_fit, -score.share), name, score, cluster))

    ranked.sort(key=lambda entry: (entry[0], entry[1]))
    chosen: Placement | None = None
    for _, name, score, cluster in ranked:
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
            chosen = Placement(
                cluster=name,
                components=tuple((c.name, c.replicas) for c in gang.components),
                multi_role=gang.multi_role,
                assignment=result,
                score=score,
                estimator=estimator.name,
            )
        else:
            rejections.append(
                Rejection(
                    name,
                    f"fits too, but {chosen.cluster} fits better ({_versus(score, chosen.score)})",
                    OUTRANKED,
                )
            )
    rejections.sort(key=lambda r: r.cluster)
    return Decision(chosen, tuple(rejections))


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


def _versus(mine: Score, best: Score) -> str:
    if mine.hole_fit != best.hole_fit:
        return f"hole fit {mine.hole_fit:.0%} vs {best.hole_fit:.0%}"
    if mine.share != best.share:
        return f"share of free capacity {mine.share:.0%} vs {best.share:.0%}"
    return "same score; names break ties"


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
) -> GroupDecision:
    """Karmada's `clusterAffinities`: try each group in order, from `start_at` (the group the
    previous placement used, so a failover searches its current group first, then the later
    ones) or from the first; the first group with a cluster that fits wins.

    When no group fits, each cluster is explained by the first group that admits it (so its
    reason is about capacity or health, not affinity), and clusters no group admits by why the
    first group refused them. Without groups, `affinity` (Karmada's single clusterAffinity)
    applies. The other arguments are `place`'s.
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
        )

    if not groups:
        return GroupDecision(attempt(affinity), None)
    names = [g.name for g in groups]
    first = names.index(start_at) if start_at in names else 0
    tried: list[tuple[AffinityGroup, Decision]] = []
    for group in groups[first:]:
        decision = attempt(group.affinity)
        if decision.placement is not None:
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
