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
5. no PersistentVolumeClaim that binds a chosen volume (`spec.volumeName`), binds only
   pre-provisioned volumes (`storageClassName: ""`) or is filled from another volume or
   snapshot (`spec.dataSource`, `spec.dataSourceRef`): that would read data fleet did not
   write;
6. namespaced writes (but deletes) only in a namespace fleet created (its mark) or one the
   member's admins opened to this fleet (`open-to.fleet.dev/<fleet id>: "true"`): the
   variable `dispatchable`, which other rules reuse;
7. the pods of every workload it writes (each kind's `pod_spec_paths`, fleet.core.kinds) run
   as `default` or a ServiceAccount the namespace lists in `fleet.dev/service-accounts`;
   outside an opened namespace, with no host namespaces, no privileged container and only
   volumes that reach neither the node nor a network storage the spec names
   (`SAFE_VOLUMES`);
8. a Namespace it creates enforces PodSecurity `baseline` or `restricted` (warn and audit, if
   given, too), and its labels never change afterwards;
9. a Reservation is fleet's own (named `fleet-<fleet uid>-...`, consumed only by that gang's
   pods, once, within a day).
10. a RoleBinding only of the viewer's ClusterRole to exactly the viewer's ServiceAccount (the
    people's read-only identity, bound in each namespace fleet dispatches to), and only in a
    `dispatchable` namespace: RBAC's `bind` names the ClusterRole, the policy the one subject
    and the namespace.

Because an update of an object that is not fleet's is refused *before* the API server answers,
no patch answers with the data of an object fleet did not write: reading through `patch` is
closed. The resources the policy covers are exactly those the ClusterRole lets fleet write
(`written_resources`), so a kind added to the ClusterRole is guarded without another edit.

Pure data: `fleet join` sends it, docs/security.md and the chart show it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
from fleet.core.kinds import pod_spec_paths
from fleet.core.kinds.adapter import path_steps

__all__ = [
    "ADMISSION_API_VERSION",
    "NOT_OPEN",
    "POD_SECURITY_FLOOR",
    "PROTECTED_NAMESPACES",
    "SAFE_VOLUMES",
    "TAKEOVER_RESOURCES",
    "WRITE_VERBS",
    "admission_objects",
    "admission_policy",
    "admission_policy_binding",
    "admission_policy_name",
    "identity_labels",
    "member_pod_security",
    "not_open",
    "open_label",
    "pod_specs_expression",
    "token_objects",
    "token_policy",
    "token_policy_name",
    "written_resources",
]

ADMISSION_API_VERSION: Final = "admissionregistration.k8s.io/v1"
#: Verbs that reach admission (and so the policy). `get`, `list` and `watch` never do.
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: Namespaces fleet never writes to, whatever a job or policy names.
PROTECTED_NAMESPACES: Final = ("kube-system", "kube-public", "kube-node-lease")
#: The words of the refusal of a write in a namespace that is neither fleet's nor opened to it:
#: the controller recognises that refusal by them (`not_open`) and says how to open it.
NOT_OPEN: Final = "did not create it and its admins have not opened it to this fleet"
#: PodSecurity levels a namespace fleet creates may carry: never below baseline.
POD_SECURITY_LEVELS: Final = ("baseline", "restricted")
POD_SECURITY_FLOOR: Final = "baseline"
POD_SECURITY_MODES: Final = ("enforce", "warn", "audit")
#: The volume sources a pod of fleet's may use outside a namespace its admins opened: none
#: reaches the node's files (hostPath), its devices, or a storage the pod names itself (nfs,
#: iscsi, an inline csi volume...). A PVC goes through the PVC rule; an ephemeral volume's
#: claim template through the same rule.
SAFE_VOLUMES: Final = (
    "configMap",
    "secret",
    "emptyDir",
    "persistentVolumeClaim",
    "projected",
    "downwardAPI",
    "ephemeral",
    "image",
)
#: What a namespace's `fleet.dev/allow-overwrite=true` lets fleet take over: the kinds
#: propagateDeps copies, never a job, a runtime, a PodGroup or a namespace.
TAKEOVER_RESOURCES: Final = ("configmaps", "secrets", "serviceaccounts", "persistentvolumeclaims")
#: The longest `spec.ttl` of a Reservation fleet's token may create.
RESERVATION_MAX_TTL_SECONDS: Final = 86400


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
    return _labelled(var, c.MANAGED_BY_LABEL, fleet_id)


def _labelled(var: str, key: str, value: str) -> str:
    return (
        f"{var} != null && has({var}.metadata.labels) && '{key}' in {var}.metadata.labels && "
        f"{var}.metadata.labels['{key}'] == '{value}'"
    )


def open_label(fleet_id: str) -> str:
    """The label a member's admins put on a namespace to open it to the fleet `fleet_id`."""
    return f"{c.OPEN_TO_LABEL_PREFIX}{fleet_id}"


def not_open(message: str) -> bool:
    """Whether an API error's message is the guard's refusal of a namespace not opened."""
    return NOT_OPEN in message


def member_pod_security(hub_labels: Mapping[str, str]) -> dict[str, str]:
    """The PodSecurity labels of a namespace fleet creates in a member for a hub namespace
    labelled `hub_labels`: the hub's enforce (and warn, audit, when set) levels, never below
    baseline (no level, privileged or an unknown word: baseline). The guard refuses any
    other Namespace of fleet's."""
    out: dict[str, str] = {}
    for mode in POD_SECURITY_MODES:
        key = f"{c.POD_SECURITY_PREFIX}{mode}"
        level = hub_labels.get(key)
        if level is None and mode != "enforce":
            continue
        out[key] = level if level in POD_SECURITY_LEVELS else POD_SECURITY_FLOOR
    return out


def _specs_at(path: str) -> str:
    """CEL: the list of objects at a pod-spec path of `object` (fleet.core.kinds.adapter's
    `specs_at`), missing steps giving none."""
    steps = path_steps(path)
    wild = next((i for i, step in enumerate(steps) if step in ("*", "[]")), len(steps))
    expr, checks = "object", []
    for step in steps[:wild]:
        expr += f".{step}"
        checks.append(f"has({expr})")
    if wild == len(steps):
        return f"({' && '.join(checks)} ? [{expr}] : [])"
    items = expr if steps[wild] == "[]" else f"{expr}.map(k, {expr}[k])"
    item, inner = "x", []
    for step in steps[wild + 1 :]:
        item += f".{step}"
        inner.append(f"has({item})")
    if inner:
        items = f"{items}.filter(x, {' && '.join(inner)}).map(x, {item})"
    return f"({' && '.join(checks)} ? {items} : [])"


def pod_specs_expression() -> str:
    """CEL: every pod spec of the object of the request, by its kind (`pod_spec_paths` of
    fleet.core.kinds); none for a kind that has none, and on a delete."""
    expr = "[]"
    for (group, kind), paths in sorted(pod_spec_paths().items(), reverse=True):
        specs = " + ".join(_specs_at(p) for p in paths) or "[]"
        expr = (
            f"(request.kind.group == '{group}' && request.kind.kind == '{kind}' ? {specs} : {expr})"
        )
    return f"object == null ? [] : {expr}"


def _claim_ok(spec: str) -> str:
    """CEL: a PersistentVolumeClaim spec that binds no volume of someone else's."""
    return (
        f"(!has({spec}.volumeName) || {spec}.volumeName == '') && "
        f"(!has({spec}.storageClassName) || {spec}.storageClassName != '') && "
        f"!has({spec}.dataSource) && !has({spec}.dataSourceRef)"
    )


def _no_privileged(spec: str) -> str:
    return " && ".join(
        f"(!has({spec}.{field}) || {spec}.{field}.all(ct, !has(ct.securityContext) || "
        "!has(ct.securityContext.privileged) || !ct.securityContext.privileged))"
        for field in ("containers", "initContainers", "ephemeralContainers")
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
            "variables": _variables(fleet_id),
            "validations": _validations(namespace, fleet_id, protected),
        },
    }


def _viewer_binding_only(namespace: str) -> str:
    """A RoleBinding fleet writes grants the viewer's ClusterRole to the viewer's ServiceAccount
    and nothing else, in a namespace fleet may dispatch to (`variables.dispatchable`): whoever
    holds the dispatch token gains nothing by binding (it holds no token of the viewer, and may
    request none), and cannot open to the people a namespace fleet may not write in."""
    subject = "object.subjects[0]"
    return (
        "request.resource.resource != 'rolebindings' || request.operation == 'DELETE' || "
        f"(object.roleRef.apiGroup == '{RBAC_GROUP}' && object.roleRef.kind == 'ClusterRole' && "
        f"object.roleRef.name == '{viewer_cluster_role(namespace)}' && "
        "has(object.subjects) && size(object.subjects) == 1 && "
        f"{subject}.kind == 'ServiceAccount' && "
        f"(!has({subject}.apiGroup) || {subject}.apiGroup == '') && "
        f"{subject}.name == '{VIEWER_SERVICE_ACCOUNT}' && "
        f"has({subject}.namespace) && {subject}.namespace == '{namespace}' && "
        "variables.dispatchable)"
    )


def _variables(fleet_id: str) -> list[dict[str, str]]:
    """The policy's named variables; `dispatchable` is the namespace predicate other rules
    (the people's RoleBindings) reuse."""
    annotations = "namespaceObject.metadata.annotations"
    accounts = c.SERVICE_ACCOUNTS_ANNOTATION
    return [
        {"name": "ours", "expression": _marked("object", fleet_id)},
        {"name": "wasOurs", "expression": _marked("oldObject", fleet_id)},
        {
            "name": "overwriteAllowed",
            "expression": f"request.resource.resource in {list(TAKEOVER_RESOURCES)} && "
            + _labelled("namespaceObject", c.ALLOW_OVERWRITE_LABEL, "true"),
        },
        # The namespace of the request was created by this fleet (it carries its mark).
        {
            "name": "fleetNamespace",
            "expression": _labelled("namespaceObject", c.MANAGED_BY_LABEL, fleet_id),
        },
        # Its admins opened it to this fleet.
        {
            "name": "openNamespace",
            "expression": _labelled("namespaceObject", open_label(fleet_id), "true"),
        },
        {
            "name": "dispatchable",
            "expression": "variables.fleetNamespace || variables.openNamespace",
        },
        # The ServiceAccounts pods of fleet's may run as there.
        {
            "name": "serviceAccounts",
            "expression": "['', 'default'] + (namespaceObject != null && "
            f"has({annotations}) && '{accounts}' in {annotations} ? "
            f"{annotations}['{accounts}'].split(',').map(n, n.trim()) : [])",
        },
        {"name": "podSpecs", "expression": pod_specs_expression()},
    ]


def _validations(namespace: str, fleet_id: str, protected: list[str]) -> list[dict[str, str]]:
    who = f"'fleet ({fleet_id}) "
    ns_labels = "object.metadata.labels"
    levels = list(POD_SECURITY_LEVELS)
    enforce = f"{c.POD_SECURITY_PREFIX}enforce"
    others = [f"{c.POD_SECURITY_PREFIX}{mode}" for mode in POD_SECURITY_MODES[1:]]
    return [
        {
            # A cluster-scoped request (a Reservation, a Namespace) has no namespace key.
            "expression": f"!has(request.namespace) || !(request.namespace in {protected})",
            "reason": "Forbidden",
            "messageExpression": f"{who}may not write in namespace ' + request.namespace",
        },
        {
            # Deletes go on everywhere (fleet removes its copies from a namespace closed since),
            # and so does an update that lets an object go (`fleet unjoin --leave`). A namespace
            # that does not exist (namespaceObject null) is the API server's 404.
            "expression": "request.operation == 'DELETE' || "
            "request.resource.resource == 'namespaces' || namespaceObject == null || "
            "variables.dispatchable || (request.operation == 'UPDATE' && !variables.ours)",
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may not write in namespace ' + request.namespace + ': it {NOT_OPEN} "
                f"(the label {open_label(fleet_id)}=true, which fleet join NAME --namespaces ' "
                "+ request.namespace + ' writes): ' + " + _what()
            ),
        },
        {
            "expression": "request.operation != 'CREATE' || variables.ours",
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may only create objects labelled "
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
                f"{who}may only change objects it created ("
                f"{c.MANAGED_BY_LABEL}={fleet_id}); ' + {_what()} + ' is not one of them' "
                f"+ (request.operation == 'UPDATE' && request.resource.resource in "
                f"{list(TAKEOVER_RESOURCES)} ? ' (its namespace owners allow a "
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
                f"{who}may not create service-account-token Secrets: ' + {_what()}"
            ),
        },
        {
            "expression": (
                "request.resource.resource != 'persistentvolumeclaims' || "
                "request.operation != 'CREATE' || !has(object.spec) || " + _claim_ok("object.spec")
            ),
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may not create a PersistentVolumeClaim that could bind a volume it did "
                'not make (spec.volumeName, storageClassName "", dataSource, dataSourceRef): \' '
                f"+ {_what()}"
            ),
        },
        {
            "expression": "variables.podSpecs.all(s, "
            "(!has(s.serviceAccountName) || s.serviceAccountName in variables.serviceAccounts) "
            "&& (!has(s.serviceAccount) || s.serviceAccount in variables.serviceAccounts))",
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may run pods only as ServiceAccount default or one its namespace lists "
                f"in the annotation {c.SERVICE_ACCOUNTS_ANNOTATION}: ' + {_what()} + ' names ' "
                "+ variables.podSpecs.filter(s, has(s.serviceAccountName) && "
                "!(s.serviceAccountName in variables.serviceAccounts))"
                ".map(s, s.serviceAccountName).join(', ')"
            ),
        },
        {
            "expression": "variables.openNamespace || variables.podSpecs.all(s, "
            "!(has(s.hostNetwork) && s.hostNetwork) && !(has(s.hostPID) && s.hostPID) && "
            "!(has(s.hostIPC) && s.hostIPC) && " + _no_privileged("s") + ")",
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may not create pods with hostNetwork, hostPID, hostIPC or a privileged "
                "container outside a namespace its admins opened to it: ' + " + _what()
            ),
        },
        {
            "expression": "variables.openNamespace || variables.podSpecs.all(s, "
            "!has(s.volumes) || s.volumes.all(v, "
            + " || ".join(f"has(v.{source})" for source in SAFE_VOLUMES)
            + "))",
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may use only {', '.join(SAFE_VOLUMES)} volumes outside a namespace "
                "its admins opened to it (no hostPath, nfs, iscsi, inline csi...): ' + " + _what()
            ),
        },
        {
            "expression": "variables.podSpecs.all(s, !has(s.volumes) || s.volumes.all(v, "
            "!has(v.ephemeral) || !has(v.ephemeral.volumeClaimTemplate) || "
            "!has(v.ephemeral.volumeClaimTemplate.spec) || "
            + _claim_ok("v.ephemeral.volumeClaimTemplate.spec")
            + "))",
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may not create pods whose ephemeral volume could bind a volume it did "
                'not make (volumeClaimTemplate.spec.volumeName, storageClassName "", '
                "dataSource): ' + " + _what()
            ),
        },
        {
            "expression": "request.resource.resource != 'namespaces' || "
            "request.operation != 'CREATE' || "
            f"(has({ns_labels}) && '{enforce}' in {ns_labels} && "
            f"{ns_labels}['{enforce}'] in {levels} && "
            + " && ".join(
                f"(!('{key}' in {ns_labels}) || {ns_labels}['{key}'] in {levels})" for key in others
            )
            + f" && !('{c.ALLOW_OVERWRITE_LABEL}' in {ns_labels}))",
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may create a namespace only with the label {enforce} baseline or "
                f"restricted (warn and audit, if given, too) and without "
                f"{c.ALLOW_OVERWRITE_LABEL}: ' + {_what()}"
            ),
        },
        {
            "expression": "request.resource.resource != 'namespaces' || "
            "request.operation != 'UPDATE' || "
            "(has(object.metadata.labels) ? object.metadata.labels : {}) == "
            "(has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})",
            "reason": "Forbidden",
            "messageExpression": f"{who}may not change the labels of a namespace: ' + {_what()}",
        },
        {
            "expression": _viewer_binding_only(namespace),
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may only write RoleBindings of ClusterRole "
                f"{viewer_cluster_role(namespace)} to exactly ServiceAccount "
                f"{namespace}/{VIEWER_SERVICE_ACCOUNT}, in a namespace it created or one opened "
                f"to it: ' + {_what()}"
            ),
        },
        {
            "expression": "request.resource.resource != 'reservations' || "
            "request.operation != 'CREATE' || " + _reservation_ok(),
            "reason": "Forbidden",
            "messageExpression": (
                f"{who}may create only Reservations of its gangs: named fleet-<"
                f"{c.FLEET_UID_LABEL}>-..., owned by the pods of that gang alone (one owner, its "
                f"labelSelector naming the same {c.FLEET_UID_LABEL}), allocateOnce, a ttl of "
                f"at most {RESERVATION_MAX_TTL_SECONDS}s and no expires: ' + {_what()}"
            ),
        },
    ]


def _reservation_ok() -> str:
    """CEL: a Reservation only the gang fleet made it for may consume, once, within a day."""
    uid = c.FLEET_UID_LABEL
    owner = "object.spec.owners[0]"
    match = f"{owner}.labelSelector.matchLabels"
    return (
        f"(has(object.metadata.labels) && '{uid}' in object.metadata.labels && "
        f"object.metadata.name.startsWith('fleet-' + object.metadata.labels['{uid}'] + '-') && "
        "has(object.spec) && has(object.spec.owners) && size(object.spec.owners) == 1 && "
        f"!has({owner}.object) && !has({owner}.controller) && has({owner}.labelSelector) && "
        f"has({match}) && '{uid}' in {match} && "
        f"{match}['{uid}'] == object.metadata.labels['{uid}'] && "
        "has(object.spec.allocateOnce) && object.spec.allocateOnce == true && "
        "has(object.spec.ttl) && "
        f"duration(object.spec.ttl) <= duration('{RESERVATION_MAX_TTL_SECONDS}s') && "
        "!has(object.spec.expires))"
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


# -- the token cap: no token of fleet's dispatch identity outlives the lifetime join chose -------


def token_policy_name(namespace: str) -> str:
    """The name of the token policy (and its binding) of the identity in `namespace`."""
    return f"token.{namespace}.fleet.dev"


def token_policy(namespace: str, fleet_id: str, seconds: int) -> dict[str, Any]:
    """A ValidatingAdmissionPolicy capping every TokenRequest for fleet's dispatch
    ServiceAccount in `namespace` at `seconds` (the lifetime `fleet join` chose), whoever asks:
    the renewer the controller renews with (fleet.api.access.renewer_rules) included, so a
    stolen renewer token mints no token longer than a bound one `fleet join` issues. The
    dispatch identity itself may request no token at all (RBAC: no Role grants it). Apart from
    the guard's policy because it applies to requests of other identities than fleet's."""
    name = token_policy_name(namespace)
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": identity_labels(fleet_id)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["*"],
                        "resources": ["serviceaccounts/token"],
                        "operations": ["CREATE"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "fleet-dispatch-identity",
                    "expression": (
                        f"request.namespace == '{namespace}' && request.name == '{SERVICE_ACCOUNT}'"
                    ),
                }
            ],
            "validations": [
                {
                    "expression": (
                        "has(object.spec.expirationSeconds) && "
                        f"object.spec.expirationSeconds <= {int(seconds)}"
                    ),
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'a token of fleet ({fleet_id}) {namespace}/{SERVICE_ACCOUNT} lives "
                        f"{int(seconds)} seconds at most (fleet join --token-expiration); asked "
                        "for ' + (has(object.spec.expirationSeconds) ? "
                        "string(object.spec.expirationSeconds) : 'no expiry')"
                    ),
                }
            ],
        },
    }


def token_objects(
    namespace: str, fleet_id: str, seconds: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The token policy and its binding (denying, in every namespace), in the order written."""
    name = token_policy_name(namespace)
    binding = {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": identity_labels(fleet_id)},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return token_policy(namespace, fleet_id, seconds), binding
