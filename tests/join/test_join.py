"""`fleet join` and `fleet unjoin` against in-memory API servers: what each side holds after a
join (fleet's identity in the member, only its token on the fleet), a second run, a dry run,
rollback when a side refuses, and unjoin with and without bound jobs, reachable or not."""

from __future__ import annotations

import base64
import json
import re
import tempfile
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import yaml

from fleet import cli
from fleet.api import access
from fleet.api import constants as c
from fleet.api.guard import open_label, written_resources
from fleet.api.membership import IssuedToken, MemberEndpoint, plan_join
from fleet.core.gangmarks import KUBERNETES_POD_GROUP_LABEL
from fleet.join import JoinError, dry_run, in_force, join, serves_native_gang, unjoin
from fleet.join.in_force import IN_FORCE_WAIT, joined_pod_group, scheduling_group_probe
from fleet.kube import ApiError
from fleet.kubeconfig import check_kubeconfig
from tests.controller.apiserver import (
    FLEET_KINDS,
    MEMBER_KINDS,
    NATIVE_GANG_KINDS,
    ClosingTransport,
    Kind,
    MemoryApi,
    status,
)
from tests.kube.pki import b64, inline_kubeconfig, make_pem

#: A CA ssl accepts: join connects with the kubeconfig it stores (its guard probe).
CA = b64(make_pem().ca)
ENDPOINT = MemberEndpoint("https://member-1.example:6443", CA)
RBAC = "rbac.authorization.k8s.io/v1"
ADMISSION = "admissionregistration.k8s.io/v1"
IDENTITY = [
    ("v1", "Namespace", "fleet-member", None),
    ("v1", "ServiceAccount", "fleet", "fleet-member"),
    (ADMISSION, "ValidatingAdmissionPolicy", "fleet-member.fleet.dev", None),
    (ADMISSION, "ValidatingAdmissionPolicyBinding", "fleet-member.fleet.dev", None),
    (ADMISSION, "ValidatingAdmissionPolicy", "token.fleet-member.fleet.dev", None),
    (ADMISSION, "ValidatingAdmissionPolicyBinding", "token.fleet-member.fleet.dev", None),
    (RBAC, "ClusterRole", "fleet:fleet-member", None),
    (RBAC, "ClusterRoleBinding", "fleet:fleet-member", None),
    ("v1", "ServiceAccount", "fleet-renewer", "fleet-member"),
    (RBAC, "Role", "fleet-renewer", "fleet-member"),
    (RBAC, "RoleBinding", "fleet-renewer", "fleet-member"),
    ("v1", "Secret", "fleet-renewer-token", "fleet-member"),
]


class TokenController:
    """The member's token controller: fills each service-account-token Secret with
    `long-lived-<its ServiceAccount>`."""

    def __init__(self, api: MemoryApi) -> None:
        self.api = api
        api.watchers.append(self)

    def __call__(self, event: str, obj: dict[str, Any]) -> None:
        if obj.get("type") != "kubernetes.io/service-account-token" or event != "ADDED":
            return
        meta = obj["metadata"]
        account = meta["annotations"]["kubernetes.io/service-account.name"]
        key = ("v1", "Secret", meta["namespace"], meta["name"])
        token = f"long-lived-{account}".encode()
        self.api.objects[key]["data"] = {"token": base64.b64encode(token).decode()}


class TokenIssuer:
    """The member's TokenRequest endpoint: token-1, token-2, ... expiring after what is asked."""

    def __init__(self, api: MemoryApi) -> None:
        self.issued: list[int] = []
        api.interceptors.append(self)

    def __call__(self, request: httpx.Request) -> httpx.Response | None:
        if not (request.method == "POST" and request.url.path.endswith("/token")):
            return None
        seconds = json.loads(request.content)["spec"]["expirationSeconds"]
        self.issued.append(seconds)
        return httpx.Response(
            201,
            json={
                "kind": "TokenRequest",
                "status": {
                    "token": f"token-{len(self.issued)}",
                    "expirationTimestamp": "2030-01-02T00:00:00Z",
                },
            },
        )


GUARD = "fleet-member.fleet.dev"


class GuardAdmission:
    """The member's API server enforcing join's guard (fleet.api.guard) and RBAC on fleet's
    token, which is any bearer token here (the joining user's client sends none). Once the
    server's watch has loaded the policy and its binding, a create by fleet's token of an
    object without fleet's mark is denied as Kubernetes denies it (403, naming both). Before
    then, `unguarded` gives each create's answer in turn: "rbac" (the authorizer has not loaded
    fleet's ClusterRoleBinding yet: RBAC's 403) or "admitted" (the policy is not loaded yet: a
    dry run answers 201); after them, `then`: "denied" (loaded), or "admitted" or "rbac" (never
    loaded)."""

    def __init__(self, api: MemoryApi, unguarded: tuple[str, ...] = (), then: str = "denied"):
        self.api = api
        self.unguarded = unguarded
        self.then = then
        #: Each create by fleet's token: (its Authorization header, the answer given).
        self.answers: list[tuple[str, str]] = []
        api.interceptors.append(self)

    def __call__(self, request: httpx.Request) -> httpx.Response | None:
        authorization = request.headers.get("authorization", "")
        if request.method != "POST" or not authorization.startswith("Bearer "):
            return None
        seen = len(self.answers)
        answer = self.unguarded[seen] if seen < len(self.unguarded) else self.then
        written = self.api.get(ADMISSION, "ValidatingAdmissionPolicy", GUARD) and self.api.get(
            ADMISSION, "ValidatingAdmissionPolicyBinding", GUARD
        )
        if answer == "denied" and not written:
            answer = "admitted"
        self.answers.append((authorization, answer))
        resource = request.url.path.rsplit("/", 1)[-1]
        if answer == "rbac":
            return status(
                403,
                "Forbidden",
                f'{resource} is forbidden: User "system:serviceaccount:fleet-member:fleet" '
                f'cannot create resource "{resource}" in API group "" in the namespace '
                '"fleet-member"',
            )
        labels = (json.loads(request.content).get("metadata") or {}).get("labels") or {}
        if answer == "denied" and c.MANAGED_BY_LABEL not in labels:
            return status(
                403,
                "Forbidden",
                f"{resource} is forbidden: ValidatingAdmissionPolicy '{GUARD}' with binding "
                f"'{GUARD}' denied request: fleet (f) may only create objects labelled "
                f"{c.MANAGED_BY_LABEL}=f: {resource} fleet-member/",
            )
        return None


def _member_api(kinds: list[Kind], **guard: Any) -> MemoryApi:
    """A member that issues tokens and enforces join's guard (`GuardAdmission(**guard)`)."""
    api = MemoryApi(kinds, server=ENDPOINT.server)
    TokenIssuer(api)
    TokenController(api)
    GuardAdmission(api, **guard)
    return api


def refuse(api: MemoryApi, method: str, path_part: str) -> Callable[[httpx.Request], Any]:
    def intercept(request: httpx.Request) -> httpx.Response | None:
        if request.method == method and path_part in request.url.path:
            return status(403, "Forbidden", f'{path_part} is forbidden: User "dev" cannot do it')
        return None

    api.interceptors.append(intercept)
    return intercept


@pytest.fixture
def member() -> MemoryApi:
    return _member_api(MEMBER_KINDS)


@pytest.fixture
def fleet() -> MemoryApi:
    return MemoryApi(FLEET_KINDS)


def _stored_kubeconfig(fleet: MemoryApi) -> dict[str, Any]:
    secret = fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system")
    assert secret is not None
    return dict(yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"])))


def _join(fleet: MemoryApi, member: MemoryApi, **kw: Any) -> list[str]:
    said: list[str] = []
    plan = plan_join("member-1", ENDPOINT, labels={"region": "east"}, **kw)
    join(
        fleet.sync_client("fleet"),
        member.sync_client("member-1"),
        plan,
        say=said.append,
        token_transport=member.sync_transport(),
    )
    return said


def test_join_makes_fleets_identity_in_the_member_and_stores_only_its_token(fleet, member):
    _join(fleet, member)

    for api_version, kind, name, namespace in IDENTITY:
        assert member.get(api_version, kind, name, namespace) is not None, (kind, name)
    role = member.get(RBAC, "ClusterRole", "fleet:fleet-member")
    assert role is not None and role["rules"] == access.as_policy_rules(access.member_rules())
    # The renewer, alone, may request tokens, of the dispatch ServiceAccount only; no Role binds
    # the dispatch identity (it cannot extend its own token).
    renewer_role = member.get(RBAC, "Role", "fleet-renewer", "fleet-member")
    assert renewer_role is not None
    assert renewer_role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["serviceaccounts/token"],
            "verbs": ["create"],
            "resourceNames": ["fleet"],
        }
    ]
    renewer_binding = member.get(RBAC, "RoleBinding", "fleet-renewer", "fleet-member")
    assert renewer_binding is not None and renewer_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "fleet-renewer", "namespace": "fleet-member"}
    ]
    bound = [
        b
        for b in member.list(RBAC, "RoleBinding", "fleet-member")
        if any(s["name"] == "fleet" for s in b["subjects"])
    ]
    assert bound == []
    cap = member.get(ADMISSION, "ValidatingAdmissionPolicy", "token.fleet-member.fleet.dev")
    assert cap is not None
    assert "<= 86400" in cap["spec"]["validations"][0]["expression"]
    binding = member.get(RBAC, "ClusterRoleBinding", "fleet:fleet-member")
    assert binding is not None and binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "fleet", "namespace": "fleet-member"}
    ]

    config = _stored_kubeconfig(fleet)
    (user,) = config["users"]
    assert user["user"] == {"token": "token-1"}  # no client key, no certificate, nothing else
    assert config["clusters"][0]["cluster"] == {
        "server": ENDPOINT.server,
        "certificate-authority-data": CA,
    }
    secret = fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system")
    assert secret is not None
    annotations = secret["metadata"]["annotations"]
    assert annotations[c.TOKEN_TYPE_ANNOTATION] == "bound"
    assert annotations[c.SERVICE_ACCOUNT_ANNOTATION] == "fleet-member/fleet"
    assert annotations[c.TOKEN_EXPIRES_ANNOTATION] == "2030-01-02T00:00:00Z"
    assert annotations[c.TOKEN_SECONDS_ANNOTATION] == "86400"
    # The renewer's token: in a Secret of its own, never in the kubeconfig Secret.
    assert annotations[c.RENEWER_SECRET_ANNOTATION] == "member-1-renewer"
    renewer = fleet.get("v1", "Secret", "member-1-renewer", "fleet-system")
    assert renewer is not None
    assert base64.b64decode(renewer["data"]["token"]) == b"long-lived-fleet-renewer"
    assert b"long-lived" not in base64.b64decode(secret["data"]["kubeconfig"])
    mc = fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1")
    assert mc is not None and mc["metadata"]["labels"] == {"region": "east"}
    assert mc["spec"]["kubeconfigSecretRef"]["name"] == "member-1-kubeconfig"


def test_join_again_updates_in_place_and_rotates_the_token(fleet, member):
    _join(fleet, member)
    before = {k: member.get(*k) for k in IDENTITY}
    said = _join(fleet, member)

    applied = [line for line in said if line.endswith((" created", " configured"))]
    assert applied and all(line.endswith(" configured") for line in applied)
    after = {k: member.get(*k) for k in IDENTITY}
    assert {k: v["metadata"]["uid"] for k, v in after.items() if v} == {
        k: v["metadata"]["uid"] for k, v in before.items() if v
    }
    # token-1 and token-2 were the first join's (dispatch, viewer); token-3 the dispatch one now.
    assert _stored_kubeconfig(fleet)["users"][0]["user"]["token"] == "token-3"
    assert len(fleet.list(c.FLEET_API_VERSION, "MemberCluster")) == 1


WRITES = ("POST", "PUT", "PATCH", "DELETE")


def _writes(api: MemoryApi) -> int:
    return sum(1 for request in api.requests if request.method in WRITES)


def _join_as(fleet: MemoryApi, member: MemoryApi, name: str, cluster_id: str) -> None:
    join(
        fleet.sync_client("fleet"),
        member.sync_client(name),
        plan_join(name, ENDPOINT, cluster_id=cluster_id),
        say=lambda _: None,
        token_transport=member.sync_transport(),
    )


def test_a_cluster_joined_under_one_name_is_refused_under_another_naming_it(fleet, member):
    """One cluster, one registration: its capacity would count twice, a failover from one name
    would land in the same cluster, and unjoining one would delete the other's identity."""
    _join_as(fleet, member, "member-1", "uid-1")
    _join_as(fleet, member, "member-1", "uid-1")  # the same name again: a new token, allowed
    fleet_writes, member_writes = _writes(fleet), _writes(member)

    with pytest.raises(JoinError) as err:
        _join_as(fleet, member, "member-2", "uid-1")

    message = str(err.value)
    assert "\n" not in message and "membercluster/member-1" in message and "uid-1" in message
    assert "fleet unjoin member-1" in message and "fleet join member-1" in message
    assert (_writes(fleet), _writes(member)) == (fleet_writes, member_writes)
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-2") is None
    assert fleet.get("v1", "Secret", "member-2-kubeconfig", "fleet-system") is None
    # Another cluster joins under a new name as before.
    _join_as(fleet, member, "member-3", "uid-3")
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-3") is not None


def test_a_long_lived_token_secret_when_asked(fleet, member):
    _join(fleet, member, token_type="secret")

    assert _stored_kubeconfig(fleet)["users"][0]["user"] == {"token": "long-lived-fleet"}
    secret = fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system")
    assert secret is not None
    annotations = secret["metadata"]["annotations"]
    assert annotations[c.TOKEN_TYPE_ANNOTATION] == "secret"
    assert c.TOKEN_EXPIRES_ANNOTATION not in annotations  # nothing to renew
    assert not member.asked("POST", "/token")
    # Nothing to renew, so no renewer on either side.
    assert c.RENEWER_SECRET_ANNOTATION not in annotations
    assert fleet.get("v1", "Secret", "member-1-renewer", "fleet-system") is None
    assert member.get("v1", "ServiceAccount", "fleet-renewer", "fleet-member") is None


def test_a_member_refusing_rbac_leaves_nothing_behind(fleet, member):
    refuse(member, "PATCH", "/clusterroles/")

    with pytest.raises(JoinError) as err:
        _join(fleet, member)

    message = str(err.value)
    assert "\n" not in message and "clusterroles" in message and "403" in message
    assert "member member-1 refused" in message and "nothing this run created" in message
    for api_version, kind, name, namespace in IDENTITY:
        assert member.get(api_version, kind, name, namespace) is None, kind
    assert fleet.list(c.FLEET_API_VERSION, "MemberCluster") == []


def test_a_fleet_refusing_the_secret_rolls_the_member_back_too_but_not_what_was_there(
    fleet, member
):
    member.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet-member"}})
    refuse(fleet, "PATCH", "/secrets/member-1-kubeconfig")

    with pytest.raises(JoinError) as err:
        _join(fleet, member)

    assert "the fleet refused" in str(err.value)
    assert member.get(RBAC, "ClusterRole", "fleet:fleet-member") is None
    assert member.get("v1", "ServiceAccount", "fleet", "fleet-member") is None
    assert member.get("v1", "Namespace", "fleet-member") is not None  # was there before
    assert fleet.get("v1", "Namespace", "fleet-system") is None
    assert fleet.list(c.FLEET_API_VERSION, "MemberCluster") == []


def test_a_dry_run_prints_every_object_of_either_side_and_no_token():
    out = dry_run(plan_join("member-1", ENDPOINT))
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds == [
        "Namespace",
        "ServiceAccount",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Secret",
        "TokenRequest",
        "TokenRequest",
        "Namespace",
        "Secret",
        "Secret",
        "MemberCluster",
        "Secret",
    ]
    assert docs[19]["stringData"] == {"token": "<redacted>"}  # the renewer's
    for secret in (docs[20], docs[22]):
        stored = yaml.safe_load(secret["stringData"]["kubeconfig"])
        assert stored["users"][0]["user"] == {"token": "<redacted>"}
    assert docs[22]["metadata"]["name"] == "member-1-viewer-kubeconfig"


# -- unjoin ---------------------------------------------------------------------------------


def _binding(fleet: MemoryApi, name: str, cluster: str) -> None:
    fleet.put(
        {
            "apiVersion": c.FLEET_API_VERSION,
            "kind": "GangBinding",
            "metadata": {"name": f"pytorchjob-{name}", "namespace": "default"},
            "spec": {
                "resource": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name},
                "clusters": [{"name": cluster}],
            },
        }
    )


def test_unjoin_removes_both_sides(fleet, member):
    _join(fleet, member)
    notes = unjoin(fleet.sync_client(), member.sync_client(), "member-1", say=lambda _: None)

    assert notes == []
    for api_version, kind, name, namespace in IDENTITY[:1] + IDENTITY[2:8]:
        assert member.get(api_version, kind, name, namespace) is None, kind
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is None
    assert fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system") is None
    assert fleet.get("v1", "Secret", "member-1-renewer", "fleet-system") is None


def _uids(member: MemoryApi) -> dict[str, str]:
    return {
        name: (member.get("v1", "ServiceAccount", name, "fleet-member") or {})["metadata"]["uid"]
        for name in ("fleet", "fleet-renewer", "fleet-viewer")
    }


def test_rotate_replaces_the_service_accounts_so_every_earlier_token_is_refused(fleet, member):
    """Bound tokens carry their ServiceAccount's UID, a Secret's token its Secret: new
    ServiceAccounts (new UIDs) and new token Secrets make every earlier token worthless: the
    dispatch identity's, the renewer's and the viewer's (people's)."""
    _join(fleet, member)
    before = _uids(member)
    renewer_secret = member.get("v1", "Secret", "fleet-renewer-token", "fleet-member") or {}

    said: list[str] = []
    join(
        fleet.sync_client("fleet"),
        member.sync_client("member-1"),
        plan_join("member-1", ENDPOINT, labels={"region": "east"}),
        say=said.append,
        rotate=True,
        token_transport=member.sync_transport(),
    )

    after = _uids(member)
    assert all(after[name] != before[name] for name in before), (before, after)
    renewed = member.get("v1", "Secret", "fleet-renewer-token", "fleet-member") or {}
    assert renewed["metadata"]["uid"] != renewer_secret["metadata"]["uid"]
    deleted = [line for line in said if "(--rotate)" in line]
    # The three ServiceAccounts and the renewer's token Secret.
    assert len(deleted) == 4, said
    # token-1 and token-2 were the first join's dispatch and viewer tokens.
    assert _stored_kubeconfig(fleet)["users"][0]["user"]["token"] == "token-3"
    assert _viewer_kubeconfig(fleet)["users"][0]["user"]["token"] == "token-4"
    # Without --rotate a re-join keeps them (and so every token issued before stays valid).
    _join(fleet, member)
    assert _uids(member) == after


def test_a_rejoin_removes_the_role_that_let_the_dispatch_identity_renew_itself(fleet, member):
    """A member joined before the renewer holds Role fleet-token (the dispatch identity's own
    TokenRequest): joined again, it is gone."""
    meta = {
        "namespace": "fleet-member",
        "labels": {c.JOINED_BY_LABEL: c.JOINED_BY},
    }
    _join(fleet, member)
    member.put(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "fleet-token", **meta},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["serviceaccounts/token"],
                    "verbs": ["create"],
                    "resourceNames": ["fleet"],
                }
            ],
        }
    )
    member.put(
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "fleet-token", **meta},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"},
            "subjects": [{"kind": "ServiceAccount", "name": "fleet", "namespace": "fleet-member"}],
        }
    )
    _join(fleet, member)
    assert member.get(RBAC, "Role", "fleet-token", "fleet-member") is None
    assert member.get(RBAC, "RoleBinding", "fleet-token", "fleet-member") is None


def test_a_switch_to_a_long_lived_token_removes_the_renewer_on_both_sides(fleet, member):
    _join(fleet, member)
    assert fleet.get("v1", "Secret", "member-1-renewer", "fleet-system") is not None
    _join(fleet, member, token_type="secret")
    assert fleet.get("v1", "Secret", "member-1-renewer", "fleet-system") is None
    for name in ("fleet-renewer", "fleet-renewer-token"):
        assert member.get("v1", "ServiceAccount", name, "fleet-member") is None
        assert member.get("v1", "Secret", name, "fleet-member") is None
    assert member.get(RBAC, "Role", "fleet-renewer", "fleet-member") is None


def test_unjoin_refuses_while_jobs_are_bound_naming_them(fleet, member):
    _join(fleet, member)
    _binding(fleet, "train", "member-1")
    _binding(fleet, "other", "member-2")

    with pytest.raises(JoinError) as err:
        unjoin(fleet.sync_client(), member.sync_client(), "member-1")

    assert "default/PyTorchJob/train" in str(err.value)
    assert "PyTorchJob/other" not in str(err.value) and "--move" in str(err.value)
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is not None
    assert member.get(RBAC, "ClusterRole", "fleet:fleet-member") is not None


def test_unjoin_leave_goes_ahead_and_move_waits_for_the_controller(fleet, member):
    _join(fleet, member)
    _binding(fleet, "train", "member-1")

    def controller_moves_it(_seconds: float) -> None:
        mc = fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") or {}
        taints = (mc.get("spec") or {}).get("taints") or []
        assert {"key": c.UNJOINING_TAINT_KEY, "effect": "NoExecute"} in taints
        fleet.merge(
            c.FLEET_API_VERSION,
            "GangBinding",
            "pytorchjob-train",
            "default",
            {"spec": {"clusters": [{"name": "member-2"}]}},
        )

    notes = unjoin(
        fleet.sync_client(),
        member.sync_client(),
        "member-1",
        move=True,
        say=lambda _: None,
        sleep=controller_moves_it,
    )
    assert notes == [] and fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is None

    _join(fleet, member)
    _binding(fleet, "stays", "member-1")

    def controller_releases_it(_seconds: float) -> None:
        mc = fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") or {}
        taints = (mc.get("spec") or {}).get("taints") or []
        leave = {"key": c.UNJOINING_TAINT_KEY, "value": c.UNJOINING_LEAVE, "effect": "NoExecute"}
        assert leave in taints
        fleet.merge(
            c.FLEET_API_VERSION,
            "GangBinding",
            "pytorchjob-stays",
            "default",
            {"status": {"phase": "Released"}},
        )

    unjoin(
        fleet.sync_client(),
        member.sync_client(),
        "member-1",
        leave=True,
        say=lambda _: None,
        sleep=controller_releases_it,
    )
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is None


def test_an_unreachable_member_is_unjoined_on_the_fleet_side_with_a_note(fleet, member):
    _join(fleet, member)
    member.reachable = False

    (note,) = unjoin(fleet.sync_client(), member.sync_client(), "member-1", say=lambda _: None)

    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is None
    assert fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system") is None
    assert "left in member member-1" in note and "clusterrole/fleet:fleet-member" in note
    assert "namespace/fleet-member" in note and "\n" not in note


def _not_ready(fleet: MemoryApi, name: str) -> None:
    """The controller's word on the MemberCluster: it cannot reach the member."""
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": c.REASON_CLUSTER_NOT_REACHABLE,
        "message": "connection refused",
    }
    fleet.merge(
        c.FLEET_API_VERSION, "MemberCluster", name, None, {"status": {"conditions": [condition]}}
    )


def _moved_leaving_an_eviction(fleet: MemoryApi, job: str) -> Callable[[float], None]:
    """The controller failing `job` over from an unreachable member-1 (MemberUnjoined): bound
    to member-2, its copy in member-1 recorded as an eviction task, to be fenced later."""

    def controller(_seconds: float) -> None:
        fleet.merge(
            c.FLEET_API_VERSION,
            "GangBinding",
            f"pytorchjob-{job}",
            "default",
            {
                "spec": {
                    "clusters": [{"name": "member-2"}],
                    "gracefulEvictionTasks": [
                        {"fromCluster": "member-1", "reason": c.REASON_MEMBER_UNJOINED}
                    ],
                }
            },
        )

    return controller


@pytest.mark.parametrize("context", [True, False], ids=["member-context", "no-member-context"])
def test_an_unreachable_member_is_unjoined_with_move_with_its_old_copies_left_recorded(
    fleet, member, context
):
    """--move waits until no gang is bound to the member, not for its old copies there: they
    stay on their bindings, to be deleted if the cluster ever answers again. One line says so,
    and names everything join made there, the guard included, with the command removing it."""
    _join(fleet, member)
    _binding(fleet, "train", "member-1")
    member.reachable = False
    _not_ready(fleet, "member-1")

    notes = unjoin(
        fleet.sync_client(),
        member.sync_client() if context else None,
        "member-1",
        move=True,
        timeout=0.5,
        say=lambda _: None,
        sleep=_moved_leaving_an_eviction(fleet, "train"),
    )

    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is None
    assert fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system") is None
    binding = fleet.get(c.FLEET_API_VERSION, "GangBinding", "pytorchjob-train", "default")
    assert binding is not None
    assert [t["fromCluster"] for t in binding["spec"]["gracefulEvictionTasks"]] == ["member-1"]
    (note,) = notes
    assert "\n" not in note and "member-1 could not be reached" in note
    assert "default/PyTorchJob/train" in note and "unfenced" in note
    assert "left in member member-1" in note
    for obj in (
        "validatingadmissionpolicy/fleet-member.fleet.dev",
        "validatingadmissionpolicybinding/fleet-member.fleet.dev",
        "clusterrolebinding/fleet:fleet-member",
        "clusterrole/fleet:fleet-member",
        "namespace/fleet-member",
    ):
        assert len(re.findall(re.escape(obj) + r"(?![\w:-])", note)) == 2, (
            obj
        )  # named, and in the kubectl command
    assert "kubectl --context <member-1> delete --ignore-not-found" in note


def test_a_native_gang_members_note_names_its_scheduling_group_policy(fleet):
    native = _native_member()
    join(
        fleet.sync_client("fleet"),
        native.sync_client("member-1"),
        plan_join("member-1", ENDPOINT, fleet_id="f", native_gang=True),
        say=lambda _: None,
        token_transport=native.sync_transport(),
    )
    secret = fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system")
    assert secret is not None
    annotations = secret["metadata"]["annotations"]
    assert (
        annotations[c.SCHEDULING_GROUP_POLICY_ANNOTATION]
        == "scheduling-group.fleet-member.fleet.dev"
    )
    native.reachable = False

    (note,) = unjoin(fleet.sync_client(), native.sync_client(), "member-1", say=lambda _: None)

    for obj in (
        "mutatingadmissionpolicy/scheduling-group.fleet-member.fleet.dev",
        "mutatingadmissionpolicybinding/scheduling-group.fleet-member.fleet.dev",
        "validatingadmissionpolicy/fleet-member.fleet.dev",
    ):
        assert len(re.findall(re.escape(obj) + r"(?![\w:-])", note)) == 2, obj


def test_a_reachable_member_with_move_still_waits_for_its_old_copies(fleet, member):
    _join(fleet, member)
    _binding(fleet, "train", "member-1")

    with pytest.raises(JoinError) as err:
        unjoin(
            fleet.sync_client(),
            member.sync_client(),
            "member-1",
            move=True,
            timeout=0.2,
            say=lambda _: None,
            sleep=_moved_leaving_an_eviction(fleet, "train"),
        )

    assert "has not moved default/PyTorchJob/train" in str(err.value)
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is not None


# -- the command line -------------------------------------------------------------------------


def test_the_command_line_says_one_line_and_exits_1_when_the_member_refuses(
    monkeypatch, tmp_path, fleet, member, capsys
):
    from fleet import join as join_module
    from fleet import kube as kube_module

    pem = make_pem()
    (tmp_path / "fleet").write_text(yaml.safe_dump(inline_kubeconfig(pem)))
    (tmp_path / "member").write_text(yaml.safe_dump(inline_kubeconfig(pem, ENDPOINT.server)))
    monkeypatch.setattr(kube_module, "SyncKubeClient", lambda *a, **kw: fleet.sync_client("fleet"))
    monkeypatch.setattr(
        join_module, "SyncKubeClient", lambda *a, **kw: member.sync_client("member-1")
    )
    refuse(member, "PATCH", "/clusterrolebindings/")

    argv = ["join", "member-1", "--member-kubeconfig", str(tmp_path / "member")]
    assert cli.main([*argv, "--kubeconfig", str(tmp_path / "fleet")]) == 1

    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith("fleet: error: join member-1: the member member-1 refused: ")
    assert "clusterrolebindings" in line and "token:" not in out
    for api_version, kind, name, namespace in IDENTITY:
        assert member.get(api_version, kind, name, namespace) is None, kind

    dry = ["join", "member-1", "--dry-run", "--member-kubeconfig", argv[3]]
    assert cli.main([*dry, "--kubeconfig", str(tmp_path / "fleet")]) == 0
    assert "ClusterRoleBinding" in capsys.readouterr().out


def test_the_command_lines_rotate_reaches_join(monkeypatch, tmp_path, fleet, member):
    from fleet import join as join_module
    from fleet import kube as kube_module

    pem = make_pem()
    (tmp_path / "fleet").write_text(yaml.safe_dump(inline_kubeconfig(pem)))
    (tmp_path / "member").write_text(yaml.safe_dump(inline_kubeconfig(pem, ENDPOINT.server)))
    monkeypatch.setattr(kube_module, "SyncKubeClient", lambda *a, **kw: fleet.sync_client("fleet"))
    monkeypatch.setattr(
        join_module, "SyncKubeClient", lambda *a, **kw: member.sync_client("member-1")
    )
    asked: list[bool] = []
    monkeypatch.setattr(join_module, "join", lambda *a, rotate, **kw: asked.append(rotate))
    argv = ["join", "member-1", "--member-kubeconfig", str(tmp_path / "member")]
    for flags in ([], ["--rotate"]):
        assert cli.main([*argv, *flags, "--kubeconfig", str(tmp_path / "fleet")]) == 0
    assert asked == [False, True]


def test_join_names_the_members_gang_scheduler_on_the_member_cluster_at_once(fleet):
    """The GANG column (status.gangScheduler) is right from the first `kubectl get
    membercluster`, by the controller's own rule: scheduler-plugins' PodGroup alone is
    coscheduling; with Koordinator's Reservation served too, Koordinator."""
    coscheduling = _member_api([k for k in MEMBER_KINDS if k.kind != "Reservation"])
    said = _join(fleet, coscheduling)
    mc = fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1")
    assert mc is not None and mc["status"]["gangScheduler"] == "Coscheduling"
    assert "gang scheduler: Coscheduling" in said


def test_join_of_a_koordinator_member_names_koordinator(fleet, member):
    _join(fleet, member)
    mc = fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1")
    assert mc is not None and mc["status"]["gangScheduler"] == "Koordinator"


def test_join_of_a_member_without_a_gang_scheduler_writes_none(fleet):
    plain = _member_api([k for k in MEMBER_KINDS if k.kind not in ("Reservation", "PodGroup")])
    _join(fleet, plain)
    mc = fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1")
    assert mc is not None and not (mc.get("status") or {}).get("gangScheduler")


class SchedulingGroupAdmission:
    """The member's API server running the scheduling-group MutatingAdmissionPolicy: a pod
    created with the pod-group label gets spec.schedulingGroup, but only once the server's own
    watch has loaded the policy and its binding, here after `creates_before_loaded` pod
    creates have gone by without it (None: never loaded)."""

    def __init__(self, api: MemoryApi, creates_before_loaded: int | None = 0) -> None:
        self.api = api
        self.creates_before_loaded = creates_before_loaded
        #: Whether each pod created came back joined, in order.
        self.answers: list[bool] = []
        api.admission.append(self)

    def __call__(self, obj: dict[str, Any]) -> None:
        if obj.get("kind") != "Pod":
            return
        name = "scheduling-group.fleet-member.fleet.dev"
        written = self.api.get(ADMISSION, "MutatingAdmissionPolicy", name) and self.api.get(
            ADMISSION, "MutatingAdmissionPolicyBinding", name
        )
        loaded = self.creates_before_loaded is not None and (
            len(self.answers) >= self.creates_before_loaded
        )
        group = (obj["metadata"].get("labels") or {}).get(KUBERNETES_POD_GROUP_LABEL)
        joins = bool(written and loaded and group and not obj["spec"].get("schedulingGroup"))
        if joins:
            obj["spec"]["schedulingGroup"] = {"podGroupName": group}
        self.answers.append(joins)


def _native_member(creates_before_loaded: int | None = 0) -> MemoryApi:
    """A member on Kubernetes 1.37 with GenericWorkload on and no other gang scheduler."""
    kinds = [k for k in MEMBER_KINDS if k.kind not in ("Reservation", "PodGroup")]
    api = _member_api([*kinds, *NATIVE_GANG_KINDS])
    SchedulingGroupAdmission(api, creates_before_loaded)
    return api


def test_join_of_a_native_gang_member_names_kubernetes_and_installs_the_scheduling_group_policy(
    fleet, tmp_path
):
    """The member is detected as gang-scheduling with Kubernetes' own PodGroup, and the
    admission policy that gives fleet's pods their spec.schedulingGroup is installed with
    the identity (by the joining user, never by fleet's token); unjoin removes it."""
    native = _native_member()
    assert serves_native_gang(native.sync_client("member-1"))
    plan = plan_join("member-1", ENDPOINT, fleet_id="f", native_gang=True)
    join(
        fleet.sync_client("fleet"),
        native.sync_client("member-1"),
        plan,
        say=lambda _: None,
        token_transport=native.sync_transport(),
    )

    mc = fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1")
    assert mc is not None and mc["status"]["gangScheduler"] == "Kubernetes"
    name = "scheduling-group.fleet-member.fleet.dev"
    policy = native.get(ADMISSION, "MutatingAdmissionPolicy", name)
    assert policy is not None
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["pods"]
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
    binding = native.get(ADMISSION, "MutatingAdmissionPolicyBinding", name)
    assert binding is not None and binding["spec"]["policyName"] == policy["metadata"]["name"]
    # fleet's own token gets no right to admission objects.
    role = native.get(RBAC, "ClusterRole", "fleet:fleet-member")
    assert role is not None
    assert not any("admissionregistration.k8s.io" in r["apiGroups"] for r in role["rules"])

    assert unjoin(fleet.sync_client(), native.sync_client(), "member-1", say=lambda _: None) == []
    assert (
        native.get(ADMISSION, "MutatingAdmissionPolicy", "scheduling-group.fleet-member.fleet.dev")
        is None
    )


def test_a_member_without_the_native_api_gets_no_scheduling_group_policy_and_unjoins_cleanly(
    fleet, member
):
    assert not serves_native_gang(member.sync_client("member-1"))
    plan = plan_join("member-1", ENDPOINT, fleet_id="f")
    assert not any(o["kind"] == "MutatingAdmissionPolicy" for o in plan.member)
    join(
        fleet.sync_client("fleet"),
        member.sync_client("member-1"),
        plan,
        say=lambda _: None,
        token_transport=member.sync_transport(),
    )
    # The member serves no MutatingAdmissionPolicy at all: unjoin skips it and says nothing.
    assert unjoin(fleet.sync_client(), member.sync_client(), "member-1", say=lambda _: None) == []
    assert member.get(RBAC, "ClusterRole", "fleet:fleet-member") is None


# -- the scheduling-group policy in force before the fleet side ------------------------------

POLICY = "mutatingadmissionpolicy/scheduling-group.fleet-member.fleet.dev"


def _native_join(fleet: MemoryApi, native: MemoryApi, **kw: Any) -> tuple[list[str], list[float]]:
    said: list[str] = []
    slept: list[float] = []
    plan = plan_join("member-1", ENDPOINT, fleet_id="f", native_gang=True)
    join(
        fleet.sync_client("fleet"),
        native.sync_client("member-1"),
        plan,
        say=said.append,
        sleep=slept.append,
        token_transport=native.sync_transport(),
        **kw,
    )
    return said, slept


def _probes(api: MemoryApi) -> list[httpx.Request]:
    return api.asked("POST", "/namespaces/fleet-member/pods")


def test_join_writes_the_fleet_side_only_once_the_member_applies_the_scheduling_group_policy(
    fleet,
):
    """The member's API server applies the new policy only after three pod creates: join asks
    by dry-run probes (nothing stored) until one comes back joined, and only then writes the
    MemberCluster the controller would dispatch to."""
    native = _native_member(creates_before_loaded=3)
    probes_before_fleet_writes: list[int] = []

    def fleet_write(request: httpx.Request) -> None:
        if request.method in ("POST", "PATCH", "PUT"):
            probes_before_fleet_writes.append(len(_probes(native)))

    fleet.interceptors.append(fleet_write)
    said, slept = _native_join(fleet, native)

    admission = native.admission[0]
    assert isinstance(admission, SchedulingGroupAdmission)
    assert admission.answers == [False, False, False, True]
    assert probes_before_fleet_writes and set(probes_before_fleet_writes) == {4}
    assert all(r.url.params["dryRun"] == "All" for r in _probes(native))
    assert native.list("v1", "Pod") == []  # a dry run stores nothing
    assert slept == [0.25, 0.25, 0.25]
    waiting = [line for line in said if "waiting until" in line]
    assert len(waiting) == 1 and POLICY in waiting[0]
    assert f"member member-1: {POLICY} in force after 0.8s" in said
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is not None


def test_a_policy_already_in_force_is_probed_once_without_waiting(fleet):
    said, slept = _native_join(fleet, _native_member())
    assert slept == [] and not any("waiting until" in line for line in said)
    assert f"member member-1: {POLICY} in force after 0.0s" in said


def test_a_member_that_never_applies_the_policy_fails_the_join_and_rolls_it_back(fleet):
    native = _native_member(creates_before_loaded=None)

    with pytest.raises(JoinError) as err:
        _native_join(fleet, native)

    message = str(err.value)
    assert "\n" not in message and POLICY in message and "member-1" in message
    assert "outside their gangs" in message and "nothing this run created" in message
    assert not native.asked("POST", "/token")  # no token issued for a join that fails
    for api_version, kind, name, namespace in IDENTITY:
        assert native.get(api_version, kind, name, namespace) is None, kind
    name = "scheduling-group.fleet-member.fleet.dev"
    assert native.get(ADMISSION, "MutatingAdmissionPolicy", name) is None
    assert native.get(ADMISSION, "MutatingAdmissionPolicyBinding", name) is None
    assert fleet.list(c.FLEET_API_VERSION, "MemberCluster") == []
    assert fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system") is None


def test_the_wait_is_bounded_by_the_injected_sleep(fleet):
    native = _native_member(creates_before_loaded=None)
    slept: list[float] = []
    plan = plan_join("member-1", ENDPOINT, fleet_id="f", native_gang=True)
    with pytest.raises(JoinError):
        join(
            fleet.sync_client(), native.sync_client(), plan, say=lambda _: None, sleep=slept.append
        )
    assert sum(slept) == pytest.approx(IN_FORCE_WAIT)
    assert len(_probes(native)) == len(slept) + 1


def test_a_member_refusing_the_probe_fails_the_join_naming_the_probe(fleet):
    native = _native_member()
    refuse(native, "POST", "/namespaces/fleet-member/pods")

    with pytest.raises(JoinError) as err:
        _native_join(fleet, native)

    message = str(err.value)
    assert "\n" not in message and "dry-run probe pod" in message and POLICY in message
    assert "403" in message and "nothing this run created" in message
    assert (
        native.get(ADMISSION, "MutatingAdmissionPolicy", "scheduling-group.fleet-member.fleet.dev")
        is None
    )
    assert fleet.list(c.FLEET_API_VERSION, "MemberCluster") == []


def test_a_member_without_native_gang_is_sent_no_probe(fleet, member):
    _join(fleet, member)
    assert member.asked("POST", "/pods") == []
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is not None


def test_the_probe_pod_is_harmless_were_it_ever_stored():
    """Labelled for the policy, and nothing more: no node it could run on, pause, no token."""
    pod = scheduling_group_probe("fleet-member", "fleet")
    assert pod["metadata"]["generateName"] == "fleet-join-probe-"
    assert pod["metadata"]["namespace"] == "fleet-member"
    assert pod["metadata"]["labels"] == {KUBERNETES_POD_GROUP_LABEL: "fleet-join-probe"}
    spec = pod["spec"]
    assert spec["nodeSelector"] and spec["automountServiceAccountToken"] is False
    assert [c["image"] for c in spec["containers"]] == ["registry.k8s.io/pause:3.10"]
    assert joined_pod_group(pod) is None
    joined = {**pod, "spec": {**spec, "schedulingGroup": {"podGroupName": "fleet-join-probe"}}}
    assert joined_pod_group(joined) == "fleet-join-probe"


# -- the guard in force for fleet's token before the fleet side ------------------------------

GUARD_POLICY = f"validatingadmissionpolicy/{GUARD}"


def _guarded_join(
    fleet: MemoryApi, member: MemoryApi, **kw: Any
) -> tuple[list[str], list[float], ClosingTransport]:
    said: list[str] = []
    slept: list[float] = []
    transport = member.sync_transport()
    plan = plan_join("member-1", ENDPOINT, fleet_id="f", **kw)
    join(
        fleet.sync_client("fleet"),
        member.sync_client("member-1"),
        plan,
        say=said.append,
        sleep=slept.append,
        token_transport=transport,
    )
    return said, slept, transport


def _guard(api: MemoryApi) -> GuardAdmission:
    (guard,) = [i for i in api.interceptors if isinstance(i, GuardAdmission)]
    return guard


def _guard_probes(api: MemoryApi) -> list[httpx.Request]:
    return [r for r in api.asked("POST", "/configmaps") if "authorization" in r.headers]


def test_join_writes_the_fleet_side_only_once_the_guard_denies_fleets_own_token(fleet):
    """The member's API server loads the guard only after two creates: join asks, with the
    token it has just been issued, by dry-run creates of a ConfigMap without fleet's mark
    (nothing stored), until the guard denies one, and only then stores the token."""
    member = _member_api(MEMBER_KINDS, unguarded=("admitted", "admitted"))
    probes_before_fleet_writes: list[int] = []

    def fleet_write(request: httpx.Request) -> None:
        if request.method in ("POST", "PATCH", "PUT"):
            probes_before_fleet_writes.append(len(_guard_probes(member)))

    fleet.interceptors.append(fleet_write)
    said, slept, transport = _guarded_join(fleet, member)

    assert [answer for _, answer in _guard(member).answers] == ["admitted", "admitted", "denied"]
    assert probes_before_fleet_writes and set(probes_before_fleet_writes) == {3}
    probes = _guard_probes(member)
    assert {r.url.path for r in probes} == {"/api/v1/namespaces/fleet-member/configmaps"}
    assert all(r.url.params["dryRun"] == "All" for r in probes)
    assert all(r.headers["authorization"] == "Bearer token-1" for r in probes)  # fleet's token
    assert all("labels" not in json.loads(r.content)["metadata"] for r in probes)  # no mark
    assert member.list("v1", "ConfigMap") == []  # a dry run stores nothing
    assert transport.closed  # the token's client is closed once it has answered
    assert slept == [0.25, 0.25]
    waiting = [line for line in said if "waiting until" in line]
    assert len(waiting) == 1 and GUARD_POLICY in waiting[0]
    assert f"member member-1: {GUARD_POLICY} in force after 0.5s" in said
    assert _stored_kubeconfig(fleet)["users"][0]["user"] == {"token": "token-1"}
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is not None


def test_rbacs_refusal_of_the_new_token_is_waited_through_not_taken_for_the_guard(fleet):
    """Right after join the authorizer may not have loaded fleet's ClusterRoleBinding: its 403
    names no policy, so it proves nothing about the guard and join asks again."""
    member = _member_api(MEMBER_KINDS, unguarded=("rbac", "rbac", "admitted"))
    said, slept, _ = _guarded_join(fleet, member)

    answers = [answer for _, answer in _guard(member).answers]
    assert answers == ["rbac", "rbac", "admitted", "denied"]
    assert slept == [0.25, 0.25, 0.25]
    assert f"member member-1: {GUARD_POLICY} in force after 0.8s" in said
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is not None


@pytest.mark.parametrize("answer", ["admitted", "rbac"])
def test_a_member_whose_guard_never_loads_fails_the_join_and_rolls_it_back(fleet, answer):
    member = _member_api(MEMBER_KINDS, then=answer)

    with pytest.raises(JoinError) as err:
        _guarded_join(fleet, member)

    message = str(err.value)
    assert "\n" not in message and GUARD_POLICY in message and "member-1" in message
    assert "after 30s" in message and "fleet's token would act unguarded" in message
    assert "nothing this run created" in message
    assert len(_guard_probes(member)) == IN_FORCE_WAIT / 0.25 + 1
    for api_version, kind, name, namespace in IDENTITY:
        assert member.get(api_version, kind, name, namespace) is None, kind
    assert fleet.list(c.FLEET_API_VERSION, "MemberCluster") == []
    assert fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system") is None


def test_the_guard_wait_is_bounded_by_the_injected_sleep(fleet):
    member = _member_api(MEMBER_KINDS, then="admitted")
    slept: list[float] = []
    plan = plan_join("member-1", ENDPOINT, fleet_id="f")
    with pytest.raises(JoinError):
        join(
            fleet.sync_client(),
            member.sync_client(),
            plan,
            say=lambda _: None,
            sleep=slept.append,
            token_transport=member.sync_transport(),
        )
    assert sum(slept) == pytest.approx(IN_FORCE_WAIT)


def test_a_refusal_neither_the_guards_nor_rbacs_fails_the_join_naming_the_probe(fleet):
    """An admission webhook that refuses the probe tells nothing about the guard: join fails
    at once, naming the probe, rather than wait or take it for the guard."""
    member = _member_api(MEMBER_KINDS)

    def webhook(request: httpx.Request) -> httpx.Response | None:
        if request.method == "POST" and request.url.path.endswith("/configmaps"):
            return status(
                403,
                "Forbidden",
                'admission webhook "deny.example.com" denied the request: no ConfigMaps',
            )
        return None

    member.interceptors.insert(0, webhook)

    with pytest.raises(JoinError) as err:
        _guarded_join(fleet, member)

    message = str(err.value)
    assert "\n" not in message and "dry-run probe" in message and GUARD_POLICY in message
    assert "deny.example.com" in message and "403" in message
    assert "nothing this run created" in message
    assert member.get(ADMISSION, "ValidatingAdmissionPolicy", GUARD) is None
    assert fleet.list(c.FLEET_API_VERSION, "MemberCluster") == []


def test_a_member_without_admission_policies_is_sent_no_guard_probe(fleet):
    """Kubernetes < 1.30: there is no guard to wait for (join warns instead), and fleet's token
    is never used by join."""
    old = _member_api(
        [k for k in MEMBER_KINDS if not k.kind.startswith("ValidatingAdmissionPolicy")]
    )
    said, slept, _ = _guarded_join(fleet, old, guarded=False)

    assert not [r for r in old.requests if "authorization" in r.headers]
    assert old.asked("POST", "/configmaps") == [] and slept == []
    assert any(line.startswith("warning:") and "RBAC alone" in line for line in said)
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is not None


def test_the_tokens_client_is_the_stored_kubeconfig_read_in_memory(
    fleet, member, monkeypatch, tmp_path
):
    """The probe's client is built from the very kubeconfig the fleet then stores, as a dict,
    by the controller's own reading of it: no file holds the token, and the temporary folder
    stays empty."""
    read: list[Any] = []

    def check(config: Any, source: str | None = None) -> Any:
        read.append(config)
        return check_kubeconfig(config, source)

    monkeypatch.setattr(in_force, "check_kubeconfig", check)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)

    _guarded_join(fleet, member)

    assert len(read) == 1 and isinstance(read[0], dict)
    assert read[0] == _stored_kubeconfig(fleet)
    assert list(tmp_path.iterdir()) == []


def test_the_tokens_client_reaches_the_member_as_the_stored_kubeconfig_does():
    """Same server, CA, TLS server name and proxy as the controller will use, and the token
    as its only credential, all held in memory."""
    endpoint = MemberEndpoint(
        "https://10.0.0.7:6443", CA, tls_server_name="member.internal", proxy_url="http://px:3128"
    )
    plan = plan_join("member-1", endpoint)
    with in_force.token_client(plan, "t0ken", "member-1") as client:
        connection = client.connection
        assert (connection.server, connection.tls_server_name, connection.proxy) == (
            "https://10.0.0.7:6443",
            "member.internal",
            "http://px:3128",
        )
        assert connection.bearer_token() == "t0ken"
        assert connection.tls.ca is not None and connection.tls.ca.path is None  # data, no file
        assert connection.tls.ca.data == base64.b64decode(CA)
        assert connection.tls.certificate is None and connection.tls.key is None
        assert client.name == "member-1"


def test_the_guard_probe_is_a_create_fleets_rbac_allows_and_the_guard_covers():
    """An unmarked ConfigMap: the member ClusterRole lets fleet create ConfigMaps whatever the
    member serves, the guard covers their creation, and the probe carries no mark."""
    probe = in_force.guard_probe("fleet-member")
    assert probe["kind"] == "ConfigMap" and probe["apiVersion"] == "v1"
    assert probe["metadata"] == {
        "generateName": "fleet-join-guard-probe-",
        "namespace": "fleet-member",
    }
    assert any(
        r.group == "" and "configmaps" in r.resources and "create" in r.verbs
        for r in access.member_rules()
    )
    assert any(
        rule["apiGroups"] == [""]
        and "configmaps" in rule["resources"]
        and "CREATE" in rule["operations"]
        for rule in written_resources(access.member_rules())
    )


def _refusal(code: int, message: str) -> ApiError:
    return ApiError(code, "Forbidden" if code == 403 else "Invalid", message)


DENIAL = (
    f"configmaps \"x\" is forbidden: ValidatingAdmissionPolicy '{GUARD}' with binding "
    f"'{GUARD}' denied request: fleet (f) may not write in namespace fleet-member"
)
RBAC_DENIAL = (
    'configmaps is forbidden: User "system:serviceaccount:fleet-member:fleet" cannot create '
    'resource "configmaps" in API group "" in the namespace "fleet-member"'
)


@pytest.mark.parametrize(
    ("refusal", "verdict"),
    [
        (None, in_force.GuardVerdict.NOT_LOADED),
        (_refusal(403, DENIAL), in_force.GuardVerdict.IN_FORCE),
        (_refusal(422, DENIAL), in_force.GuardVerdict.IN_FORCE),  # a validation without reason
        (_refusal(403, RBAC_DENIAL), in_force.GuardVerdict.RBAC_NOT_LOADED),
        (_refusal(403, DENIAL.replace(GUARD, "other.example")), in_force.GuardVerdict.UNKNOWN),
        (_refusal(403, 'admission webhook "w" denied the request'), in_force.GuardVerdict.UNKNOWN),
        (_refusal(401, "Unauthorized"), in_force.GuardVerdict.UNKNOWN),
        (_refusal(500, DENIAL), in_force.GuardVerdict.UNKNOWN),
    ],
)
def test_the_verdict_on_an_answer_to_the_guard_probe(refusal, verdict):
    assert in_force.guard_verdict(refusal, GUARD) is verdict


# -- the people's identity (the viewer) -------------------------------------------------------


def _viewer_kubeconfig(fleet: MemoryApi, name: str = "member-1") -> dict[str, Any]:
    secret = fleet.get("v1", "Secret", f"{name}-viewer-kubeconfig", "fleet-system")
    assert secret is not None
    return dict(yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"])))


def _viewer_names(fleet: MemoryApi) -> list[str] | None:
    role = fleet.get(RBAC, "Role", access.VIEWER_SECRETS_ROLE, "fleet-system")
    return None if role is None else role["rules"][0]["resourceNames"]


def test_join_makes_a_read_only_viewer_whose_secret_alone_people_may_read(fleet, member):
    _join(fleet, member)

    viewer = member.get("v1", "ServiceAccount", "fleet-viewer", "fleet-member")
    assert viewer is not None
    role = member.get(RBAC, "ClusterRole", "fleet:fleet-member:viewer")
    assert role is not None and role["rules"] == access.as_policy_rules(access.viewer_rules())
    # Bound cluster-wide: nodes and Reservations only; the rest per namespace, by the controller.
    cluster = member.get(RBAC, "ClusterRoleBinding", "fleet:fleet-member:viewer-cluster")
    assert cluster is not None and cluster["subjects"] == [
        {"kind": "ServiceAccount", "name": "fleet-viewer", "namespace": "fleet-member"}
    ]
    assert member.get(RBAC, "ClusterRoleBinding", "fleet:fleet-member:viewer") is None
    # The viewer's token is asked for its own ServiceAccount, with its own lifetime.
    paths = [r.url.path for r in member.asked("POST", "/token")]
    assert paths[-1].endswith("/serviceaccounts/fleet-viewer/token")
    config = _viewer_kubeconfig(fleet)
    assert config["users"][0]["user"] == {"token": "token-2"}
    assert config["users"][0]["name"] == "system:serviceaccount:fleet-member:fleet-viewer"
    assert _stored_kubeconfig(fleet)["users"][0]["user"] == {"token": "token-1"}
    # Who may read it: the Role join keeps names it, and no dispatch Secret.
    assert _viewer_names(fleet) == ["member-1-viewer-kubeconfig"]
    # The dispatch Secret tells the controller which ClusterRole to bind per namespace.
    dispatch = fleet.get("v1", "Secret", "member-1-kubeconfig", "fleet-system")
    assert dispatch is not None
    annotations = dispatch["metadata"]["annotations"]
    assert annotations[c.VIEWER_ROLE_ANNOTATION] == "fleet:fleet-member:viewer"


def test_the_viewer_secrets_role_names_each_joined_member_and_goes_with_the_last(fleet, member):
    other = MemoryApi(MEMBER_KINDS, server="https://member-2.example:6443")
    TokenIssuer(other)
    TokenController(other)
    GuardAdmission(other)
    _join(fleet, member)
    join(
        fleet.sync_client("fleet"),
        other.sync_client("member-2"),
        plan_join("member-2", MemberEndpoint("https://member-2.example:6443", CA)),
        say=lambda _: None,
        token_transport=other.sync_transport(),
    )
    assert _viewer_names(fleet) == ["member-1-viewer-kubeconfig", "member-2-viewer-kubeconfig"]

    unjoin(fleet.sync_client(), member.sync_client(), "member-1", say=lambda _: None)
    assert _viewer_names(fleet) == ["member-2-viewer-kubeconfig"]
    assert fleet.get("v1", "Secret", "member-1-viewer-kubeconfig", "fleet-system") is None

    unjoin(fleet.sync_client(), other.sync_client(), "member-2", say=lambda _: None)
    # Never left with no names (that would be every Secret): deleted.
    assert _viewer_names(fleet) is None


def test_unjoin_deletes_the_viewers_role_bindings_the_controller_made(fleet, member):
    _join(fleet, member)
    from fleet.api.membership import viewer_binding

    member.put(viewer_binding("fleet-member", "team-a", "fleet-1"))
    theirs = viewer_binding("other-fleet", "team-a", "fleet-2")  # another identity's: kept
    member.put(theirs)

    unjoin(fleet.sync_client(), member.sync_client(), "member-1", say=lambda _: None)

    assert member.get(RBAC, "RoleBinding", "fleet:fleet-member:viewer", "team-a") is None
    assert member.get(RBAC, "RoleBinding", "fleet:other-fleet:viewer", "team-a") is not None
    assert member.get(RBAC, "ClusterRole", "fleet:fleet-member:viewer") is None
    assert member.get(RBAC, "ClusterRoleBinding", "fleet:fleet-member:viewer-cluster") is None


def test_a_member_without_the_guard_binds_the_viewer_cluster_wide_and_lets_fleet_bind_nothing():
    plan = plan_join("m", ENDPOINT, guarded=False)
    objects = {(o["kind"], o["metadata"]["name"]): o for o in plan.member}
    assert ("ClusterRoleBinding", "fleet:fleet-member:viewer") in objects
    dispatch = objects[("ClusterRole", "fleet:fleet-member")]
    assert not [r for r in dispatch["rules"] if "rbac.authorization.k8s.io" in r["apiGroups"]]
    annotations = plan.fleet_objects(IssuedToken("t"))[1]["metadata"]["annotations"]
    assert c.VIEWER_ROLE_ANNOTATION not in annotations


def test_the_viewer_token_lives_as_long_as_asked_and_too_short_is_refused(fleet):
    member = MemoryApi(MEMBER_KINDS, server=ENDPOINT.server)
    issuer = TokenIssuer(member)
    TokenController(member)
    GuardAdmission(member)
    said = _join(fleet, member, token_seconds=3600, viewer_token_seconds=7 * 86400)
    assert issuer.issued == [3600, 7 * 86400]  # the dispatch token's, then the viewer's
    assert any(line.startswith("viewer token: read only, expires in") for line in said)
    with pytest.raises(ValueError, match="--viewer-token-expiration 60"):
        plan_join("m", ENDPOINT, viewer_token_seconds=60)


# -- --namespaces: the namespaces the joining user opens to fleet --------------------------------


def _ns(api: MemoryApi, name: str, **labels: str) -> None:
    api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


def test_join_opens_the_namespaces_it_is_given_and_unjoin_closes_them(fleet, member):
    _ns(member, "default", owner="team")
    _ns(member, "research")
    _ns(member, "other", **{open_label("another-fleet"): "true"})
    said = _join(fleet, member, fleet_id="f", open_namespaces=("default", "research"))

    for name in ("default", "research"):
        labels = member.get("v1", "Namespace", name)["metadata"]["labels"]
        assert labels[open_label("f")] == "true", name
    assert member.get("v1", "Namespace", "default")["metadata"]["labels"]["owner"] == "team"
    assert "member member-1: namespace/research configured" in said

    notes = unjoin(fleet.sync_client(), member.sync_client(), "member-1", say=lambda _: None)
    assert notes == []
    for name in ("default", "research"):
        labels = member.get("v1", "Namespace", name)["metadata"].get("labels") or {}
        assert open_label("f") not in labels, name
    # Another fleet's opening is not this fleet's to take back.
    assert member.get("v1", "Namespace", "other")["metadata"]["labels"] == {
        open_label("another-fleet"): "true"
    }
    assert member.get("v1", "Namespace", "default")["metadata"]["labels"] == {"owner": "team"}


def test_join_opens_no_namespace_that_does_not_exist_and_never_a_system_one(fleet, member):
    with pytest.raises(JoinError, match="--namespaces research: no such namespace"):
        _join(fleet, member, fleet_id="f", open_namespaces=("research",))
    assert member.get("v1", "Namespace", "research") is None
    assert fleet.get(c.FLEET_API_VERSION, "MemberCluster", "member-1") is None
    for system in ("kube-system", "fleet-member"):
        with pytest.raises(ValueError, match="never writes in the system namespaces"):
            plan_join("member-1", ENDPOINT, fleet_id="f", open_namespaces=(system,))


def test_a_member_name_whose_dispatch_secret_would_be_another_members_viewer_secret_is_refused():
    """`x-viewer-kubeconfig` is member x's people's Secret (readable through the Role
    fleet-viewer-kubeconfigs): a member named x-viewer may not keep its dispatch token there."""
    with pytest.raises(ValueError, match="may not end in -viewer"):
        plan_join("x-viewer", ENDPOINT)
