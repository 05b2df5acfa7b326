"""Every kubeconfig rule, each problem naming its field, and the tolerant Secret reader."""

from __future__ import annotations

import base64
import copy
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from fleet.kube import JOIN_HINT
from fleet.kubeconfig import (
    KubeconfigError,
    ResolvedKubeconfig,
    check_kubeconfig,
    kubeconfig_from_secret,
    kubeconfig_text_from_secret,
    load_kubeconfig,
    validate_kubeconfig,
)
from tests.kube.pki import b64, make_pem

# Real PEM: a validated kubeconfig is one OpenSSL accepts (the Connection is built with it).
_PEM = make_pem()
CA, CERT, KEY = b64(_PEM.ca), b64(_PEM.cert), b64(_PEM.key)


def good() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "member",
                "cluster": {
                    "server": "https://member.example.com:6443",
                    "certificate-authority-data": CA,
                },
            }
        ],
        "users": [{"name": "fleet", "user": {"token": "abc.def"}}],
        "contexts": [
            {"name": "ctx", "context": {"cluster": "member", "user": "fleet", "namespace": "fleet"}}
        ],
        "current-context": "ctx",
    }


def fields(config: Any) -> list[str]:
    return [p.field for p in validate_kubeconfig(config)]


def messages(config: Any) -> list[str]:
    return [str(p) for p in validate_kubeconfig(config)]


def test_a_good_kubeconfig_resolves() -> None:
    assert validate_kubeconfig(good()) == []
    resolved = check_kubeconfig(good(), source="Secret fleet-system/m key 'kubeconfig'")
    assert resolved == ResolvedKubeconfig(
        config=good(),
        context="ctx",
        cluster="member",
        user="fleet",
        server="https://member.example.com:6443",
        namespace="fleet",
        connection=resolved.connection,
    )
    # Parsed and checked once: the Connection comes with it, and says where it came from.
    assert resolved.connection.server == "https://member.example.com:6443"
    assert resolved.connection.source == "Secret fleet-system/m key 'kubeconfig'"
    assert resolved.token == "abc.def"


def test_client_certificate_credentials_are_fine() -> None:
    cfg = good()
    cfg["users"][0]["user"] = {"client-certificate-data": CERT, "client-key-data": KEY}
    assert validate_kubeconfig(cfg) == []


def test_yaml_text_is_accepted() -> None:
    assert validate_kubeconfig(yaml.safe_dump(good())) == []
    assert check_kubeconfig(yaml.safe_dump(good()).encode()).server.startswith("https://")


def test_insecure_skip_tls_verify_is_refused() -> None:
    cfg = good()
    cfg["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    assert messages(cfg) == [
        "clusters[0].cluster.insecure-skip-tls-verify: insecure TLS verification is not allowed; "
        "provide certificate-authority-data"
    ]
    cfg["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = False
    assert validate_kubeconfig(cfg) == []


def test_exec_plugin_is_refused() -> None:
    cfg = good()
    cfg["users"][0]["user"]["exec"] = {
        "command": "aws",
        "apiVersion": "client.authentication.k8s.io/v1",
    }
    assert messages(cfg) == [
        "users[0].user.exec: exec plugins are not allowed in a kubeconfig Secret; "
        "join the member with `fleet join`, which stores a token for fleet's own ServiceAccount"
    ]


def test_auth_provider_is_refused() -> None:
    cfg = good()
    cfg["users"][0]["user"]["auth-provider"] = {"name": "gcp"}
    assert messages(cfg) == [
        f"users[0].user.auth-provider: auth-provider plugins are not allowed "
        f"in a kubeconfig Secret; {JOIN_HINT}"
    ]


@pytest.mark.parametrize(
    ("section", "key", "inline"),
    [
        ("clusters", "certificate-authority", "certificate-authority-data"),
        ("users", "client-certificate", "client-certificate-data"),
        ("users", "client-key", "client-key-data"),
        ("users", "tokenFile", "token"),
    ],
)
def test_file_paths_are_refused(section: str, key: str, inline: str) -> None:
    cfg = good()
    inner = "cluster" if section == "clusters" else "user"
    cfg[section][0][inner][key] = "/etc/kubernetes/pki/file"
    problems = validate_kubeconfig(cfg)
    assert f"{section}[0].{inner}.{key}" in [p.field for p in problems]
    assert any(f"file paths are not allowed; use {inline}" in str(p) for p in problems)


@pytest.mark.parametrize(
    ("server", "expect"),
    [
        ("http://member.example.com", "must use https"),
        ("member.example.com:6443", "must use https"),
        ("https://user:pw@member.example.com", "credentials in the URL"),
        ("https://bad_host.example.com", "not a valid host name"),
        ("https://", "has no host"),
        ("https://member.example.com:99999", "not a valid URL"),
        ("https://member.example.com/?x=1", "query or fragment"),
        ("", "required"),
    ],
)
def test_server_must_be_https_with_a_valid_host(server: str, expect: str) -> None:
    cfg = good()
    cfg["clusters"][0]["cluster"]["server"] = server
    problems = validate_kubeconfig(cfg)
    assert [p.field for p in problems] == ["clusters[0].cluster.server"] * len(problems)
    assert any(expect in p.message for p in problems), problems


@pytest.mark.parametrize(
    "server",
    [
        "https://10.0.0.1:6443",
        "https://[2001:db8::1]:6443",
        "HTTPS://API.EXAMPLE.COM",
        "https://rancher.example.com/k8s/clusters/c-abc",
    ],
)
def test_valid_servers(server: str) -> None:
    cfg = good()
    cfg["clusters"][0]["cluster"]["server"] = server
    assert validate_kubeconfig(cfg) == []


def test_missing_server() -> None:
    cfg = good()
    del cfg["clusters"][0]["cluster"]["server"]
    assert fields(cfg) == ["clusters[0].cluster.server"]


def test_current_context_is_required() -> None:
    cfg = good()
    del cfg["current-context"]
    assert messages(cfg) == ["current-context: required (contexts: 'ctx')"]


def test_current_context_must_exist() -> None:
    cfg = good()
    cfg["current-context"] = "nope"
    assert messages(cfg) == ["current-context: context 'nope' not found ('ctx')"]


def test_context_cluster_and_user_must_exist() -> None:
    cfg = good()
    cfg["contexts"][0]["context"] = {"cluster": "ghost", "user": "nobody"}
    assert messages(cfg) == [
        "contexts[0].context.cluster: cluster 'ghost' not found in clusters",
        "contexts[0].context.user: user 'nobody' not found in users",
    ]
    cfg["contexts"][0]["context"] = {}
    assert fields(cfg) == ["contexts[0].context.cluster", "contexts[0].context.user"]


def test_resolution_must_be_unambiguous() -> None:
    cfg = good()
    cfg["clusters"].append(copy.deepcopy(cfg["clusters"][0]))
    cfg["contexts"].append(copy.deepcopy(cfg["contexts"][0]))
    assert messages(cfg) == [
        "clusters[1].name: duplicate name 'member'",
        "contexts[1].name: duplicate name 'ctx'",
    ]
    with pytest.raises(KubeconfigError):
        check_kubeconfig(cfg)


def test_resolved_user_needs_credentials_but_others_need_not() -> None:
    cfg = good()
    cfg["users"][0]["user"] = {}
    assert messages(cfg) == [
        "users[0].user: no usable credentials: "
        "set token, or client-certificate-data and client-key-data"
    ]
    cfg = good()
    cfg["users"].append({"name": "spare", "user": {}})
    assert validate_kubeconfig(cfg) == []


def test_client_certificate_and_key_come_together() -> None:
    cfg = good()
    cfg["users"][0]["user"] = {"client-certificate-data": CERT}
    assert "users[0].user.client-key-data" in fields(cfg)


@pytest.mark.parametrize("value", ["not base64!!", base64.b64encode(b"just text").decode(), ""])
def test_inline_data_must_be_base64_pem(value: str) -> None:
    cfg = good()
    cfg["clusters"][0]["cluster"]["certificate-authority-data"] = value
    assert fields(cfg) == ["clusters[0].cluster.certificate-authority-data"]


def test_basic_auth_and_empty_token() -> None:
    cfg = good()
    cfg["users"][0]["user"] = {"username": "admin", "password": "pw", "token": ""}
    got = fields(cfg)
    assert "users[0].user.username" in got and "users[0].user.token" in got


def test_forbidden_things_in_unused_entries_are_refused_too() -> None:
    cfg = good()
    cfg["users"].append({"name": "dev", "user": {"exec": {"command": "sh"}}})
    cfg["clusters"].append(
        {"name": "lab", "cluster": {"server": "https://lab", "insecure-skip-tls-verify": True}}
    )
    assert fields(cfg) == ["clusters[1].cluster.insecure-skip-tls-verify", "users[1].user.exec"]


def test_every_problem_at_once() -> None:
    cfg = good()
    cfg["clusters"][0]["cluster"] = {
        "server": "http://x",
        "insecure-skip-tls-verify": True,
        "certificate-authority": "/ca",
    }
    cfg["users"][0]["user"] = {"exec": {"command": "x"}, "tokenFile": "/t", "token": "t"}
    with pytest.raises(KubeconfigError) as info:
        check_kubeconfig(cfg, source="Secret fleet-system/m key 'kubeconfig'")
    assert len(info.value.problems) == 5
    text = str(info.value)
    assert text.startswith("invalid kubeconfig (Secret fleet-system/m key 'kubeconfig'): ")
    assert "users[0].user.exec: exec plugins are not allowed" in text


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({**good(), "kind": "Pod"}, "kind"),
        ({**good(), "apiVersion": "v2"}, "apiVersion"),
        ({**good(), "clusters": {"member": {}}}, "clusters"),
        ({**good(), "users": [{"user": {"token": "x"}}]}, "users[0].name"),
        ({**good(), "users": ["x"]}, "users[0]"),
    ],
)
def test_shape_errors(config: dict[str, Any], field: str) -> None:
    assert field in fields(config)


@pytest.mark.parametrize("text", ["[]", "just a string", "a: [unclosed", ""])
def test_unparseable_documents(text: str) -> None:
    assert fields(text) == ["(document)"]
    with pytest.raises(KubeconfigError):
        load_kubeconfig(text)


# --- The Secret -----------------------------------------------------------------------------


def _secret(
    data: dict[str, Any] | None = None, string_data: dict[str, Any] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "member-a", "namespace": "fleet-system"},
    }
    if data is not None:
        out["data"] = data
    if string_data is not None:
        out["stringData"] = string_data
    return out


TEXT = yaml.safe_dump(good())


def test_secret_base64_data() -> None:
    secret = _secret({"kubeconfig": base64.b64encode(TEXT.encode()).decode()})
    assert kubeconfig_text_from_secret(secret) == TEXT
    assert kubeconfig_from_secret(secret).cluster == "member"


def test_secret_wrapped_base64_is_tolerated() -> None:
    encoded = base64.b64encode(TEXT.encode()).decode()
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    assert kubeconfig_text_from_secret(_secret({"kubeconfig": wrapped})) == TEXT


def test_secret_plain_text_in_data_is_tolerated() -> None:
    assert kubeconfig_text_from_secret(_secret({"kubeconfig": TEXT})) == TEXT


def test_secret_string_data_and_bytes() -> None:
    assert kubeconfig_text_from_secret(_secret(string_data={"kubeconfig": TEXT})) == TEXT
    assert kubeconfig_text_from_secret(_secret({"kubeconfig": TEXT.encode()})) == TEXT


def test_secret_other_key() -> None:
    secret = _secret({"config": base64.b64encode(TEXT.encode()).decode()})
    assert kubeconfig_from_secret(secret, key="config").context == "ctx"


def test_secret_missing_key_names_secret_and_key() -> None:
    with pytest.raises(KubeconfigError) as info:
        kubeconfig_text_from_secret(_secret({"value": "eA=="}))
    assert str(info.value) == (
        "invalid kubeconfig: Secret fleet-system/member-a: "
        "has no key 'kubeconfig' (keys present: 'value')"
    )
    with pytest.raises(KubeconfigError, match="keys present: none"):
        kubeconfig_text_from_secret(_secret())


def test_secret_empty_or_binary_value() -> None:
    with pytest.raises(KubeconfigError, match="is empty"):
        kubeconfig_text_from_secret(_secret({"kubeconfig": ""}))
    with pytest.raises(KubeconfigError, match="not UTF-8"):
        kubeconfig_text_from_secret(
            _secret({"kubeconfig": base64.b64encode(b"\xff\xfe\x00").decode()})
        )


def test_v1secret_like_objects() -> None:
    secret = SimpleNamespace(
        metadata=SimpleNamespace(name="member-a", namespace="fleet-system"),
        data={"kubeconfig": base64.b64encode(TEXT.encode()).decode()},
        string_data=None,
    )
    assert kubeconfig_from_secret(secret).server == "https://member.example.com:6443"


def test_invalid_kubeconfig_in_secret_names_the_secret() -> None:
    cfg = good()
    cfg["users"][0]["user"]["exec"] = {"command": "x"}
    secret = _secret({"kubeconfig": base64.b64encode(yaml.safe_dump(cfg).encode()).decode()})
    with pytest.raises(
        KubeconfigError, match=r"\(Secret fleet-system/member-a key 'kubeconfig'\).*exec plugins"
    ):
        kubeconfig_from_secret(secret)
