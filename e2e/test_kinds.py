"""The seeds' flow for every kind beside the PyTorchJob (whose flow test_dispatch and
test_failover prove in detail), on real API servers and the kind's real controller in the
member: held whole while no member can hold the gang; dispatched whole when capacity arrives;
all its pods Running in one member; `kubectl amc get pod -M` shows them there; failed over
when it fails there.

Each job is confined to fake GPU nodes the test adds (labelled with its namespace), so the
capacity it reasons about is exactly the capacity it created.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fleet.amc.errors import EXIT_OK
from fleet.testing.kube import wait_until
from fleet.testing.workloads import batch_job, gang_policy, kubeflow_job, mpijob

from .conftest import MEMBERS, Amc, Fleet


@dataclass(frozen=True)
class Case:
    kind: tuple[str, str]
    make: Callable[..., dict[str, Any]]
    #: The pods of the gang.
    pods: int


CASES = {
    # Three pods of 2 GPUs, run at once; backoffLimit 0: one failed pod fails the Job.
    "Job": Case(("batch/v1", "Job"), lambda ns: batch_job("train", pods=3, gpus=2, **_on(ns)), 3),
    # A launcher (no GPU, but the training operator's 5Gi ephemeral-storage init container) and
    # two workers of 2 GPUs; a failed launcher fails an MPIJob.
    "MPIJob": Case(
        ("kubeflow.org/v1", "MPIJob"),
        lambda ns: mpijob("train", workers=2, gpus=2, **_on(ns)),
        3,
    ),
    # The training operator's other kinds: a Master (XGBoost, Paddle) and workers of 2 GPUs, or
    # three workers (JAX); restartPolicy Never, so one failed pod fails the job.
    **{
        kind: Case(
            ("kubeflow.org/v1", kind),
            lambda ns, kind=kind, workers=workers: kubeflow_job(
                kind, "train", workers=workers, gpus=2, **_on(ns)
            ),
            3,
        )
        for kind, workers in (("XGBoostJob", 2), ("PaddleJob", 2), ("JAXJob", 3))
    },
}


def _on(namespace: str) -> dict[str, Any]:
    return {"namespace": namespace, "node_selector": {"test": namespace}}


def _pending_reasons(live: Fleet, namespace: str, kind: tuple[str, str]) -> list[dict] | None:
    binding = live.binding(namespace, "train", kind) or {}
    return (binding.get("status") or {}).get("pendingReasons")


def _moved(live: Fleet, namespace: str, kind: tuple[str, str], away_from: str) -> str | None:
    target = live.target(namespace, "train", kind)
    return target if target and target != away_from else None


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_seeds_flow(live: Fleet, namespace: str, add_nodes: Any, amc: Amc, name: str) -> None:
    case = CASES[name]
    kind = case.kind
    live.api.create(gang_policy("gang", namespace, kinds=(kind[1],), toleration_seconds=2))
    live.api.create(case.make(namespace))

    # Held whole: no member has a node it may use, so every member says why, and none has a copy.
    reasons = wait_until(lambda: _pending_reasons(live, namespace, kind), what="pending reasons")
    assert {r["cluster"] for r in reasons} == set(MEMBERS)
    assert live.copies(namespace, "train", kind) == []

    # Capacity arrives in two members: the gang goes whole to one of them.
    for member in ("member-1", "member-2"):
        add_nodes(member, count=1, gpu=8, labels={"test": namespace})
    first = wait_until(lambda: live.target(namespace, "train", kind), what="a placement")
    assert first in ("member-1", "member-2")
    pods = live.wait_running(namespace, "train", first, kind=kind, pods=case.pods)
    assert live.copies(namespace, "train", kind) == [first]
    assert live.api.pods(namespace) == []  # nothing runs on the fleet itself

    # kubectl amc get pod -M: the gang's pods, all Running, all in that member.
    code, out, err = amc("get", "pod", "-M", "-n", namespace)
    assert code == EXIT_OK, err
    header, *rows = [line.split() for line in out.splitlines()]
    assert header[:4] == ["NAME", "CLUSTER", "READY", "STATUS"]
    assert sorted((r[0], r[1], r[3]) for r in rows) == sorted(
        (p["metadata"]["name"], first, "Running") for p in pods
    )

    # It fails there: fleet moves it, whole, to the other member, and the failed copy goes.
    live.mark(first, namespace, "train", "Failed", kind=kind)
    second = wait_until(lambda: _moved(live, namespace, kind, first), timeout=60, what="failover")
    live.wait_running(namespace, "train", second, kind=kind, pods=case.pods)
    wait_until(
        lambda: live.copies(namespace, "train", kind) == [second],
        what="the failed copy deleted",
    )
    history = (live.binding(namespace, "train", kind) or {})["status"]["failoverHistory"]
    assert [(h["fromCluster"], h["reason"]) for h in history] == [(first, "ApplicationFailure")]
