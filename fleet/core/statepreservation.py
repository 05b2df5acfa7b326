"""`statePreservation`: what a gang's old copy tells its next one, as Karmada does it.

A PropagationPolicy's `failover.application.statePreservation` and
`failover.cluster.statePreservation` hold `rules`, each `{aliasLabelName, jsonPath}`. When a
copy is moved away, Karmada evaluates every rule's `jsonPath` against the old copy's `.status`
(the status it reported, `AggregatedStatusItem.status`) with Kubernetes' JSONPath (the
`kubectl -o jsonpath` template language, missing keys an error) and puts each result, as text,
as the label `aliasLabelName` on the copy it creates in the next cluster (its
GracefulEvictionTask's `preservedLabelState`). The Flink example: `"{ .jobStatus.jobID }"`
gives the job ID its next copy restores from.

fleet does the same on a failover (application or cluster) and, as the issue asks, when the
queue evicts a gang (reclaim, preemption): `preserved_labels` here, the values carried by the
binding (`lifecycle.Eviction.preserved`, `lifecycle.Binding.carried`) to the next copy.

The text of a value is client-go's: a string as it is; a number as Go prints a float64
(`3`, `1.5`, `1e+21`); `true` / `false`; a map or a list as compact JSON; `<nil>` for null;
several results joined by a space; text outside `{}` kept. A path that is missing (or an index
out of range) is an error, as Karmada's `AllowMissingKeys(false)`: Karmada then fails the
eviction and retries it; fleet carries none of that rule's label, reports the problem (the
shell puts it on an Event), and the move goes on: a gang is never kept on a failed cluster for
a label. A value that is not a valid label value (63 characters at most, alphanumerics with
`-`, `_`, `.` inside) is reported the same way instead of being refused by the API server.

Supported JSONPath: `.field`, `['field']` / `["field"]`, `[N]` (negative counts from the end),
and a leading `$` or `@`; anything else (`[*]`, `..`, filters, ranges) is reported as
unsupported. Pure.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

#: A label value Kubernetes accepts (empty included).
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_VALUE_MAX = 63


class PreservationError(ValueError):
    """A jsonPath that cannot be evaluated against a status (named in the message)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One `statePreservation.rules[]` entry."""

    alias_label_name: str
    json_path: str


@dataclass(frozen=True, slots=True)
class Preserved:
    """The labels for the next copy, and the rules that gave none (with why)."""

    labels: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def rules_of(state_preservation: Mapping[str, Any] | None) -> list[Rule]:
    """The rules of a `statePreservation` object (as the policy holds it; None: none)."""
    if not state_preservation:
        return []
    out = []
    for rule in state_preservation.get("rules") or ():
        name = rule.get("aliasLabelName")
        path = rule.get("jsonPath")
        if isinstance(name, str) and isinstance(path, str):
            out.append(Rule(name, path))
    return out


def preserved_labels(rules: Iterable[Rule], status: Mapping[str, Any] | None) -> Preserved:
    """Evaluate every rule against the old copy's `.status` (None: it reported none)."""
    out = Preserved()
    for rule in rules:
        try:
            value = evaluate(rule.json_path, status if status is not None else {})
        except PreservationError as err:
            out.problems.append(f"statePreservation rule {rule.alias_label_name!r}: {err}")
            continue
        if len(value) > _LABEL_VALUE_MAX or not _LABEL_VALUE.match(value):
            out.problems.append(
                f"statePreservation rule {rule.alias_label_name!r}: {rule.json_path} gives "
                f"{value!r}, which is not a valid label value (at most 63 characters, "
                "alphanumerics and -_. inside)"
            )
            continue
        out.labels[rule.alias_label_name] = value
    return out


def evaluate(template: str, data: Any) -> str:
    """A JSONPath template against `data`, as text (see the module docstring)."""
    text: list[str] = []
    pos = 0
    while pos < len(template):
        start = template.find("{", pos)
        if start < 0:
            text.append(template[pos:])
            break
        text.append(template[pos:start])
        end = template.find("}", start)
        if end < 0:
            raise PreservationError(f"{template!r}: unclosed '{{'")
        results = _select(template[start + 1 : end].strip(), data, template)
        text.append(" ".join(_text(value) for value in results))
        pos = end + 1
    return "".join(text)


def _select(expression: str, data: Any, template: str) -> Sequence[Any]:
    steps = _steps(expression, template)
    current = data
    walked = ""
    for step in steps:
        if isinstance(step, str):
            walked += f".{step}"
            if not isinstance(current, Mapping) or step not in current:
                raise PreservationError(f"{template!r}: {walked} is not found in the status")
            current = current[step]
        else:
            walked += f"[{step}]"
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                raise PreservationError(f"{template!r}: {walked} is not found in the status")
            current = current[step]
    return [current]


_TOKEN = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-/]+)|\[(?P<index>-?\d+)\]|\[(?P<quote>['"])(?P<key>.*?)(?P=quote)\]"""
)


def _steps(expression: str, template: str) -> list[str | int]:
    rest = expression
    if rest[:1] in ("$", "@"):
        rest = rest[1:]
    steps: list[str | int] = []
    pos = 0
    while pos < len(rest):
        match = _TOKEN.match(rest, pos)
        if match is None or rest.startswith("..", pos):
            raise PreservationError(
                f"{template!r}: {rest[pos:]!r} is not supported (fleet reads .field, "
                "['field'] and [N])"
            )
        if match.group("field") is not None:
            steps.append(match.group("field"))
        elif match.group("index") is not None:
            steps.append(int(match.group("index")))
        else:
            steps.append(match.group("key"))
        pos = match.end()
    return steps


def _text(value: Any) -> str:
    """client-go's text for one JSON value."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return _go_float(float(value))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _go_float(number: float) -> str:
    """A float64 as Go's `fmt.Print` writes it (%v: the shortest digits; exponent form from
    1e21 up and below 1e-4, as `1e+21`, `1.5e-05`, which is also Python's)."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:
        return "0"
    shortest = repr(number)
    if -4 <= math.floor(math.log10(abs(number))) < 21:
        text = format(Decimal(shortest), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    return shortest


__all__ = [
    "PreservationError",
    "Preserved",
    "Rule",
    "evaluate",
    "preserved_labels",
    "rules_of",
]
