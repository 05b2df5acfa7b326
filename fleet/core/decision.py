"""What a placement decides: the chosen member (`Placement`, with why it won), and for every
other member a `Rejection` (a code for machines, a sentence for people), gathered in a
`Decision`. The codes, in the order of work that gives them, and the comparisons of two scores
that the sentences quote. `fleet.core.placement` makes decisions; this module is what they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from fleet.core.assignment import Assignment
from fleet.core.domainwait import WAITING_FOR_DOMAIN, DomainWait
from fleet.core.domainwait import summary as waiting_summary
from fleet.core.explain import Fact, Reason, clip, facts_of
from fleet.core.scoring import Score, fragmentation_text
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
        """A message for an Event or condition: the result, or why no cluster fits. Only the
        sentences that show before the cut are put into words (at a thousand clusters most are
        past it)."""
        if self.placement is not None:
            return f"Result: {self.placement}"
        considered = len(self.rejections)
        head = f"0/{considered} clusters can take the gang"
        if self.domain_wait is not None:
            head = waiting_summary(self.domain_wait)
        parts = [head]
        length = len(head)
        for rejection in self.rejections:
            if length > limit:
                break  # the cut falls in what is already there: the rest cannot show
            text = str(rejection)
            parts.append(text)
            length += 2 + len(text)
        return clip("; ".join(parts), limit)


_ORDER = {code: i for i, code in enumerate(CODES)}


def _code_order(code: str) -> tuple[int, str]:
    """A code's place in the order of work (CODES); a code not in CODES after them."""
    return (_ORDER.get(code, len(CODES)), code)


def _closeness(rejection: Rejection) -> tuple[int, str]:
    """Closer first: the furthest along the order of work (CODES backwards; a code not in
    CODES after them), then by name."""
    rank = _ORDER.get(rejection.category, -1)
    return (-rank, rejection.cluster)


def _preferred_missed(gang: Gang, assignment: Assignment) -> int:
    """How many preferred topology rules `assignment` does not keep (0: all kept)."""
    wanted = sum(1 for rule in gang.topology if not rule.required)
    kept = sum(1 for domain in assignment.domains if not domain.required)
    return wanted - kept


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
