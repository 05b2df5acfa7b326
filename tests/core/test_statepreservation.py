"""statePreservation (fleet.core.statepreservation) and the binding that carries its labels."""

from __future__ import annotations

import pytest

from fleet.core import lifecycle
from fleet.core.failover import FailoverSettings, Move
from fleet.core.statepreservation import (
    PreservationError,
    Rule,
    evaluate,
    preserved_labels,
    rules_of,
)

STATUS = {
    "jobStatus": {"jobID": "6f1c-2b", "savepoint": 42, "ok": True, "ranks": [0, 1]},
    "checkpoint": {"path": "s3-ckpt.bucket_step-1200", "step": 1200.0},
    "a.b": {"c": None},
}


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("{ .jobStatus.jobID }", "6f1c-2b"),  # Karmada's Flink example
        ("{.jobStatus.savepoint}", "42"),
        ("{.checkpoint.step}", "1200"),
        ("{.jobStatus.ok}", "true"),
        ("{.jobStatus.ranks}", "[0,1]"),
        ("{.jobStatus.ranks[-1]}", "1"),
        ("{$.checkpoint.path}", "s3-ckpt.bucket_step-1200"),
        ("{['a.b'].c}", "<nil>"),
        ("step-{.checkpoint.step}", "step-1200"),
    ],
)
def test_a_json_path_reads_the_status_as_client_go_prints_it(path, text):
    assert evaluate(path, STATUS) == text


@pytest.mark.parametrize("path", ["{.jobStatus.missing}", "{.jobStatus.ranks[2]}", "{.nope.x}"])
def test_a_missing_path_is_an_error_naming_it(path):
    with pytest.raises(PreservationError, match="not found"):
        evaluate(path, STATUS)


def test_unsupported_json_path_is_reported_not_guessed():
    with pytest.raises(PreservationError, match="not supported"):
        evaluate("{.jobStatus.ranks[*]}", STATUS)


def test_labels_from_rules_and_problems_for_the_rest():
    rules = rules_of(
        {
            "rules": [
                {"aliasLabelName": "ckpt.example.com/job-id", "jsonPath": "{ .jobStatus.jobID }"},
                {"aliasLabelName": "ckpt.example.com/step", "jsonPath": "{.checkpoint.step}"},
                {"aliasLabelName": "ckpt.example.com/gone", "jsonPath": "{.checkpoint.nope}"},
                {"aliasLabelName": "ckpt.example.com/list", "jsonPath": "{.jobStatus.ranks}"},
            ]
        }
    )
    got = preserved_labels(rules, STATUS)
    assert got.labels == {"ckpt.example.com/job-id": "6f1c-2b", "ckpt.example.com/step": "1200"}
    assert len(got.problems) == 2
    assert "ckpt.example.com/gone" in got.problems[0] and "not found" in got.problems[0]
    assert "not a valid label value" in got.problems[1]
    assert preserved_labels([Rule("x", "{.a}")], None).labels == {}
    assert rules_of(None) == []


def test_a_failover_carries_the_preserved_labels_to_the_next_copy():
    settings = FailoverSettings()
    binding = lifecycle.scheduled(lifecycle.Binding(), "m1", 0.0)
    moved = lifecycle.failed_over(
        binding,
        Move("ApplicationFailure", "failed"),
        settings,
        100.0,
        old_cluster_reachable=True,
        preserved={"ckpt/job-id": "6f1c-2b"},
    )
    assert lifecycle.carried_labels(moved.binding) == {"ckpt/job-id": "6f1c-2b"}
    if moved.binding.evictions:
        assert moved.binding.evictions[-1].preserved == (("ckpt/job-id", "6f1c-2b"),)
    placed = lifecycle.scheduled(moved.binding, "m2", 200.0)
    assert lifecycle.carried_labels(placed) == {"ckpt/job-id": "6f1c-2b"}
    # then reclaimed: the new copy's state replaces it
    evicted = lifecycle.evicted_by_queue(
        placed,
        preempted=False,
        evicted_for="ns/claimant",
        message="reclaimed",
        now=300.0,
        grace_period_seconds=30.0,
        preserved={"ckpt/job-id": "7a2d-3c"},
    )
    assert lifecycle.carried_labels(evicted) == {"ckpt/job-id": "7a2d-3c"}
    assert evicted.evictions[-1].preserved == (("ckpt/job-id", "7a2d-3c"),)
    # a move without statePreservation keeps what was carried
    again = lifecycle.evicted_by_queue(
        lifecycle.scheduled(evicted, "m3", 400.0),
        preempted=True,
        evicted_for="ns/other",
        message="preempted",
        now=500.0,
        grace_period_seconds=30.0,
    )
    assert lifecycle.carried_labels(again) == {"ckpt/job-id": "7a2d-3c"}
