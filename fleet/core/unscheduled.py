"""The pods of fleet's gangs that a member's scheduler refused: what a stuck gang is seen by.

A gang dispatched to a member may not start there: its pinned rack was taken by the member's
own pods after dispatch, or its member-side group (PodGroup, Koordinator gang, native
PodGroup) cannot form. Every gang scheduler says so the same way, on each pod it does not
place: `PodScheduled=False` with its reason in the message (`fleet.core.inventory`). This
index keeps, per gang (the fleet-UID owner key its pods carry), the pods refused that way and
the latest word on each, event by event (O(1) per pod event); `failover.judge` decides what a
refusal that lasts means.

A pod that is bound, finished, deleted, or not refused (created and not tried yet, or waiting
at the gang's permit stage without a refusal) is not in it, so a gang whose pods are not
created yet, or that runs, has nothing here.
"""

from __future__ import annotations

from fleet.core.inventory import PodInfo

#: How many refused pods a summary names.
NAMED = 1


class UnscheduledPods:
    """Per gang owner key: its refused pods (uid -> (name, the scheduler's message))."""

    def __init__(self) -> None:
        self._by_owner: dict[str, dict[str, tuple[str, str]]] = {}
        self._owner_of: dict[str, str] = {}

    def upsert(self, pod: PodInfo) -> str | None:
        """Take in a pod's latest state; the owner key of a gang that this turned refused (its
        first refused pod) or no longer refused (its last one bound or gone), else None: more
        pods refused, or a new message, change what is said, not whether the gang is
        refused."""
        owner = pod.owner_key
        if owner is None or pod.unschedulable is None:
            return self.remove(pod.uid)
        pods = self._by_owner.setdefault(owner, {})
        first = not pods
        pods[pod.uid] = (pod.name, pod.unschedulable)
        self._owner_of[pod.uid] = owner
        return owner if first else None

    def remove(self, uid: str) -> str | None:
        """A pod is gone, bound or no longer refused; the owner key of its gang if that left
        the gang with no refused pod."""
        owner = self._owner_of.pop(uid, None)
        if owner is None:
            return None
        pods = self._by_owner.get(owner, {})
        pods.pop(uid, None)
        if pods:
            return None
        self._by_owner.pop(owner, None)
        return owner

    def of(self, owner: str) -> dict[str, tuple[str, str]]:
        """The gang's refused pods, uid -> (name, message)."""
        return dict(self._by_owner.get(owner, {}))

    def summary(self, owner: str) -> str | None:
        """What the member's scheduler says about the gang, in one line (None: no pod of it is
        refused): how many pods, and the first one's name and message."""
        pods = self._by_owner.get(owner)
        if not pods:
            return None
        named = sorted(pods.values())[:NAMED]
        said = "; ".join(f"pod {name}: {message}" for name, message in named)
        count = len(pods)
        return f"{count} pod{'s' if count != 1 else ''} not scheduled ({said})"
