"""statePreservation in the shell: read the old copy's status before a move, report problems.

The rules are the policy's, as the binding copied them when it was made (`BindingFailover`, like
every failover parameter, so a policy edit does not change a move under way):
`failover.application.statePreservation` for an application failover,
`failover.cluster.statePreservation` for a move off a lost, tainted or unjoined cluster (the
same split as the purge modes, `FailoverSettings.purge_mode_for`). An eviction by the queue
(reclaim, preemption) is neither; Karmada has no such move, so fleet uses the application's
rules, else the cluster's: the copy was healthy and reachable, as after an application failure,
and a policy that wrote only cluster rules still wants its state carried.

The old copy's status is the one its member's watch last saw (the freshest, and all of it);
when the watch has none (the member is gone, or a restarted controller has not heard from it),
the last status the mirror recorded in the binding (`aggregatedStatus[].status`, written only
for a gang whose policy has rules, `wants_status`). The core evaluates the rules
(`fleet.core.statepreservation`); a rule that reads nothing this time keeps the value an
earlier move carried (a copy that died before it reported has not moved the checkpoint), and
every problem goes on an Event on the job. The move goes on regardless.
"""

from __future__ import annotations

from typing import Any, Literal

from fleet.api import GangBinding
from fleet.controller import copies
from fleet.controller.context import Job, Shell
from fleet.core.failover import APPLICATION_REASONS
from fleet.core.statepreservation import Rule, preserved_labels, rules_of

#: The Event a job gets when a rule gives no label.
REASON_FAILED = "StatePreservationFailed"

#: What moves the gang: an application failover, a cluster failover, an eviction by the queue.
MoveKind = Literal["application", "cluster", "queue"]


def move_kind(reason: str) -> MoveKind:
    """The kind of failover a verdict's reason is (a Failed copy, or a gang that never started
    in its member, is the application's; a lost, tainted or unjoined cluster is the
    cluster's)."""
    return "application" if reason in APPLICATION_REASONS else "cluster"


def rules_for(binding: GangBinding, kind: MoveKind) -> list[Rule]:
    """The rules that apply to a move of `kind` (see the module docstring)."""
    failover = binding.spec.failover
    if failover is None:
        return []
    app = failover.state_preservation
    cluster = failover.cluster_state_preservation
    if kind == "application":
        chosen = app
    elif kind == "cluster":
        chosen = cluster
    else:
        chosen = app if app is not None and app.rules else cluster
    return rules_of(chosen.to_dict() if chosen is not None else None)


def wants_status(binding: GangBinding) -> bool:
    """Whether the mirror keeps the copy's raw status in the binding: only when some rule may
    read it after the member can no longer be asked."""
    return bool(rules_for(binding, "application") or rules_for(binding, "cluster"))


def old_status(shell: Shell, job: Job, cluster: str) -> dict[str, Any] | None:
    """The status of the gang's copy in `cluster`: as its member's watch last saw it, else as
    the binding last recorded it (None: neither has one)."""
    member = shell.members.get(cluster)
    key = job.key
    seen = member.job(key.api_version, key.kind, key.namespace, key.name) if member else None
    if seen is not None and copies.is_ours(seen, job.uid) and seen.get("status") is not None:
        return dict(seen["status"])
    status = job.binding.status
    for item in (status.aggregated_status if status else None) or ():
        if item.cluster_name == cluster and item.status is not None:
            return dict(item.status)
    return None


async def preserve(shell: Shell, job: Job, cluster: str, kind: MoveKind) -> dict[str, str] | None:
    """The labels the gang's next copy carries after it leaves `cluster` (None: no rule
    applies, what it carries is kept); every rule that gave none is told in one Event."""
    rules = rules_for(job.binding, kind)
    if not rules:
        return None
    status = old_status(shell, job, cluster)
    found = preserved_labels(rules, status)
    labels = dict(found.labels)
    earlier = dict(job.life.carried)
    kept = []
    for rule in rules:
        if rule.alias_label_name not in labels and rule.alias_label_name in earlier:
            labels[rule.alias_label_name] = earlier[rule.alias_label_name]
            kept.append(rule.alias_label_name)
    if found.problems:
        where = "" if status is not None else f" ({cluster} reported no status)"
        tail = f"; kept the earlier value of {', '.join(kept)}" if kept else ""
        await shell.events.record(
            job.workload,
            REASON_FAILED,
            f"leaving {cluster}{where}: {'; '.join(found.problems)}{tail}; the move goes on",
            warning=True,
        )
    return labels
