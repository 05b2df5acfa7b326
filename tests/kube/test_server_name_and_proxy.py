"""A kubeconfig's tls-server-name and proxy-url, honored as kubectl honors them, by every client
fleet builds from a Connection: the sync one, the async one and kopf's aiohttp session.

The API server here is a real TLS server on 127.0.0.1 whose certificate names only
`member.internal`: a client that dials 127.0.0.1 completes the handshake only if it sends that
name and checks the certificate against it. Its key is loaded the way fleet loads client keys
(fleet.kube._tls, a memory-only file): no key material is written to disk.
"""

from __future__ import annotations

import datetime as dt
import json
import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kopf._cogs.clients.auth import APIContext

from fleet.controller.operator import kopf_login
from fleet.kube import (
    Connection,
    KubeClient,
    KubeconfigError,
    SyncKubeClient,
    Trust,
    Unreachable,
    from_kubeconfig,
)
from fleet.kube._tls import load_client_certificate
from tests.kube.pki import Serving, b64, make_serving

NAME = "member.internal"
VERSION = {"major": "1", "minor": "30", "gitVersion": "v1.30.0"}


class TlsApi:
    """An HTTPS server on 127.0.0.1 that answers GET /version; notes each handshake's SNI."""

    def __init__(self, serving: Serving) -> None:
        self.names: list[str | None] = []
        self.answered = 0
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        load_client_certificate(context, serving.cert, serving.key)  # through memory only

        def note_name(_obj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
            self.names.append(name)

        context.sni_callback = note_name
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                body = json.dumps(VERSION).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                api.answered += 1

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ConnectProxy:
    """A tiny HTTP CONNECT proxy on 127.0.0.1; notes every tunnel's target."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = self.request.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
                if method != "CONNECT":
                    self.request.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                    return
                proxy.targets.append(target)
                host, port = target.rsplit(":", 1)
                with socket.create_connection((host, int(port)), timeout=5) as upstream:
                    self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    _pipe(self.request, upstream)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    peers = {a: b, b: a}
    while True:
        ready, _, _ = select.select(list(peers), [], [], 10)
        if not ready:
            return
        for sock in ready:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


@pytest.fixture(autouse=True)
def no_proxy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def serving() -> Serving:
    return make_serving(NAME)


@pytest.fixture
def api(serving: Serving) -> Iterator[TlsApi]:
    server = TlsApi(serving)
    yield server
    server.close()


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    server = ConnectProxy()
    yield server
    server.close()


def member_kubeconfig(
    serving: Serving, server: str, *, tls_server_name: str | None = NAME, proxy: str | None = None
) -> dict[str, Any]:
    """A member's kubeconfig as `fleet join` stores it: server, CA, one token."""
    cluster: dict[str, Any] = {"server": server, "certificate-authority-data": b64(serving.ca)}
    if tls_server_name:
        cluster["tls-server-name"] = tls_server_name
    if proxy:
        cluster["proxy-url"] = proxy
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "m", "cluster": cluster}],
        "users": [{"name": "fleet", "user": {"token": "t"}}],
        "contexts": [{"name": "m", "context": {"cluster": "m", "user": "fleet"}}],
        "current-context": "m",
    }


def connect(config: dict[str, Any]) -> Connection:
    return from_kubeconfig(config, trust=Trust.SECRET)


async def kopf_version(connection: Connection) -> Any:
    """GET /version through the aiohttp session kopf itself makes from fleet's login."""
    context = APIContext(kopf_login(connection, dt.datetime.now(dt.UTC)))
    try:
        async with context.session.get(f"{context.server}/version") as response:
            return await response.json()
    finally:
        await context.session.close()


# -- tls-server-name ---------------------------------------------------------------------------


async def test_tls_server_name_is_sent_and_checked_by_every_client(
    serving: Serving, api: TlsApi
) -> None:
    connection = connect(member_kubeconfig(serving, api.url))
    assert connection.tls_server_name == NAME

    with SyncKubeClient(connection, retries=1) as client:
        assert client.version() == VERSION
    async with KubeClient(connection, retries=1) as aclient:
        assert await aclient.version() == VERSION
    assert await kopf_version(connection) == VERSION

    assert api.answered == 3
    assert api.names == [NAME, NAME, NAME]  # SNI: the kubeconfig's name, not 127.0.0.1


async def test_without_tls_server_name_the_certificate_does_not_verify(
    serving: Serving, api: TlsApi
) -> None:
    connection = connect(member_kubeconfig(serving, api.url, tls_server_name=None))
    with SyncKubeClient(connection, retries=1) as client, pytest.raises(Unreachable) as sync_err:
        client.version()
    async with KubeClient(connection, retries=1) as aclient:
        with pytest.raises(Unreachable) as async_err:
            await aclient.version()
    for err in (sync_err, async_err):
        assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)
    assert api.answered == 0


async def test_a_certificate_for_another_name_still_fails(serving: Serving, api: TlsApi) -> None:
    connection = connect(member_kubeconfig(serving, api.url, tls_server_name="other.internal"))
    with SyncKubeClient(connection, retries=1) as client, pytest.raises(Unreachable) as err:
        client.version()
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)
    assert api.names == ["other.internal"] and api.answered == 0


def test_tls_server_name_with_the_systems_cas_still_makes_a_context() -> None:
    config = member_kubeconfig(make_serving(NAME), "https://10.0.0.1:6443")
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    connection = connect(config)
    assert isinstance(connection.ssl_context, ssl.SSLContext)
    assert connection.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert connection.ssl_context.check_hostname


# -- proxy-url ---------------------------------------------------------------------------------


async def test_proxy_url_tunnels_every_client_with_the_server_name(
    serving: Serving, api: TlsApi, proxy: ConnectProxy
) -> None:
    connection = connect(member_kubeconfig(serving, api.url, proxy=proxy.url))
    assert connection.proxy == proxy.url

    with SyncKubeClient(connection, retries=1) as client:
        assert client.version() == VERSION
    async with KubeClient(connection, retries=1) as aclient:
        assert await aclient.version() == VERSION
    assert await kopf_version(connection) == VERSION

    target = api.url.removeprefix("https://")
    assert proxy.targets == [target, target, target]
    assert api.names == [NAME, NAME, NAME]  # TLS end to end through the tunnel, same checks


def test_an_injected_transport_replaces_the_proxy_too(serving: Serving) -> None:
    connection = connect(member_kubeconfig(serving, "https://10.0.0.1:6443", proxy="http://p:3128"))
    assert connection.client_options()["proxy"] == "http://p:3128"
    assert connection.client_options(transport=object())["proxy"] is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("socks5://127.0.0.1:1080", "socks5 proxies are not supported; use an http:// or https://"),
        ("ftp://proxy:21", "'ftp://proxy:21' must be an http:// or https:// URL"),
        ("http://proxy:port", "is not a valid URL"),
    ],
)
def test_a_proxy_fleet_cannot_speak_is_refused_naming_the_field(
    serving: Serving, value: str, message: str
) -> None:
    config = member_kubeconfig(serving, "https://10.0.0.1:6443", proxy=value)
    for trust in Trust:
        with pytest.raises(KubeconfigError) as err:
            from_kubeconfig(config, trust=trust)
        (problem,) = err.value.problems
        assert problem.field == "clusters[0].cluster.proxy-url"
        assert message in problem.message
