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


def apply_pod_event(snapshot: ClusterSnapshot, event: str, obj: Obj) -> bool:
    """Apply one Pod event; a pod carrying the fleet-UID label consumes its gang's in-flight
    reservation (fleet.core.snapshot)."""
    if event == "DELETED":
        snapshot.remove_pod((obj.get("metadata") or {}).get("uid") or "")
        return True
    try:
        snapshot.upsert_pod(pod_from_k8s(obj, owner_label=c.FLEET_UID_LABEL))
    except ObjectError as e:
        log.warning("%s: ignoring pod: %s", snapshot.name, e)
        return False
    return True
