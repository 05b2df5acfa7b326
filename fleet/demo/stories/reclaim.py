"""Reclaim: a team's min is guaranteed, by taking back whole gangs another team borrowed.

1. A tree of two teams over the 8 GPUs of member-2 and member-3 (the only members whose nodes
   hold a 2-GPU pod): team `a` and team `b`, each min 4 GPUs, max 8 (jobs name their team with
   the quota label); and the seeds' queued policy.
2. Team a runs two gangs of 4 GPUs (a master and a worker of 2 GPUs each): it borrows the
   whole fleet, 4 GPUs beyond its min.
3. Team b's gang of 4 GPUs arrives, within b's min. The queue reclaims: the gang of team a
   that started last (placements are recorded to the second; a tie goes by name) is evicted
   whole (a `Reclaimed` Event in numbers; the eviction recorded on its binding first, naming
   b's unit; no failover charged), back in its queue, its copy deleted after the grace period;
   b's gang is dequeued and runs where a's ran.
4. b's gang finishes: room returns, and a's gang runs again.
"""

from __future__ import annotations

from typing import Any

from fleet.api import constants as c
from fleet.api import queue_unit_name
from fleet.demo import seeds
from fleet.demo.runner import Demo, Story
from fleet.testing.workloads import pytorchjob

PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
TREE = (c.ELASTIC_QUOTA_API_VERSION, "ElasticQuotaTree")
UNIT = (c.QUEUE_API_VERSION, "QueueUnit")
POLICY = ("policy.one.alibabacloud.com/v1alpha1", "PropagationPolicy")
NAMESPACE = seeds.NAMESPACE
FIRST, SECOND, B_JOB = "reclaim-a1", "reclaim-a2", "reclaim-b1"
PODS = 2
TREE_NAME = "teams"
QUOTA_LABEL = "quota.scheduling.alibabacloud.com/name"
GPU = "nvidia.com/gpu"

TEAMS_TREE: dict[str, Any] = {
    "apiVersion": TREE[0],
    "kind": TREE[1],
    "metadata": {"name": TREE_NAME, "namespace": c.QUOTA_TREE_NAMESPACE},
    "spec": {
        "root": {
            "name": "root",
            "min": {GPU: 8},
            "max": {GPU: 8},
            "children": [
                {"name": "a", "min": {GPU: 4}, "max": {GPU: 8}},
                {"name": "b", "min": {GPU: 4}, "max": {GPU: 8}},
            ],
        }
    },
}


def team_job(name: str, team: str) -> dict[str, Any]:
    """A master and a worker of 2 GPUs each (4 GPUs): fits member-2 or member-3."""
    job = pytorchjob(name, namespace=NAMESPACE, workers=1, gpus=2)
    job["metadata"]["labels"] = {**seeds.QUEUE_LABEL, QUOTA_LABEL: team}
    return job


def _unit(demo: Demo, name: str) -> dict[str, Any]:
    return demo.fleet.get(*UNIT, queue_unit_name(PYTORCHJOB[1], name), NAMESPACE) or {}


def _phase(demo: Demo, name: str) -> str | None:
    return (_unit(demo, name).get("status") or {}).get("phase")


def _event(demo: Demo, name: str, reason: str) -> dict[str, Any] | None:
    uid = ((demo.fleet.get(*PYTORCHJOB, name, NAMESPACE) or {}).get("metadata") or {}).get("uid")
    events = [
        e
        for e in demo.fleet.events(NAMESPACE, name)
        if e.get("reason") == reason and e["involvedObject"].get("uid") == uid
    ]
    return events[-1] if uid and events else None


def _eviction(demo: Demo, name: str) -> dict[str, Any] | None:
    tasks = (demo.binding("PyTorchJob", name).get("spec") or {}).get("gracefulEvictionTasks") or []
    return next((t for t in tasks if t.get("evictedFor")), None)


def _tree_active(demo: Demo) -> bool:
    tree = demo.fleet.get(*TREE, TREE_NAME, c.QUOTA_TREE_NAMESPACE) or {}
    return (tree.get("status") or {}).get("state") == "Active"


def _start(demo: Demo, name: str, team: str) -> str:
    demo.fleet.apply(team_job(name, team))
    demo.expect(lambda: _phase(demo, name) == "Running", f"QueueUnit pytorchjob-{name} Running")
    member = demo.expect(lambda: demo.target("PyTorchJob", name), f"{name} placed")
    demo.expect(
        lambda: demo.running_in(member, name, PODS), f"{PODS} pods of {name} Running in {member}"
    )
    return member


def run(demo: Demo) -> None:
    demo.step("Two teams over 8 GPUs: a and b, each guaranteed min 4, may borrow up to 8")
    demo.fleet.apply(TEAMS_TREE)
    demo.expect(lambda: _tree_active(demo), f"ElasticQuotaTree {TREE_NAME} Active")
    demo.fleet.apply(seeds.QUEUED_POLICY)
    demo.say("  jobs name their team with the label " + QUOTA_LABEL)

    demo.step("Team a borrows the whole fleet: two gangs of 4 GPUs")
    first = _start(demo, FIRST, "a")
    second = _start(demo, SECOND, "a")
    demo.verify(first != second, f"{FIRST} in {first}, {SECOND} in {second}: every 2-GPU slot")
    demo.kubectl(f"kubectl get queueunit -n {NAMESPACE}")

    demo.step("Team b's gang of 4 GPUs arrives, within b's min: one of a's gangs is reclaimed")
    demo.fleet.apply(team_job(B_JOB, "b"))
    victim = demo.expect(
        lambda: next((n for n in (SECOND, FIRST) if _event(demo, n, "Reclaimed")), None),
        "a Reclaimed event on one of team a's gangs (the later start; to the second, a tie "
        "goes by name)",
    )
    kept = FIRST if victim == SECOND else SECOND
    where = {FIRST: first, SECOND: second}
    reclaimed = _event(demo, victim, "Reclaimed")
    assert reclaimed is not None
    demo.say(f"  Reclaimed: {reclaimed['message']}")
    task = demo.expect(lambda: _eviction(demo, victim), f"the eviction on {victim}'s binding")
    demo.verify(
        task["fromCluster"] == where[victim]
        and task["reason"] == "Reclaimed"
        and task["evictedFor"] == f"{NAMESPACE}/{queue_unit_name('PyTorchJob', B_JOB)}",
        f"recorded on the binding first: from {where[victim]}, Reclaimed, for b's unit",
    )
    binding = demo.binding("PyTorchJob", victim)
    demo.verify(
        not (binding.get("status") or {}).get("failoverHistory"),
        "not a failover: nothing charged against maxFailovers",
    )
    demo.expect(
        lambda: _phase(demo, victim) == "Enqueued",
        f"QueueUnit pytorchjob-{victim} Enqueued again, at its original place",
    )
    freed = where[victim]
    demo.expect(
        lambda: not demo.pods(freed, victim), f"{victim}'s copy deleted in {freed} after grace"
    )
    demo.expect(lambda: _phase(demo, B_JOB) == "Running", f"QueueUnit pytorchjob-{B_JOB} Running")
    demo.expect(lambda: demo.target("PyTorchJob", B_JOB) == freed, f"{B_JOB} placed in {freed}")
    demo.expect(
        lambda: demo.running_in(freed, B_JOB, PODS), f"{PODS} pods of {B_JOB} Running in {freed}"
    )
    dequeued = demo.expect(lambda: _event(demo, B_JOB, "Dequeued"), f"a Dequeued event on {B_JOB}")
    demo.say(f"  Dequeued: {dequeued['message']}")
    demo.verify(
        demo.running_in(where[kept], kept, PODS),
        f"{kept} (within a's min) still running in {where[kept]}",
    )
    demo.kubectl(f"kubectl get queueunit -n {NAMESPACE}")

    demo.step(f"{B_JOB} finishes: room returns and {victim} runs again")
    demo.cluster(freed).mark_job(PYTORCHJOB, B_JOB, NAMESPACE, "Succeeded")
    demo.expect(lambda: _phase(demo, B_JOB) == "Succeed", f"QueueUnit pytorchjob-{B_JOB} Succeed")
    demo.expect(lambda: _phase(demo, victim) == "Running", f"QueueUnit pytorchjob-{victim} Running")
    again = demo.expect(lambda: demo.target("PyTorchJob", victim), f"{victim} placed again")
    demo.expect(
        lambda: demo.running_in(again, victim, PODS), f"{PODS} pods of {victim} Running in {again}"
    )


def reset(demo: Demo) -> None:
    """Delete the jobs (their units go with them), the policy and the tree."""
    demo.delete_jobs(PYTORCHJOB, [FIRST, SECOND, B_JOB], NAMESPACE)
    demo.fleet.delete(*POLICY, seeds.QUEUED_POLICY["metadata"]["name"], NAMESPACE)
    demo.fleet.delete(*TREE, TREE_NAME, c.QUOTA_TREE_NAMESPACE)
    demo.expect(
        lambda: not any(_unit(demo, n) for n in (FIRST, SECOND, B_JOB)),
        "the jobs' QueueUnits gone",
    )


STORY = Story(
    name="reclaim",
    title="reclaim: team b takes its min back from team a, whole gang by whole gang",
    run=run,
    reset=reset,
)
