"""The Koordinator member's pure parts: its config, its pins and its scheduler's command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.sandbox import components as comp
from fleet.sandbox import toolchain
from fleet.sandbox.config import MemberSpec, SandboxConfig
from fleet.sandbox.errors import SandboxError
from fleet.sandbox.kind import plan


def _layout(tmp_path: Path) -> comp.ClusterLayout:
    return comp.ClusterLayout(
        "member-k", tmp_path, {n: 10000 + i for i, n in enumerate(comp.PORT_NAMES)}
    )


def test_default_config_has_one_koordinator_member_last():
    default = SandboxConfig.default()
    assert [m.scheduler for m in default.members] == ["coscheduling"] * 3 + ["koordinator"]
    assert default.needs_koordinator
    assert not SandboxConfig.default(3, koordinator=0).needs_koordinator
    mixed = SandboxConfig.default(3, koordinator=1)
    assert [m.scheduler for m in mixed.members] == ["coscheduling", "coscheduling", "koordinator"]
    assert mixed.needs_koordinator


def test_unknown_scheduler_is_refused(tmp_path):
    path = tmp_path / "sandbox.yaml"
    path.write_text("members:\n- name: m1\n  scheduler: volcano\n")
    with pytest.raises(SandboxError, match=r"members\.0\.scheduler"):
        SandboxConfig.load(path)


def test_koordinator_is_pinned_apart_from_the_cluster_toolchain():
    """Adding koord-scheduler changes neither the cluster toolchain's pins nor its cache key."""
    assert "koordinator" not in str(toolchain.pins())
    assert toolchain.koordinator_toolchain().root != toolchain.toolchain_for_pins().root
    go_mod = toolchain.KOORDINATOR_MODULE.go_mod()
    assert f"github.com/koordinator-sh/koordinator {toolchain.KOORDINATOR}" in go_mod
    assert "k8s.io/kubernetes => k8s.io/kubernetes v1.35.4" in go_mod
    assert "k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.35.4" in go_mod
    assert "gitVersion=v1.35.4+koordinator-v1.8.0" in toolchain.KOORDINATOR_MODULE.ldflags
    names = {Path(rel).name for _m, rel in toolchain.KOORDINATOR_CRD_SOURCES}
    assert "scheduling.koordinator.sh_reservations.yaml" in names
    assert "scheduling.sigs.k8s.io_podgroups.yaml" in names


def test_koord_scheduler_profile_has_gang_and_reservation(tmp_path):
    config = comp.koord_scheduler_config(_layout(tmp_path))
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "default-scheduler"
    plugins = profile["plugins"]
    assert {"name": "Coscheduling"} in plugins["permit"]["enabled"]
    assert {"name": "Reservation"} in plugins["bind"]["enabled"]
    assert plugins["bind"]["disabled"] == [{"name": "*"}]


def test_koord_scheduler_preempts_for_reservations_only_when_the_member_says(tmp_path):
    """Off by default (no pluginConfig: the Reservation plugin's own default, no preemption);
    `reservation_preemption` turns the plugin's `enablePreemption` on, upstream's
    DefaultPreemption still disabled."""
    (plain,) = comp.koord_scheduler_config(_layout(tmp_path))["profiles"]
    assert "pluginConfig" not in plain
    (profile,) = comp.koord_scheduler_config(_layout(tmp_path), reservation_preemption=True)[
        "profiles"
    ]
    (args,) = profile["pluginConfig"]
    assert args["name"] == "Reservation" and args["args"]["enablePreemption"] is True
    assert args["args"]["kind"] == "ReservationArgs"
    assert profile["plugins"]["postFilter"]["disabled"] == [{"name": "*"}]
    assert MemberSpec(name="k", scheduler="koordinator").reservation_preemption is False
    with pytest.raises(ValueError, match="reservation_preemption is koord-scheduler's"):
        MemberSpec(name="c", reservation_preemption=True)


def test_koord_scheduler_runs_as_the_members_scheduler(tmp_path):
    layout = _layout(tmp_path)
    ktc = toolchain.Toolchain(tmp_path / "k")
    component = comp.koord_scheduler(ktc, layout)
    assert component.name == "member-k/kube-scheduler"
    assert component.argv[0] == str(ktc.binary("koord-scheduler"))
    assert f"--config={layout.config('koord-scheduler.yaml')}" in component.argv


def test_training_operator_without_gang_scheduler_makes_no_podgroups(tmp_path):
    layout = _layout(tmp_path)
    tc = toolchain.Toolchain(tmp_path / "t")
    argv = comp.training_operator(tc, layout, "").argv
    assert not any(a.startswith("--gang-scheduler-name") for a in argv)
    assert "--gang-scheduler-name=x" in comp.training_operator(tc, layout, "x").argv


def test_kind_provider_refuses_koordinator_members(tmp_path):
    config = SandboxConfig(members=[MemberSpec(name="m1", scheduler="koordinator")])
    with pytest.raises(SandboxError, match="m1: scheduler koordinator"):
        plan(config, tmp_path)
