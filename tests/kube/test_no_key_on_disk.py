"""No connection fleet builds leaves key material on disk (issue #9: 3 files per connection).

Every path that turns a kubeconfig into a connection is exercised: the controller's member
connections, `kubectl amc` (the fleet's own kubeconfig file and the members' Secrets), and the
test/demo client. TMPDIR points at a fresh folder that must stay empty, and no file written
during the test, in any usual temporary place, may hold the private key.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from fleet.amc.members import Fleet
from fleet.controller.operator import kopf_login
from fleet.kube import KubeClient, SyncKubeClient, from_kubeconfig, load
from fleet.testing.kube import ClusterClient
from tests.kube.fakes import FakeApi, sync_client
from tests.kube.pki import inline_kubeconfig, make_pem

_SCAN = ("/tmp", "/var/tmp", "/dev/shm")


def _files_holding(needle: bytes, roots: list[Path], since: float, skip: set[Path]) -> list[Path]:
    found = []
    for root in roots:
        for folder, _dirs, files in os.walk(root, onerror=lambda _e: None):
            for name in files:
                path = Path(folder) / name
                try:
                    if path in skip or not path.is_file() or path.stat().st_mtime < since:
                        continue
                    if path.stat().st_size < 1_000_000 and needle in path.read_bytes():
                        found.append(path)
                except OSError:
                    continue
    return found


def _fleet_serving_a_member(member_kubeconfig: dict[str, object]) -> SyncKubeClient:
    api = FakeApi()
    api.discovery["/apis/fleet.dev/v1alpha1"] = {
        "resources": [{"name": "memberclusters", "kind": "MemberCluster", "namespaced": False}]
    }
    ref = {"namespace": "fleet-system", "name": "member-1-kubeconfig", "key": "kubeconfig"}
    member = {"metadata": {"name": "member-1"}, "spec": {"kubeconfigSecretRef": ref}}
    api.on("GET", "/apis/fleet.dev/v1alpha1/memberclusters", {"items": [member]})
    text = yaml.safe_dump(member_kubeconfig).encode()
    secret = {"metadata": ref, "data": {"kubeconfig": base64.b64encode(text).decode()}}
    # amc reads the member's viewer kubeconfig, beside the one the MemberCluster names.
    api.on("GET", "/api/v1/namespaces/fleet-system/secrets/member-1-viewer-kubeconfig", secret)
    return sync_client(api)[0]


@pytest.fixture
def fresh_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() caches its answer
    assert tempfile.gettempdir() == str(folder)
    yield folder
    tempfile.tempdir = None


async def test_connections_leave_no_key_material_on_disk(
    tmp_path: Path, fresh_tmpdir: Path
) -> None:
    pem = make_pem()
    config = inline_kubeconfig(pem)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    started = time.time() - 1

    # The controller: a member's kubeconfig from its Secret, reconnected a few times; and
    # kopf's login with the fleet's own credentials (kopf builds its SSLContext itself).
    for _ in range(3):
        client = KubeClient(from_kubeconfig(config), name="member-1")
        await client.aclose()
        kopf_login(load(str(kubeconfig), "ctx"), dt.datetime.now(dt.UTC)).as_ssl_context()
    # `kubectl amc`: the fleet's own kubeconfig file, and every member's from its Secret.
    fleet = _fleet_serving_a_member(config)
    for _ in range(3):
        load(str(kubeconfig), "ctx")
        with ExitStack() as stack:
            assert Fleet(fleet, stack).connect("member-1").name == "member-1"
    # Tests and the demo.
    for _ in range(3):
        ClusterClient(str(kubeconfig), "ctx").close()

    assert sorted(fresh_tmpdir.iterdir()) == []
    roots = [fresh_tmpdir, tmp_path, *(Path(p) for p in _SCAN if Path(p).is_dir())]
    assert _files_holding(pem.key, roots, started, skip={kubeconfig}) == []
    assert _files_holding(pem.key.strip().splitlines()[1], roots, started, skip={kubeconfig}) == []
