"""What a second operator hits next, end to end: the periodic sweep of member copies whose fleet
object is gone, and kubeconfig Secrets that change under a MemberCluster."""

from __future__ import annotations

import uuid
from typing import Any

import yaml

from fleet.install import SECRETS_NAMESPACE, single_context
from fleet.kube import read_kubeconfig_file
from fleet.testing.kube import wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import FLEET_ID, MEMBER_CLUSTER, PYTORCHJOB, SWEEP_SECONDS, Fleet


def _copy(namespace: str, name: str, managed_by: str, fleet_uid: str) -> dict[str, Any]:
    """A PyTorchJob in a member, labelled as a fleet's copy of the fleet object `fleet_uid`."""
    job = pytorchjob(name, namespace=namespace, workers=1, gpus=0, cpu="100m")
    job["metadata"]["labels"] = {
        "fleet.dev/managed-by": managed_by,
        "fleet.dev/fleet-uid": fleet_uid,
    }
    return job


def test_the_sweep_deletes_a_member_copy_whose_fleet_object_is_gone(live: Fleet, namespace):
    member = live.clusters["member-1"]
    # A copy whose fleet object exists (a dispatched job's), made first.
    policy = gang_policy("gang", namespace)
    policy["spec"]["placement"]["clusterAffinity"] = {"clusterNames": ["member-1"]}
    live.api.create(policy)
    live.api.create(pytorchjob("a-kept", namespace=namespace, workers=1, gpus=0, cpu="100m"))
    wait_until(lambda: live.copies(namespace, "a-kept") == ["member-1"], what="the copy made")
    # Another fleet's copy of an object this fleet never had, then one of this fleet's whose
    # fleet object is gone. The member's job watch lists them in this order, and a sweep
    # looks at every copy in that order.
    member.create(_copy(namespace, "b-foreign", "another-fleet", str(uuid.uuid4())))
    leader = live.leader()
    assert leader is not None
    swept = live.metrics(leader).value("fleet_orphaned_copies_deleted_total", cluster="member-1")
    member.create(_copy(namespace, "c-orphan", FLEET_ID, str(uuid.uuid4())))

    wait_until(
        lambda: member.get(*PYTORCHJOB, "c-orphan", namespace) is None,
        timeout=30 * SWEEP_SECONDS,
        what="the sweep to delete the orphaned copy",
    )
    assert live.leader() == leader, "the leader changed: the counters are another replica's"
    deleted = live.metrics(leader).value("fleet_orphaned_copies_deleted_total", cluster="member-1")
    assert deleted >= swept + 1
    # The sweep that deleted it had passed over these two.
    assert member.get(*PYTORCHJOB, "b-foreign", namespace) is not None
    assert live.copies(namespace, "a-kept") == ["member-1"]


def _broken_kubeconfig() -> str:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'https://127.0.0.1:1', "
        "insecure-skip-tls-verify: true}}]\n"
        "users: [{name: x, user: {token: abc}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
    )


def test_an_edited_kubeconfig_secret_is_taken_in_without_touching_the_member_cluster(
    live: Fleet, namespace
):
    """The Secret is watched: rotating it reconnects the member, both ways."""
    name = f"rotating-{namespace[-4:]}"
    secret_name = f"{name}-kubeconfig"

    def secret(kubeconfig: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret_name, "namespace": SECRETS_NAMESPACE},
            "stringData": {"kubeconfig": kubeconfig},
        }

    def ready(status: str, reason: str) -> dict[str, Any] | None:
        condition = live.member_condition(name) or {}
        return (
            condition
            if (condition.get("status"), condition.get("reason"))
            == (
                status,
                reason,
            )
            else None
        )

    # A cluster no other MemberCluster is (one cluster, one registration: member-3 would be
    # refused as a duplicate), as the join tests use it.
    valid = yaml.safe_dump(
        single_context(read_kubeconfig_file(live.sandbox.kubeconfig), KOORDINATOR_MEMBER)
    )
    live.api.apply(secret(_broken_kubeconfig()))
    live.api.create(
        {
            "apiVersion": "fleet.dev/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": name},
            "spec": {"kubeconfigSecretRef": {"namespace": SECRETS_NAMESPACE, "name": secret_name}},
        }
    )
    try:
        refused = wait_until(
            lambda: ready("False", "KubeconfigInvalid"), what="the broken kubeconfig refused"
        )
        assert "insecure-skip-tls-verify" in refused["message"]
        generation = live.api.get(*MEMBER_CLUSTER, name)["metadata"]["generation"]

        live.api.apply(secret(valid))
        wait_until(lambda: ready("True", "ClusterReady"), what="Ready on the rotated Secret")
        mc = live.api.get(*MEMBER_CLUSTER, name)
        assert mc["status"]["nodeCount"] >= 1 and mc["status"]["kubernetesVersion"]

        live.api.apply(secret(_broken_kubeconfig()))
        wait_until(
            lambda: ready("False", "KubeconfigInvalid"), what="NotReady on the broken Secret"
        )
        # The MemberCluster itself was never edited: the Secret's watch did it all.
        assert live.api.get(*MEMBER_CLUSTER, name)["metadata"]["generation"] == generation
    finally:
        live.api.delete(*MEMBER_CLUSTER, name)
        live.api.delete("v1", "Secret", secret_name, SECRETS_NAMESPACE)
