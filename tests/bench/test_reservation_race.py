"""The pure summaries of bench/reservation_race.py: gangs that never started rank last."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "reservation_race.py"
    spec = importlib.util.spec_from_file_location("reservation_race", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


race = _bench()


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([3.0, 1.0, 2.0], 0.5, 2.0),
        ([3.0, 1.0, 2.0], 0.99, 3.0),
        ([1.0, None, None], 0.5, None),
        ([None, 4.0, 1.0, 2.0, 3.0], 0.5, 3.0),
        ([None, 4.0, 1.0, 2.0, 3.0], 0.99, None),
        ([5.0], 0.5, 5.0),
        ([], 0.5, None),
    ],
)
def test_percentile_ranks_gangs_that_never_started_above_every_latency(values, q, expected):
    assert race.percentile(values, q) == expected


def test_share_within_counts_only_gangs_started_in_time():
    assert race.share_within([1.0, 30.0, 30.5, None], 30.0) == 0.5
    assert race.share_within([], 30.0) == 0.0
