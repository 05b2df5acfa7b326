"""The sandbox's fake pods have logs: kwok is their kubelet, and everything that connects the
API server's pods/log to it is in place (the end-to-end proof is e2e/test_amc.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fleet.sandbox import components
from fleet.sandbox.components import KWOK_LOGS, ClusterLayout, kube_apiserver, kwok
from fleet.sandbox.toolchain import Toolchain

ASSETS = Path(components.__file__).parent / "assets"


def _layout(tmp_path: Path) -> ClusterLayout:
    ports = {name: 30000 + i for i, name in enumerate(components.PORT_NAMES)}
    return ClusterLayout("member-1", tmp_path, ports)


def test_kwok_serves_a_log_file_that_exists_for_every_container(tmp_path: Path) -> None:
    kwok_component = kwok(Toolchain(tmp_path), _layout(tmp_path), ASSETS / "kwok-stages.yaml")
    assert f"--config={KWOK_LOGS}" in kwok_component.argv
    (rules,) = list(yaml.safe_load_all(KWOK_LOGS.read_text()))
    assert rules["kind"] == "ClusterLogs"
    assert "selector" not in rules["spec"]  # every pod
    (log,) = rules["spec"]["logs"]
    assert "containers" not in log  # every container
    # kwok resolves the file against its working directory.
    assert kwok_component.cwd is not None
    file = kwok_component.cwd / log["logsFile"]
    assert file.is_file()
    for line in file.read_text().splitlines():  # CRI log format: time, stream, tag, text
        time, stream, tag, _text = line.split(" ", 3)
        assert time.endswith("Z") and stream == "stdout" and tag == "F"


def test_the_api_server_reaches_kwok_as_the_nodes_kubelet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = _layout(tmp_path)
    argv = kwok(Toolchain(tmp_path), layout, ASSETS / "kwok-stages.yaml").argv
    port = layout.ports["kwok"]
    # The port kwok listens on is the one the node stage writes into daemonEndpoints...
    assert f"--server-address=127.0.0.1:{port}" in argv
    assert f"--node-port={port}" in argv
    stages = (ASSETS / "kwok-stages.yaml").read_text()
    assert "daemonEndpoints:\n        kubeletEndpoint:\n          Port: {{ . }}" in stages
    # ...at the address the API server picks: the InternalIP kwok writes, not the Hostname.
    assert "--node-ip=127.0.0.1" in argv
    monkeypatch.setattr(components, "tls_context", lambda *_pem: True)  # no PKI on disk here
    api = kube_apiserver(Toolchain(tmp_path), layout).argv
    assert "--kubelet-preferred-address-types=InternalIP" in api
