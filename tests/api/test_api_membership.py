"""The join plan: what joining a member makes on either side, as plain objects."""

from __future__ import annotations

import base64

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fleet.api import access
from fleet.api import constants as c
from fleet.api.membership import (
    IssuedToken,
    MemberEndpoint,
    identity_of,
    plan_join,
    redacted,
    renewed_secret,
)
from fleet.kubeconfig import check_kubeconfig
from tests.kube.pki import make_pem

ENDPOINT = MemberEndpoint("https://10.0.0.1:6443", base64.b64encode(make_pem().ca).decode())


def _kubeconfig(secret: dict) -> dict:
    return yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))


def test_the_member_side_is_the_identity_and_its_roles_from_the_rules():
    plan = plan_join("m1", ENDPOINT, namespace="fleet-a", fleet_id="fleet-x")
    kinds = [(o["kind"], o["metadata"]["name"]) for o in plan.member]
    # The admission policy is in place before the ClusterRoleBinding gives the rights it guards.
    assert kinds == [
        ("Namespace", "fleet-a"),
        ("ServiceAccount", "fleet"),
        ("ServiceAccount", "fleet-renewer"),
        ("ValidatingAdmissionPolicy", "fleet-a.fleet.dev"),
        ("ValidatingAdmissionPolicyBinding", "fleet-a.fleet.dev"),
        ("ValidatingAdmissionPolicy", "token.fleet-a.fleet.dev"),
        ("ValidatingAdmissionPolicyBinding", "token.fleet-a.fleet.dev"),
        ("ClusterRole", "fleet:fleet-a"),
        ("ClusterRoleBinding", "fleet:fleet-a"),
        # The people's read-only identity: bound per namespace by the controller.
        ("ServiceAccount", "fleet-viewer"),
        ("ClusterRole", "fleet:fleet-a:viewer"),
        ("ClusterRole", "fleet:fleet-a:viewer-cluster"),
        ("ClusterRoleBinding", "fleet:fleet-a:viewer-cluster"),
        ("Role", "fleet-renewer"),
        ("RoleBinding", "fleet-renewer"),
        ("Secret", "fleet-renewer-token"),
    ]
    role = plan.member[7]
    assert role["rules"] == access.as_policy_rules(access.member_rules("fleet-a"))
    labels = {c.JOINED_BY_LABEL: c.JOINED_BY, c.FLEET_ID_LABEL: "fleet-x"}
    assert all(o["metadata"]["labels"] == labels for o in plan.member)


def test_a_member_without_admission_policies_gets_rbac_alone_and_the_secret_says_so():
    plan = plan_join("m1", ENDPOINT, fleet_id="fleet-x", cluster_id="uid-1", guarded=False)
    assert "ValidatingAdmissionPolicy" not in [o["kind"] for o in plan.member]
    _, secret, member = plan.fleet_objects(IssuedToken("t"))
    annotations = secret["metadata"]["annotations"]
    assert annotations[c.ADMISSION_POLICY_ANNOTATION] == c.NO_ADMISSION_POLICY
    assert annotations[c.CLUSTER_ID_ANNOTATION] == "uid-1"
    assert member["spec"]["id"] == "uid-1"
    secret_type = plan_join("m1", ENDPOINT, token_type="secret").member[-1]
    assert secret_type["type"] == "kubernetes.io/service-account-token"


@given(token=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-_", min_size=1))
def test_the_stored_kubeconfig_passes_the_controllers_rules_and_holds_only_the_token(token):
    plan = plan_join("m1", ENDPOINT, labels={"region": "east"})
    _, secret, member = plan.fleet_objects(IssuedToken(token, issued=0.0, expires=600.0))
    config = _kubeconfig(secret)
    resolved = check_kubeconfig(config)
    assert resolved.server == ENDPOINT.server
    assert [u["user"] for u in config["users"]] == [{"token": token}]
    assert identity_of(secret) == ("fleet-member", "fleet")
    assert secret["metadata"]["annotations"][c.TOKEN_EXPIRES_ANNOTATION] == "1970-01-01T00:10:00Z"
    assert member["spec"]["kubeconfigSecretRef"]["name"] == secret["metadata"]["name"]


def test_a_renewal_replaces_the_token_and_its_times_only():
    plan = plan_join("m1", ENDPOINT)
    _, secret, _ = plan.fleet_objects(IssuedToken("old", issued=0.0, expires=600.0))
    patch = renewed_secret(secret, _kubeconfig(secret), IssuedToken("new", 300.0, 900.0))
    renewed = _kubeconfig(patch)
    assert renewed["users"][0]["user"] == {"token": "new"}
    assert {**renewed, "users": []} == {**_kubeconfig(secret), "users": []}
    assert patch["metadata"]["annotations"] == {
        c.TOKEN_ISSUED_ANNOTATION: "1970-01-01T00:05:00Z",
        c.TOKEN_EXPIRES_ANNOTATION: "1970-01-01T00:15:00Z",
    }


def test_a_dry_run_copy_never_holds_the_token():
    plan = plan_join("m1", ENDPOINT)
    _, secret, _ = plan.fleet_objects(IssuedToken("s3cret", issued=0.0, expires=600.0))
    shown = redacted(secret)
    assert "s3cret" not in yaml.safe_dump(shown) and "data" not in shown


def test_tokenrequest_issues_nothing_shorter_than_ten_minutes():
    with pytest.raises(ValueError, match="600"):
        plan_join("m1", ENDPOINT, token_seconds=599)
