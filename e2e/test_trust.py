"""What the token fleet stores for a member can do there, tried as an attacker holding it would.

Every request below is sent with exactly the token the fleet's kubeconfig Secret holds, as one
raw API request (no GET first as `kubectl patch` sends, no `can-i`): the member's answer to that
request is what an attacker gets. fleet.api.guard says why each is refused.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from fleet.api import constants as c
from fleet.api.guard import NOT_OPEN, open_label
from fleet.controller.reserving import RESERVATION
from fleet.install import SECRETS_NAMESPACE
from fleet.kube import ApiError, SyncKubeClient, from_kubeconfig
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import FLEET_ID, PYTORCHJOB, Fleet, joined_apart

SECRET_VALUE = "s3cret-" + secrets.token_hex(4)
ENCODED = base64.b64encode(SECRET_VALUE.encode()).decode()
#: A patch that would put fleet's mark on an object fleet did not create.
MARKED = {"metadata": {"labels": {c.MANAGED_BY_LABEL: FLEET_ID}}}


def _stored_token_client(fleet: Fleet, name: str, secret: str = "kubeconfig") -> SyncKubeClient:
    """A client of member `name` with the kubeconfig join stored on the fleet in the Secret
    `<name>-<secret>` (the dispatch token's, or `viewer-kubeconfig`: the people's)."""
    stored = fleet.api.get("v1", "Secret", f"{name}-{secret}", SECRETS_NAMESPACE)
    assert stored is not None, f"fleet join stores {name}-{secret}"
    config = yaml.safe_load(base64.b64decode(stored["data"]["kubeconfig"]))
    return SyncKubeClient(from_kubeconfig(config), name=name, retries=0)


@pytest.fixture
def attacker(live: Fleet) -> Iterator[SyncKubeClient]:
    with _stored_token_client(live, "member-1") as client:
        yield client


@pytest.fixture
def planted(live: Fleet, namespace: str) -> Iterator[dict[str, Any]]:
    """A Secret in kube-system and a Secret and ConfigMap in a tenant namespace, made by the
    member's admin (not by fleet), each holding SECRET_VALUE."""
    admin: ClusterClient = live.clusters["member-1"]
    name = f"probe-{secrets.token_hex(3)}"
    objects = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "kube-system"},
            "data": {"value": ENCODED},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"value": ENCODED},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"value": SECRET_VALUE},
        },
    ]
    for obj in objects:
        admin.create(obj)
    yield {"name": name, "objects": objects}
    for obj in objects:
        admin.delete(obj["apiVersion"], obj["kind"], name, obj["metadata"]["namespace"])


def _refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    error = caught.value
    assert error.status == 403, error
    assert SECRET_VALUE not in error.body and ENCODED not in error.body, "data in the answer"
    return error


def test_a_patch_answers_with_no_secret_fleet_did_not_write(
    live: Fleet, attacker: SyncKubeClient, planted: dict[str, Any], namespace: str
):
    name = planted["name"]
    admin = live.clusters["member-1"]
    for ns in ("kube-system", namespace):
        # An empty merge patch, a JSON patch that tests nothing, and a server-side apply: each
        # would answer with the whole object if it were let through.
        _refused(lambda ns=ns: attacker.patch("v1", "Secret", name, {}, ns))
        _refused(lambda ns=ns: attacker.patch("v1", "Secret", name, [], ns, patch_type="json"))
        _refused(
            lambda ns=ns: attacker.apply(
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}},
                field_manager="attacker",
            )
        )
        # Nor by claiming fleet's mark for it.
        _refused(lambda ns=ns: attacker.patch("v1", "Secret", name, MARKED, ns))
        labels = (admin.get("v1", "Secret", name, ns) or {})["metadata"].get("labels") or {}
        assert c.MANAGED_BY_LABEL not in labels


def test_no_token_of_another_identity(live: Fleet, attacker: SyncKubeClient, namespace: str):
    for ns in ("kube-system", namespace):
        token_secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": f"stolen-{secrets.token_hex(3)}",
                "namespace": ns,
                "labels": {c.MANAGED_BY_LABEL: FLEET_ID},  # even wearing fleet's mark
                "annotations": {"kubernetes.io/service-account.name": "default"},
            },
        }
        _refused(lambda obj=token_secret: attacker.create(obj))
        meta = token_secret["metadata"]
        assert live.clusters["member-1"].get("v1", "Secret", meta["name"], ns) is None
    # A TokenRequest for any ServiceAccount but fleet's own.
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    _refused(
        lambda: attacker.create_subresource(
            "v1", "ServiceAccount", "default", "token", request, "kube-system"
        )
    )


def _token_request(seconds: int) -> dict[str, Any]:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }


YEAR = 365 * 24 * 3600


def test_the_dispatch_token_cannot_extend_itself(live: Fleet, attacker: SyncKubeClient):
    """No TokenRequest for its own ServiceAccount, not even the shortest: whoever holds the
    stored token holds it until it expires, and no longer."""
    for seconds in (600, YEAR):
        _refused(
            lambda seconds=seconds: attacker.create_subresource(
                "v1", "ServiceAccount", "fleet", "token", _token_request(seconds), "fleet-member"
            )
        )


@pytest.fixture
def renewer(live: Fleet) -> Iterator[SyncKubeClient]:
    """A client of member-1 with the renewer's token, as the controller (alone) holds it."""
    secret = live.api.get("v1", "Secret", "member-1-renewer", SECRETS_NAMESPACE)
    assert secret is not None
    token = base64.b64decode(secret["data"][c.RENEWER_TOKEN_KEY]).decode()
    kubeconfig = live.api.get("v1", "Secret", "member-1-kubeconfig", SECRETS_NAMESPACE) or {}
    config = yaml.safe_load(base64.b64decode(kubeconfig["data"]["kubeconfig"]))
    config["users"][0]["user"] = {"token": token}
    with SyncKubeClient(from_kubeconfig(config), name="member-1", retries=0) as client:
        yield client


def test_the_renewer_mints_no_token_longer_than_joins_lifetime(
    live: Fleet, renewer: SyncKubeClient
):
    """Even the renewer's token (were it stolen from the controller's Secret) buys dispatch
    tokens of the lifetime join chose (24 h here) and no longer, of that one ServiceAccount
    only, and reads nothing."""
    error = _refused(
        lambda: renewer.create_subresource(
            "v1", "ServiceAccount", "fleet", "token", _token_request(YEAR), "fleet-member"
        )
    )
    assert "token.fleet-member.fleet.dev" in error.message, error
    _refused(
        lambda: renewer.create_subresource(
            "v1", "ServiceAccount", "default", "token", _token_request(600), "fleet-member"
        )
    )
    _refused(lambda: renewer.list("v1", "Pod", "kube-system"))
    _refused(lambda: renewer.get("v1", "Secret", "fleet-renewer-token", "fleet-member"))
    # What the controller asks for is granted: the lifetime join chose.
    issued = renewer.create_subresource(
        "v1", "ServiceAccount", "fleet", "token", _token_request(24 * 3600), "fleet-member"
    )
    assert issued["status"]["token"]


def test_no_workload_in_the_system_namespaces(live: Fleet, attacker: SyncKubeClient):
    for ns in ("kube-system", "kube-public", "kube-node-lease", "fleet-member"):
        job = pytorchjob(f"evil-{secrets.token_hex(2)}", namespace=ns, workers=1, gpus=0)
        job["metadata"]["labels"] = {c.MANAGED_BY_LABEL: FLEET_ID}
        error = _refused(lambda job=job: attacker.create(job))
        assert ns in error.message
        assert live.clusters["member-1"].get(*PYTORCHJOB, job["metadata"]["name"], ns) is None


def test_no_object_fleet_did_not_create_is_changed_or_deleted(
    live: Fleet, attacker: SyncKubeClient, planted: dict[str, Any], namespace: str
):
    name = planted["name"]
    admin = live.clusters["member-1"]
    before = admin.get("v1", "ConfigMap", name, namespace)
    _refused(
        lambda: attacker.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
                "data": {"value": "overwritten"},
            },
            field_manager="attacker",
        )
    )
    _refused(lambda: attacker.patch("v1", "ConfigMap", name, {"data": {"v": "x"}}, namespace))
    # A tenant's own job: not changed, not deleted.
    theirs = pytorchjob(f"theirs-{secrets.token_hex(2)}", namespace=namespace, workers=1, gpus=0)
    theirs["spec"]["runPolicy"] = {"suspend": True}
    admin.create(theirs)
    job_name = theirs["metadata"]["name"]
    _refused(lambda: attacker.delete(*PYTORCHJOB, job_name, namespace))
    _refused(
        lambda: attacker.patch(
            *PYTORCHJOB, job_name, {"metadata": {"labels": {"x": "y"}}}, namespace
        )
    )
    assert admin.get(*PYTORCHJOB, job_name, namespace) is not None
    after = admin.get("v1", "ConfigMap", name, namespace)
    assert before is not None and after is not None
    assert after["data"] == before["data"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_no_volume_fleet_did_not_fill(live: Fleet, attacker: SyncKubeClient, namespace: str):
    for spec in (
        {"volumeName": "someone-elses"},
        {"dataSource": {"kind": "PersistentVolumeClaim", "name": "someone-elses"}},
    ):
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": f"claim-{secrets.token_hex(2)}",
                "namespace": namespace,
                "labels": {c.MANAGED_BY_LABEL: FLEET_ID},
            },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                **spec,
            },
        }
        _refused(lambda claim=claim: attacker.create(claim))


def test_dispatch_with_dependencies_still_works(live: Fleet, namespace: str, add_nodes):
    """fleet's own work is untouched by the guard: a job whose policy propagates its
    dependencies is dispatched with them, and its status mirrored, with this identity alone."""
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "train-config", "namespace": namespace},
        "data": {"lr": "0.1"},
    }
    live.api.create(config)
    policy = gang_policy("gang", namespace, cluster_names=["member-1"])
    policy["spec"]["propagateDeps"] = True
    live.api.create(policy)
    job = pytorchjob("guarded", namespace=namespace, workers=1, gpus=1)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["volumes"] = [
            {"name": "config", "configMap": {"name": "train-config"}}
        ]
    live.api.create(job)
    live.wait_running(namespace, "guarded", "member-1")
    copied = wait_until(
        lambda: live.clusters["member-1"].get("v1", "ConfigMap", "train-config", namespace),
        what="the dependency in the member",
    )
    assert copied["data"] == {"lr": "0.1"}
    assert copied["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID


def test_the_member_cluster_says_it_is_guarded(live: Fleet):
    def guarded() -> dict[str, Any] | None:
        mc = live.api.get("fleet.dev/v1alpha1", "MemberCluster", "member-1") or {}
        conditions = (mc.get("status") or {}).get("conditions") or []
        return next((x for x in conditions if x["type"] == c.CONDITION_GUARDED), None)

    condition = wait_until(guarded, what="the Guarded condition")
    assert condition["status"] == "True", condition
    mc = live.api.get("fleet.dev/v1alpha1", "MemberCluster", "member-1") or {}
    ns = live.clusters["member-1"].get("v1", "Namespace", "kube-system") or {}
    assert mc["spec"]["id"] == ns["metadata"]["uid"]


# -- the people's token (the viewer) and what the dispatch token no longer reads ---------------


def _viewer_client(fleet: Fleet, name: str) -> SyncKubeClient:
    return _stored_token_client(fleet, name, "viewer-kubeconfig")


@pytest.fixture
def viewer(live: Fleet) -> Iterator[SyncKubeClient]:
    with _viewer_client(live, "member-1") as client:
        yield client


def _read_log(client: SyncKubeClient, namespace: str, pod: str) -> bytes:
    return b"".join(client.pod_log(namespace, pod, tail_lines=5))


@pytest.fixture
def elsewhere(live: Fleet) -> Iterator[tuple[str, str]]:
    """A namespace fleet never dispatched to, in member-1, with a pod its admin made."""
    admin: ClusterClient = live.clusters["member-1"]
    ns = f"tenant-{secrets.token_hex(3)}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app", "namespace": ns},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "busybox",
                    "env": [{"name": "DB_PASSWORD", "value": SECRET_VALUE}],
                }
            ]
        },
    }
    admin.create(pod)
    yield ns, "app"
    admin.delete("v1", "Namespace", ns)


def test_the_viewer_reads_a_jobs_pods_and_logs_where_fleet_dispatched(
    live: Fleet, viewer: SyncKubeClient, namespace: str, add_nodes
):
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace, cluster_names=["member-1"]))
    live.api.create(pytorchjob("seen", namespace=namespace, workers=1, gpus=1))
    pods = live.wait_running(namespace, "seen", "member-1")

    # The controller bound the viewer there on its first dispatch.
    binding = live.clusters["member-1"].get(
        "rbac.authorization.k8s.io/v1", "RoleBinding", "fleet:fleet-member:viewer", namespace
    )
    assert binding is not None and binding["metadata"]["labels"][c.VIEWER_ANNOTATION] == "true"
    listed = wait_until(
        lambda: viewer.list("v1", "Pod", namespace).get("items"), what="the viewer lists pods"
    )
    assert {p["metadata"]["name"] for p in listed} == {p["metadata"]["name"] for p in pods}
    assert viewer.get(*PYTORCHJOB, "seen", namespace) is not None
    assert _read_log(viewer, namespace, pods[0]["metadata"]["name"])  # kwok's canned log
    assert viewer.list("v1", "Node").get("items")  # capacity, for the dashboard


def test_the_viewer_reads_nothing_else_and_writes_nothing(
    live: Fleet, viewer: SyncKubeClient, planted: dict[str, Any], namespace: str, elsewhere
):
    ns, pod = elsewhere
    name = planted["name"]
    # A pod fleet did not make, in a namespace fleet never dispatched to: no spec, no log.
    _refused(lambda: viewer.get("v1", "Pod", pod, ns))
    _refused(lambda: _read_log(viewer, ns, pod))
    _refused(lambda: viewer.list("v1", "Pod"))  # not cluster-wide either
    _refused(lambda: viewer.list("v1", "Pod", "kube-system"))
    # No Secret, no ConfigMap, anywhere.
    for where in ("kube-system", namespace, "fleet-member"):
        _refused(lambda where=where: viewer.list("v1", "Secret", where))
    _refused(lambda: viewer.get("v1", "Secret", name, "kube-system"))
    _refused(lambda: viewer.get("v1", "ConfigMap", name, namespace))
    # No write: not a ConfigMap, not a job, not a RoleBinding of its own, not a token.
    marked = {
        "name": f"w-{secrets.token_hex(2)}",
        "namespace": namespace,
        "labels": {c.MANAGED_BY_LABEL: FLEET_ID},
    }
    _refused(lambda: viewer.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": marked}))
    job = pytorchjob(marked["name"], namespace=namespace, workers=1, gpus=0)
    _refused(lambda: viewer.create(job))
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    _refused(
        lambda: viewer.create_subresource(
            "v1", "ServiceAccount", "fleet-viewer", "token", request, "fleet-member"
        )
    )


def test_the_dispatch_token_reads_no_log(
    live: Fleet, attacker: SyncKubeClient, elsewhere, namespace: str
):
    ns, pod = elsewhere
    _refused(lambda: _read_log(attacker, ns, pod))
    _refused(lambda: attacker.get("v1", "Pod", pod, ns))  # pods: list/watch only
    _refused(lambda: attacker.list("v1", "Event", ns))


def test_the_dispatch_token_binds_nothing_but_the_viewer_to_the_viewer(
    live: Fleet, attacker: SyncKubeClient, elsewhere
):
    """Whoever holds the dispatch token gains nothing by binding: only the viewer's ClusterRole
    (RBAC's bind), only to the viewer's ServiceAccount (the guard), with fleet's mark, and only
    in a namespace fleet created or one opened to it."""
    ns, _ = elsewhere

    def binding(role: str, subject: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": f"b-{secrets.token_hex(2)}",
                "namespace": ns,
                "labels": {c.MANAGED_BY_LABEL: FLEET_ID},
            },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [subject],
        }

    viewer_sa = {"kind": "ServiceAccount", "name": "fleet-viewer", "namespace": "fleet-member"}
    default = {"kind": "ServiceAccount", "name": "default", "namespace": ns}
    anyone = {
        "kind": "Group",
        "apiGroup": "rbac.authorization.k8s.io",
        "name": "system:authenticated",
    }
    for role, subject in (
        ("fleet:fleet-member:viewer", default),
        ("fleet:fleet-member:viewer", anyone),
        ("cluster-admin", viewer_sa),
        ("fleet:fleet-member", default),  # its own rights, to another account
    ):
        _refused(lambda role=role, subject=subject: attacker.create(binding(role, subject)))
    # Not even the viewer's own binding, in a namespace fleet did not create and nobody opened
    # to it: the people would read there what fleet never dispatched (the guard's dispatchable).
    error = _refused(lambda: attacker.create(binding("fleet:fleet-member:viewer", viewer_sa)))
    assert NOT_OPEN in error.message
    assert not live.clusters["member-1"].items("rbac.authorization.k8s.io/v1", "RoleBinding", ns)


# -- where fleet may dispatch, and what its pods may be (fleet.api.guard, rules 6 to 9) ----------


def _batch_job(namespace: str, **pod: Any) -> dict[str, Any]:
    """A suspended Job carrying fleet's mark (suspended: nothing runs even where admitted)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"probe-{secrets.token_hex(3)}",
            "namespace": namespace,
            "labels": {c.MANAGED_BY_LABEL: FLEET_ID},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                    **pod,
                }
            },
        },
    }


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _service_account(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
    }


@pytest.fixture
def closed(live: Fleet) -> Iterator[str]:
    """A namespace of member-1 its admin made and did not open to fleet (an `ops` namespace,
    with a ServiceAccount a GitOps controller would bind to cluster-admin)."""
    admin = live.clusters["member-1"]
    name = f"ops-{secrets.token_hex(3)}"
    admin.create(_namespace(name))
    admin.create(_service_account("deployer", name))
    yield name
    admin.delete("v1", "Namespace", name)


@pytest.fixture
def ours(live: Fleet, attacker: SyncKubeClient) -> Iterator[str]:
    """A namespace fleet's token created (its mark, PodSecurity baseline), in which the member's
    admin has since made a ServiceAccount `deployer` fleet did not propagate."""
    admin = live.clusters["member-1"]
    name = f"fleet-ns-{secrets.token_hex(3)}"
    enforce = f"{c.POD_SECURITY_PREFIX}enforce"
    attacker.create(_namespace(name, **{c.MANAGED_BY_LABEL: FLEET_ID, enforce: "baseline"}))
    admin.create(_service_account("deployer", name))
    yield name
    admin.delete("v1", "Namespace", name)


def test_no_workload_in_a_namespace_fleet_did_not_create_and_nobody_opened(
    live: Fleet, attacker: SyncKubeClient, closed: str
):
    admin = live.clusters["member-1"]
    job = _batch_job(closed)
    error = _refused(lambda: attacker.create(job))
    assert NOT_OPEN in error.message and open_label(FLEET_ID) in error.message
    assert f"--namespaces {closed}" in error.message
    for dependency in (
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}},
        {"apiVersion": "v1", "kind": "ServiceAccount"},
    ):
        meta = {"name": "dep", "namespace": closed, "labels": {c.MANAGED_BY_LABEL: FLEET_ID}}
        _refused(lambda d=dependency, m=meta: attacker.create({**d, "metadata": m}))
    assert admin.get("batch/v1", "Job", job["metadata"]["name"], closed) is None
    # Nor may the token open it itself: the namespace is not fleet's to change.
    _refused(
        lambda: attacker.patch(
            "v1", "Namespace", closed, {"metadata": {"labels": {open_label(FLEET_ID): "true"}}}
        )
    )
    # Once its admin opens it (fleet join --namespaces writes this label), the same Job is
    # admitted; a ServiceAccount only once the admin lists it.
    admin.patch("v1", "Namespace", closed, {"metadata": {"labels": {open_label(FLEET_ID): "true"}}})
    wait_until(lambda: _admitted(attacker, _batch_job(closed)), what="a Job admitted once opened")
    error = _refused(lambda: attacker.create(_batch_job(closed, serviceAccountName="deployer")))
    assert c.SERVICE_ACCOUNTS_ANNOTATION in error.message and "deployer" in error.message
    admin.patch(
        "v1",
        "Namespace",
        closed,
        {"metadata": {"annotations": {c.SERVICE_ACCOUNTS_ANNOTATION: "reader, deployer"}}},
    )
    wait_until(
        lambda: _admitted(attacker, _batch_job(closed, serviceAccountName="deployer")),
        what="a Job as a ServiceAccount its admin listed",
    )


def _admitted(client: SyncKubeClient, obj: dict[str, Any]) -> bool:
    try:
        client.create(obj)
    except ApiError as e:
        if e.status == 403:
            return False
        raise
    return True


def test_in_a_fleet_namespace_pods_run_as_default_without_host_access(
    live: Fleet, attacker: SyncKubeClient, ours: str
):
    admin = live.clusters["member-1"]
    # Positive control: a plain Job of fleet's, as its default ServiceAccount.
    attacker.create(_batch_job(ours))
    attacker.create(_batch_job(ours, serviceAccountName="default"))
    refused = {
        "a ServiceAccount fleet did not propagate": {"serviceAccountName": "deployer"},
        "the deprecated serviceAccount field": {"serviceAccount": "deployer"},
        "hostPath /": {
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        },
        "an nfs volume": {"volumes": [{"name": "n", "nfs": {"server": "10.0.0.1", "path": "/"}}]},
        "an inline csi volume": {"volumes": [{"name": "c", "csi": {"driver": "x.csi.io"}}]},
        "hostPID": {"hostPID": True},
        "hostNetwork": {"hostNetwork": True},
        "a privileged container": {
            "containers": [
                {"name": "main", "image": "busybox", "securityContext": {"privileged": True}}
            ]
        },
        "a privileged init container": {
            "initContainers": [
                {"name": "init", "image": "busybox", "securityContext": {"privileged": True}}
            ]
        },
        "an ephemeral volume bound to a chosen PV": {
            "volumes": [
                {
                    "name": "e",
                    "ephemeral": {
                        "volumeClaimTemplate": {
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                                "volumeName": "someone-elses",
                            }
                        }
                    },
                }
            ]
        },
    }
    for why, pod in refused.items():
        job = _batch_job(ours, **pod)
        with pytest.raises(ApiError) as caught:
            attacker.create(job)
        assert caught.value.status == 403, why
        assert admin.get("batch/v1", "Job", job["metadata"]["name"], ours) is None, why
    # The same checks reach every pod template of every kind: a PyTorchJob's worker.
    job = pytorchjob(f"evil-{secrets.token_hex(2)}", namespace=ours, workers=1, gpus=0)
    job["metadata"]["labels"] = {c.MANAGED_BY_LABEL: FLEET_ID}
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["serviceAccountName"] = (
        "deployer"
    )
    error = _refused(lambda: attacker.create(job))
    assert "deployer" in error.message


def test_no_namespace_below_baseline_and_no_relabelling(
    live: Fleet, attacker: SyncKubeClient, ours: str
):
    enforce = f"{c.POD_SECURITY_PREFIX}enforce"
    mark = {c.MANAGED_BY_LABEL: FLEET_ID}
    for labels in (
        {**mark, enforce: "privileged"},
        mark,  # no level: the member's default, privileged unless its admins set another
        {**mark, enforce: "baseline", f"{c.POD_SECURITY_PREFIX}warn": "privileged"},
        {**mark, enforce: "restricted", c.ALLOW_OVERWRITE_LABEL: "true"},
    ):
        name = f"evil-{secrets.token_hex(3)}"
        _refused(lambda n=name, lb=labels: attacker.create(_namespace(n, **lb)))
        assert live.clusters["member-1"].get("v1", "Namespace", name) is None
    # A namespace of fleet's keeps its labels: no lowering its level, no opening it to takeovers.
    for labels in ({enforce: "privileged"}, {enforce: None}, {c.ALLOW_OVERWRITE_LABEL: "true"}):
        _refused(
            lambda lb=labels: attacker.patch("v1", "Namespace", ours, {"metadata": {"labels": lb}})
        )
    labels = live.clusters["member-1"].get("v1", "Namespace", ours)["metadata"]["labels"]
    assert labels[enforce] == "baseline"


def test_no_claim_that_could_bind_a_volume_fleet_did_not_make(
    live: Fleet, attacker: SyncKubeClient, ours: str
):
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "static", "namespace": ours, "labels": {c.MANAGED_BY_LABEL: FLEET_ID}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "",  # binds pre-provisioned volumes only
        },
    }
    _refused(lambda: attacker.create(claim))
    # Positive control: a claim for a new volume of a class.
    claim["spec"]["storageClassName"] = "standard"
    attacker.create(claim)


def test_no_reservation_but_one_for_a_gang_of_fleets(live: Fleet):
    """On the Koordinator member (the one that serves Reservations), joined as users join."""
    taint = {"key": "fleet.dev/trust", "value": "e2e", "effect": "NoSchedule"}
    with (
        joined_apart(live, KOORDINATOR_MEMBER, taint),
        _stored_token_client(live, KOORDINATOR_MEMBER) as token,
    ):
        uid = f"{secrets.token_hex(4)}-0000-4000-8000-000000000000"
        labels = {c.MANAGED_BY_LABEL: FLEET_ID, c.FLEET_UID_LABEL: uid}
        good = {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Reservation",
            "metadata": {"name": f"fleet-{uid}-worker-0", "labels": labels},
            "spec": {
                "template": {
                    "metadata": {"namespace": "default"},
                    "spec": {
                        "containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]
                    },
                },
                "owners": [{"labelSelector": {"matchLabels": {c.FLEET_UID_LABEL: uid}}}],
                "ttl": "600s",
                "allocateOnce": True,
            },
        }
        bad = {
            "a name not of fleet's gang": {"metadata": {"name": "hoard", "labels": labels}},
            "a year": {"spec": {**good["spec"], "ttl": "8760h"}},
            "any pod may consume it": {
                "spec": {**good["spec"], "owners": [{"labelSelector": {"matchLabels": {}}}]}
            },
            "not consumed once": {"spec": {**good["spec"], "allocateOnce": False}},
        }
        for why, change in bad.items():
            with pytest.raises(ApiError) as caught:
                token.create({**good, **change})
            assert caught.value.status == 403, why
        created = token.create(good)  # positive control: fleet's own Reservation
        token.delete(*RESERVATION, created["metadata"]["name"])


def test_a_job_in_a_namespace_not_open_is_refused_with_the_way_to_open_it(live: Fleet, closed: str):
    """The controller does not retry blindly: the binding and a Warning Event name the member,
    the namespace and the fix."""
    live.api.create(_namespace(closed))
    try:
        live.api.create(gang_policy("gang", closed, cluster_names=["member-1"]))
        live.api.create(pytorchjob("closed", namespace=closed, workers=1, gpus=0, cpu="100m"))

        def refused() -> dict[str, Any] | None:
            conditions = ((live.binding(closed, "closed") or {}).get("status") or {}).get(
                "conditions"
            ) or []
            found = next((x for x in conditions if x["type"] == c.CONDITION_FULLY_APPLIED), None)
            return found if found and found["reason"] == c.REASON_NAMESPACE_NOT_OPEN else None

        condition = wait_until(refused, what="FullyApplied False, NamespaceNotOpen")
        assert f"fleet join member-1 --namespaces {closed}" in condition["message"]
        events = wait_until(
            lambda: [
                m for r, m, _ in live.events(closed, "closed") if r == c.REASON_NAMESPACE_NOT_OPEN
            ],
            what="a NamespaceNotOpen Event",
        )
        assert open_label(FLEET_ID) in events[0]
        assert live.copies(closed, "closed") == []
    finally:
        live.api.delete("v1", "Namespace", closed)


def test_a_namespace_fleet_creates_carries_the_hubs_level_and_its_propagated_account_runs(
    live: Fleet, add_nodes
):
    """Positive control: fleet's own work in a namespace it creates. The hub namespace enforces
    `privileged`: the member's gets `baseline`; the job runs as the ServiceAccount it took along
    (listed on the namespace by fleet), with its ConfigMap."""
    name = f"t-fleet-made-{secrets.token_hex(2)}"
    enforce = f"{c.POD_SECURITY_PREFIX}enforce"
    member = live.clusters["member-1"]
    live.api.create(_namespace(name, **{enforce: "privileged"}))
    try:
        add_nodes("member-1", count=1, gpu=4, labels={"test": name})
        live.api.create(_service_account("trainer", name))
        live.api.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "train-config", "namespace": name},
                "data": {"lr": "0.1"},
            }
        )
        live.api.create(gang_policy("gang", name, cluster_names=["member-1"]))
        job = pytorchjob(
            "as-trainer", namespace=name, workers=1, gpus=1, node_selector={"test": name}
        )
        for spec in job["spec"]["pytorchReplicaSpecs"].values():
            pod = spec["template"]["spec"]
            pod["serviceAccountName"] = "trainer"
            pod["volumes"] = [{"name": "config", "configMap": {"name": "train-config"}}]
        live.api.create(job)
        pods = live.wait_running(name, "as-trainer", "member-1")
        assert {p["spec"]["serviceAccountName"] for p in pods} == {"trainer"}
        made = member.get("v1", "Namespace", name) or {}
        assert made["metadata"]["labels"][enforce] == "baseline"
        assert made["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID
        assert made["metadata"]["annotations"][c.SERVICE_ACCOUNTS_ANNOTATION] == "trainer"
    finally:
        live.api.delete("v1", "Namespace", name)
        member.delete("v1", "Namespace", name)
