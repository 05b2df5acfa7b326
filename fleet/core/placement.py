"""Choose ONE member cluster for a gang, or explain, cluster by cluster, why none can take it.

Order of work (cheap before expensive):

1. filters, each with its sentence: clusters marked not ready, clusters the job failed over
   from, then the policy's cluster affinity (Karmada semantics: exclude, then labelSelector,
   fieldSelector and clusterNames must all hold);
2. the estimator's `screen` on per-cluster aggregates;
3. the survivors are ranked by the scorer (best fit by default, see `scoring`), ties by name;
4. the estimator's full `check` runs in rank order; the first cluster that really fits wins.

Clusters ranked below the winner are not checked in full unless `explain_all=True`; their
sentence says so. `place` is pure: it never modifies a snapshot. To hold the capacity until the
member shows the pods, call `snapshot.reserve(key, decision.placement.assignment, expires_at)`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from fleet.core.assignment import Assignment
from fleet.core.estimate import NODES, Estimator
from fleet.core.explain import Reason, Sentence, clip
from fleet.core.scoring import Score, Scorer, best_fit
from fleet.core.selectors import LabelSelector, Requirement
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang

NOT_READY = "NotReady"
FAILED_OVER = "FailedOver"
AFFINITY = "ClusterAffinity"
INSUFFICIENT = "Insufficient"
OUTRANKED = "Outranked"


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


@dataclass(frozen=True, slots=True)
class Rejection:
    cluster: str
    why: Reason
    #: NotReady, FailedOver, ClusterAffinity, Insufficient or Outranked.
    category: str

    @property
    def reason(self) -> str:
        """The sentence (formatted on first read), without the cluster name."""
        return str(self.why)

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


def place(
    gang: Gang,
    clusters: Iterable[ClusterSnapshot],
    *,
    estimator: Estimator = NODES,
    affinity: ClusterAffinity | None = None,
    failed_over: Mapping[str, str] | None = None,
    not_ready: Collection[str] | Mapping[str, str] = (),
    scorer: Scorer = best_fit,
    explain_all: bool = False,
) -> Decision:
    """Pick one cluster for `gang` (see the module docstring for the order of work).

    `failed_over` maps cluster -> reason the job left it; `not_ready` lists clusters (or maps
    them to a reason) that must not receive work now.
    """
    failed_over = failed_over or {}
    rejections: list[Rejection] = []
    ranked: list[tuple[tuple[float, float], str, Score, ClusterSnapshot]] = []
    seen: set[str] = set()
    for cluster in clusters:
        name = cluster.name
        if name in seen:
            raise ValueError(f"cluster {name!r} given twice")
        seen.add(name)
        if name in not_ready:
            why = not_ready.get(name) if isinstance(not_ready, Mapping) else None
            rejections.append(
                Rejection(name, f"not ready ({why})" if why else "not ready", NOT_READY)
            )
            continue
        if name in failed_over:
            why = failed_over[name]
            text = f"the job failed over from it ({why})" if why else "the job failed over from it"
            rejections.append(Rejection(name, clip(text), FAILED_OVER))
            continue
        if affinity is not None:
            excluded = affinity.rejection(cluster)
            if excluded is not None:
                rejections.append(Rejection(name, excluded, AFFINITY))
                continue
        short = estimator.screen(gang, cluster)
        if short is not None:
            rejections.append(Rejection(name, short, INSUFFICIENT))
            continue
        score = scorer(gang, cluster)
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


def _outranked(lead: str, chosen: Placement, score: Score) -> str:
    return f"{lead} {chosen.cluster} ({_versus(score, chosen.score)})"


def _versus(mine: Score, best: Score) -> str:
    if mine.hole_fit != best.hole_fit:
        return f"hole fit {mine.hole_fit:.0%} vs {best.hole_fit:.0%}"
    if mine.share != best.share:
        return f"share of free capacity {mine.share:.0%} vs {best.share:.0%}"
    return "same score; names break ties"
