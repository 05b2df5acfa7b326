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
from fleet.install import SECRETS_NAMESPACE
from fleet.kube import ApiError, SyncKubeClient, from_kubeconfig
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import FLEET_ID, PYTORCHJOB, Fleet

SECRET_VALUE = "s3cret-" + secrets.token_hex(4)
ENCODED = base64.b64encode(SECRET_VALUE.encode()).decode()
#: A patch that would put fleet's mark on an object fleet did not create.
MARKED = {"metadata": {"labels": {c.MANAGED_BY_LABEL: FLEET_ID}}}


def _stored_token_client(fleet: Fleet, name: str) -> SyncKubeClient:
    secret = fleet.api.get("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE)
    assert secret is not None
    config = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
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
