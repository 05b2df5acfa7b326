"""Shape groups: the non-resource facts a pod's constraints are judged against (`Signature`,
shared by every node with the same labels minus identity and topology labels, taints and cordon
flag), and the nodes of one signature with exactly the same free vector (`ShapeGroup`), which
placement reasons about once, with a count. Kept by `fleet.core.snapshot`."""

from __future__ import annotations

from collections.abc import Mapping

from fleet.core.constraints import PodConstraints
from fleet.core.resources import Resources
from fleet.core.taints import Taint

_VERDICT_CACHE_LIMIT = 512


def _signature_key(
    labels: Mapping[str, str], taints: tuple[Taint, ...], unschedulable: bool
) -> tuple[object, ...]:
    return (frozenset(labels.items()), taints, unschedulable)


class Signature:
    """The non-resource facts a pod's constraints are judged against, shared by many nodes."""

    __slots__ = ("_verdicts", "buckets", "key", "labels", "nodes", "taints", "unschedulable")

    def __init__(self, labels: Mapping[str, str], taints: tuple[Taint, ...], unschedulable: bool):
        self.key = _signature_key(labels, taints, unschedulable)
        self.labels = labels
        self.taints = taints
        self.unschedulable = unschedulable
        self.nodes = 0
        #: accelerator free amount -> free vector -> group
        self.buckets: dict[int, dict[Resources, ShapeGroup]] = {}
        self._verdicts: dict[PodConstraints, str | None] = {}

    def rejection(self, constraints: PodConstraints) -> str | None:
        """Why pods with `constraints` cannot use nodes of this signature (cached), or None."""
        try:
            return self._verdicts[constraints]
        except KeyError:
            pass
        if len(self._verdicts) >= _VERDICT_CACHE_LIMIT:
            self._verdicts.clear()
        verdict = constraints.rejection(self.labels, self.taints, self.unschedulable)
        self._verdicts[constraints] = verdict
        return verdict

    def __repr__(self) -> str:
        cordon = self.unschedulable
        return f"Signature(labels={dict(self.labels)}, taints={self.taints}, cordon={cordon})"


class ShapeGroup:
    """Nodes of one signature with exactly the same free vector."""

    __slots__ = ("free", "nodes", "signature")

    def __init__(self, signature: Signature, free: Resources) -> None:
        self.signature = signature
        self.free = free
        #: node name -> its allocatable (shared between equal vectors); insertion-ordered.
        self.nodes: dict[str, Resources] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"ShapeGroup({self.free!r} x{len(self.nodes)})"
