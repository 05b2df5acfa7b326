"""The registry: every kind once, and the docs and `fleet --help` list what the adapters say."""

from __future__ import annotations

from pathlib import Path

from fleet.cli import build_parser
from fleet.core.kinds import ADAPTERS, adapter_for, kinds_table, supported

DOCS = Path(__file__).parents[3] / "docs" / "kinds.md"


def test_every_adapter_is_found_by_its_type() -> None:
    for adapter in ADAPTERS:
        assert adapter_for(*adapter.type) is adapter
    assert adapter_for("apps/v1", "Deployment") is None


def test_the_docs_table_is_the_adapters_own() -> None:
    assert kinds_table() in DOCS.read_text()


def test_fleet_help_lists_the_supported_kinds() -> None:
    help_text = " ".join(build_parser().format_help().split())
    for kind in supported():
        assert kind in help_text


def test_each_kind_says_how_its_pods_are_found_by_its_name_or_that_they_are_not():
    selectors = {}
    for adapter in ADAPTERS:
        try:
            selectors[adapter.kind] = adapter.pod_selector("x")
        except NotImplementedError:
            selectors[adapter.kind] = None
    assert selectors["JobSet"] == "jobset.sigs.k8s.io/jobset-name=x"
    assert selectors["TrainJob"] == "jobset.sigs.k8s.io/jobset-name=x"
    assert selectors["RayCluster"] == "ray.io/cluster=x"
    assert selectors["RayJob"] is None  # its pods carry the name of the cluster it made
    assert selectors["PyTorchJob"] == "training.kubeflow.org/job-name=x"
    assert selectors["Job"] == "batch.kubernetes.io/job-name=x"
