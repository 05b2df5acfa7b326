"""The member copy of a fleet workload, and the dependencies it takes along (pure).

Pure: the fleet object and the gang go in, the object to create in the member comes out. What
is kind-specific (the server-set fields dropped, where the pods get the member's schedulerName,
the gang and fleet's labels) is the kind's adapter's (`fleet.core.kinds`, `mark_pods`); this
says what fleet's marks are (labels that mark the copy as the fleet's and carry the fleet
object's UID, so a restarted controller adopts it and a recreated fleet object never does) and
puts those on the copy itself.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fleet.api import constants as c
from fleet.core.assignment import Domain
from fleet.core.kinds import ADAPTERS, KindAdapter, Needed
from fleet.core.topology import pin_templates

#: Metadata that belongs to the fleet object only: kubectl's record, and the job's checkpoint
#: report (written on the fleet job at every checkpoint; the copy would be written again each
#: time).
_DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", c.CHECKPOINT_ANNOTATION)


def member_labels(fleet_uid: str, fleet_id: str) -> dict[str, str]:
    """The labels that make a member object this fleet's copy of one fleet object."""
    return {c.MANAGED_BY_LABEL: fleet_id, c.FLEET_UID_LABEL: fleet_uid}


def member_copy(
    workload: Mapping[str, Any],
    kind: KindAdapter,
    *,
    min_member: int,
    binding: str,
    fleet_id: str,
    gang_scheduler: str | None = None,
    scheduler_name: str | None = None,
    needed: Needed | None = None,
    pin: Sequence[Domain] = (),
    carried: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The object fleet creates in the chosen member for `workload`.

    The kind's adapter builds the copy and marks the pods it makes (`KindAdapter.mark_pods`):
    the gang in what the member's scheduler understands (`gang_scheduler`, the MemberCluster's,
    declared or detected), its `scheduler_name`, fleet's UID and role labels, wherever that
    kind's pods get them (`needed`: what the kind reads besides the job, a TrainJob's runtime).
    Fleet's labels and the binding annotation go on the copy itself.
    `pin`: the topology domains the placement chose (`Placement.assignment.domains`), for a
    member whose gang scheduler has no topology of its own (coscheduling, Koordinator): a
    required one is written as required node affinity on its templates, so the member cannot
    scatter the gang; a preferred one (present only when placement found one domain for it)
    as preferred node affinity, so the member tries that domain first and may still spread
    the gang when it no longer fits there.
    `carried`: the labels statePreservation carries to this copy (`lifecycle.carried_labels`),
    put on the copy, as Karmada does, and on its pods' templates, since no operator passes a
    job's own labels to its pods (docs/queue.md, "State carried over"). They win over the
    user's labels of the same key (the value read from the old copy is the newer); fleet's own
    labels win over them.
    """
    uid = workload["metadata"]["uid"]
    state = dict(carried or {})
    out = kind.member_copy(
        workload,
        min_member=min_member,
        gang_scheduler=gang_scheduler,
        scheduler_name=scheduler_name,
        pod_labels={**state, c.FLEET_UID_LABEL: uid},
        role_label=c.ROLE_LABEL,
        needed=needed,
    )
    meta = out["metadata"]
    meta["labels"].update(state)
    meta["labels"].update(member_labels(uid, fleet_id))
    for key in _DROP_ANNOTATIONS:
        meta["annotations"].pop(key, None)
    meta["annotations"][c.BINDING_ANNOTATION] = binding
    if pin:
        pin_domains([(t.component, t.template) for t in kind.templates(out)], pin)
    return stamped(out)


def pin_domains(templates: Sequence[tuple[str, dict[str, Any]]], pin: Sequence[Domain]) -> None:
    """Pin, in place, pod templates (component, template) to the placed domains `pin`: a
    required one as required node affinity, a preferred one as preferred (`member_copy`'s
    `pin`; a gang's Reservations get the same, `reserving.reservation_objects`)."""
    pin_templates(templates, [(d.level, d.value, d.components) for d in pin if d.required])
    pin_templates(
        templates,
        [(d.level, d.value, d.components) for d in pin if not d.required],
        required=False,
    )


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
#: Kind -> apiVersion of what a kind reads its gang from besides the job (`KindAdapter.needs`:
#: a TrainJob's runtime): propagateDeps takes it along too, as one more dependency.
NEEDED_KINDS: dict[str, str] = {kind: api for a in ADAPTERS for api, kind in a.needs_kinds}
#: The kinds of `NEEDED_KINDS` that are cluster-scoped (a ClusterTrainingRuntime).
CLUSTER_SCOPED_NEEDS = frozenset(kind for a in ADAPTERS for kind in a.cluster_scoped_needs)


def dependency_api_version(kind: str) -> str:
    """The apiVersion of a dependency kind (`DEPENDENCY_KINDS`, `NEEDED_KINDS`)."""
    return DEPENDENCY_KINDS.get(kind) or NEEDED_KINDS[kind]


def dependencies(
    workload: Mapping[str, Any], kind: KindAdapter, needed: Needed | None = None
) -> list[tuple[str, str]]:
    """(kind, name) of every ConfigMap, Secret, ServiceAccount and PVC the pods use, read from
    the templates they are made from (`KindAdapter.pod_templates`: a TrainJob's runtime's, with
    its overrides; `needed` holds the runtime)."""
    found: set[tuple[str, str]] = set()
    for t in kind.pod_templates(workload, needed or {}):
        found.update(_pod_dependencies(t.template.get("spec") or {}))
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


#: The fields fleet keeps in step on a member dependency after creating it, by kind. A Secret's
#: `type` and a PVC's spec cannot change once made: they are written at creation only.
_KEPT_FIELDS: dict[str, tuple[str, ...]] = {
    "ConfigMap": ("data", "binaryData"),
    "Secret": ("data",),
    "ServiceAccount": ("imagePullSecrets", "automountServiceAccountToken"),
    "PersistentVolumeClaim": (),
    # What a kind reads besides the job (a runtime): its spec, whole.
    **{kind: ("spec",) for kind in NEEDED_KINDS},
}
#: What an absent field is written as: a value the API server stores as absent (omitempty).
_EMPTY: dict[str, Any] = {
    "spec": {},
    "data": {},
    "binaryData": {},
    "imagePullSecrets": [],
    "automountServiceAccountToken": None,
}


def dependency_digest(dependency: Mapping[str, Any]) -> str:
    """What a dependency copy is, in a few characters: a changed fleet object changes it."""
    return _digest(dependency)


def stamped_dependency(dependency: Mapping[str, Any]) -> dict[str, Any]:
    """A dependency copy as created in a member: with its digest annotation (so its annotations
    exist for the per-key writes of `dependency_patch`)."""
    out = copy.deepcopy(dict(dependency))
    out["metadata"]["annotations"][c.APPLIED_DIGEST_ANNOTATION] = _digest(dependency)
    return out


def _pointer(key: str) -> str:
    """A map key as one JSON-pointer token (RFC 6901: `~` is `~0`, `/` is `~1`)."""
    return key.replace("~", "~0").replace("/", "~1")


def ownership_test(fleet_id: str) -> dict[str, Any]:
    """The JSON-patch op that fails (422) unless the member object carries this fleet's mark:
    an object fleet did not write is never changed by a patch that starts with it."""
    return {
        "op": "test",
        "path": f"/metadata/labels/{_pointer(c.MANAGED_BY_LABEL)}",
        "value": fleet_id,
    }


def dependency_patch(dependency: Mapping[str, Any], fleet_id: str) -> list[dict[str, Any]]:
    """The JSON patch that brings a member's copy of a dependency to `dependency`, guarded by
    `ownership_test`: the kept fields (`_KEPT_FIELDS`) written whole, the fleet object's labels
    and annotations (and the digest) key by key, so marks others added stay."""
    meta = dependency["metadata"]
    ops: list[dict[str, Any]] = [ownership_test(fleet_id)]
    for name in _KEPT_FIELDS.get(str(dependency.get("kind")), ()):
        value = dependency.get(name, _EMPTY.get(name))
        ops.append({"op": "add", "path": f"/{name}", "value": copy.deepcopy(value)})
    for key, value in sorted((meta.get("labels") or {}).items()):
        ops.append({"op": "add", "path": f"/metadata/labels/{_pointer(key)}", "value": value})
    annotations = {
        **(meta.get("annotations") or {}),
        c.APPLIED_DIGEST_ANNOTATION: _digest(dependency),
    }
    for key, value in sorted(annotations.items()):
        ops.append({"op": "add", "path": f"/metadata/annotations/{_pointer(key)}", "value": value})
    return ops


def unmark_patch(fleet_id: str) -> list[dict[str, Any]]:
    """The JSON patch that lets a member's dependency go (`fleet unjoin --leave`): fleet's mark
    removed, guarded by `ownership_test`, so only what is still fleet's is changed."""
    path = f"/metadata/labels/{_pointer(c.MANAGED_BY_LABEL)}"
    return [ownership_test(fleet_id), {"op": "remove", "path": path}]


def takeover_patch(fleet_id: str) -> dict[str, Any]:
    """The merge patch that marks a member's own object as fleet's (conflictResolution
    Overwrite): fleet's label, and `adopted`, so fleet never deletes it."""
    return {
        "metadata": {
            "labels": {c.MANAGED_BY_LABEL: fleet_id},
            "annotations": {c.DEPENDENCY_ADOPTED_ANNOTATION: "true"},
        }
    }


def is_adopted(member_obj: Mapping[str, Any]) -> bool:
    """Whether fleet took this member object over rather than creating it."""
    annotations = (member_obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(c.DEPENDENCY_ADOPTED_ANNOTATION) == "true"
