"""Topology: a gang (or one of its pod sets) that must, or would rather, run inside ONE domain of
a node-label level (a rack, an NVLink domain, a network block), and what the copy must carry so
the member keeps that promise.

Where a requirement comes from, in this order:

* Kueue's pod-template annotations, read by each kind's adapter (`rules_from_templates`), with
  Kueue's meaning: `kueue.x-k8s.io/podset-required-topology: <label key>` asks that the pods of
  that template (one *pod set*) run in one domain of the level; `podset-preferred-topology`
  only prefers it. Two templates with the same `kueue.x-k8s.io/podset-group-name` are one
  group: their pods share one domain (they must name the same level and mode, as Kueue
  requires). Each pod set (or group) gets its own domain; two pod sets may sit in different
  racks, as in Kueue.
* else the policy's default, `placement.replicaScheduling.gangTopology: {level, mode}`, which
  applies to the whole gang at once (every pod of the minimum set in one domain), the meaning
  of Kubernetes' PodGroup `schedulingConstraints.topology`.

A domain is one value of the level's label: nodes with `topology.kubernetes.io/rack=r7` are the
domain `r7`; nodes without the label belong to none, so a required pod set never uses them (as
in Kueue). Kueue's slice annotations (`podset-slice-required-topology`, `podset-slice-size`)
are not read: fleet places such a pod set as if they were absent, and the member's Kueue
enforces the slices (docs/placement.md says so). Only the minimum set is constrained.

`pin_pod_spec` is what the copy must carry on a member whose gang scheduler knows no topology
(coscheduling, Koordinator without its network-topology plugin): a required node affinity on
the domain fleet chose, so the member's scheduler cannot scatter the gang.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.core.errors import FieldError

REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
GROUP_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
#: Kueue's slice annotations: not read by fleet (the member's Kueue enforces them).
SLICE_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-size",
)
REQUIRED = "Required"
PREFERRED = "Preferred"
MODES = (REQUIRED, PREFERRED)


@dataclass(frozen=True, slots=True)
class TopologyRule:
    """The pods of `components` (all of the gang's when empty) in one domain of `level`."""

    level: str
    mode: str = REQUIRED
    #: Component names; empty means every component (the policy's whole-gang default).
    components: tuple[str, ...] = ()
    #: Where the rule came from, for sentences: the annotation's field, or the policy field.
    source: str = ""
    #: Preferred only: seconds a gang that fits only spread waits for one domain before it is
    #: placed spread (`fleet.core.domainwait`); 0 places it spread at once (Kueue's meaning).
    wait_seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"topology mode {self.mode!r} not one of {MODES}")
        if not self.level:
            raise ValueError("topology level must be a node label key")
        if self.wait_seconds < 0:
            raise ValueError("topology wait must not be negative")
        if self.wait_seconds and self.mode == REQUIRED:
            raise ValueError("a required topology never places spread: it has no wait")

    @property
    def required(self) -> bool:
        return self.mode == REQUIRED

    def covers(self, component: str) -> bool:
        return not self.components or component in self.components


def level_word(level: str) -> str:
    """`rack` for `topology.kubernetes.io/rack`, `block` for `cloud.com/topology-block`: the
    word sentences call a domain of `level`."""
    word = level.rsplit("/", 1)[-1]
    for prefix in ("topology-", "topology."):
        if word.startswith(prefix):
            word = word[len(prefix) :]
    return word or "domain"


def rules_from_templates(
    templates: Sequence[tuple[str, str, Mapping[str, Any]]],
) -> tuple[TopologyRule, ...]:
    """The rules Kueue's annotations give, from (component, field, template) of each pod
    template. Raises `FieldError` naming the annotation when a value is empty, both required and
    preferred are given, or a group's templates disagree."""
    groups: dict[str, list[tuple[str, str, str, str]]] = {}
    order: list[str] = []
    for component, field, template in templates:
        meta = template.get("metadata") or {}
        annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
        if not isinstance(annotations, Mapping):
            continue
        required = annotations.get(REQUIRED_ANNOTATION)
        preferred = annotations.get(PREFERRED_ANNOTATION)
        where = f"{field}.metadata.annotations"
        if required is not None and preferred is not None:
            raise FieldError(
                f"{where}[{REQUIRED_ANNOTATION}]",
                f"give {REQUIRED_ANNOTATION} or {PREFERRED_ANNOTATION}, not both",
            )
        if required is None and preferred is None:
            continue
        key = REQUIRED_ANNOTATION if required is not None else PREFERRED_ANNOTATION
        level = required if required is not None else preferred
        if not isinstance(level, str) or not level.strip():
            raise FieldError(f"{where}[{key}]", f"expected a node label key, got {level!r}")
        mode = REQUIRED if required is not None else PREFERRED
        group = annotations.get(GROUP_ANNOTATION)
        name = f"group:{group}" if isinstance(group, str) and group else f"set:{component}"
        if name not in groups:
            order.append(name)
        groups.setdefault(name, []).append((component, level.strip(), mode, f"{where}[{key}]"))
    rules = []
    for name in order:
        members = groups[name]
        _, level, mode, source = members[0]
        for _component, other_level, other_mode, where in members[1:]:
            if (other_level, other_mode) != (level, mode):
                raise FieldError(
                    where,
                    f"pod sets of {name.removeprefix('group:')!r} ({GROUP_ANNOTATION}) must ask "
                    f"for the same topology: {mode} {level!r} vs {other_mode} {other_level!r}",
                )
        rules.append(TopologyRule(level, mode, tuple(c for c, *_ in members), source))
    return tuple(rules)


def node_affinity_term(level: str, value: str) -> dict[str, Any]:
    return {"key": level, "operator": "In", "values": [value]}


def pin_pod_spec(spec: Mapping[str, Any], level: str, value: str) -> dict[str, Any]:
    """A copy of pod `spec` that can only run on nodes whose `level` label is `value`.

    Node selector terms are ORed and their expressions ANDed, so the expression is added to
    every existing term of `requiredDuringSchedulingIgnoredDuringExecution` (or makes the only
    term); the user's own affinity is kept. Idempotent: pinning twice adds nothing."""
    out = copy.deepcopy(dict(spec))
    affinity = out.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    expression = node_affinity_term(level, value)
    pinned = []
    for term in terms:
        term = dict(term)
        expressions = [e for e in term.get("matchExpressions") or [] if e != expression]
        term["matchExpressions"] = [*expressions, expression]
        pinned.append(term)
    required["nodeSelectorTerms"] = pinned
    return out


#: Weight of the preferred node affinity a preferred domain is written as (the highest).
PREFERRED_WEIGHT = 100


def prefer_pod_spec(spec: Mapping[str, Any], level: str, value: str) -> dict[str, Any]:
    """A copy of pod `spec` that prefers nodes whose `level` label is `value` (preferred node
    affinity of the highest weight, beside the user's own). Idempotent."""
    out = copy.deepcopy(dict(spec))
    node_affinity = out.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    preferred = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    term = {
        "weight": PREFERRED_WEIGHT,
        "preference": {"matchExpressions": [node_affinity_term(level, value)]},
    }
    if term not in preferred:
        preferred.append(term)
    return out


def pin_templates(
    templates: Iterable[tuple[str, dict[str, Any]]],
    domains: Iterable[tuple[str, str, tuple[str, ...]]],
    *,
    required: bool = True,
) -> int:
    """Pin, in place, the pod templates (component, template dict) of each placed domain
    ((level, value, components); empty components: every template) to that domain's nodes
    (with `required` False: make them prefer it). Returns how many templates were pinned.
    What the shell calls on a member copy for a member whose gang scheduler has no topology
    of its own (see docs/placement.md)."""
    pinned = 0
    listed = list(templates)
    for level, value, components in domains:
        for component, template in listed:
            if components and component not in components:
                continue
            spec = template.get("spec")
            if not isinstance(spec, Mapping):
                continue
            pin = pin_pod_spec if required else prefer_pod_spec
            template["spec"] = pin(spec, level, value)
            pinned += 1
    return pinned
