"""Shared fixtures for the fleet.api tests: the repository paths and YAML loading."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def load_docs() -> Callable[[str], list[dict[str, Any]]]:
    def load(text: str) -> list[dict[str, Any]]:
        return [d for d in yaml.safe_load_all(text) if d is not None]

    return load
