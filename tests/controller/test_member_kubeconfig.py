"""A member's kubeconfig Secret is parsed and checked once (fleet.kubeconfig), and the member
is connected with the Connection that check built: its tls-server-name and proxy-url included,
never read again from the raw kubeconfig."""

from __future__ import annotations

from fleet.api import constants as c
from tests.controller.registry_harness import SECRET_NAMESPACE, Members

URL = "https://10.0.0.7:6443"


async def test_the_member_is_connected_with_the_connection_the_secret_check_built():
    members = Members()
    members.server(URL)
    try:
        members.secret(
            "m1", URL, **{"tls-server-name": "m1.internal", "proxy-url": "http://proxy:3128"}
        )
        await members.registry.sync(members.member_cluster("m1"))
        (connection,) = members.connections
        assert connection.source == f"Secret {SECRET_NAMESPACE}/m1-kubeconfig key 'kubeconfig'"
        assert connection.server == URL
        assert (connection.tls_server_name, connection.proxy) == (
            "m1.internal",
            "http://proxy:3128",
        )
    finally:
        await members.stop()


async def test_a_secret_that_breaks_a_rule_never_connects_and_says_which_field():
    members = Members()
    members.server(URL)
    try:
        members.secret("m1", URL, **{"proxy-url": "socks5://proxy:1080"})
        await members.registry.sync(members.member_cluster("m1"))
        member = members.registry.get("m1")
        assert member is not None and member.connection is None
        assert members.connections == []
        assert member.health.reason == c.REASON_KUBECONFIG_INVALID
        assert (
            "clusters[0].cluster.proxy-url: socks5 proxies are not supported"
            in member.health.message
        )
    finally:
        await members.stop()
