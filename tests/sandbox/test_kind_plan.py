"""The kind provider cannot run here (no Docker engine); its plan and its refusal can be tested."""

from __future__ import annotations

import pytest
import yaml

from fleet.sandbox import SandboxConfig, SandboxError
from fleet.sandbox.kind import merge_kubeconfigs, plan, up_with_kind


def test_plan_creates_every_cluster_then_installs_members(tmp_path):
    steps = plan(SandboxConfig.default(2, koordinator=0), tmp_path)
    created = [s.argv[4] for s in steps if s.argv[:3] == ("kind", "create", "cluster")]
    assert created == ["fleet-fleet", "fleet-member-1", "fleet-member-2"]
    text = "\n".join(" ".join(s.argv) for s in steps)
    assert "training-operator.git/manifests/overlays/standalone?ref=v1.9.3" in text
    assert "--gang-scheduler-name=scheduler-plugins-scheduler" in text
    nodes = [s for s in steps if s.stdin]
    assert len(nodes) == 2
    assert all(
        n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        for n in yaml.safe_load_all(nodes[0].stdin)
    )


def test_without_docker_it_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match="--provider kind needs docker"):
        up_with_kind(SandboxConfig.default(1, koordinator=0), tmp_path)


def test_merged_kubeconfig_names_contexts_after_clusters(tmp_path):
    for name in ("fleet", "member-1"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "kubeconfig").write_text(
            yaml.safe_dump(
                {
                    "clusters": [
                        {"name": f"kind-{name}", "cluster": {"server": f"https://{name}"}}
                    ],
                    "users": [{"name": f"kind-{name}", "user": {"token": "t"}}],
                    "contexts": [{"name": f"kind-{name}", "context": {}}],
                }
            )
        )
    merged = yaml.safe_load(merge_kubeconfigs(["fleet", "member-1"], tmp_path).read_text())
    assert [c["name"] for c in merged["contexts"]] == ["fleet", "member-1"]
    assert merged["clusters"][1]["cluster"]["server"] == "https://member-1"
