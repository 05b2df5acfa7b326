"""Small pure parts of the controller: job state, policy affinity, fleet's job condition,
and the work queue's guarantees."""

from __future__ import annotations

import asyncio

from fleet.api import PropagationPolicy
from fleet.controller.policies import PolicyIndex, core_affinity
from fleet.controller.reconciler import _with_fleet_condition
from fleet.controller.workqueue import WorkQueue
from fleet.core.jobstate import job_state
from fleet.testing.workloads import gang_policy, pytorchjob


def test_job_state_prefers_terminal_conditions_whatever_their_order():
    def cond(t: str, s: str = "True") -> dict:
        return {"type": t, "status": s}

    assert job_state(None) == "Pending"
    assert job_state({"conditions": [cond("Created")]}) == "Created"
    assert job_state({"conditions": [cond("Succeeded"), cond("Running", "False")]}) == "Succeeded"
    assert job_state({"conditions": [cond("Failed"), cond("Running")]}) == "Failed"
    assert job_state({"conditions": [cond("Complete")]}) == "Succeeded"  # batch/v1 Job
    assert job_state({"active": 2}) == "Running"


def test_policy_affinity_becomes_the_engines_dataclass():
    policy = gang_policy("p", "ns", cluster_names=["member-1"])
    policy["spec"]["placement"]["clusterAffinity"] |= {
        "exclude": ["member-3"],
        "labelSelector": {
            "matchLabels": {"gpu": "a100"},
            "matchExpressions": [{"key": "region", "operator": "In", "values": ["east"]}],
        },
    }
    affinity = core_affinity(PropagationPolicy.from_dict(policy).spec)
    assert affinity is not None
    assert affinity.cluster_names == ("member-1",) and affinity.exclude == ("member-3",)
    assert affinity.label_selector is not None
    assert affinity.label_selector.matches({"gpu": "a100", "region": "east"})
    assert not affinity.label_selector.matches({"gpu": "a100", "region": "west"})
    assert core_affinity(PropagationPolicy.from_dict(gang_policy("q", "ns")).spec) is None


def test_policy_index_matches_only_in_the_workloads_namespace_and_skips_bad_policies():
    index = PolicyIndex()
    assert index.upsert(gang_policy("gang", "team-a")) == []
    broken = gang_policy("broken", "team-a")
    broken["spec"]["failover"]["application"]["purgeMode"] = "Sometimes"
    assert index.upsert(broken)  # reported, and ignored
    job = pytorchjob("j", namespace="team-a")
    assert index.match(job).gang and index.match(job).policy.metadata.name == "gang"
    assert not index.match(pytorchjob("j", namespace="team-b")).gang
    index.remove("PropagationPolicy", "team-a", "gang")
    assert index.match(job).policy is None


def test_fleets_condition_goes_first_so_the_state_column_keeps_the_jobs_state():
    member = [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]
    out = _with_fleet_condition(member, "True", "Success", "scheduled")
    assert [c["type"] for c in out] == ["Scheduled", "Created", "Running"]
    again = _with_fleet_condition(out, "True", "Success", "scheduled")
    assert again == out  # unchanged: no new timestamps, so no write


def test_work_queue_runs_a_key_once_at_a_time_and_reruns_it_if_it_changed_meanwhile():
    async def scenario() -> list[str]:
        seen: list[str] = []
        gate = asyncio.Event()

        async def process(key: str) -> None:
            seen.append(key)
            if len(seen) == 1:
                await gate.wait()

        queue: WorkQueue[str] = WorkQueue(process, workers=3)
        queue.start()
        queue.add("a")
        await asyncio.sleep(0.01)
        queue.add("a")  # while "a" runs: must run again afterwards, not concurrently
        queue.add("a")  # coalesces with the previous add
        gate.set()
        await asyncio.sleep(0.05)
        queue.add_after("b", 0.02)
        queue.add_after("b", 5)  # a later timer does not postpone an earlier one
        await asyncio.sleep(0.1)
        await queue.stop()
        return seen

    assert asyncio.run(scenario()) == ["a", "a", "b"]


def test_work_queue_retries_failures_with_backoff():
    async def scenario() -> int:
        attempts = 0

        async def process(_key: str) -> None:
            nonlocal attempts
            attempts += 1
            if attempts < 3:
                raise RuntimeError("transient")

        queue: WorkQueue[str] = WorkQueue(process, workers=1)
        queue.start()
        queue.add("k")
        await asyncio.sleep(2.0)
        await queue.stop()
        return attempts

    assert asyncio.run(scenario()) == 3
