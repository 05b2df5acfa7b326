"""`fleet install/join` say what went wrong in one line and exit non-zero; never a traceback.
(`kubectl amc`'s own are in tests/amc.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from fleet import cli
from fleet.kube import Connection, KubeClient, SyncKubeClient
from tests.kube.fakes import AsyncSleeps, FakeApi, Sleeps, status
from tests.kube.pki import inline_kubeconfig, make_pem


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    file = tmp_path / "kubeconfig"
    file.write_text(yaml.safe_dump(inline_kubeconfig(make_pem())))
    return file


def test_fleet_install_with_an_unreadable_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing"
    assert cli.main(["install", "--kubeconfig", str(missing)]) == 1
    _out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"fleet: error: invalid kubeconfig ({missing}): (file): cannot read: "
        "No such file or directory"
    ]


def test_fleet_join_refuses_a_member_kubeconfig_naming_the_field(
    tmp_path: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    member = inline_kubeconfig(make_pem())
    member["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    member_file = tmp_path / "member"
    member_file.write_text(yaml.safe_dump(member))
    argv = ["join", "m1", "--member-kubeconfig", str(member_file), "--kubeconfig", str(kubeconfig)]
    assert cli.main(argv) == 1
    _out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith("fleet: error: invalid kubeconfig (kubeconfig for m1): ")
    assert "clusters[0].cluster.insecure-skip-tls-verify" in line


def test_fleet_install_against_an_unreachable_fleet(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import fleet.kube

    api = FakeApi().on(
        "GET", "/apis/apiextensions.k8s.io/v1", httpx.ConnectError("connection refused")
    )

    def client(connection: Connection, **kw: Any) -> SyncKubeClient:
        return SyncKubeClient(connection, transport=api.sync_transport(), sleep=Sleeps(), **kw)

    monkeypatch.setattr(fleet.kube, "SyncKubeClient", client)
    assert cli.main(["install", "--kubeconfig", str(kubeconfig)]) == 1
    _out, err = capsys.readouterr()
    assert err.splitlines() == [
        "fleet: error: DISCOVER CustomResourceDefinition (apiextensions.k8s.io/v1) on fleet: "
        "unreachable: ConnectError: connection refused"
    ]


APIEXTENSIONS = {
    "kind": "APIResourceList",
    "groupVersion": "apiextensions.k8s.io/v1",
    "resources": [
        {
            "name": "customresourcedefinitions",
            "singularName": "customresourcedefinition",
            "namespaced": False,
            "kind": "CustomResourceDefinition",
            "shortNames": ["crd"],
        }
    ],
}


def _fleet_behind(monkeypatch: pytest.MonkeyPatch, api: FakeApi) -> None:
    import fleet.kube

    def client(connection: Connection, **kw: Any) -> SyncKubeClient:
        return SyncKubeClient(connection, transport=api.sync_transport(), sleep=Sleeps(), **kw)

    monkeypatch.setattr(fleet.kube, "SyncKubeClient", client)


def test_fleet_install_refused_says_forbidden_naming_the_crd(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet.install import crd_objects

    first = crd_objects()[0]["metadata"]["name"]
    api = FakeApi()
    api.discovery["/apis"] = {
        "kind": "APIGroupList",
        "groups": [
            {
                "name": "apiextensions.k8s.io",
                "versions": [{"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"},
            }
        ],
    }
    api.discovery["/apis/apiextensions.k8s.io/v1"] = APIEXTENSIONS
    message = (
        f'customresourcedefinitions.apiextensions.k8s.io "{first}" is forbidden: '
        'User "dev" cannot patch resource "customresourcedefinitions"'
    )
    api.on(
        "PATCH",
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{first}",
        status(403, "Forbidden", message),
    )
    _fleet_behind(monkeypatch, api)

    assert cli.main(["install", "--kubeconfig", str(kubeconfig)]) == 1

    _out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"fleet: error: APPLY CustomResourceDefinition {first} on fleet: 403 Forbidden: {message}"
    ]


# A join refused by either side: tests/join/test_join.py (one line, and rolled back).


def test_fleet_join_with_a_label_that_is_not_key_value_exits_2_with_one_line(
    tmp_path: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    member_file = tmp_path / "member"
    member_file.write_text(yaml.safe_dump(inline_kubeconfig(make_pem())))
    argv = [
        "join",
        "m1",
        "--member-kubeconfig",
        str(member_file),
        "--kubeconfig",
        str(kubeconfig),
        "--label",
        "region",
    ]

    assert cli.main(argv) == 2

    _out, err = capsys.readouterr()
    assert err.splitlines() == ["fleet: error: --label 'region' is not key=value"]


def test_fleet_controller_that_cannot_derive_its_fleet_id_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import fleet.controller.operator as operator

    api = FakeApi().on("GET", "/api/v1", httpx.ConnectError("connection refused"))

    def client(connection: Connection, **kw: Any) -> KubeClient:
        return KubeClient(connection, transport=api.async_transport(), sleep=AsyncSleeps(), **kw)

    monkeypatch.setattr(operator, "KubeClient", client)

    assert cli.main(["controller", "--kubeconfig", str(kubeconfig)]) == 1

    _out, err = capsys.readouterr()
    assert err.splitlines() == [
        "fleet: error: cannot read Namespace kube-system to derive the fleet id (DISCOVER "
        "Namespace (v1) on fleet: unreachable: ConnectError: connection refused); set --fleet-id"
    ]


def test_fleet_join_refuses_a_socks_proxy_in_one_line_naming_the_field(
    tmp_path: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    member = inline_kubeconfig(make_pem())
    member["clusters"][0]["cluster"]["proxy-url"] = "socks5://127.0.0.1:1080"
    member_file = tmp_path / "member"
    member_file.write_text(yaml.safe_dump(member))
    argv = ["join", "m1", "--member-kubeconfig", str(member_file), "--kubeconfig", str(kubeconfig)]
    assert cli.main(argv) == 1
    _out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith("fleet: error: invalid kubeconfig (")
    assert "clusters[0].cluster.proxy-url: socks5 proxies are not supported" in line
