"""A scripted fleet and its members for `kubectl amc` tests: every client amc makes talks to a
FakeApi (httpx.MockTransport), chosen by the name amc gives it (`fleet` or the member's)."""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.amc import main
from fleet.kube import Connection, SyncKubeClient
from tests.kube.fakes import FakeApi, Sleeps
from tests.kube.pki import Pem, inline_kubeconfig, make_pem

#: What time it is in every amc test (ages are computed from it).
NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
SECRETS_NS = "fleet-system"
MEMBERS_PATH = "/apis/fleet.dev/v1alpha1/memberclusters"
FLEET_GROUP = {
    "kind": "APIResourceList",
    "groupVersion": "fleet.dev/v1alpha1",
    "resources": [
        {"name": "memberclusters", "kind": "MemberCluster", "namespaced": False},
        {
            "name": "gangbindings",
            "singularName": "gangbinding",
            "kind": "GangBinding",
            "namespaced": True,
            "shortNames": ["gb"],
        },
    ],
}


def ago(seconds: float) -> str:
    """An API server timestamp `seconds` before NOW."""
    return (NOW - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def secret_path(member: str) -> str:
    """The member's viewer kubeconfig Secret: what amc reads (never the dispatch one)."""
    return f"/api/v1/namespaces/{SECRETS_NS}/secrets/{member}-viewer-kubeconfig"


@cache
def _pem() -> Pem:
    return make_pem()


def secret_holding(member: str, kubeconfig: dict[str, Any]) -> dict[str, Any]:
    text = base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()
    meta = {"name": f"{member}-viewer-kubeconfig", "namespace": SECRETS_NS}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {"kubeconfig": text}}


def member_kubeconfig() -> dict[str, Any]:
    return inline_kubeconfig(_pem())


@dataclass
class Result:
    code: int
    out: str
    err: str


class World:
    """The fleet (`self.fleet`) and its members (`self.members[name]`), all FakeApis."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], *members: str):
        self.capsys = capsys
        self.fleet = FakeApi()
        self.fleet.discovery["/apis/fleet.dev/v1alpha1"] = FLEET_GROUP
        self.fleet.discovery["/apis"] = {
            "kind": "APIGroupList",
            "groups": [
                *self.fleet.discovery["/apis"]["groups"],
                {
                    "name": "fleet.dev",
                    "versions": [{"groupVersion": "fleet.dev/v1alpha1", "version": "v1alpha1"}],
                    "preferredVersion": {"groupVersion": "fleet.dev/v1alpha1"},
                },
            ],
        }
        self.members = {name: FakeApi() for name in members}
        self.fleet.on(
            "GET",
            MEMBERS_PATH,
            {"items": [self.member_cluster(name) for name in members]},
        )
        for name in members:
            self.fleet.on("GET", secret_path(name), secret_holding(name, member_kubeconfig()))
        self.kubeconfig = tmp_path / "fleet.kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump(inline_kubeconfig(_pem())))
        self.dialed: list[str] = []

    @staticmethod
    def member_cluster(name: str) -> dict[str, Any]:
        ref = {"namespace": SECRETS_NS, "name": f"{name}-kubeconfig", "key": "kubeconfig"}
        return {
            "apiVersion": "fleet.dev/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": name},
            "spec": {"kubeconfigSecretRef": ref},
        }

    def connect(self, connection: Connection, name: str) -> SyncKubeClient:
        self.dialed.append(name)
        api = self.fleet if name == "fleet" else self.members[name]
        return SyncKubeClient(connection, name=name, transport=api.sync_transport(), sleep=Sleeps())

    def amc(self, *argv: str, kubeconfig: bool = True) -> Result:
        args = [*argv, *(["--kubeconfig", str(self.kubeconfig)] if kubeconfig else [])]
        code = main(args, connect=self.connect, clock=lambda: NOW)
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        return Result(code, out, err)


# -- what members answer ------------------------------------------------------------------


def column(name: str, type_: str = "string", priority: int = 0) -> dict[str, Any]:
    return {"name": name, "type": type_, "format": "", "priority": priority}


def row(
    cells: list[Any],
    name: str,
    namespace: str | None = "team-a",
    labels: dict[str, str] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "labels": labels or {}, **metadata}
    return {"cells": cells, "object": {"kind": "PartialObjectMetadata", "metadata": meta}}


def table(columns: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "columnDefinitions": columns,
        "rows": rows,
    }


JOB_COLUMNS = [column("Name"), column("State"), column("Age", "date")]
POD_COLUMNS = [
    column("Name"),
    column("Ready"),
    column("Status"),
    column("Restarts"),
    column("Age", "date"),
    column("IP", priority=1),
    column("Node", priority=1),
]
MANAGED = {"fleet.dev/managed-by": "fleet-1"}


def job_table(*rows: dict[str, Any]) -> dict[str, Any]:
    return table(JOB_COLUMNS, list(rows))


def pod_row(name: str, age: float, node: str = "node-0", **metadata: Any) -> dict[str, Any]:
    return row([name, "1/1", "Running", 0, ago(age), "10.0.0.1", node], name, **metadata)
