"""The native-gang member's pure parts (`scheduler: kubernetes`): its pins, kept apart from the
cluster toolchain, its processes' gates, and how fleet tells such a member from the others."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.controller.members.connection import GANG_SCHEDULER_KINDS, gang_scheduler_of
from fleet.sandbox import components as comp
from fleet.sandbox import toolchain
from fleet.sandbox.config import MemberSpec, SandboxConfig
from fleet.sandbox.errors import SandboxError
from fleet.sandbox.kind import plan
from fleet.sandbox.pki import create_cluster_pki
from fleet.sandbox.sandbox import ControlPlane, _Toolchains

NATIVE = ("scheduling.k8s.io/v1beta1", "PodGroup")
COSCHEDULING = ("scheduling.x-k8s.io/v1alpha1", "PodGroup")


def _layout(tmp_path: Path) -> comp.ClusterLayout:
    return comp.ClusterLayout(
        "member-n", tmp_path, {n: 10000 + i for i, n in enumerate(comp.PORT_NAMES)}
    )


def test_the_native_control_plane_is_pinned_apart_from_the_cluster_toolchain():
    assert toolchain.NATIVE_KUBERNETES not in str(toolchain.pins())
    assert toolchain.native_toolchain().root != toolchain.toolchain_for_pins().root
    go_mod = toolchain.NATIVE_MODULE.go_mod()
    assert "k8s.io/kubernetes => k8s.io/kubernetes v1.37.2" in go_mod
    # 1.37's module graph has two staging modules 1.34's has not; both pinned.
    assert "k8s.io/streaming => k8s.io/streaming v0.37.2" in go_mod
    assert "k8s.io/cri-streaming => k8s.io/cri-streaming v0.37.2" in go_mod
    assert [b.name for b in toolchain.NATIVE_MODULE.binaries] == [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    assert "gitVersion=v1.37.2" in toolchain.NATIVE_MODULE.ldflags


def test_a_native_member_runs_every_control_plane_process_with_the_workload_gates(tmp_path):
    layout = _layout(tmp_path)
    create_cluster_pki(layout.root / "pki", layout.name)  # the API server's probe reads it
    config = SandboxConfig(members=[MemberSpec(name="member-n", scheduler="kubernetes")])
    assert config.needs_native and not config.needs_koordinator
    cluster, native = toolchain.Toolchain(tmp_path / "c"), toolchain.Toolchain(tmp_path / "n")
    plane = _Toolchains(cluster, None, None, native).control_plane(config, "member-n")
    assert plane == ControlPlane(native, native=True)
    gates = "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
    for component in (
        plane.apiserver(layout),
        plane.controller_manager(layout),
        plane.scheduler(layout),
    ):
        assert component.argv[0].startswith(str(native.bin_dir)), component.name
        assert gates in component.argv, component.name
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in plane.apiserver(layout).argv
    # The fleet and the other members keep the cluster toolchain, without the gates.
    other = _Toolchains(cluster, None, None, native).control_plane(config, "fleet")
    assert other == ControlPlane(cluster)
    assert not any(a.startswith("--feature-gates") for a in other.apiserver(layout).argv)


def test_the_native_scheduler_is_the_upstream_default_profile(tmp_path):
    config = comp.native_scheduler_config(_layout(tmp_path))
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]


def test_fleet_detects_kubernetes_gang_scheduling_unless_a_gang_scheduler_of_its_own_is_there():
    assert NATIVE in {(a, k) for a, k, _ in GANG_SCHEDULER_KINDS}
    assert gang_scheduler_of({NATIVE}) == "Kubernetes"
    # scheduler-plugins installed beside it says more than the API server's own API
    assert gang_scheduler_of({NATIVE, COSCHEDULING}) == "Coscheduling"


def test_the_default_config_puts_native_members_last_and_has_none_unless_asked():
    assert not SandboxConfig.default().needs_native
    mixed = SandboxConfig.default(5, koordinator=1, native=1)
    assert [m.scheduler for m in mixed.members] == ["coscheduling"] * 3 + [
        "koordinator",
        "kubernetes",
    ]
    assert mixed.needs_native and mixed.needs_koordinator


def test_kind_provider_refuses_native_members(tmp_path):
    config = SandboxConfig(members=[MemberSpec(name="member-n", scheduler="kubernetes")])
    with pytest.raises(SandboxError, match="scheduler kubernetes is not supported"):
        plan(config, tmp_path)


FAKE_GO = """#!/bin/sh
# A stand-in for go: `env GOVERSION`, `list` (resolves), `build ... -o OUT ... PKG` (writes OUT).
case "$1" in
  env) echo go1.fake ;;
  list) echo k8s.io/kubernetes/cmd/kube-apiserver ;;
  build)
    while [ $# -gt 0 ]; do
      if [ "$1" = "-o" ]; then shift; printf '#!/bin/sh\\n' > "$1"; chmod +x "$1"; fi
      shift
    done ;;
esac
"""


def test_the_native_control_plane_is_built_once_under_the_lock_and_stamped(tmp_path, monkeypatch):
    """What a cold `ensure_native` does, with a stand-in for go: every binary, a stamp naming
    what it was built from, the steps said; a second call finds it built and says nothing."""
    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    monkeypatch.setenv("FLEET_GO", str(go))
    monkeypatch.setenv("FLEET_CACHE_DIR", str(tmp_path / "cache"))
    said: list[str] = []
    tools = toolchain.ensure_native(said.append)
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert (tools.bin_dir / name).is_file(), name
    stamp = json.loads(tools.stamp.read_text())
    assert stamp["kubernetes"] == toolchain.NATIVE_KUBERNETES
    assert stamp["go.mod"] == toolchain.NATIVE_MODULE.go_mod()
    assert said[0].startswith(f"building Kubernetes {toolchain.NATIVE_KUBERNETES}")
    assert any(line.startswith("native ready in") for line in said)
    again: list[str] = []
    assert toolchain.ensure_native(again.append) == tools
    assert again == []
