"""The member copy of a fleet workload, and the dependencies it takes along.

Pure: the fleet object and the gang go in, the object to create in the member comes out. The
copy carries labels that mark it as the fleet's (and carry the fleet object's UID, so a restarted
controller adopts it and a recreated fleet object never does), and the gang expressed in every
dialect a member's scheduler may speak: `runPolicy.schedulingPolicy.minAvailable` for the
Kubeflow training operator (which makes a PodGroup for coscheduling or Volcano), and ACK's
`pod-group.scheduling.sigs.k8s.io/{name,min-available}` pod labels as ACK One writes them.
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


def member_labels(fleet_uid: str) -> dict[str, str]:
    return {c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE, c.FLEET_UID_LABEL: fleet_uid}


def member_copy(
    workload: Mapping[str, Any], kind: Kind, *, min_member: int, binding: str
) -> dict[str, Any]:
    """The object fleet creates in the chosen member for `workload`."""
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
            "labels": {**(meta.get("labels") or {}), **member_labels(uid)},
            "annotations": annotations,
        },
        "spec": copy.deepcopy(workload.get("spec") or {}),
    }
    if kind.min_available is not None:
        run_policy = out["spec"].setdefault("runPolicy", {})
        run_policy.setdefault("schedulingPolicy", {})["minAvailable"] = min_member
    for _role, template in pod_templates(kind, out):
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels[c.POD_GROUP_NAME_LABEL] = meta["name"]
        labels[c.POD_GROUP_MIN_AVAILABLE_LABEL] = str(min_member)
        labels[c.FLEET_UID_LABEL] = uid
    return stamped(out)


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
    wanted = (desired.get("metadata") or {}).get("annotations", {}).get(c.APPLIED_DIGEST_ANNOTATION)
    return wanted is not None and annotations.get(c.APPLIED_DIGEST_ANNOTATION) == wanted


def is_ours(member_obj: Mapping[str, Any], fleet_uid: str) -> bool:
    labels = (member_obj.get("metadata") or {}).get("labels") or {}
    return labels.get(c.FLEET_UID_LABEL) == fleet_uid


#: (apiVersion, kind) of the dependencies `propagateDeps` takes along.
DEPENDENCY_KINDS = {
    "ConfigMap": "v1",
    "Secret": "v1",
    "ServiceAccount": "v1",
    "PersistentVolumeClaim": "v1",
}


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


def dependency_copy(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A dependency as created in the member: content kept, server-set metadata dropped."""
    meta = obj["metadata"]
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("metadata", "status")}
    out["metadata"] = {
        "name": meta["name"],
        "namespace": meta.get("namespace"),
        "labels": {**(meta.get("labels") or {}), c.MANAGED_BY_LABEL: c.MANAGED_BY_VALUE},
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
