"""Taints and tolerations, matched exactly as kube-scheduler's TaintToleration filter does.

Only NoSchedule and NoExecute taints keep a pod off a node at scheduling time; PreferNoSchedule
only lowers a node's score, so it never makes a gang infeasible and is ignored here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleet.core.errors import FieldError

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
EFFECTS = frozenset({NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE})
BLOCKING_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})
#: The taint kube-scheduler's NodeUnschedulable filter pretends a cordoned node carries.
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    #: For NoExecute: how long the workload may stay once the taint appears; None = for ever.
    toleration_seconds: float | None = None

    def tolerates(self, taint: Taint) -> bool:
        """`v1.Toleration.ToleratesTaint`: empty effect/key are wildcards; Exists ignores value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


UNSCHEDULABLE_TAINT = Taint(UNSCHEDULABLE_TAINT_KEY, NO_SCHEDULE)


def untolerated(tolerations: Sequence[Toleration], taints: Sequence[Taint]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration covers, or None if the pod may land."""
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def no_execute_grace(
    tolerations: Sequence[Toleration], taints: Sequence[Taint]
) -> tuple[Taint, float] | None:
    """The NoExecute taint that evicts first, and after how many seconds; None if none evicts.

    kube's NoExecute rule, which Karmada applies to clusters: a taint no toleration covers
    evicts at once (0); one covered only by tolerations with tolerationSeconds evicts after the
    smallest of them; one covered by a toleration without tolerationSeconds never evicts.
    """
    first: tuple[Taint, float] | None = None
    for taint in taints:
        if taint.effect != NO_EXECUTE:
            continue
        matching = [t for t in tolerations if t.tolerates(taint)]
        if any(t.toleration_seconds is None for t in matching):
            continue
        grace = min((max(t.toleration_seconds or 0.0, 0.0) for t in matching), default=0.0)
        if first is None or grace < first[1]:
            first = (taint, grace)
    return first


def tolerates_unschedulable(tolerations: Sequence[Toleration]) -> bool:
    """Whether a pod may go to a cordoned node (NodeUnschedulable filter)."""
    return any(t.tolerates(UNSCHEDULABLE_TAINT) for t in tolerations)


def parse_taints(raw: object, field: str) -> tuple[Taint, ...]:
    items = _items(raw, field)
    out = []
    for i, item in enumerate(items):
        where = f"{field}[{i}]"
        key = _text(item, "key", where)
        effect = _text(item, "effect", where)
        if not key or effect not in EFFECTS:
            raise FieldError(where, f"invalid taint {dict(item)!r}")
        out.append(Taint(key, effect, _text(item, "value", where)))
    return tuple(out)


def parse_tolerations(raw: object, field: str) -> tuple[Toleration, ...]:
    items = _items(raw, field)
    out = []
    for i, item in enumerate(items):
        where = f"{field}[{i}]"
        operator = _text(item, "operator", where) or "Equal"
        if operator not in ("Equal", "Exists"):
            raise FieldError(f"{where}.operator", f"unknown operator {operator!r}")
        effect = _text(item, "effect", where)
        if effect and effect not in EFFECTS:
            raise FieldError(f"{where}.effect", f"unknown effect {effect!r}")
        seconds = item.get("tolerationSeconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            raise FieldError(f"{where}.tolerationSeconds", f"expected an integer, got {seconds!r}")
        out.append(
            Toleration(
                _text(item, "key", where),
                operator,
                _text(item, "value", where),
                effect,
                None if seconds is None else float(seconds),
            )
        )
    return tuple(out)


def _items(raw: object, field: str) -> Sequence[Mapping[str, object]]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise FieldError(field, f"expected a list, got {raw!r}")
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise FieldError(f"{field}[{i}]", f"expected an object, got {item!r}")
    return raw


def _text(item: Mapping[str, object], key: str, field: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError(f"{field}.{key}", f"expected a string, got {value!r}")
    return value
