"""The member's MutatingAdmissionPolicy that joins fleet's pods to their native PodGroup.

On a member that gang-schedules with Kubernetes' own Workload API (`gangmarks.KUBERNETES`),
a pod belongs to a gang by `spec.schedulingGroup.podGroupName`, set when it is created (the
field is immutable). No operator fleet dispatches to sets it: their CRDs' pod templates prune
it and their Go types predate it, so a template that carried it would lose it on the way to
the pod. Fleet therefore labels the copy's templates (`gangmarks.KUBERNETES_POD_GROUP_LABEL`,
which every operator passes to its pods), writes the PodGroup beside the copy, and `fleet join`
installs this policy, which copies the label into the field when such a pod is created
(MutatingAdmissionPolicy: GA and on by default since Kubernetes 1.36).

It gives nobody anything new: a pod's creator could set the field itself, to a PodGroup of its
own namespace only (the field names no namespace); the policy acts only on a pod that carries
the label and has no scheduling group yet, and changes nothing else. It holds no credential and
acts for no one: fleet's token is not needed for it, nor given any right to admission objects.

Pure data: `fleet join` sends it (one per fleet identity, as the validating guard), `fleet
unjoin` removes it, docs/security.md shows it.
"""

from __future__ import annotations

from typing import Any, Final

from fleet.api.guard import identity_labels
from fleet.core.gangmarks import KUBERNETES_POD_GROUP_API, KUBERNETES_POD_GROUP_LABEL

__all__ = [
    "MUTATING_API_VERSION",
    "NATIVE_POD_GROUP",
    "scheduling_group_name",
    "scheduling_group_objects",
]

MUTATING_API_VERSION: Final = "admissionregistration.k8s.io/v1"
#: (apiVersion, kind) a member serves when its API server has Kubernetes' own gang scheduling.
NATIVE_POD_GROUP: Final = (KUBERNETES_POD_GROUP_API, "PodGroup")


def scheduling_group_name(namespace: str) -> str:
    """The name of the policy (and its binding) of the identity in `namespace`."""
    return f"scheduling-group.{namespace}.fleet.dev"


def scheduling_group_policy(namespace: str, fleet_id: str) -> dict[str, Any]:
    label = KUBERNETES_POD_GROUP_LABEL
    return {
        "apiVersion": MUTATING_API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": scheduling_group_name(namespace), "labels": identity_labels(fleet_id)},
        "spec": {
            # A pod that cannot join its gang would be scheduled alone: refuse it instead, and
            # its operator creates it again.
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "operations": ["CREATE"],
                    }
                ],
                "objectSelector": {"matchExpressions": [{"key": label, "operator": "Exists"}]},
            },
            "matchConditions": [
                {"name": "no-scheduling-group", "expression": "!has(object.spec.schedulingGroup)"}
            ],
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": (
                            "Object{spec: Object.spec{schedulingGroup: "
                            "Object.spec.schedulingGroup{podGroupName: "
                            f"object.metadata.labels['{label}']}}}}}}"
                        )
                    },
                }
            ],
        },
    }


def scheduling_group_binding(namespace: str, fleet_id: str) -> dict[str, Any]:
    name = scheduling_group_name(namespace)
    return {
        "apiVersion": MUTATING_API_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": identity_labels(fleet_id)},
        "spec": {"policyName": name},
    }


def scheduling_group_objects(namespace: str, fleet_id: str) -> tuple[dict[str, Any], ...]:
    """The policy and its binding, in the order they are written (the reverse of removal)."""
    return scheduling_group_policy(namespace, fleet_id), scheduling_group_binding(
        namespace, fleet_id
    )
