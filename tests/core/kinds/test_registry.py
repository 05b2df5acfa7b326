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
