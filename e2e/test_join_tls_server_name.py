"""A member reached as kubectl reaches it with `tls-server-name`: joined, Ready and working.

Each sandbox API server also serves a certificate that names only SNI_NAME, signed by a CA of
its own (fleet/sandbox/pki.py, kube-apiserver's --tls-sni-cert-key). A kubeconfig that trusts
only that CA reaches the member at 127.0.0.1 only if the client sends SNI_NAME and checks the
certificate against it: `fleet join` does with the user's kubeconfig, stores the name, and the
controller connects with it."""

from __future__ import annotations

import base64
import contextlib
import copy
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from fleet.install import SECRETS_NAMESPACE, single_context
from fleet.join import join_member
from fleet.join.join import identity_objects
from fleet.kube import (
    NotFound,
    SyncKubeClient,
    Trust,
    Unreachable,
    from_kubeconfig,
    load,
    read_kubeconfig_file,
)
from fleet.sandbox.pki import SNI_NAME
from fleet.testing.kube import wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER

from .conftest import FLEET_ID, MEMBER_CLUSTER, Fleet

#: A cluster is joined once, so the member joined here is one the e2e fleet holds under no
#: other name while this module runs: the Koordinator member, joined elsewhere only inside the
#: modules about it (conftest.joined_apart). Only its API server and its SNI certificate count.
MEMBER = KOORDINATOR_MEMBER


@pytest.fixture
def joined_name(live: Fleet) -> Iterator[tuple[str, str]]:
    """A MemberCluster for MEMBER with its own identity (name, member namespace), unjoined
    afterwards whatever the test left: the MemberCluster, its kubeconfig Secret, and its
    identity in the member (admission policies and bindings included)."""
    suffix = secrets.token_hex(2)
    name, namespace = f"sni-{suffix}", f"fleet-sni-{suffix}"
    yield name, namespace
    live.api.delete(*MEMBER_CLUSTER, name)
    live.api.delete("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE)
    member = live.clusters[MEMBER]
    for api_version, kind, obj_name, obj_namespace in identity_objects(namespace):
        with contextlib.suppress(NotFound):  # a kind the member does not serve: none of it
            member.delete(api_version, kind, obj_name, obj_namespace)


def _by_name(live: Fleet) -> dict[str, Any]:
    """MEMBER's context in the sandbox's kubeconfig, trusting only the SNI certificate's CA
    and naming SNI_NAME, as a user whose cluster is known by that name alone would have it."""
    config = single_context(read_kubeconfig_file(live.sandbox.kubeconfig), MEMBER)
    cluster = config["clusters"][0]["cluster"]
    pki = live.sandbox.cluster(MEMBER).pki
    cluster["certificate-authority-data"] = base64.b64encode(pki.sni_ca_crt.read_bytes()).decode()
    cluster["tls-server-name"] = SNI_NAME
    return config


def _stored(live: Fleet, name: str) -> dict[str, Any]:
    secret = live.api.get("v1", "Secret", f"{name}-kubeconfig", SECRETS_NAMESPACE)
    assert secret is not None
    return dict(yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"])))


def test_a_member_reached_by_its_tls_server_name_joins_and_works(
    live: Fleet, joined_name: tuple[str, str]
) -> None:
    name, namespace = joined_name
    config = _by_name(live)

    # Without the name, that CA verifies nothing at 127.0.0.1: the name is what reaches it.
    bare = copy.deepcopy(config)
    del bare["clusters"][0]["cluster"]["tls-server-name"]
    with (
        SyncKubeClient(from_kubeconfig(bare, trust=Trust.USER), retries=1) as client,
        pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.version()

    with SyncKubeClient(load(str(live.sandbox.kubeconfig), "fleet"), name="fleet") as fleet:
        join_member(fleet, name, config, {}, namespace=namespace, fleet_id=FLEET_ID)

    (cluster,) = _stored(live, name)["clusters"]
    assert cluster["cluster"]["tls-server-name"] == SNI_NAME
    assert (
        cluster["cluster"]["certificate-authority-data"]
        == (config["clusters"][0]["cluster"]["certificate-authority-data"])
    )

    def ready() -> bool:
        condition = live.member_condition(name) or {}
        return condition.get("status") == "True"

    wait_until(ready, timeout=60, what=f"{name} Ready through {SNI_NAME}")
    # What the fleet holds reaches the member by the name, with fleet's own token.
    stored = _stored(live, name)
    with SyncKubeClient(from_kubeconfig(stored), name=name) as member:
        assert member.list("v1", "Node")["items"]
