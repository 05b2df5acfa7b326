"""Connections from kubeconfigs: files relative to the kubeconfig as kubectl reads them,
problems that name their field, and TLS material that never lands on disk."""

from __future__ import annotations

import datetime as dt
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.controller.operator import kopf_login
from fleet.kube import KubeconfigError, KubeError, Trust, from_kubeconfig, load
from fleet.kube import _tls as tls
from fleet.kubeconfig import validate_kubeconfig
from tests.kube.pki import b64, inline_kubeconfig, make_pem

NOW = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def fresh_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield folder
    tempfile.tempdir = None


def problems(config: dict[str, Any], **kw: Any) -> list[str]:
    with pytest.raises(KubeconfigError) as err:
        from_kubeconfig(config, **kw)
    assert isinstance(err.value, KubeError) and isinstance(err.value, ValueError)
    return [str(p) for p in err.value.problems]


def test_inline_credentials_make_a_client_certificate_context() -> None:
    pem = make_pem()
    connection = from_kubeconfig(inline_kubeconfig(pem))
    assert isinstance(connection.ssl_context, ssl.SSLContext)
    assert connection.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert connection.tls.key is not None and connection.tls.key.path is None
    assert connection.tls.key.data == pem.key
    assert connection.auth is None
    info = kopf_login(connection, NOW)
    # kopf connects with fleet's own SSLContext: no PEM data it would write to a file.
    assert info.as_ssl_context() is connection.ssl_context
    assert (info.ca_path, info.certificate_path, info.private_key_path) == (None, None, None)
    assert info.private_key_data is None and info.certificate_data is None
    assert info.expiration is None


def test_file_paths_are_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    pem = make_pem()
    (tmp_path / "pki").mkdir()
    for name, data in (("ca.crt", pem.ca), ("admin.crt", pem.cert), ("admin.key", pem.key)):
        (tmp_path / "pki" / name).write_bytes(data)
    (tmp_path / "token").write_text("from-a-file\n")
    config = inline_kubeconfig(pem)
    config["clusters"][0]["cluster"] = {
        "server": "https://127.0.0.1:6443",
        "certificate-authority": "pki/ca.crt",
    }
    config["users"][0]["user"] = {
        "client-certificate": "pki/admin.crt",
        "client-key": "pki/admin.key",
    }
    config["contexts"][0]["context"]["namespace"] = "team-a"
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(config))
    connection = load(str(file))
    assert connection.default_namespace == "team-a"
    assert connection.tls.key is not None and connection.tls.key.path == tmp_path / "pki/admin.key"
    assert connection.tls.ca is not None and connection.tls.ca.path == tmp_path / "pki/ca.crt"
    info = kopf_login(connection, NOW)
    # kopf connects with the context fleet built from the user's files; no data, no copies.
    assert info.as_ssl_context() is connection.ssl_context
    assert info.private_key_data is None and info.certificate_data is None


def test_a_context_can_be_chosen_and_a_missing_one_is_named() -> None:
    config = inline_kubeconfig(make_pem())
    config["contexts"].append({"name": "other", "context": {"cluster": "c", "user": "u"}})
    config["contexts"][1]["context"]["namespace"] = "ns-2"
    assert from_kubeconfig(config, "other").default_namespace == "ns-2"
    assert problems(config, context="nope") == [
        "context: context 'nope' not found ('ctx', 'other')"
    ]


def test_problems_name_their_fields() -> None:
    config = inline_kubeconfig(make_pem())
    config["users"][0]["user"]["client-key-data"] = "not base64!"
    config["users"][0]["user"]["auth-provider"] = {"name": "gcp"}
    config["clusters"][0]["cluster"]["server"] = ""
    assert sorted(problems(config, trust=Trust.USER)) == [
        "clusters[0].cluster.server: required",
        "users[0].user.auth-provider: auth-provider plugins are not supported (kubectl removed "
        "its own too); log in with the provider's exec plugin (gke-gcloud-auth-plugin, kubelogin)",
        "users[0].user.client-key-data: is not valid base64",
    ]


def test_a_kubeconfig_in_memory_gets_the_secret_rules_unless_it_is_the_users() -> None:
    config = inline_kubeconfig(make_pem())
    config["users"][0]["user"] = {"exec": {"command": "aws"}, "tokenFile": "/etc/shadow"}
    assert problems(config) == [
        "users[0].user.tokenFile: file paths are not allowed; use token",
        "users[0].user.exec: exec plugins are not allowed in a kubeconfig Secret; join the "
        "member with `fleet join`, which stores a token for fleet's own ServiceAccount",
    ]


def test_a_certificate_that_does_not_match_its_key_is_named() -> None:
    config = inline_kubeconfig(make_pem())
    config["users"][0]["user"]["client-key-data"] = b64(make_pem().key)
    (problem,) = problems(config)
    assert problem.startswith("users[0].user: client certificate and key are not a usable pair")


def test_a_ca_that_is_not_pem_is_named() -> None:
    config = inline_kubeconfig(make_pem())
    config["clusters"][0]["cluster"]["certificate-authority-data"] = b64(b"hello")
    (problem,) = problems(config)
    assert problem.startswith("clusters[0].cluster.certificate-authority-data: not a usable CA")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    config = inline_kubeconfig(make_pem())
    config["users"][0]["user"] = {"tokenFile": "nowhere"}
    (problem,) = problems(config, base=tmp_path, trust=Trust.USER)
    assert problem.startswith(f"users[0].user.tokenFile: cannot read {tmp_path / 'nowhere'}")
    with pytest.raises(KubeconfigError, match=r"\(file\): cannot read"):
        load(str(tmp_path / "no-such-kubeconfig"))


def test_without_memfd_the_key_file_is_deleted_at_once(
    fresh_tmpdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tls, "memfd_available", lambda: False)
    seen: list[Path] = []
    load_cert_chain = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: Any, *args: Any, **kw: Any) -> None:
        seen.append(Path(certfile))
        load_cert_chain(self, certfile, *args, **kw)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    connection = from_kubeconfig(inline_kubeconfig(make_pem()))
    assert isinstance(connection.ssl_context, ssl.SSLContext)
    assert [p.parent for p in seen] == [fresh_tmpdir]
    assert list(fresh_tmpdir.iterdir()) == []


def test_with_memfd_openssl_reads_from_memory(
    fresh_tmpdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not tls.memfd_available():
        pytest.skip("no memfd_create here")
    seen: list[str] = []
    load_cert_chain = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: Any, *args: Any, **kw: Any) -> None:
        seen.append(str(certfile))
        load_cert_chain(self, certfile, *args, **kw)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    from_kubeconfig(inline_kubeconfig(make_pem()))
    assert len(seen) == 1 and seen[0].startswith("/proc/self/fd/")
    assert not Path(seen[0]).exists()  # closed right after loading


@pytest.mark.parametrize(
    ("section", "body", "expect"),
    [
        (
            "users",
            {"username": "admin", "password": "pw"},
            "users[0].user.username: basic authentication is not supported; "
            "use a token or a client certificate",
        ),
        (
            "users",
            {"client-certificate-data": "x"},
            "users[0].user.client-key-data: required with its pair",
        ),
        (
            "users",
            {"client-key-data": "x"},
            "users[0].user.client-certificate-data: required with its pair",
        ),
        (
            "clusters",
            {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True},
            "clusters[0].cluster.insecure-skip-tls-verify: insecure TLS verification is not "
            "allowed; provide certificate-authority-data",
        ),
        (
            "clusters",
            {"server": "https://127.0.0.1:6443", "tls-server-name": ""},
            "clusters[0].cluster.tls-server-name: must be a host name",
        ),
    ],
)
def test_a_member_secret_and_a_connection_refuse_with_the_same_words(
    section: str, body: dict[str, Any], expect: str
) -> None:
    """The kubeconfig rules have one home (fleet.kube.entry_problems): a member's Secret checked
    by fleet.kubeconfig and a Connection made by from_kubeconfig say the same thing."""
    config = inline_kubeconfig(make_pem())
    inner = section[:-1]
    config[section][0][inner] = body
    assert expect in [str(p) for p in validate_kubeconfig(config)]
    assert expect in problems(config, trust=Trust.SECRET)
    if "insecure" not in expect:
        assert expect in problems(config, trust=Trust.USER)


def test_the_users_own_kubeconfig_may_skip_tls_verification() -> None:
    config = inline_kubeconfig(make_pem())
    config["clusters"][0]["cluster"] = {
        "server": "https://127.0.0.1:6443",
        "insecure-skip-tls-verify": "true",
    }
    config["users"][0]["user"] = {"token": "t"}
    connection = from_kubeconfig(config, trust=Trust.USER)
    assert connection.insecure and connection.ssl_context is False
    assert kopf_login(connection, NOW).insecure is True
    # With a client certificate to present, the context carries it and verifies nothing.
    config["users"][0]["user"] = inline_kubeconfig(make_pem())["users"][0]["user"]
    with_certificate = from_kubeconfig(config, trust=Trust.USER)
    assert isinstance(with_certificate.ssl_context, ssl.SSLContext)
    assert with_certificate.insecure and not with_certificate.ssl_context.check_hostname
