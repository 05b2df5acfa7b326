"""Why a queued unit waits, in words and numbers: the explanations the queue writes on units,
their jobs' conditions and Events (`reasons` says which condition reason goes with them).

Pure functions over the tree, what the nodes hold and the unit; `Admission.why` picks which
applies.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleet.core.admission.decisions import WaitReason
from fleet.core.admission.phases import UnitSpec
from fleet.core.quota import MAX_JOBS, QuotaTree, describe_amount

#: Used per quota path, per resource.
Usage = Mapping[str, Mapping[str, int]]


def describe(used: Mapping[str, int], plus: Mapping[str, int] | None = None) -> str:
    """`4 GPUs` (or the whole vector when it asks no GPU): amounts in numbers for messages."""
    amounts = dict(used)
    for resource, amount in (plus or {}).items():
        amounts[resource] = amounts.get(resource, 0) + amount
    amounts.pop(MAX_JOBS, None)
    if amounts.get("nvidia.com/gpu"):
        return describe_amount("nvidia.com/gpu", amounts["nvidia.com/gpu"])
    return ", ".join(describe_amount(r, a) for r, a in sorted(amounts.items())) or "nothing"


def no_quota_text(tree: QuotaTree | None, spec: UnitSpec) -> str:
    """Why a unit has no quota node."""
    if tree is None:
        return "there is no ElasticQuotaTree in force, so no queue can hold the job"
    if spec.quota_label:
        return f"its quota label names {spec.quota_label!r}, which is no node of the tree"
    return f"namespace {spec.namespace!r} is in no quota node of the ElasticQuotaTree"


def never_fits_text(tree: QuotaTree, quota: str, demand: Mapping[str, int]) -> str | None:
    """Why a unit can never be dequeued (it asks more than a max on its path), or None."""
    for path in tree.nodes[quota].lineage:
        cap = tree.nodes[path].max
        for resource, amount in demand.items():
            limit = cap.get(resource, None)
            if limit is not None and amount > limit:
                return (
                    f"asks {describe_amount(resource, amount)} but the max of quota {path} "
                    f"is {describe_amount(resource, limit)}: it can never be dequeued "
                    "unless the tree changes"
                )
    return None


def opted_out(
    tree: QuotaTree | None, used: Usage, quota: str, demand: Mapping[str, int]
) -> WaitReason:
    """An opted-out unit that would borrow: it waits for its node's min."""
    node = tree.nodes[quota] if tree is not None else None
    held = used.get(quota, {})
    return WaitReason(
        "Quota",
        f"opted out of reclaim, so it never borrows: quota {quota} holds "
        f"{describe(held)} of min {describe(node.min if node else {})} and it needs "
        f"{describe(demand)} more",
        quota,
    )


def shortage(
    tree: QuotaTree, used: Usage, quota: str, demand: Mapping[str, int]
) -> WaitReason | None:
    """The first max on the unit's path that it does not fit, in numbers (None: it fits)."""
    for path in tree.nodes[quota].lineage:
        node = tree.nodes[path]
        have = used.get(path, {})
        for resource, amount in sorted(demand.items()):
            cap = node.max.get(resource, None)
            if cap is None:
                continue
            held = have.get(resource, 0)
            if held + amount > cap:
                if resource == MAX_JOBS:
                    text = (
                        f"quota {path}: {held} of max {cap} jobs already dequeued "
                        f"(kube-queue/max-jobs)"
                    )
                else:
                    text = (
                        f"quota {path}: {describe_amount(resource, held)} of max "
                        f"{describe_amount(resource, cap)} in use, needs "
                        f"{describe_amount(resource, amount)} more"
                    )
                return WaitReason("Quota", text, path, resource)
    return None


__all__ = ["describe", "never_fits_text", "no_quota_text", "opted_out", "shortage"]
