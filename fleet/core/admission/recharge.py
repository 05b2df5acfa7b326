"""Charging a gang that runs though the queue no longer has it Dequeued (docs/queue.md, "Late
and moved gangs").

Two events make a gang run without the queue's current word, because the shell's reconciles and
the queue's pass run concurrently:

* **a late placement**: placement chose a cluster for a unit whose placement timed out meanwhile
  (it backs off, or is back in its queue): its quota was released and may be someone else's now;
* **a moved victim**: a reclaim chose a running gang as a victim (its quota released at once)
  but the gang had already failed over and runs in another cluster than the one the eviction
  names.

Whether such a unit holds its quota again is the core's decision, by the rule every dequeue
follows: on every node from its quota node to the root, what the node holds plus the unit stays
within the node's `max` (`kube-queue/max-jobs` counted), and a unit that opted out of reclaim
(`borrows` False) stays within its node's `min`. A unit with no quota node holds nothing: it is
granted only where units with no quota bypass the queue (`no_quota: bypass`).

Granted: it is Running and charged. Refused: nothing changes in the queue (the unit keeps its
phase: TimeoutBackoff or Enqueued) and the shell must not let the gang hold capacity uncharged:
a late placement is withdrawn before anything is sent to a member (the job waits for its queue
again).

A moved victim is never refused (`above_max`): the reclaim's proof freed room in the cluster it
left, and evicting it where it runs now frees nothing its claimant needs, so it is not evicted
there. Where the rule above has no room for it, it is charged anyway, above the max, as a gang
whose max shrank keeps running above it: nothing new is dequeued on that path until what it
holds is within its max again, and a later reclaim may evict it where it runs, with a proof of
its own. So a node holds more than its `max` only by a charge the core decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleet.core.quota import MAX_JOBS, QuotaTree, describe_amount

Usage = Mapping[str, Mapping[str, int]]


@dataclass(frozen=True, slots=True)
class Charge:
    """The core's word on a gang that runs (or is about to) though its unit is not Dequeued."""

    key: str
    granted: bool
    """True: the unit is Running and holds its quota. False: nothing changed; the shell does not
    let the gang run uncharged (see the module docstring)."""
    quota: str | None
    """Path of the unit's quota node (None: it has none)."""
    message: str
    """Why, in numbers: for the unit's status, the job's condition and an Event."""
    node: str | None = None
    """With a refusal: the quota node that has no room."""
    resource: str | None = None
    """With a refusal: the resource short there (`kube-queue/max-jobs` for the job count)."""


def charge_decision(
    key: str,
    tree: QuotaTree | None,
    used: Usage,
    quota: str | None,
    demand: Mapping[str, int],
    *,
    within_min: bool,
    borrows: bool,
    bypass: bool,
    above_max: bool = False,
) -> Charge:
    """Whether unit `key` of quota node `quota`, asking `demand` (its job counted), may hold its
    quota now, given what every node holds (`used`, the unit itself not included).
    `within_min`: its node would stay within its min with it; `borrows`: it may borrow (it did
    not opt out of reclaim); `bypass`: a unit with no quota node bypasses the queue;
    `above_max`: a reclaim's victim that had moved, charged whatever the rule says (see the
    module docstring; the refusal's words say why, in numbers)."""
    charge = _decision(
        key, tree, used, quota, demand, within_min=within_min, borrows=borrows, bypass=bypass
    )
    if charge.granted or not above_max:
        return charge
    charged = quota is not None and tree is not None and quota in tree.nodes
    where = "is charged all the same" if charged else "runs uncharged"
    return Charge(
        key,
        True,
        charge.quota,
        f"{charge.message}; it had moved before its eviction was recorded, and evicting it where "
        f"it runs now frees nothing its claimant needs, so it {where}",
        charge.node,
        charge.resource,
    )


def _decision(
    key: str,
    tree: QuotaTree | None,
    used: Usage,
    quota: str | None,
    demand: Mapping[str, int],
    *,
    within_min: bool,
    borrows: bool,
    bypass: bool,
) -> Charge:
    if quota is None or tree is None or quota not in tree.nodes:
        if bypass:
            return Charge(key, True, None, "in no quota node: bypasses the queue, charges nothing")
        return Charge(key, False, None, "in no quota node, so no queue may let it run")
    if not borrows and not within_min:
        return Charge(
            key,
            False,
            quota,
            f"opted out of reclaim, so it never borrows, and quota {quota} has not the room "
            "within its min",
            quota,
        )
    for path in tree.nodes[quota].lineage:
        cap = tree.nodes[path].max
        held = used.get(path, {})
        for resource, amount in sorted(demand.items()):
            limit = cap.get(resource, None)
            if limit is None:
                continue
            have = held.get(resource, 0)
            if have + amount > limit:
                if resource == MAX_JOBS:
                    text = f"quota {path} already holds {have} of max {limit} jobs"
                else:
                    text = (
                        f"quota {path} holds {describe_amount(resource, have)} of max "
                        f"{describe_amount(resource, limit)} and it needs "
                        f"{describe_amount(resource, amount)} more"
                    )
                return Charge(key, False, quota, text, path, resource)
    return Charge(key, True, quota, f"charged to quota {quota} again: every max allows it")


__all__ = ["Charge", "charge_decision"]
