"""Label selectors with the exact semantics of apimachinery and kube-scheduler's node affinity.

Two flavours share one `Requirement`: metav1 `LabelSelector` (matchLabels + matchExpressions;
used for clusters) and the node selector of required node affinity (terms ORed; expressions and
`matchFields` ANDed inside a term; Gt/Lt allowed). Malformed selectors are rejected at parse time
with the field path, because a pod carrying one would be refused by the API server anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.core.errors import FieldError

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
SET_OPERATORS = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST})
NODE_OPERATORS = SET_OPERATORS | {GT, LT}
NODE_NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key operator values` clause."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == IN:
            return self.key in labels and labels[self.key] in self.values
        if op == NOT_IN:
            # A missing label satisfies NotIn, exactly as in apimachinery.
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GT, LT):
            have = _as_int(labels.get(self.key))
            want = _as_int(self.values[0]) if len(self.values) == 1 else None
            if have is None or want is None:
                return False
            return have > want if op == GT else have < want
        return False

    def __str__(self) -> str:
        if self.operator in (EXISTS, DOES_NOT_EXIST):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} [{', '.join(self.values)}]"


def _as_int(text: str | None) -> int | None:
    if text is None:
        return None
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii():
        return None
    return int(text)


def parse_requirement(raw: object, field: str, operators: frozenset[str]) -> Requirement:
    """Parse and validate one requirement the way `labels.NewRequirement` validates it."""
    if not isinstance(raw, Mapping):
        raise FieldError(field, f"expected a requirement object, got {raw!r}")
    key = raw.get("key")
    if not isinstance(key, str) or not key:
        raise FieldError(f"{field}.key", "must be a non-empty string")
    op = raw.get("operator")
    if op not in operators:
        allowed = ", ".join(sorted(operators))
        raise FieldError(
            f"{field}.operator", f"unknown operator {op!r} (expected one of {allowed})"
        )
    values = _string_list(raw.get("values"), f"{field}.values")
    if op in (IN, NOT_IN) and not values:
        raise FieldError(f"{field}.values", f"must not be empty for {op}")
    if op in (EXISTS, DOES_NOT_EXIST) and values:
        raise FieldError(f"{field}.values", f"must be empty for {op}")
    if op in (GT, LT) and (len(values) != 1 or _as_int(values[0]) is None):
        raise FieldError(f"{field}.values", f"{op} needs exactly one integer value")
    return Requirement(key, str(op), values)


def _string_list(raw: object, field: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise FieldError(field, f"expected a list of strings, got {raw!r}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, str):
            raise FieldError(f"{field}[{i}]", f"expected a string, got {item!r}")
        out.append(item)
    return tuple(out)


def parse_string_map(raw: object, field: str) -> dict[str, str]:
    """A `map[string]string` such as nodeSelector or matchLabels."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FieldError(field, f"expected a map of strings, got {raw!r}")
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise FieldError(f"{field}.{key}", f"expected a string, got {value!r}")
        out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: every matchLabels pair and every expression must hold."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    @classmethod
    def of(
        cls, match_labels: Mapping[str, str] | None = None, *expressions: Requirement
    ) -> LabelSelector:
        return cls(tuple(sorted((match_labels or {}).items())), tuple(expressions))

    @classmethod
    def parse(cls, raw: object, field: str = "labelSelector") -> LabelSelector:
        if not isinstance(raw, Mapping):
            raise FieldError(field, f"expected a label selector object, got {raw!r}")
        labels = parse_string_map(raw.get("matchLabels"), f"{field}.matchLabels")
        exprs = raw.get("matchExpressions") or []
        if not isinstance(exprs, Sequence) or isinstance(exprs, str):
            raise FieldError(f"{field}.matchExpressions", "expected a list")
        parsed = tuple(
            parse_requirement(e, f"{field}.matchExpressions[{i}]", SET_OPERATORS)
            for i, e in enumerate(exprs)
        )
        return cls(tuple(sorted(labels.items())), parsed)

    def first_mismatch(self, labels: Mapping[str, str]) -> str | None:
        """The first clause `labels` violates, as text for an explanation, or None on match."""
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return f"{key}={value}"
        for req in self.expressions:
            if not req.matches(labels):
                return str(req)
        return None

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.first_mismatch(labels) is None


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of required node affinity: expressions on labels AND fields on the node."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        # An empty term selects nothing (component-helpers skips it).
        if not self.expressions and not self.fields:
            return False
        if not all(req.matches(labels) for req in self.expressions):
            return False
        if self.fields:
            node_fields = {NODE_NAME_FIELD: node_name}
            for req in self.fields:
                value = node_fields.get(req.key, "")
                equal = value == req.values[0]
                if equal != (req.operator == IN):
                    return False
        return True


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """`requiredDuringSchedulingIgnoredDuringExecution`: a node must match one of the terms."""

    terms: tuple[NodeSelectorTerm, ...]

    @classmethod
    def parse(cls, raw: object, field: str) -> NodeSelector:
        if not isinstance(raw, Mapping):
            raise FieldError(field, f"expected a node selector object, got {raw!r}")
        terms_raw = raw.get("nodeSelectorTerms") or []
        where = f"{field}.nodeSelectorTerms"
        if not isinstance(terms_raw, Sequence) or isinstance(terms_raw, str):
            raise FieldError(where, "expected a list")
        terms = []
        for i, term in enumerate(terms_raw):
            tfield = f"{where}[{i}]"
            if not isinstance(term, Mapping):
                raise FieldError(tfield, f"expected a term object, got {term!r}")
            exprs = _list(term.get("matchExpressions"), f"{tfield}.matchExpressions")
            fields = _list(term.get("matchFields"), f"{tfield}.matchFields")
            terms.append(
                NodeSelectorTerm(
                    tuple(
                        parse_requirement(e, f"{tfield}.matchExpressions[{j}]", NODE_OPERATORS)
                        for j, e in enumerate(exprs)
                    ),
                    tuple(
                        _parse_field_requirement(e, f"{tfield}.matchFields[{j}]")
                        for j, e in enumerate(fields)
                    ),
                )
            )
        return cls(tuple(terms))

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return any(term.matches(labels, node_name) for term in self.terms)

    def label_keys(self) -> frozenset[str]:
        return frozenset(req.key for term in self.terms for req in term.expressions)

    def uses_fields(self) -> bool:
        return any(term.fields for term in self.terms)

    def __str__(self) -> str:
        def term_text(term: NodeSelectorTerm) -> str:
            return " and ".join(str(r) for r in (*term.expressions, *term.fields)) or "(empty)"

        return " or ".join(term_text(t) for t in self.terms) or "(no terms)"


def _list(raw: object, field: str) -> Sequence[Any]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise FieldError(field, "expected a list")
    return raw


def _parse_field_requirement(raw: object, field: str) -> Requirement:
    req = parse_requirement(raw, field, frozenset({IN, NOT_IN}))
    if len(req.values) != 1:
        raise FieldError(f"{field}.values", "must have exactly one element for a field")
    return req
