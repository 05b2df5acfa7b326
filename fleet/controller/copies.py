"""The member copy of a fleet workload, and the dependencies it takes along (pure).

Pure: the fleet object and the gang go in, the object to create in the member comes out. The
copy carries labels that mark it as the fleet's (and carry the fleet object's UID, so a restarted
controller adopts it and a recreated fleet object never does), and the gang written in what the
member's scheduler understands (see `member_copy`).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from fleet.api import constants as c
from fleet.core.kinds import Kind, pod_templates

#: Metadata that belongs to the fleet object only.
_DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def member_labels(fleet_uid: str, fleet_id: str) -> dict[str, str]:
    """The labels that make a member object this fleet's copy of one fleet object."""
    return {c.MANAGED_BY_LABEL: fleet_id, c.FLEET_UID_LABEL: fleet_uid}


def member_copy(
    workload: Mapping[str, Any],
    kind: Kind,
    *,
    min_member: int,
    binding: str,
    fleet_id: str,
    gang_scheduler: str | None = None,
    scheduler_name: str | None = None,
) -> dict[str, Any]:
    """The object fleet creates in the chosen member for `workload`.

    The gang is written in what the member's scheduler understands (`gang_scheduler`, the
    MemberCluster's, declared or detected): `runPolicy.schedulingPolicy.minAvailable` for every
    Kubeflow job (the training operator makes a coscheduling or Volcano PodGroup from it), and for
    Koordinator, or a member whose scheduler is unknown, ACK's pod-group labels, from which the
    scheduler makes the PodGroup itself. A user's own gang labels and annotations (GangGroup,
    match-policy, ...) are kept as they are, never overwritten.
    """
    meta = workload["metadata"]
    uid = meta["uid"]
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in _DROP_ANNOTATIONS
    }
    annotations[c.BINDING_ANNOTATION] = binding
    out: dict[str, Any] = {
        "apiVersion": workload["apiVersion"],
        "kind": workload["kind"],
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "labels": {**(meta.get("labels") or {}), **member_labels(uid, fleet_id)},
            "annotations": annotations,
        },
        "spec": copy.deepcopy(workload.get("spec") or {}),
    }
    if kind.min_available is not None:
        run_policy = out["spec"].setdefault("runPolicy", {})
        run_policy.setdefault("schedulingPolicy", {})["minAvailable"] = min_member
    pod_group_labels = gang_scheduler in (None, KOORDINATOR)
    fleet_pod_group = kind.fleet_pod_group and gang_scheduler == COSCHEDULING
    for role, template in pod_templates(kind, out):
        template_meta = template.setdefault("metadata", {})
        labels = template_meta.setdefault("labels", {})
        pod_annotations = template_meta.get("annotations") or {}
        own_koordinator_gang = c.KOORDINATOR_GANG_NAME_ANNOTATION in pod_annotations
        if pod_group_labels and not own_koordinator_gang:
            labels.setdefault(c.POD_GROUP_NAME_LABEL, meta["name"])
            labels.setdefault(c.POD_GROUP_MIN_AVAILABLE_LABEL, str(min_member))
        if fleet_pod_group:
            labels.setdefault(c.COSCHEDULING_POD_GROUP_LABEL, meta["name"])
        labels[c.FLEET_UID_LABEL] = uid
        labels[c.ROLE_LABEL] = role.lower()
        if scheduler_name:
            template.setdefault("spec", {}).setdefault("schedulerName", scheduler_name)
    return stamped(out)


def pod_group(
    member_obj: Mapping[str, Any], kind: Kind, *, min_member: int, gang_scheduler: str | None
) -> dict[str, Any] | None:
    """The scheduler-plugins PodGroup fleet writes beside a copy whose member's operator makes
    none (`Kind.fleet_pod_group`) on a coscheduling member; None otherwise. It is owned by the
    member copy, so the member's garbage collector deletes it with the copy."""
    if not (kind.fleet_pod_group and gang_scheduler == COSCHEDULING):
        return None
    meta = member_obj["metadata"]
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "labels": {
                k: v
                for k, v in (meta.get("labels") or {}).items()
                if k in (c.MANAGED_BY_LABEL, c.FLEET_UID_LABEL)
            },
            "ownerReferences": [
                {
                    "apiVersion": member_obj["apiVersion"],
                    "kind": member_obj["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"minMember": min_member},
    }


#: MemberCluster.spec.gangScheduler values.
COSCHEDULING, KOORDINATOR, VOLCANO = "Coscheduling", "Koordinator", "Volcano"


def _digest(obj: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:20]


def stamped(desired: dict[str, Any]) -> dict[str, Any]:
    """`desired` with an annotation recording what was applied, so an unchanged object is not
    written again on every reconcile (and a removed field is still noticed)."""
    desired["metadata"]["annotations"][c.APPLIED_DIGEST_ANNOTATION] = _digest(desired)
    return desired


def is_current(member_obj: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether `member_obj` was last applied from exactly `desired`."""
    annotations = (member_obj.get("metadata") or {}).get("annotations") or {}
    annotations_wanted = (desired.get("metadata") or {}).get("annotations") or {}
    wanted = annotations_wanted.get(c.APPLIED_DIGEST_ANNOTATION)
    return wanted is not None and annotations.get(c.APPLIED_DIGEST_ANNOTATION) == wanted


def is_ours(member_obj: Mapping[str, Any], fleet_uid: str) -> bool:
    """Whether a member object is the copy of the fleet object with that UID."""
    labels = (member_obj.get("metadata") or {}).get("labels") or {}
    return labels.get(c.FLEET_UID_LABEL) == fleet_uid


#: Kind -> apiVersion of the dependencies `propagateDeps` takes along.
DEPENDENCY_KINDS = c.DEPENDENCY_KINDS


def dependencies(workload: Mapping[str, Any], kind: Kind) -> list[tuple[str, str]]:
    """(kind, name) of every ConfigMap, Secret, ServiceAccount and PVC the pod templates use."""
    found: set[tuple[str, str]] = set()
    for _role, template in pod_templates(kind, workload):
        found.update(_pod_dependencies(template.get("spec") or {}))
    return sorted(found)


def _pod_dependencies(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if sa := spec.get("serviceAccountName"):
        yield "ServiceAccount", sa
    for secret in spec.get("imagePullSecrets") or []:
        if secret.get("name"):
            yield "Secret", secret["name"]
    for volume in spec.get("volumes") or []:
        if cm := (volume.get("configMap") or {}).get("name"):
            yield "ConfigMap", cm
        if secret := (volume.get("secret") or {}).get("secretName"):
            yield "Secret", secret
        if claim := (volume.get("persistentVolumeClaim") or {}).get("claimName"):
            yield "PersistentVolumeClaim", claim
        for source in (volume.get("projected") or {}).get("sources") or []:
            if cm := (source.get("configMap") or {}).get("name"):
                yield "ConfigMap", cm
            if secret := (source.get("secret") or {}).get("name"):
                yield "Secret", secret
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    for container in containers:
        for env_from in container.get("envFrom") or []:
            if cm := (env_from.get("configMapRef") or {}).get("name"):
                yield "ConfigMap", cm
            if secret := (env_from.get("secretRef") or {}).get("name"):
                yield "Secret", secret
        for env in container.get("env") or []:
            source = env.get("valueFrom") or {}
            if cm := (source.get("configMapKeyRef") or {}).get("name"):
                yield "ConfigMap", cm
            if secret := (source.get("secretKeyRef") or {}).get("name"):
                yield "Secret", secret


def dependency_copy(obj: Mapping[str, Any], fleet_id: str) -> dict[str, Any]:
    """A dependency as created in the member: content kept, server-set metadata dropped."""
    meta = obj["metadata"]
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("metadata", "status")}
    out["metadata"] = {
        "name": meta["name"],
        "namespace": meta.get("namespace"),
        "labels": {**(meta.get("labels") or {}), c.MANAGED_BY_LABEL: fleet_id},
        "annotations": {
            k: v
            for k, v in (meta.get("annotations") or {}).items()
            if k not in _DROP_ANNOTATIONS and not k.startswith("kubernetes.io/")
        },
    }
    if obj.get("kind") == "PersistentVolumeClaim":
        spec = out.get("spec") or {}
        spec.pop("volumeName", None)  # bound to a fleet-side volume that does not exist there
    if obj.get("kind") == "ServiceAccount":
        out.pop("secrets", None)
    return out
