"""What `fleet join` stores of how it reached the member: the server, the CA, and the
kubeconfig's tls-server-name and proxy-url, which the controller then connects with."""

from __future__ import annotations

from fleet.api.membership import member_kubeconfig
from fleet.join import endpoint_of, member_client
from fleet.kubeconfig import check_kubeconfig
from tests.kube.pki import inline_kubeconfig, make_pem


def test_join_stores_the_server_name_and_proxy_the_member_was_reached_with() -> None:
    config = inline_kubeconfig(make_pem(), server="https://10.0.0.7:6443")
    cluster = config["clusters"][0]["cluster"]
    cluster["tls-server-name"] = "member.internal"
    cluster["proxy-url"] = "http://proxy.corp:3128"
    client, _ = member_client(config)
    with client:
        assert client.connection.tls_server_name == "member.internal"
        assert client.connection.proxy == "http://proxy.corp:3128"
        endpoint = endpoint_of(client.connection)

    stored = member_kubeconfig("m1", endpoint, "fleet-member/fleet", "token")
    assert stored["clusters"][0]["cluster"] == {
        "server": "https://10.0.0.7:6443",
        "certificate-authority-data": cluster["certificate-authority-data"],
        "tls-server-name": "member.internal",
        "proxy-url": "http://proxy.corp:3128",
    }
    # The controller's reading of the stored Secret connects the same way.
    connection = check_kubeconfig(stored).connection
    assert (connection.tls_server_name, connection.proxy) == (
        "member.internal",
        "http://proxy.corp:3128",
    )


def test_a_member_without_them_stores_neither() -> None:
    client, _ = member_client(inline_kubeconfig(make_pem()))
    with client:
        endpoint = endpoint_of(client.connection)
    stored = member_kubeconfig("m1", endpoint, "fleet-member/fleet", "token")
    assert set(stored["clusters"][0]["cluster"]) == {"server", "certificate-authority-data"}
