"""What RBAC cannot say: the admission policy that narrows fleet's identity in a member.

RBAC grants verbs on resources, never on *which* objects, so the member ClusterRole
(fleet.api.access.member_rules) alone lets whoever holds fleet's token:
- read any Secret or ConfigMap through `patch` (even an empty patch answers with the object);
- obtain another ServiceAccount's token (`create` a `kubernetes.io/service-account-token`
  Secret naming it, then read it back the same way);
- overwrite objects fleet never wrote (a tenant's ConfigMap, another controller's job);
- run a workload in `kube-system` as any of its ServiceAccounts.

`fleet join` therefore installs, next to the ClusterRole, a ValidatingAdmissionPolicy and its
binding (GA since Kubernetes 1.30) that apply to fleet's ServiceAccount only and say:
1. what fleet creates carries its mark: the label `fleet.dev/managed-by=<fleet id>`;
2. what fleet updates or deletes already carries its mark (`oldObject`): it changes only what it
   made. The one exception is a namespace whose owners labelled it
   `fleet.dev/allow-overwrite=true`: there fleet may take over objects of the same name
   (`conflictResolution: Overwrite`);
3. nothing in `kube-system`, `kube-public`, `kube-node-lease` or fleet's own namespace;
4. no Secret of type `kubernetes.io/service-account-token` (a token of another identity);
5. no PersistentVolumeClaim that binds a chosen volume (`spec.volumeName`) or is filled from
   another volume or snapshot (`spec.dataSource`, `spec.dataSourceRef`): that would read data
   fleet did not write;
6. a RoleBinding only of the viewer's ClusterRole to exactly the viewer's ServiceAccount (the
   people's read-only identity, bound in each namespace fleet dispatches to): RBAC's `bind`
   names the ClusterRole, the policy the one subject.

Because an update of an object that is not fleet's is refused *before* the API server answers,
no patch answers with the data of an object fleet did not write: reading through `patch` is
closed. The resources the policy covers are exactly those the ClusterRole lets fleet write
(`written_resources`), so a kind added to the ClusterRole is guarded without another edit.

Pure data: `fleet join` sends it, docs/security.md and the chart show it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from fleet.api import constants as c
from fleet.api.access import (
    RBAC_GROUP,
    SERVICE_ACCOUNT,
    VIEWER_SERVICE_ACCOUNT,
    Rule,
    member_rules,
    viewer_cluster_role,
)

__all__ = [
    "ADMISSION_API_VERSION",
    "PROTECTED_NAMESPACES",
    "WRITE_VERBS",
    "admission_objects",
    "admission_policy",
    "admission_policy_binding",
    "admission_policy_name",
    "identity_labels",
    "written_resources",
]

ADMISSION_API_VERSION: Final = "admissionregistration.k8s.io/v1"
#: Verbs that reach admission (and so the policy). `get`, `list` and `watch` never do.
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: Namespaces fleet never writes to, whatever a job or policy names.
PROTECTED_NAMESPACES: Final = ("kube-system", "kube-public", "kube-node-lease")


def written_resources(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    """The policy's resourceRules: every (group, resource) a rule lets fleet write, one rule
    per group; subresources (a token request for fleet's own ServiceAccount) are not guarded:
    RBAC already names the one object they may touch."""
    by_group: dict[str, list[str]] = {}
    for rule in rules:
        if rule.resource_names or not WRITE_VERBS & set(rule.verbs):
            continue
        names = by_group.setdefault(rule.group, [])
        names += [r for r in rule.resources if "/" not in r and r not in names]
    return [
        {
            "apiGroups": [group],
            "apiVersions": ["*"],
            "resources": resources,
            "operations": ["CREATE", "UPDATE", "DELETE"],
        }
        for group, resources in sorted(by_group.items())
    ]


def admission_policy_name(namespace: str) -> str:
    """The name of the policy (and its binding) of the identity in `namespace`: one per
    identity, as the ClusterRole, in the DNS-subdomain form admission objects need."""
    return f"{namespace}.fleet.dev"


def _marked(var: str, fleet_id: str) -> str:
    return (
        f"{var} != null && has({var}.metadata.labels) && "
        f"'{c.MANAGED_BY_LABEL}' in {var}.metadata.labels && "
        f"{var}.metadata.labels['{c.MANAGED_BY_LABEL}'] == '{fleet_id}'"
    )


def _what() -> str:
    """`secrets ns/name` (or `namespaces name`) of the request, for the messages."""
    return (
        "request.resource.resource + ' ' + "
        "(has(request.namespace) && request.namespace != '' ? request.namespace + '/' : '') + "
        "request.name"
    )


def admission_policy(namespace: str, fleet_id: str) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy for fleet's identity in `namespace` of a member, for the
    fleet whose id is `fleet_id` (the value of its managed-by mark)."""
    user = f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}"
    protected = [*PROTECTED_NAMESPACES, namespace]
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": admission_policy_name(namespace), "labels": identity_labels(fleet_id)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": written_resources(member_rules())},
            "matchConditions": [
                {"name": "fleet-identity", "expression": f"request.userInfo.username == '{user}'"}
            ],
            "variables": [
                {"name": "ours", "expression": _marked("object", fleet_id)},
                {"name": "wasOurs", "expression": _marked("oldObject", fleet_id)},
                {
                    "name": "overwriteAllowed",
                    "expression": "namespaceObject != null && "
                    "has(namespaceObject.metadata.labels) && "
                    f"'{c.ALLOW_OVERWRITE_LABEL}' in namespaceObject.metadata.labels && "
                    f"namespaceObject.metadata.labels['{c.ALLOW_OVERWRITE_LABEL}'] == 'true'",
                },
            ],
            "validations": [
                {
                    # A cluster-scoped request (a Reservation, a Namespace) has no namespace key.
                    "expression": f"!has(request.namespace) || !(request.namespace in {protected})",
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'fleet ({fleet_id}) may not write in namespace ' + request.namespace"
                    ),
                },
                {
                    "expression": "request.operation != 'CREATE' || variables.ours",
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'fleet ({fleet_id}) may only create objects labelled "
                        f"{c.MANAGED_BY_LABEL}={fleet_id}: ' + {_what()}"
                    ),
                },
                {
                    "expression": (
                        "request.operation == 'CREATE' || variables.wasOurs || "
                        "(request.operation == 'UPDATE' && variables.overwriteAllowed && "
                        "variables.ours)"
                    ),
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'fleet ({fleet_id}) may only change objects it created ("
                        f"{c.MANAGED_BY_LABEL}={fleet_id}); ' + {_what()} + ' is not one of them' "
                        f"+ (request.operation == 'UPDATE' ? ' (its namespace owners allow a "
                        f"takeover with the label {c.ALLOW_OVERWRITE_LABEL}=true)' : '')"
                    ),
                },
                {
                    "expression": (
                        "request.resource.resource != 'secrets' || object == null || "
                        "!has(object.type) || object.type != 'kubernetes.io/service-account-token'"
                    ),
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'fleet ({fleet_id}) may not create service-account-token Secrets: ' + "
                        f"{_what()}"
                    ),
                },
                {
                    "expression": (
                        "request.resource.resource != 'persistentvolumeclaims' || "
                        "request.operation != 'CREATE' || !has(object.spec) || "
                        "((!has(object.spec.volumeName) || object.spec.volumeName == '') && "
                        "!has(object.spec.dataSource) && !has(object.spec.dataSourceRef))"
                    ),
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'fleet ({fleet_id}) may not create a PersistentVolumeClaim bound to a "
                        "chosen volume or filled from another (spec.volumeName, dataSource): ' + "
                        f"{_what()}"
                    ),
                },
                {
                    "expression": _viewer_binding_only(namespace),
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'fleet ({fleet_id}) may only write RoleBindings of ClusterRole "
                        f"{viewer_cluster_role(namespace)} to exactly ServiceAccount "
                        f"{namespace}/{VIEWER_SERVICE_ACCOUNT}: ' + {_what()}"
                    ),
                },
            ],
        },
    }


def _viewer_binding_only(namespace: str) -> str:
    """A RoleBinding fleet writes grants the viewer's ClusterRole to the viewer's ServiceAccount
    and nothing else: whoever holds the dispatch token gains nothing by binding (it holds no
    token of the viewer, and may request none)."""
    subject = "object.subjects[0]"
    return (
        "request.resource.resource != 'rolebindings' || request.operation == 'DELETE' || "
        f"(object.roleRef.apiGroup == '{RBAC_GROUP}' && object.roleRef.kind == 'ClusterRole' && "
        f"object.roleRef.name == '{viewer_cluster_role(namespace)}' && "
        "has(object.subjects) && size(object.subjects) == 1 && "
        f"{subject}.kind == 'ServiceAccount' && "
        f"(!has({subject}.apiGroup) || {subject}.apiGroup == '') && "
        f"{subject}.name == '{VIEWER_SERVICE_ACCOUNT}' && "
        f"has({subject}.namespace) && {subject}.namespace == '{namespace}')"
    )


def admission_policy_binding(namespace: str, fleet_id: str) -> dict[str, Any]:
    """Its binding: the policy denies (not only audits) in every namespace."""
    name = admission_policy_name(namespace)
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": identity_labels(fleet_id)},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }


def admission_objects(namespace: str, fleet_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy and its binding, in the order they are written (the reverse of removal)."""
    return admission_policy(namespace, fleet_id), admission_policy_binding(namespace, fleet_id)


def identity_labels(fleet_id: str) -> dict[str, str]:
    """The labels of the admission objects join installs for the fleet `fleet_id` (the guard
    here, the scheduling-group policy): made by join, and whose."""
    return {c.JOINED_BY_LABEL: c.JOINED_BY, c.FLEET_ID_LABEL: fleet_id}
