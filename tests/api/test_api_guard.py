"""The admission policy `fleet join` installs beside fleet's ClusterRole (fleet.api.guard): it
covers every resource the role lets fleet write, applies to fleet's identity alone, and names
the fleet whose mark it checks. What it refuses is proven against a real API server in
e2e/test_trust.py."""

from __future__ import annotations

from fleet.api import access
from fleet.api import constants as c
from fleet.api.guard import (
    PROTECTED_NAMESPACES,
    admission_objects,
    admission_policy,
    written_resources,
)


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


def test_a_token_request_for_fleets_own_account_is_not_guarded():
    rules = access.token_rules()
    assert written_resources(rules) == []


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
