"""`fleet install/join` say what went wrong in one line and exit non-zero; never a traceback.
(`kubectl amc`'s own are in tests/amc.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from fleet import cli
from fleet.kube import Connection, SyncKubeClient
from tests.kube.fakes import FakeApi, Sleeps
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
