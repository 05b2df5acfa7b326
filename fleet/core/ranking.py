"""Fragmentation-aware ranking of members (`gangScoring: fragmentation`, FGD; see
docs/placement.md): the members that pass the screens are ranked by the fragmentation their
free-accelerator histograms say the gang would add, the best `MEASURED_PER_ROUND` are packed
with the workload mix, and the real assignment that adds least fragmentation wins."""

from __future__ import annotations

import math
from typing import cast

from fleet.core.assignment import Assignment
from fleet.core.decision import (
    INSUFFICIENT,
    OUTRANKED,
    Decision,
    Placement,
    Rejection,
    _preferred_missed,
    _versus,
)
from fleet.core.estimate import NODES
from fleet.core.explain import Reason, Sentence
from fleet.core.fragmentation import WorkloadMix, assignment_delta
from fleet.core.scoring import Score, fragmentation_text
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Gang


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
