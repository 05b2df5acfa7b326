"""The admission policy `fleet join` installs beside fleet's ClusterRole (fleet.api.guard): it
covers every resource the role lets fleet write, applies to fleet's identity alone, and names
the fleet whose mark it checks. What it refuses is proven against a real API server in
e2e/test_trust.py."""

from __future__ import annotations

from fleet.api import access
from fleet.api import constants as c
from fleet.api.guard import (
    NOT_OPEN,
    PROTECTED_NAMESPACES,
    SAFE_VOLUMES,
    TAKEOVER_RESOURCES,
    _specs_at,
    admission_objects,
    admission_policy,
    member_pod_security,
    open_label,
    token_objects,
    written_resources,
)
from fleet.core.kinds import pod_spec_paths


def _guarded() -> set[tuple[str, str]]:
    policy = admission_policy("fleet-member", "fleet-x")
    return {
        (group, resource)
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def test_every_resource_fleet_may_write_is_guarded_and_nothing_it_only_reads():
    writable = {
        (rule.group, resource)
        for rule in access.member_rules()
        if {"create", "patch", "update", "delete"} & set(rule.verbs)
        for resource in rule.resources
    }
    read_only = {
        (rule.group, resource)
        for rule in access.member_rules()
        if not {"create", "patch", "update", "delete"} & set(rule.verbs)
        for resource in rule.resources
    } - writable
    assert _guarded() == writable
    assert not _guarded() & read_only
    assert ("", "secrets") in _guarded() and ("", "configmaps") in _guarded()


def test_the_renewers_token_request_is_not_in_the_guard_but_in_the_token_cap():
    rules = access.renewer_rules()
    assert written_resources(rules) == []
    policy, binding = token_objects("fleet-member", "fleet-x", 3600)
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["serviceaccounts/token"] and rule["operations"] == ["CREATE"]
    # Whoever asks (the renewer, an admin), for the dispatch ServiceAccount only.
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == (
        "request.namespace == 'fleet-member' && request.name == 'fleet'"
    )
    (validation,) = policy["spec"]["validations"]
    assert validation["expression"] == (
        "has(object.spec.expirationSeconds) && object.spec.expirationSeconds <= 3600"
    )
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert policy["metadata"]["labels"][c.FLEET_ID_LABEL] == "fleet-x"


def test_it_applies_to_fleets_service_account_only_and_checks_this_fleets_mark():
    policy = admission_policy("fleet-member", "fleet-x")
    (condition,) = policy["spec"]["matchConditions"]
    assert "system:serviceaccount:fleet-member:fleet" in condition["expression"]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert f"['{c.MANAGED_BY_LABEL}'] == 'fleet-x'" in variables["ours"]
    assert "oldObject" in variables["wasOurs"]
    assert c.ALLOW_OVERWRITE_LABEL in variables["overwriteAllowed"]
    validations = " ".join(v["expression"] for v in policy["spec"]["validations"])
    for namespace in (*PROTECTED_NAMESPACES, "fleet-member"):
        assert f"'{namespace}'" in validations
    assert "kubernetes.io/service-account-token" in validations
    # A cluster-scoped request (a Reservation, a Namespace) has no namespace key at all: the
    # expression must not fail on it (with failurePolicy Fail, an error is a refusal).
    assert "!has(request.namespace) ||" in validations
    assert all(v["reason"] == "Forbidden" for v in policy["spec"]["validations"])


def test_the_binding_denies_and_both_carry_the_fleet_id():
    policy, binding = admission_objects("fleet-member", "fleet-x")
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert policy["spec"]["failurePolicy"] == "Fail"
    for obj in (policy, binding):
        assert obj["metadata"]["labels"][c.FLEET_ID_LABEL] == "fleet-x"


# -- where fleet may dispatch, and what its pods may be -----------------------------------------


def _variables() -> dict[str, str]:
    policy = admission_policy("fleet-member", "fleet-x")
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def _validation(words: str) -> dict[str, str]:
    policy = admission_policy("fleet-member", "fleet-x")
    (found,) = [v for v in policy["spec"]["validations"] if words in v["messageExpression"]]
    return found


def test_the_namespace_predicate_is_a_named_variable_others_reuse():
    variables = _variables()
    assert f"['{c.MANAGED_BY_LABEL}'] == 'fleet-x'" in variables["fleetNamespace"]
    assert "namespaceObject" in variables["fleetNamespace"]
    assert f"['{open_label('fleet-x')}'] == 'true'" in variables["openNamespace"]
    assert open_label("fleet-x") == "open-to.fleet.dev/fleet-x"
    assert variables["dispatchable"] == "variables.fleetNamespace || variables.openNamespace"
    rule = _validation(NOT_OPEN)
    assert "variables.dispatchable" in rule["expression"]
    # Deletes go on (a copy in a namespace closed since is still removed); a namespace that
    # does not exist is the API server's 404, which makes fleet create it.
    assert "request.operation == 'DELETE'" in rule["expression"]
    assert "namespaceObject == null" in rule["expression"]
    assert "--namespaces" in rule["messageExpression"]


def test_every_pod_spec_path_of_every_kind_is_checked():
    expression = _variables()["podSpecs"]
    for (group, kind), paths in pod_spec_paths().items():
        assert f"request.kind.group == '{group}' && request.kind.kind == '{kind}'" in expression
        for path in paths:
            assert _specs_at(path) in expression
    assert expression.startswith("object == null ? [] :")


def test_the_cel_of_a_path_guards_every_step():
    assert _specs_at("spec.template.spec") == (
        "(has(object.spec) && has(object.spec.template) && has(object.spec.template.spec) "
        "? [object.spec.template.spec] : [])"
    )
    assert _specs_at("spec.m.*.template.spec") == (
        "(has(object.spec) && has(object.spec.m) ? object.spec.m.map(k, object.spec.m[k])"
        ".filter(x, has(x.template) && has(x.template.spec)).map(x, x.template.spec) : [])"
    )
    assert _specs_at("spec.l[].t") == (
        "(has(object.spec) && has(object.spec.l) ? object.spec.l.filter(x, has(x.t))"
        ".map(x, x.t) : [])"
    )


def test_pods_run_as_default_or_a_listed_account_and_touch_no_host_outside_an_opened_namespace():
    accounts = _variables()["serviceAccounts"]
    assert accounts.startswith("['', 'default'] + ")
    assert f"'{c.SERVICE_ACCOUNTS_ANNOTATION}'" in accounts and ".split(',')" in accounts
    rule = _validation(c.SERVICE_ACCOUNTS_ANNOTATION)["expression"]
    assert "s.serviceAccountName in variables.serviceAccounts" in rule
    assert "s.serviceAccount in variables.serviceAccounts" in rule  # the deprecated field
    host = _validation("hostNetwork, hostPID")["expression"]
    assert host.startswith("variables.openNamespace || ")
    for word in ("hostNetwork", "hostPID", "hostIPC", "initContainers", "privileged"):
        assert word in host
    volumes = _validation("volumes outside")["expression"]
    assert volumes.startswith("variables.openNamespace || ")
    for source in SAFE_VOLUMES:
        assert f"has(v.{source})" in volumes
    for unsafe in ("hostPath", "nfs", "iscsi", "csi", "cephfs", "glusterfs", "rbd"):
        assert unsafe not in SAFE_VOLUMES and f"v.{unsafe}" not in volumes


def test_claims_that_could_bind_a_volume_fleet_did_not_make_are_refused():
    claims = _validation("PersistentVolumeClaim that could bind")["expression"]
    ephemeral = _validation("ephemeral volume")["expression"]
    for rule, spec in (
        (claims, "object.spec"),
        (ephemeral, "v.ephemeral.volumeClaimTemplate.spec"),
    ):
        assert f"{spec}.storageClassName != ''" in rule
        assert f"!has({spec}.dataSource) && !has({spec}.dataSourceRef)" in rule
        assert f"{spec}.volumeName == ''" in rule


def test_namespaces_are_never_below_baseline_and_never_relabelled():
    created = _validation("may create a namespace")["expression"]
    assert "['baseline', 'restricted']" in created and "privileged" not in created
    assert f"'{c.POD_SECURITY_PREFIX}enforce' in object.metadata.labels" in created
    assert c.ALLOW_OVERWRITE_LABEL in created
    changed = _validation("change the labels of a namespace")["expression"]
    assert "object.metadata.labels" in changed and "oldObject.metadata.labels" in changed


def test_the_pod_security_of_a_namespace_fleet_creates():
    enforce, warn = f"{c.POD_SECURITY_PREFIX}enforce", f"{c.POD_SECURITY_PREFIX}warn"
    assert member_pod_security({}) == {enforce: "baseline"}
    assert member_pod_security({enforce: "privileged"}) == {enforce: "baseline"}
    assert member_pod_security({enforce: "restricted", warn: "restricted"}) == {
        enforce: "restricted",
        warn: "restricted",
    }
    assert member_pod_security({enforce: "nonsense", warn: "privileged"}) == {
        enforce: "baseline",
        warn: "baseline",
    }


def test_takeovers_are_limited_to_the_kinds_propagate_deps_copies():
    allowed = _variables()["overwriteAllowed"]
    assert f"request.resource.resource in {list(TAKEOVER_RESOURCES)}" in allowed
    writable = {r for rule in written_resources(access.member_rules()) for r in rule["resources"]}
    assert set(TAKEOVER_RESOURCES) == {
        "configmaps",
        "secrets",
        "serviceaccounts",
        "persistentvolumeclaims",
    }
    assert set(TAKEOVER_RESOURCES) < writable
    for never in ("pytorchjobs", "jobs", "namespaces", "clustertrainingruntimes", "reservations"):
        assert never not in TAKEOVER_RESOURCES


def test_reservations_are_only_fleets_own_gangs():
    rule = _validation("Reservations of its gangs")["expression"]
    assert "startsWith('fleet-' + object.metadata.labels" in rule
    assert "size(object.spec.owners) == 1" in rule
    assert "object.spec.allocateOnce == true" in rule
    assert "duration(object.spec.ttl) <= duration('86400s')" in rule
    assert "!has(object.spec.expires)" in rule


def test_no_message_breaks_its_cel_string():
    """A quote inside a message's words ends its CEL string literal: the API server refuses the
    whole policy (what `fleet join` would then fail on)."""
    policy = admission_policy("fleet-member", "fleet-x")
    for rule in policy["spec"]["validations"]:
        literals = rule["messageExpression"].split("'")
        assert len(literals) % 2 == 1, rule["messageExpression"]


def test_the_viewers_role_bindings_are_confined_to_dispatchable_namespaces():
    """The one RoleBinding the dispatch token may write (the viewer's role to the viewer) is
    admitted only where fleet may dispatch: binding the people in a namespace nobody opened
    would let them read what fleet never put there."""
    rule = _validation("may only write RoleBindings")
    assert "request.resource.resource != 'rolebindings'" in rule["expression"]
    assert "variables.dispatchable" in rule["expression"]
    assert f"'{access.viewer_cluster_role('fleet-member')}'" in rule["expression"]
    assert f"'{access.VIEWER_SERVICE_ACCOUNT}'" in rule["expression"]
