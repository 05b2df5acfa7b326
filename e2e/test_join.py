"""fleet's own identity in members, end to end: what `fleet join` stores, what the member refuses
it, its token renewed with no human step, `fleet unjoin` with and without bound jobs, and a join
by a user who may not create RBAC, and the refusal to join a cluster a second time.

Every other e2e test runs on members joined this way (e2e/conftest.py), so dispatch, status,
failover, logs and Reservations are proven with this identity alone.

A cluster is joined once (`fleet join` refuses one another MemberCluster already is), so the
tests that join a cluster under a name of their own join SPARE, a sandbox cluster the e2e fleet
does not hold while this module runs; a re-join that moves the name to another cluster moves it
to OTHER_SPARE, the other such cluster."""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet import cli
from fleet.api import constants as c
from fleet.api.guard import admission_policy_name
from fleet.install import SECRETS_NAMESPACE, single_context
from fleet.join import JoinError, join_member
from fleet.join.join import identity_objects
from fleet.kube import (
    ApiError,
    Forbidden,
    NotFound,
    SyncKubeClient,
    from_kubeconfig,
    load,
    read_kubeconfig_file,
)
from fleet.testing.chart import service_account_kubeconfig
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER, NATIVE_MEMBER
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import (
    FLEET_ID,
    GUARD_CHECK_SECONDS,
    MEMBER_CLUSTER,
    MEMBERS,
    POLICY,
    PYTORCHJOB,
    Fleet,
)

#: The e2e controllers renew this long before a token expires (conftest's
#: --token-renew-before): a 600-second token (TokenRequest's shortest) every 30 seconds.
RENEW_EVERY = 30
#: The cluster the tests below join under names of their own: the Koordinator member, which the
#: e2e fleet joins only inside the modules about it (conftest.joined_apart, deleted when each
#: ends; modules run one after another), so no other MemberCluster is it meanwhile. Nothing here
#: needs more than its API server, its training operator and kwok: the CPU-only gangs these
#: tests dispatch run under koord-scheduler as under coscheduling.
SPARE = KOORDINATOR_MEMBER
#: Where a forced re-join moves such a name: the native-gang member, held by no MemberCluster
#: outside e2e/test_native_gang.py either.
OTHER_SPARE = NATIVE_MEMBER


def _stored(fleet: Fleet, name: str) -> dict[str, Any]:
    secret = fleet.api.get("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE)
    assert secret is not None
    return dict(yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"])))


def _member_client(fleet: Fleet, name: str) -> SyncKubeClient:
    """A client of the member with exactly what the fleet holds for it."""
    return SyncKubeClient(from_kubeconfig(_stored(fleet, name)), name=name)


def test_the_fleet_holds_a_token_and_no_key_for_every_member(live: Fleet):
    for member in MEMBERS:
        config = _stored(live, member)
        (user,) = config["users"]
        assert set(user["user"]) == {"token"}, f"{member}: more than a token is stored"
        assert user["name"] == "system:serviceaccount:fleet-member:fleet"
        (cluster,) = config["clusters"]
        assert set(cluster["cluster"]) <= {"server", "certificate-authority-data"}
        # Beside it, the people's read-only identity, in a Secret of its own.
        secret = live.api.get("v1", "Secret", f"{member}-viewer-kubeconfig", SECRETS_NAMESPACE)
        assert secret is not None, member
        viewer = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
        (user,) = viewer["users"]
        assert set(user["user"]) == {"token"}
        assert user["name"] == "system:serviceaccount:fleet-member:fleet-viewer"
    role = live.api.get(
        "rbac.authorization.k8s.io/v1", "Role", "fleet-viewer-kubeconfigs", SECRETS_NAMESPACE
    )
    assert role is not None
    (rule,) = role["rules"]
    assert {f"{m}-viewer-kubeconfig" for m in MEMBERS} <= set(rule["resourceNames"])
    assert not [n for n in rule["resourceNames"] if not n.endswith("-viewer-kubeconfig")]


def test_the_member_refuses_fleet_what_its_role_does_not_grant(live: Fleet):
    with _member_client(live, "member-1") as member:
        assert member.list("v1", "Node")["items"]  # granted: placement reads nodes
        with pytest.raises(Forbidden):
            member.list("v1", "Secret", "kube-system")
        with pytest.raises(Forbidden):
            member.get("v1", "ConfigMap", "kube-root-ca.crt", "kube-system")
        with pytest.raises(Forbidden):
            member.delete("v1", "Namespace", "kube-system")


@pytest.fixture
def joined_name(live: Fleet) -> Iterator[tuple[str, str]]:
    """A name (and member namespace) for a MemberCluster with its own identity, unjoined
    afterwards whatever the test left: the MemberCluster, its kubeconfig Secret, and the
    identity in every member (a forced re-join moves it; a refused join must have made none)."""
    suffix = secrets.token_hex(2)
    name, namespace = f"again-{suffix}", f"fleet-again-{suffix}"
    yield name, namespace
    live.api.delete(*MEMBER_CLUSTER, name)
    live.api.delete("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE)
    live.api.delete("v1", "Secret", f"{name}-viewer-kubeconfig", SECRETS_NAMESPACE)
    live.api.delete("v1", "Secret", f"{name}-renewer", SECRETS_NAMESPACE)
    for cluster in live.sandbox.members():
        _remove_identity(live.clusters[cluster], namespace)


def _remove_identity(member: ClusterClient, namespace: str) -> None:
    for api_version, kind, obj_name, obj_namespace in identity_objects(namespace):
        with contextlib.suppress(NotFound):  # a kind the member does not serve: none of it
            member.delete(api_version, kind, obj_name, obj_namespace)


def _join_spare(live: Fleet, name: str, namespace: str, **options: Any) -> None:
    config = read_kubeconfig_file(live.sandbox.kubeconfig)
    with SyncKubeClient(load(str(live.sandbox.kubeconfig), "fleet"), name="fleet") as fleet:
        join_member(
            fleet,
            name,
            config,
            {},
            context=SPARE,
            base=live.sandbox.kubeconfig.parent,
            namespace=namespace,
            fleet_id=FLEET_ID,
            **options,
        )


def _placeable(live: Fleet, name: str, namespace: str) -> None:
    """Wait until the controller places gangs in `name`. Ready is not enough: a member that
    (re)connects is fenced first (the collector checks fleet's objects there) and placement
    passes it over meanwhile, so a policy's next clusterAffinities group would be taken. A probe
    gang that may go there alone (a policy for the label `probe` only) is placed there, then
    deleted, and gone with its binding before this returns."""
    policy = gang_policy("probe", namespace, toleration_seconds=None, cluster_names=[name])
    policy["spec"]["resourceSelectors"][0]["labelSelector"] = {"matchLabels": {"probe": "true"}}
    live.api.create(policy)
    job = pytorchjob("probe", namespace=namespace, workers=1, gpus=0, cpu="100m")
    job["metadata"]["labels"] = {"probe": "true"}
    live.api.create(job)
    wait_until(lambda: live.target(namespace, "probe") == name, what=f"a probe gang in {name}")
    live.api.delete(*PYTORCHJOB, "probe", namespace)
    wait_until(
        lambda: live.job(namespace, "probe") is None and live.binding(namespace, "probe") is None,
        what="the probe gang gone",
    )
    live.api.delete(*POLICY, "probe", namespace)


def _ready_condition(live: Fleet, name: str) -> tuple[str, str, str] | None:
    """(status, reason, lastTransitionTime) of the member's Ready condition, when True."""
    condition = live.member_condition(name) or {}
    if condition.get("status") != "True":
        return None
    return condition["status"], condition["reason"], condition["lastTransitionTime"]


def test_the_token_is_renewed_twice_and_the_member_stays_ready(live: Fleet, joined_name):
    name, namespace = joined_name
    _join_spare(live, name, namespace, token_seconds=600)
    ready = wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready")
    seen = {_stored(live, name)["users"][0]["user"]["token"]}

    def renewed() -> bool:
        seen.add(_stored(live, name)["users"][0]["user"]["token"])
        assert _ready_condition(live, name) == ready, "Ready changed during a renewal"
        return len(seen) >= 3

    wait_until(renewed, timeout=6 * RENEW_EVERY, what="two renewals of the token")
    secret = live.api.get("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE) or {}
    assert secret["metadata"]["annotations"][c.TOKEN_TYPE_ANNOTATION] == "bound"
    # The member answers the newest token: the controller has been using it.
    with _member_client(live, name) as member:
        assert member.list("v1", "Node")["items"]
    assert _ready_condition(live, name) == ready


def test_unjoin_refuses_while_a_job_is_bound_then_moves_it(
    live: Fleet, joined_name, namespace, capsys
):
    name, member_namespace = joined_name
    _join_spare(live, name, member_namespace)
    wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready")
    _placeable(live, name, namespace)
    policy = gang_policy("gang", namespace)
    policy["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "leaving", "clusterNames": [name]},
        {"affinityName": "staying", "clusterNames": ["member-1"]},
    ]
    live.api.create(policy)
    live.api.create(pytorchjob("train", namespace=namespace, workers=1, gpus=0, cpu="100m"))
    wait_until(lambda: live.target(namespace, "train") == name, what="the job placed there")

    fleet_flags = ["--kubeconfig", str(live.sandbox.kubeconfig), "--context", "fleet"]
    member_flags = ["--member-kubeconfig", str(live.sandbox.kubeconfig)]
    argv = ["unjoin", name, *fleet_flags, *member_flags, "--member-context", SPARE]
    argv += ["--fleet-id", FLEET_ID]
    assert cli.main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert f"{namespace}/PyTorchJob/train" in line and "--move" in line
    assert live.api.get(*MEMBER_CLUSTER, name) is not None

    assert cli.main([*argv, "--move", "--timeout", "120"]) == 0
    # unjoin returns once no binding holds a copy there; the gang is placed again meanwhile.
    wait_until(lambda: live.target(namespace, "train") == "member-1", what="placed again")
    binding = live.binding(namespace, "train") or {}
    failovers = (binding.get("status") or {}).get("failoverHistory") or []
    assert [f["reason"] for f in failovers] == [c.REASON_MEMBER_UNJOINED]
    assert not (binding.get("status") or {}).get("failoverCount")  # not charged
    assert live.api.get(*MEMBER_CLUSTER, name) is None
    member = live.clusters[SPARE]
    role = f"fleet:{member_namespace}"
    assert member.get("rbac.authorization.k8s.io/v1", "ClusterRole", role) is None
    assert member.get(*PYTORCHJOB, "train", namespace) is None  # the old copy purged


def test_unjoin_without_jobs_and_the_member_unreachable(live: Fleet, joined_name, capsys):
    name, member_namespace = joined_name
    _join_spare(live, name, member_namespace)
    fleet_flags = ["--kubeconfig", str(live.sandbox.kubeconfig), "--context", "fleet"]
    # No member kubeconfig: as unreachable as a member gets; the fleet side goes, with a note.
    assert cli.main(["unjoin", name, *fleet_flags]) == 0
    err = capsys.readouterr().err
    assert f"left in member {name}" in err and f"clusterrole/fleet:{member_namespace}" in err
    assert live.api.get(*MEMBER_CLUSTER, name) is None
    assert live.api.get("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE) is None
    role = live.clusters[SPARE].get(
        "rbac.authorization.k8s.io/v1", "ClusterRole", f"fleet:{member_namespace}"
    )
    assert role is not None  # left, as the note says


# -- one registration, one cluster; never twice -------------------------------------------------


def _fleet_flags(live: Fleet) -> list[str]:
    return ["--kubeconfig", str(live.sandbox.kubeconfig), "--context", "fleet"]


def _member_flags(live: Fleet, context: str) -> list[str]:
    return ["--member-kubeconfig", str(live.sandbox.kubeconfig), "--member-context", context]


def _running_in(live: Fleet, name: str, namespace: str, first: str) -> None:
    """A job `train` placed on `name` (then member-1), running there."""
    _placeable(live, name, namespace)
    policy = gang_policy("gang", namespace, toleration_seconds=5)
    policy["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "first", "clusterNames": [name]},
        {"affinityName": "then", "clusterNames": ["member-1"]},
    ]
    live.api.create(policy)
    live.api.create(pytorchjob("train", namespace=namespace, workers=1, gpus=0, cpu="100m"))
    wait_until(lambda: live.target(namespace, "train") == name, what="the job placed there")
    live.wait_running(namespace, "train", first)


def _copies_everywhere(live: Fleet, namespace: str) -> list[str]:
    """The members (every one of the sandbox) holding a copy of `train`, in name order."""
    return [
        m
        for m in sorted(live.sandbox.members())
        if live.clusters[m].get(*PYTORCHJOB, "train", namespace) is not None
    ]


def _cluster_id(live: Fleet, member: str) -> str:
    """The member's identity as join records it: its kube-system namespace's UID."""
    kube_system = live.clusters[member].get("v1", "Namespace", "kube-system") or {}
    return str(kube_system["metadata"]["uid"])


def test_a_cluster_already_joined_is_refused_under_a_new_name(
    live: Fleet, joined_name: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """One cluster, one registration: member-1 joined again under a new name is refused, naming
    the MemberCluster that is it, and nothing is written on either side."""
    name, member_namespace = joined_name
    holder = live.api.get(*MEMBER_CLUSTER, "member-1") or {}
    argv = ["join", name, *_fleet_flags(live), *_member_flags(live, "member-1")]
    argv += ["--member-namespace", member_namespace, "--fleet-id", FLEET_ID]

    assert cli.main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "membercluster/member-1" in line and _cluster_id(live, "member-1") in line
    assert live.api.get(*MEMBER_CLUSTER, name) is None
    assert live.api.get("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE) is None
    member = live.clusters["member-1"]
    assert member.get("v1", "Namespace", member_namespace) is None
    role = f"fleet:{member_namespace}"
    assert member.get("rbac.authorization.k8s.io/v1", "ClusterRole", role) is None
    # The registration that holds it is as it was.
    assert (live.api.get(*MEMBER_CLUSTER, "member-1") or {})["spec"] == holder["spec"]


def test_a_rejoin_that_reaches_another_cluster_is_refused_unless_forced(
    live: Fleet, joined_name, namespace, capsys
):
    name, member_namespace = joined_name
    _join_spare(live, name, member_namespace)
    wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready")
    _running_in(live, name, namespace, SPARE)
    before = _stored(live, name)
    argv = ["join", name, *_fleet_flags(live), *_member_flags(live, OTHER_SPARE)]
    argv += ["--member-namespace", member_namespace, "--fleet-id", FLEET_ID]

    assert cli.main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert _cluster_id(live, SPARE) in line and _cluster_id(live, OTHER_SPARE) in line
    assert "--force" in line
    assert _stored(live, name) == before, "a refused re-join changed the stored kubeconfig"
    other = live.clusters[OTHER_SPARE]
    assert other.get("v1", "ServiceAccount", "fleet", member_namespace) is None

    # Forced onto a cluster another MemberCluster is: refused still, before its job moves.
    to_member_2 = ["join", name, *_fleet_flags(live), *_member_flags(live, "member-2")]
    to_member_2 += ["--member-namespace", member_namespace, "--fleet-id", FLEET_ID]
    assert cli.main([*to_member_2, "--force", "--timeout", "120"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "membercluster/member-2" in line and _cluster_id(live, "member-2") in line
    assert _stored(live, name) == before, "a refused forced re-join changed the kubeconfig"
    assert live.target(namespace, "train") == name
    assert _copies_everywhere(live, namespace) == [SPARE]
    member_2 = live.clusters["member-2"]
    assert member_2.get("v1", "ServiceAccount", "fleet", member_namespace) is None

    assert cli.main([*argv, "--force", "--timeout", "120"]) == 0
    # The job left first (MemberUnjoined), then the name was re-pointed: one copy at a time.
    assert _copies_everywhere(live, namespace) in ([], ["member-1"])
    live.wait_running(namespace, "train", "member-1")
    assert _copies_everywhere(live, namespace) == ["member-1"]
    stored = _stored(live, name)["clusters"][0]["cluster"]["server"]
    config = single_context(read_kubeconfig_file(live.sandbox.kubeconfig), OTHER_SPARE)
    assert stored == config["clusters"][0]["cluster"]["server"]
    mc = live.api.get(*MEMBER_CLUSTER, name) or {}
    assert mc["spec"]["id"] == _cluster_id(live, OTHER_SPARE)
    assert not any(t["key"] == c.UNJOINING_TAINT_KEY for t in mc["spec"].get("taints") or [])


def test_unjoin_through_a_context_that_reaches_another_cluster_is_refused(
    live: Fleet, joined_name, capsys
):
    name, member_namespace = joined_name
    _join_spare(live, name, member_namespace)
    argv = ["unjoin", name, *_fleet_flags(live), *_member_flags(live, "member-1")]
    argv += ["--fleet-id", FLEET_ID]

    assert cli.main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "refusing to delete fleet's identity in another cluster" in line
    assert live.api.get(*MEMBER_CLUSTER, name) is not None
    # Nothing was deleted in member-1, whose own identity fleet uses.
    assert live.clusters["member-1"].get("v1", "ServiceAccount", "fleet", "fleet-member")
    assert live.clusters[SPARE].get("v1", "ServiceAccount", "fleet", member_namespace)


def test_unjoin_leave_releases_the_job_and_never_starts_a_second_copy(
    live: Fleet, joined_name, namespace
):
    name, member_namespace = joined_name
    _join_spare(live, name, member_namespace)
    wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready")
    _running_in(live, name, namespace, SPARE)  # application failover, 5 s toleration
    argv = ["unjoin", name, *_fleet_flags(live), *_member_flags(live, SPARE)]
    argv += ["--fleet-id", FLEET_ID, "--leave", "--timeout", "60"]

    assert cli.main(argv) == 0
    binding = live.binding(namespace, "train") or {}
    assert (binding.get("status") or {}).get("phase") == "Released"
    # The copy runs on in the member, no longer fleet's.
    left = live.clusters[SPARE].get(*PYTORCHJOB, "train", namespace) or {}
    assert c.MANAGED_BY_LABEL not in (left["metadata"].get("labels") or {})
    # Sampled over the failover's toleration and twice more: never a second copy.
    deadline = time.monotonic() + 3 * 5 + 5
    while time.monotonic() < deadline:
        assert _copies_everywhere(live, namespace) == [SPARE]
        time.sleep(0.5)
    assert (live.binding(namespace, "train") or {})["status"]["phase"] == "Released"


@pytest.fixture
def limited_user(live: Fleet, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for SPARE (a cluster no MemberCluster is, so the join gets as far as the
    member) of a user who may create namespaces and ServiceAccounts but no RBAC (and may delete
    what it made)."""
    member = live.clusters[SPARE]
    suffix = secrets.token_hex(2)
    ns, account = "kube-system", f"limited-{suffix}"
    member.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}, ns)
    rbac = "rbac.authorization.k8s.io/v1"
    verbs = ["get", "create", "patch", "delete"]
    member.create(
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": {"name": account},
            "rules": [
                {"apiGroups": [""], "resources": ["namespaces", "serviceaccounts"], "verbs": verbs}
            ],
        }
    )
    member.create(
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": account},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": account,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
        }
    )
    base = single_context(read_kubeconfig_file(live.sandbox.kubeconfig), SPARE)
    config = service_account_kubeconfig(member, base, ns, account)
    file = tmp_path / "limited.kubeconfig"
    file.write_text(yaml.safe_dump(config))
    yield file
    member.delete(rbac, "ClusterRoleBinding", account)
    member.delete(rbac, "ClusterRole", account)
    member.delete("v1", "ServiceAccount", account, ns)


def test_a_user_who_may_not_create_rbac_gets_one_line_and_nothing_is_left(
    live: Fleet, limited_user: Path, capsys
):
    name = f"limited-{secrets.token_hex(2)}"
    argv = ["join", name, "--kubeconfig", str(live.sandbox.kubeconfig), "--context", "fleet"]
    argv += ["--member-kubeconfig", str(limited_user), "--member-namespace", f"ns-{name}"]

    assert cli.main(argv) == 1

    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"fleet: error: join {name}: the member {name} refused: ")
    # The first thing it may not make: the admission policy that guards fleet's identity.
    assert "validatingadmissionpolicies" in line and "403" in line
    member: ClusterClient = live.clusters[SPARE]

    def gone() -> bool:
        ns = member.get("v1", "Namespace", f"ns-{name}")
        return ns is None or bool(ns["metadata"].get("deletionTimestamp"))

    assert gone(), "the namespace this run created was left behind"
    assert member.get("v1", "ServiceAccount", "fleet", f"ns-{name}") is None or gone()
    assert live.api.get(*MEMBER_CLUSTER, name) is None
    assert live.api.get("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE) is None


# -- a member whose only login is an exec plugin -------------------------------------------------

PLUGIN = Path(__file__).with_name("exec_credential_plugin.py")


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@pytest.fixture
def exec_login(live: Fleet, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for SPARE whose only login is an exec plugin printing a token of an
    admin-ish ServiceAccount (cluster-admin), as a cloud's CLI would."""
    member = live.clusters[SPARE]
    account = f"exec-admin-{secrets.token_hex(2)}"
    rbac = "rbac.authorization.k8s.io/v1"
    member.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
        "kube-system",
    )
    member.create(
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": account},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "kube-system"}],
        }
    )
    base = single_context(read_kubeconfig_file(live.sandbox.kubeconfig), SPARE)
    context = base["contexts"][0]
    exec_user = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(PLUGIN), str(live.sandbox.kubeconfig), SPARE, "kube-system", account],
        "interactiveMode": "Never",
    }
    config = {
        **base,
        "users": [{"name": "cloud-login", "user": {"exec": exec_user}}],
        "contexts": [{**context, "context": {**context["context"], "user": "cloud-login"}}],
    }
    file = tmp_path / "exec.kubeconfig"
    file.write_text(yaml.safe_dump(config))
    yield file
    member.delete(rbac, "ClusterRoleBinding", account)
    member.delete("v1", "ServiceAccount", account, "kube-system")


def test_a_member_whose_only_login_is_an_exec_plugin_joins_runs_and_fails_over(
    live: Fleet, exec_login: Path, joined_name, namespace
):
    name, member_namespace = joined_name
    fleet_flags = ["--kubeconfig", str(live.sandbox.kubeconfig), "--context", "fleet"]
    argv = ["join", name, *fleet_flags, "--member-kubeconfig", str(exec_login)]
    argv += ["--fleet-id", FLEET_ID]  # the e2e controllers run with --fleet-id
    assert cli.main([*argv, "--member-namespace", member_namespace]) == 0
    wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready")
    _placeable(live, name, namespace)

    config = _stored(live, name)
    (user,) = config["users"]
    assert set(user["user"]) == {"token"}  # no exec, no admin token: fleet's own identity
    claims = _claims(user["user"]["token"])
    assert claims["sub"] == f"system:serviceaccount:{member_namespace}:fleet"

    policy = gang_policy("gang", namespace, toleration_seconds=0)
    policy["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "cloud", "clusterNames": [name]},
        {"affinityName": "fallback", "clusterNames": ["member-1"]},
    ]
    live.api.create(policy)
    # restartPolicy Never: a failing pod fails the job, as the training operator rules.
    job = pytorchjob(
        "pytorch-test", namespace=namespace, workers=2, gpus=0, cpu="100m", restart_policy="Never"
    )
    live.api.create(job)
    wait_until(lambda: live.target(namespace, "pytorch-test") == name, what="placed there")
    live.wait_running(namespace, "pytorch-test", SPARE)

    live.mark(SPARE, namespace, "pytorch-test", "Failed")
    wait_until(
        lambda: live.target(namespace, "pytorch-test") == "member-1",
        timeout=120,
        what="the job failed over to member-1",
    )
    live.wait_running(namespace, "pytorch-test", "member-1")
    assert set(_stored(live, name)["users"][0]["user"]) == {"token"}


def _token_condition(live: Fleet, name: str) -> dict[str, Any]:
    mc = live.api.get(*MEMBER_CLUSTER, name) or {}
    conditions = (mc.get("status") or {}).get("conditions") or []
    return next((x for x in conditions if x["type"] == c.CONDITION_TOKEN_RENEWED), {})


def test_a_refused_renewal_shows_at_once_and_the_member_stays_ready(live: Fleet, joined_name):
    """The member's token Role taken away: within one attempt the MemberCluster says why
    (TokenRenewed False, Forbidden), a Warning Event and the failure counter appear, and the
    member stays Ready; given back, the next renewal says so once."""
    name, namespace = joined_name
    _join_spare(live, name, namespace, token_seconds=600)
    ready = wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready")
    wait_until(
        lambda: _token_condition(live, name).get("status") == "True",
        timeout=30,
        what="TokenRenewed True",
    )
    member = live.clusters[SPARE]
    rbac = "rbac.authorization.k8s.io/v1"
    binding = member.get(rbac, "RoleBinding", "fleet-renewer", namespace)
    assert binding is not None
    member.delete(rbac, "RoleBinding", "fleet-renewer", namespace)

    # Due every RENEW_EVERY seconds: the first refusal comes within one of them (and the
    # status write that follows it at once); a retry is 15 s later.
    def refused() -> bool:
        assert _ready_condition(live, name) == ready, "Ready changed while renewals failed"
        return _token_condition(live, name).get("status") == "False"

    wait_until(refused, timeout=RENEW_EVERY + 15, what="TokenRenewed False")
    condition = _token_condition(live, name)
    assert condition["reason"] == "Forbidden", condition
    assert "403" in condition["message"] and "serviceaccounts/token" in condition["message"]
    mc = live.api.get(*MEMBER_CLUSTER, name) or {}
    renewal = mc["status"]["tokenRenewal"]
    assert renewal["consecutiveFailures"] >= 1 and renewal["nextAttemptTime"]
    warnings = [e for e in live.api.events("default", name) if e["reason"] == "TokenRenewalFailed"]
    assert warnings and warnings[0]["type"] == "Warning"
    failures = live.metrics().value(
        "fleet_token_renewal_failures_total", cluster=name, reason="Forbidden"
    )
    assert failures >= 1
    assert live.metrics().value("fleet_member_token_expiry_timestamp_seconds", cluster=name) > 0

    # Given back: renewed at the next attempt, one Normal Event says so, and still Ready.
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        binding["metadata"].pop(key, None)
    member.apply(binding)
    wait_until(
        lambda: _token_condition(live, name).get("reason") == c.REASON_TOKEN_RENEWED,
        timeout=RENEW_EVERY + 30,
        what="TokenRenewed True again",
    )
    recovered = [e for e in live.api.events("default", name) if e["reason"] == "TokenRenewed"]
    assert len(recovered) == 1 and recovered[0]["type"] == "Normal"
    assert _ready_condition(live, name) == ready


def _renewer_token(live: Fleet, name: str) -> str:
    secret = live.api.get("v1", "Secret", f"{name}-renewer", SECRETS_NAMESPACE) or {}
    return base64.b64decode(secret["data"][c.RENEWER_TOKEN_KEY]).decode()


def _with_token(live: Fleet, name: str, token: str) -> SyncKubeClient:
    """A client of the member as the fleet reaches it, authenticating with `token`."""
    config = _stored(live, name)
    config["users"][0]["user"] = {"token": token}
    return SyncKubeClient(from_kubeconfig(config), name=name, retries=0)


def test_rotate_revokes_every_token_issued_before(live: Fleet, joined_name):
    """`fleet join --rotate`: the dispatch and renewer ServiceAccounts are made anew, so the
    member refuses (401) every token of them issued before, stored or stolen; the member is
    Ready again with the new ones."""
    name, namespace = joined_name
    _join_spare(live, name, namespace, token_seconds=600)
    wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready")
    old_dispatch = _stored(live, name)["users"][0]["user"]["token"]
    old_renewer = _renewer_token(live, name)
    with _with_token(live, name, old_dispatch) as before:
        assert before.list("v1", "Node")["items"]  # the old token works until the rotation

    _join_spare(live, name, namespace, token_seconds=600, rotate=True)

    def refused(token: str) -> int | None:
        with _with_token(live, name, token) as stolen:
            try:
                stolen.list("v1", "Node")
            except ApiError as e:
                return e.status
        return None

    # The API server remembers a token that authenticated for 10 s (its token cache): the old
    # dispatch token, used just above, is refused once that has passed.
    for old in (old_dispatch, old_renewer):
        status = wait_until(lambda old=old: refused(old), timeout=30, what="the old token refused")
        assert status == 401
    assert _stored(live, name)["users"][0]["user"]["token"] != old_dispatch
    assert _renewer_token(live, name) != old_renewer
    wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready again")
    with _member_client(live, name) as member:
        assert member.list("v1", "Node")["items"]


def _guarded(live: Fleet, name: str) -> dict[str, Any]:
    mc = live.api.get(*MEMBER_CLUSTER, name) or {}
    conditions = (mc.get("status") or {}).get("conditions") or []
    return next((x for x in conditions if x["type"] == c.CONDITION_GUARDED), {})


def test_a_guard_deleted_in_the_member_turns_guarded_false_within_one_period(
    live: Fleet, joined_name
):
    """A member admin deletes the guard's binding: within one guard period (the e2e
    controllers check every GUARD_CHECK_SECONDS) the MemberCluster says Guarded=False
    (GuardMissing), with a Warning Event, and takes no new gang (Ready=False); joined again,
    it is Guarded and Ready."""
    name, namespace = joined_name
    _join_spare(live, name, namespace)
    wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready")
    assert _guarded(live, name).get("status") == "True"
    guard = admission_policy_name(namespace)
    live.clusters[SPARE].delete(
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", guard
    )
    # The API server unloads it about a second later; then one period, then a status write.
    wait_until(
        lambda: _guarded(live, name).get("status") == "False",
        timeout=GUARD_CHECK_SECONDS + 15,
        what="Guarded False",
    )
    condition = _guarded(live, name)
    assert condition["reason"] == c.REASON_GUARD_MISSING and guard in condition["message"]
    ready = live.member_condition(name) or {}
    assert (ready.get("status"), ready.get("reason")) == ("False", c.REASON_GUARD_MISSING)
    warnings = [e for e in live.api.events("default", name) if e["reason"] == "GuardMissing"]
    assert warnings and warnings[0]["type"] == "Warning"

    _join_spare(live, name, namespace)
    wait_until(
        lambda: _guarded(live, name).get("status") == "True",
        timeout=GUARD_CHECK_SECONDS + 15,
        what="Guarded True again",
    )
    wait_until(lambda: _ready_condition(live, name), timeout=60, what=f"{name} Ready again")


def test_join_refuses_a_secrets_namespace_the_controller_cannot_renew_in(live: Fleet, joined_name):
    """The chart grants the controller Secrets in its own namespace only: a join keeping the
    kubeconfig in `default` is refused before anything is written, naming the chart value."""
    name, namespace = joined_name
    with pytest.raises(JoinError) as refused:
        _join_spare(live, name, namespace, secrets_namespace="default")
    # Cluster-wide the controller may only get a Secret (propagateDeps): the rest is missing.
    assert "may not list, watch, patch Secrets in namespace 'default'" in str(refused.value)
    assert "controller.secretsNamespaces" in str(refused.value)
    assert live.api.get(*MEMBER_CLUSTER, name) is None
    assert live.api.get("v1", "Secret", f"{name}-kubeconfig", "default") is None
    assert live.clusters[SPARE].get("v1", "Namespace", namespace) is None
