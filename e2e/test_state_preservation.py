"""statePreservation on real API servers: a PyTorchJob whose policy preserves a field of its
copy's status fails over, then is evicted by reclaim, and each next copy carries the old copy's
value as the alias label, on the job and on its pods (where the downward API can read it).

The training operator's status schema has no field for a checkpoint, so the test plays the
part of a checkpointing sidecar: it appends a condition of its own (`Checkpointed`, reason
`step-<n>`) to the member copy's status through the status subresource. The operator keeps
conditions of types it does not know, in place, so after `Created` and `Running` the rule
`{ .conditions[2].reason }` reads it.

The tree is e2e/test_reclaim.py's two teams (8 GPUs; team `a`, the test's namespace, min 4);
each member gets one 4-GPU node for the test, and every job takes 4 GPUs.
"""

from __future__ import annotations

from typing import Any

from fleet.core.kinds import adapter_for
from fleet.testing.kube import wait_until
from fleet.testing.workloads import gang_policy

from .conftest import MEMBERS, PYTORCHJOB, Fleet
from .test_reclaim import _eviction, _job, _phase, _start, _wait_phase, teams  # noqa: F401

ALIAS = "ckpt.fleet.dev/step"
RULE = {"aliasLabelName": ALIAS, "jsonPath": "{ .conditions[2].reason }"}


def _policy(namespace: str) -> dict[str, Any]:
    """Queued (suspension.scheduling), failing over 2 s after a failure, the copy left deleted
    at once, and the rule under failover.application (which reclaim uses too)."""
    policy = gang_policy("queued", namespace, toleration_seconds=2, purge_mode="Immediately")
    policy["spec"]["suspension"] = {"scheduling": True}
    policy["spec"]["failover"]["application"]["statePreservation"] = {"rules": [RULE]}
    return policy


def _checkpoint(live: Fleet, member: str, namespace: str, name: str, step: str) -> None:
    """Report checkpoint `step` in the copy's status, as a sidecar would (again if the
    operator's own write raced it away)."""
    client = live.clusters[member]

    def reported() -> bool:
        copy = client.get(*PYTORCHJOB, name, namespace) or {}
        conditions = list((copy.get("status") or {}).get("conditions") or [])
        if len(conditions) > 2 and conditions[2].get("reason") == step:
            return True
        kept = [c for c in conditions if c.get("type") != "Checkpointed"]
        if [c.get("type") for c in kept] != ["Created", "Running"]:
            return False  # not running yet: the operator writes its conditions first
        checkpointed = {"type": "Checkpointed", "status": "True", "reason": step}
        client.api.patch(
            *PYTORCHJOB,
            name,
            {"status": {"conditions": [*kept, checkpointed]}},
            namespace,
            subresource="status",
        )
        return False

    wait_until(reported, what=f"checkpoint {step} reported by {name} in {member}")


def _carried(
    live: Fleet, member: str, namespace: str, name: str
) -> tuple[str | None, set[str | None]]:
    """The alias label on the job's copy in `member`, and the values on its pods."""
    client = live.clusters[member]
    copy = client.get(*PYTORCHJOB, name, namespace) or {}
    adapter = adapter_for(*PYTORCHJOB)
    assert adapter is not None
    pods = client.pods(namespace, adapter.pod_selector(name))
    return (
        ((copy.get("metadata") or {}).get("labels") or {}).get(ALIAS),
        {((p.get("metadata") or {}).get("labels") or {}).get(ALIAS) for p in pods},
    )


def _moved(live: Fleet, namespace: str, name: str, away_from: str) -> str | None:
    target = live.target(namespace, name)
    return target if target and target != away_from else None


def test_a_failover_and_a_reclaim_each_carry_the_old_copys_checkpoint(
    live: Fleet,
    namespace,
    add_nodes,
    teams,  # noqa: F811
):
    teams()
    for member in MEMBERS:
        add_nodes(member, count=1, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace))
    other = _start(live, namespace, "a1", "a")  # team a's first gang, within its min
    # The second borrows (the later start); restartPolicy Never: a failing pod fails the job.
    first = _start(live, namespace, "job", "a", restart_policy="Never")
    assert first != other

    # 1. Application failover: the copy reports step-100 and fails; the next copy carries it.
    _checkpoint(live, first, namespace, "job", "step-100")
    live.mark(first, namespace, "job", "Failed")
    second = wait_until(lambda: _moved(live, namespace, "job", first), timeout=60, what="failover")
    assert second != other
    live.wait_running(namespace, "job", second)
    assert _carried(live, second, namespace, "job") == ("step-100", {"step-100"})
    binding = live.binding(namespace, "job") or {}
    assert binding["spec"]["preservedLabels"] == {ALIAS: "step-100"}
    history = binding["status"]["failoverHistory"]
    assert [(h["fromCluster"], h["reason"]) for h in history] == [(first, "ApplicationFailure")]

    # 2. Reclaim: the moved copy reports step-200; team b's job takes a's borrowed quota back,
    # the gang's eviction records what it preserves before its copy goes.
    _checkpoint(live, second, namespace, "job", "step-200")
    live.api.create(_job(namespace, "b1", "b"))
    task = wait_until(lambda: _eviction(live, namespace, "job"), what="the eviction recorded")
    assert task["reason"] == "Reclaimed" and task["preservedLabelState"] == {ALIAS: "step-200"}
    wait_until(lambda: not live.copies(namespace, "job"), timeout=90, what="the copy deleted")
    _wait_phase(live, namespace, "b1", "Running")
    assert _phase(live, namespace, "job") == "Enqueued"
    assert _phase(live, namespace, "a1") == "Running"

    # 3. b's job goes; the gang is placed again, and its next copy carries step-200.
    live.api.delete(*PYTORCHJOB, "b1", namespace)
    _wait_phase(live, namespace, "job", "Running", timeout=120)
    third = wait_until(lambda: live.target(namespace, "job"), what="job placed again")
    assert third != first  # still excluded after its failover
    live.wait_running(namespace, "job", third)
    assert _carried(live, third, namespace, "job") == ("step-200", {"step-200"})
    reasons = [r for r, _, _ in live.events(namespace, "job")]
    assert "StatePreservationFailed" not in reasons
