"""The job operators' pure parts: members' `operators`, their pins and cache, command lines and
the webhook configurations the sandbox registers for them."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from fleet.sandbox import components as comp
from fleet.sandbox import toolchain
from fleet.sandbox.config import MemberSpec, SandboxConfig
from fleet.sandbox.errors import SandboxError


def _layout(tmp_path: Path) -> comp.ClusterLayout:
    return comp.ClusterLayout(
        "member-o", tmp_path, {n: 10000 + i for i, n in enumerate(comp.PORT_NAMES)}
    )


def test_members_run_the_training_operator_unless_told_otherwise():
    config = SandboxConfig(
        members=[
            MemberSpec(name="m1"),
            MemberSpec(name="m2", operators=["jobset", "trainer", "kuberay", "jobset"]),
        ]
    )
    m1, m2 = config.members
    assert m1.operators == ["training-operator"]
    assert m2.operators == ["jobset", "trainer", "kuberay"]
    assert config.operators == ["jobset", "kuberay", "trainer", "training-operator"]
    assert not config.runs(m2, "training-operator")
    benches = config.model_copy(update={"training_operator": False})
    assert not benches.runs(m1, "training-operator")
    assert benches.operators == ["jobset", "kuberay", "trainer"]


def test_trainer_without_jobset_is_refused(tmp_path):
    path = tmp_path / "sandbox.yaml"
    path.write_text("members:\n- name: m1\n  operators: [trainer]\n")
    with pytest.raises(SandboxError, match=r"members\.0\.operators: .*trainer needs jobset"):
        SandboxConfig.load(path)


def test_unknown_operator_is_refused(tmp_path):
    path = tmp_path / "sandbox.yaml"
    path.write_text("members:\n- name: m1\n  operators: [volcano]\n")
    with pytest.raises(SandboxError, match=r"members\.0\.operators\.0"):
        SandboxConfig.load(path)


def test_operators_are_pinned_apart_from_the_cluster_toolchain():
    """The operators change neither the cluster toolchain's pins nor its cache key, and share
    one module graph on the cluster binaries' Kubernetes staging pins."""
    pins = str(toolchain.pins())
    assert "jobset" not in pins and "kuberay" not in pins and "trainer/v2" not in pins
    assert toolchain.operators_toolchain().root != toolchain.toolchain_for_pins().root
    go_mod = toolchain.OPERATORS_MODULE.go_mod()
    assert f"sigs.k8s.io/jobset {toolchain.JOBSET}" in go_mod
    assert f"github.com/kubeflow/trainer/v2 {toolchain.TRAINER}" in go_mod
    assert f"github.com/ray-project/kuberay/ray-operator {toolchain.KUBERAY}" in go_mod
    assert "k8s.io/client-go => k8s.io/client-go v0.34.4" in go_mod
    assert sorted(toolchain.OPERATOR_PARTS) == ["jobset", "kuberay", "trainer"]


def test_each_part_names_its_crds_and_webhook_manifests():
    files = {
        name: [dest for _m, _rel, dest in part.files()]
        for name, part in toolchain.OPERATOR_PARTS.items()
    }
    assert files["jobset"] == ["crds/jobset.x-k8s.io_jobsets.yaml", "webhooks/jobset.yaml"]
    assert "crds/trainer.kubeflow.org_clustertrainingruntimes.yaml" in files["trainer"]
    assert "webhooks/trainer.yaml" in files["trainer"]
    assert "crds/ray.io_rayjobs.yaml" in files["kuberay"]
    assert not any(f.startswith("webhooks/") for f in files["kuberay"])


def test_nothing_is_built_for_members_without_new_operators(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEET_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "find_go", lambda: pytest.fail("nothing to build"))
    assert toolchain.ensure_operators(["training-operator"]).root.parent == tmp_path / "toolchain"


def test_operators_listen_on_their_own_loopback_ports(tmp_path):
    layout = _layout(tmp_path)
    otc = toolchain.Toolchain(tmp_path / "o")
    jobset = comp.jobset_config(layout)
    assert jobset["internalCertManagement"] == {"enable": False}
    assert jobset["webhook"] == {
        "host": "127.0.0.1",
        "port": layout.ports["jobset_webhook"],
        "certDir": str(layout.serving_certs),
    }
    trainer = comp.trainer_config(layout)
    assert trainer["certManagement"] == {"enable": False}
    assert trainer["webhook"] == {"host": "127.0.0.1", "port": layout.ports["trainer_webhook"]}
    ray = comp.kuberay_operator(otc, layout)
    # its scheduler-plugins integration refuses every RayJob: fleet writes Ray gangs itself
    assert not any(a.startswith("--batch-scheduler") for a in ray.argv)
    for component in (
        comp.jobset_controller(otc, layout),
        comp.trainer_controller(otc, layout),
        ray,
    ):
        assert component.name.startswith("member-o/")
        assert f"--kubeconfig={layout.kubeconfig}" in component.argv
        assert len(set(component.ports)) == len(component.ports)


def test_webhooks_point_at_the_local_operator_with_the_cluster_ca(tmp_path):
    layout = _layout(tmp_path)
    upstream = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                {
                    "name": "mjobset.kb.io",
                    "clientConfig": {
                        "service": {"name": "webhook-service", "namespace": "system", "path": "/m"}
                    },
                    "rules": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"]}],
                },
                {
                    "name": "mpod.kb.io",
                    "clientConfig": {"service": {"name": "webhook-service", "path": "/p"}},
                    "rules": [{"apiGroups": [""], "resources": ["pods"]}],
                },
            ],
        },
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook-service"}},
    ]
    (config,) = comp.webhook_configurations("jobset", upstream, layout, b"CA PEM")
    assert config["metadata"] == {"name": "jobset-mutating-webhook-configuration"}
    (hook,) = config["webhooks"]
    assert hook["name"] == "mjobset.kb.io"
    assert hook["clientConfig"] == {
        "url": f"https://127.0.0.1:{layout.ports['jobset_webhook']}/m",
        "caBundle": base64.b64encode(b"CA PEM").decode(),
    }
    # upstream's manifests are left as they were
    assert "service" in upstream[0]["webhooks"][0]["clientConfig"]
