"""A member's node and pod events, into its ClusterSnapshot.

Each watch event is reduced to the scheduling facts placement needs (`fleet.core.inventory`)
and applied to the snapshot in O(1); a malformed object is skipped with a warning, never fatal.
"""

from __future__ import annotations

import logging

from fleet.api import constants as c
from fleet.core.errors import ObjectError
from fleet.core.inventory import node_from_k8s, pod_from_k8s
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.unscheduled import UnscheduledPods
from fleet.kube import Obj

log = logging.getLogger(__name__)


def apply_node_event(snapshot: ClusterSnapshot, event: str, obj: Obj) -> bool:
    """Apply one Node event; False if the object was unusable and skipped."""
    if event == "DELETED":
        snapshot.remove_node((obj.get("metadata") or {}).get("name") or "")
        return True
    try:
        snapshot.upsert_node(node_from_k8s(obj))
    except ObjectError as e:
        log.warning("%s: ignoring node: %s", snapshot.name, e)
        return False
    return True


def apply_pod_event(
    snapshot: ClusterSnapshot,
    event: str,
    obj: Obj,
    unscheduled: UnscheduledPods | None = None,
) -> tuple[bool, str | None]:
    """Apply one Pod event; a pod carrying the fleet-UID label consumes its gang's in-flight
    reservation (fleet.core.snapshot), and one the member's scheduler refused is noted in
    `unscheduled` (fleet.core.unscheduled). Returns whether the object was usable, and the
    fleet UID of the gang whose refused pods changed (None: none did)."""
    if event == "DELETED":
        uid = (obj.get("metadata") or {}).get("uid") or ""
        snapshot.remove_pod(uid)
        return True, unscheduled.remove(uid) if unscheduled is not None else None
    try:
        pod = pod_from_k8s(obj, owner_label=c.FLEET_UID_LABEL)
    except ObjectError as e:
        log.warning("%s: ignoring pod: %s", snapshot.name, e)
        return False, None
    snapshot.upsert_pod(pod)
    return True, unscheduled.upsert(pod) if unscheduled is not None else None
