"""Tokens: a service-account token is re-read when the kubelet rotates it, by fleet's clients
(on the next request) and by kopf (at the expiration the login handler sets)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from pathlib import Path

import httpx

from fleet.controller.operator import kopf_login
from fleet.kube import SyncKubeClient, TokenFile, in_cluster, refresh_deadline
from tests.kube.fakes import FakeApi
from tests.kube.pki import make_pem

NOW = dt.datetime(2025, 1, 1, 12, 0, tzinfo=dt.UTC)


def jwt(**claims: object) -> str:
    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.signature"


def rotate(path: Path, token: str) -> None:
    """As the kubelet does: a new file swapped in (new inode), not an edit in place."""
    fresh = path.with_suffix(".new")
    fresh.write_text(token)
    os.replace(fresh, path)


def service_account(tmp_path: Path, token: str) -> Path:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text(token)
    (folder / "ca.crt").write_bytes(make_pem().ca)
    (folder / "namespace").write_text("fleet-system\n")
    return folder


def test_the_client_sends_the_rotated_token(tmp_path: Path) -> None:
    folder = service_account(tmp_path, "first")
    connection = in_cluster(folder, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert connection is not None
    assert connection.server == "https://10.0.0.1:443"
    assert connection.default_namespace == "fleet-system"
    api = FakeApi()
    client = SyncKubeClient(connection, transport=api.sync_transport())
    client.version()
    client.version()
    rotate(folder / "token", "second")
    client.version()
    sent = [r.headers["Authorization"] for r in api.requests]
    assert sent == ["Bearer first", "Bearer first", "Bearer second"]
    assert isinstance(connection.auth, TokenFile) and connection.auth.reads == 2


def test_outside_a_pod_there_is_no_in_cluster_connection(tmp_path: Path) -> None:
    folder = service_account(tmp_path, "t")
    assert in_cluster(folder, {}) is None
    assert in_cluster(tmp_path / "missing", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) is None


def test_an_ipv6_service_host_is_bracketed(tmp_path: Path) -> None:
    folder = service_account(tmp_path, "t")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
    connection = in_cluster(folder, env)
    assert connection is not None and connection.server == "https://[fd00::1]:6443"


def test_kopf_logs_in_again_before_the_token_expires(tmp_path: Path) -> None:
    issued = int(NOW.timestamp())
    folder = service_account(tmp_path, jwt(iat=issued, exp=issued + 3600))
    connection = in_cluster(folder, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert connection is not None
    info = kopf_login(connection, NOW)
    assert info.expiration == NOW + dt.timedelta(seconds=3240)  # 90% of an hour
    assert info.token == connection.bearer_token()
    assert info.as_ssl_context() is connection.ssl_context  # the pod's CA, read once
    assert info.certificate_data is None and info.private_key_data is None
    rotate(folder / "token", "second")
    assert kopf_login(connection, NOW).token == "second"


def test_refresh_deadline() -> None:
    issued = int(NOW.timestamp())
    hour = jwt(iat=issued, exp=issued + 3600)
    assert refresh_deadline(hour, NOW) == NOW + dt.timedelta(seconds=3240)
    # Never sooner than `shortest`: a token past its prime causes no login storm.
    later = NOW + dt.timedelta(hours=5)
    assert refresh_deadline(hour, later) == later + dt.timedelta(seconds=30)
    # An extended token (exp a year out) is refreshed by its warnafter, as the kubelet does.
    extended = jwt(
        iat=issued, exp=issued + 365 * 86400, **{"kubernetes.io": {"warnafter": issued + 3600}}
    )
    assert refresh_deadline(extended, NOW) == NOW + dt.timedelta(seconds=3240)
    # A long-lived token is rotated by the kubelet after a day anyway.
    week = jwt(iat=issued, exp=issued + 7 * 86400)
    assert refresh_deadline(week, NOW) == NOW + dt.timedelta(hours=25)
    # A token that is not a JWT says nothing: read again after `longest`.
    assert refresh_deadline("opaque", NOW) == NOW + dt.timedelta(minutes=10)


def test_a_fixed_token_sets_no_expiration() -> None:
    from fleet.kube import from_kubeconfig

    config = {
        "clusters": [{"name": "c", "cluster": {"server": "https://api.test"}}],
        "users": [{"name": "u", "user": {"token": "abc"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    connection = from_kubeconfig(config)
    info = kopf_login(connection, NOW)
    assert (info.token, info.expiration) == ("abc", None)
    api = FakeApi()
    SyncKubeClient(connection, transport=api.sync_transport()).version()
    assert api.requests[0].headers["Authorization"] == "Bearer abc"
    assert isinstance(api.requests[0], httpx.Request)
