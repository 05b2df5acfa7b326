"""The GangBinding holds the core's lifecycle value: what is written reads back the same."""

from __future__ import annotations

from fleet.api import GangBinding
from fleet.controller.bindings import _evictions, _target, lifecycle_of, persisted_status
from fleet.core import lifecycle
from fleet.core.failover import FailoverSettings, Move, Timers

T0 = 1_700_000_000.0


def _stored(life: lifecycle.Binding) -> GangBinding:
    """A binding as the API server would return it after fleet wrote `life`."""
    spec = {
        "resource": {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "j",
            "uid": "u",
        },
        "policy": {"kind": "PropagationPolicy", "namespace": "ns", "name": "p"},
        "gang": {"minMember": 1, "components": [{"name": "worker", "replicas": 1}]},
        "clusters": _target(life, [("worker", 1)], multi_role=False),
        "gracefulEvictionTasks": _evictions(life),
    }
    status = {k: v for k, v in persisted_status(life).items() if v is not None}
    return GangBinding.from_dict(
        {
            "metadata": {"name": "pytorchjob-j", "namespace": "ns"},
            "spec": {k: v for k, v in spec.items() if v is not None},
            "status": status,
        }
    )


def test_a_history_with_failovers_survives_the_round_trip() -> None:
    settings = FailoverSettings(purge_mode="Gracefully", cluster_exclusion_seconds=600)
    life = lifecycle.scheduled(lifecycle.Binding(), "a", T0, group="primary")
    life = lifecycle.failed_over(
        life, Move("ClusterLost", "gone"), settings, T0 + 60, old_cluster_reachable=False
    ).binding
    life = lifecycle.scheduled(life, "b", T0 + 61, group="backup")
    life = lifecycle.with_timers(life, Timers(unhealthy_since=T0 + 100, tainted_since=T0 + 90))
    life = lifecycle.observed(life, "Running")
    assert lifecycle_of(_stored(life), now=T0 + 200) == life


def test_a_fresh_binding_reads_as_pending() -> None:
    assert lifecycle_of(_stored(lifecycle.Binding()), now=T0) == lifecycle.Binding()
