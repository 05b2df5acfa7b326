from __future__ import annotations

from pathlib import Path

import pytest

from tests.amc.world import World


@pytest.fixture
def world(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> World:
    """A fleet with two members, member-1 and member-2, both reachable."""
    return World(tmp_path, capsys, "member-1", "member-2")
