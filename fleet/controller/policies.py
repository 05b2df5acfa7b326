"""The fleet's policies, kept in memory from their watch, and what they mean for placement.

A policy that fails to parse (an older CRD, a hand-edited object) is reported and skipped; it
never stops the controller or the jobs other policies govern. What is wrong with a policy, or what
fleet will not do with it, is told on the policy itself (`explain_policy`): Events, and the
Recognized condition when its customSchedulingType is a value fleet does not know (`gang`), so
such a policy is never silently not fleet's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from fleet.api import (
    ClusterPropagationPolicy,
    ConditionStatus,
    PolicyMatch,
    PolicyRef,
    PropagationPolicy,
    PropagationSpec,
    WorkloadRef,
    match_policy,
)
from fleet.api import constants as c
from fleet.api.conditions import condition_of, upsert_condition
from fleet.controller.events import EventRecorder
from fleet.core.kinds import adapter_for, supported
from fleet.kube import ApiError, KubeClient, Unreachable

log = logging.getLogger(__name__)

AnyPolicy = PropagationPolicy | ClusterPropagationPolicy


@dataclass(frozen=True)
class PolicyReport:
    """What the controller has to tell about a policy it just read."""

    #: Semantic problems (or why it does not parse).
    problems: list[str] = field(default_factory=list)
    #: Fields it sets that fleet accepts but does not act on (for a Gang policy).
    ignored: list[str] = field(default_factory=list)
    #: Why fleet does not act on it: a customSchedulingType fleet does not know.
    unknown_type: str | None = None
    #: Whether it parsed at all (only then does it get a Recognized condition).
    parsed: bool = True
    #: Whether its customSchedulingType is Gang: fleet places its workloads.
    gang: bool = False


def _kinds_not_dispatched(spec: PropagationSpec) -> list[str]:
    """The resource selectors of a Gang policy naming a kind fleet does not dispatch (no
    adapter, docs/kinds.md): each is said once on the policy, not silently matched by nothing."""
    return [
        f"spec.resourceSelectors[{i}]: {s.api_version} {s.kind} is no kind fleet dispatches "
        f"(it dispatches {', '.join(supported())})"
        for i, s in enumerate(spec.resource_selectors)
        if adapter_for(s.api_version, s.kind) is None
    ]


class PolicyIndex:
    def __init__(self) -> None:
        self._namespaced: dict[tuple[str, str], PropagationPolicy] = {}
        self._cluster: dict[str, ClusterPropagationPolicy] = {}
        #: "<Kind> <ns/name>" -> why it is ignored.
        self.problems: dict[str, str] = {}

    def upsert(self, obj: Mapping[str, Any]) -> PolicyReport:
        """Index a policy; returns what is to be told about it (empty when it is fine)."""
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        label = f"{kind} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")
        try:
            policy: AnyPolicy
            if kind == "PropagationPolicy":
                policy = PropagationPolicy.from_dict(obj)
            else:
                policy = ClusterPropagationPolicy.from_dict(obj)
        except ValidationError as e:
            why = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()
            )
            self.problems[label] = why
            self.remove(str(kind), meta.get("namespace"), meta.get("name") or "")
            log.warning("ignoring %s: %s", label, why)
            return PolicyReport(problems=[why], parsed=False)
        if meta.get("deletionTimestamp"):
            self.remove(str(kind), meta.get("namespace"), meta.get("name") or "")
            return PolicyReport(parsed=False)
        self.problems.pop(label, None)
        if isinstance(policy, PropagationPolicy):
            self._namespaced[(meta.get("namespace") or "", meta["name"])] = policy
        else:
            self._cluster[meta["name"]] = policy
        spec = policy.spec
        return PolicyReport(
            problems=[str(p) for p in spec.problems()],
            ignored=[*spec.not_acted_on(), *_kinds_not_dispatched(spec)] if spec.is_gang else [],
            unknown_type=spec.unknown_scheduling_type(),
            gang=spec.is_gang,
        )

    def remove(self, kind: str, namespace: str | None, name: str) -> None:
        if kind == "PropagationPolicy":
            self._namespaced.pop((namespace or "", name), None)
        else:
            self._cluster.pop(name, None)

    def match(
        self, workload: Mapping[str, Any], claimed_by: PolicyRef | None = None
    ) -> PolicyMatch:
        ref = WorkloadRef.from_object(workload)
        local = [p for (ns, _), p in self._namespaced.items() if ns == ref.namespace]
        return match_policy(ref, local, list(self._cluster.values()), claimed_by=claimed_by)

    def get(self, ref: PolicyRef) -> AnyPolicy | None:
        if ref.kind == "PropagationPolicy":
            return self._namespaced.get((ref.namespace or "", ref.name))
        return self._cluster.get(ref.name)


def recognized_condition(
    obj: Mapping[str, Any], report: PolicyReport, now: float
) -> list[dict[str, Any]] | None:
    """The policy's status.conditions with Recognized set, or None when nothing is to be
    written: a policy fleet knows gets the condition only to clear a False one, so plain
    policies cost no write."""
    current = (obj.get("status") or {}).get("conditions")
    if not report.parsed or (
        report.unknown_type is None and not condition_of(current, c.CONDITION_RECOGNIZED)
    ):
        return None
    status: ConditionStatus = "True"
    if report.unknown_type is not None:
        status, reason, message = "False", c.REASON_UNKNOWN_SCHEDULING_TYPE, report.unknown_type
    elif report.gang:
        reason = c.REASON_GANG
        message = "customSchedulingType Gang: fleet places the workloads this policy selects"
    else:
        reason = c.REASON_NOT_GANG
        message = "no customSchedulingType: fleet leaves the workloads this policy selects alone"
    generation = (obj.get("metadata") or {}).get("generation")
    updated = upsert_condition(
        current,
        c.CONDITION_RECOGNIZED,
        status,
        reason,
        message,
        now,
        observed_generation=generation,
    )
    return None if updated == list(current or []) else updated


async def explain_policy(
    obj: Mapping[str, Any],
    report: PolicyReport,
    *,
    fleet: KubeClient,
    events: EventRecorder,
    now: float,
) -> None:
    """Tell on the policy what `report` says: a Warning Event for each kind of finding, and
    the Recognized condition in its status. Failures to write are logged, never raised: the
    policy is still indexed."""
    if report.problems:
        await events.record(obj, "InvalidPolicy", "; ".join(report.problems), warning=True)
    if report.ignored:
        await events.record(obj, "FieldsNotActedOn", "; ".join(report.ignored), warning=True)
    if report.unknown_type:
        await events.record(
            obj, c.REASON_UNKNOWN_SCHEDULING_TYPE, report.unknown_type, warning=True
        )
    conditions = recognized_condition(obj, report, now)
    if conditions is None:
        return
    meta = obj.get("metadata") or {}
    try:
        await fleet.patch(
            str(obj.get("apiVersion")),
            str(obj.get("kind")),
            str(meta.get("name")),
            {"status": {"conditions": conditions}},
            meta.get("namespace"),
            subresource="status",
        )
    except (ApiError, Unreachable) as e:
        log.warning("could not write the status of %s %s: %s", obj.get("kind"), meta.get("name"), e)
