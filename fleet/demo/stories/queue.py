"""The seeds' Kube Queue step (ACK One, seed 001): two jobs of a quota of one job at a time.

1. The seeds' ElasticQuotaTree (`default` in leaf `root/child-2`, `kube-queue/max-jobs: 1`):
   fleet puts it in force and makes one Queue per quota node in kube-queue
   (`root-<suffix>`, `root-child-2-<suffix>`).
2. The seeds' queued policy (`suspension.scheduling: true`), for PyTorchJobs labelled
   `fleet.dev/queue: "true"` only: the other stories' jobs in `default` are not queued.
3. Two such PyTorchJobs, each fitting one member: the first is dequeued and placed; the second
   waits in the queue (its QueueUnit Enqueued, the job's Scheduled condition saying that 1 of
   max 1 jobs is already dequeued) although the fleet has room for it.
4. The first finishes in its member: its quota is released, the second is dequeued (Dequeued,
   then ScheduleBindingSucceed) and runs.
"""

from __future__ import annotations

import re
from typing import Any

from fleet.api import constants as c
from fleet.api import queue_unit_name
from fleet.api._time import parse_time
from fleet.demo import seeds
from fleet.demo.runner import Demo, Story, amc_rows
from fleet.testing.workloads import pytorchjob

PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
TREE = (c.ELASTIC_QUOTA_API_VERSION, "ElasticQuotaTree")
QUEUE = (c.QUEUE_API_VERSION, "Queue")
UNIT = (c.QUEUE_API_VERSION, "QueueUnit")
POLICY = ("policy.one.alibabacloud.com/v1alpha1", "PropagationPolicy")
NAMESPACE = seeds.NAMESPACE
FIRST, SECOND = "queue-first", "queue-second"
PODS = 3
#: The quota nodes of the seeds' tree, and the Queue name each gets (path, then a suffix).
QUEUES = {"root": r"root-[a-z0-9]{5}", "root/child-2": r"root-child-2-[a-z0-9]{5}"}


def queued_job(name: str) -> dict[str, Any]:
    """1 master + 2 workers, 1 GPU each: fits any member of the demo's fleet."""
    job = pytorchjob(name, namespace=NAMESPACE, workers=2, gpus=1)
    job["metadata"]["labels"] = dict(seeds.QUEUE_LABEL)
    return job


def _tree_in_force(demo: Demo) -> dict[str, Any] | None:
    tree = demo.fleet.get(*TREE, seeds.QUOTA_TREE["metadata"]["name"], c.QUOTA_TREE_NAMESPACE)
    status = (tree or {}).get("status") or {}
    in_force = (status.get("inForce") or {}).get("generation")
    if tree is None or status.get("state") != "Active":
        return None
    return tree if in_force == tree["metadata"].get("generation") else None


def _queues(demo: Demo) -> dict[str, str]:
    """Quota path -> Queue name, for fleet's Queues in kube-queue."""
    found: dict[str, str] = {}
    for queue in demo.fleet.items(*QUEUE, c.QUEUE_NAMESPACE):
        path = (queue["metadata"].get("annotations") or {}).get(c.QUOTA_FULLNAME_ANNOTATION)
        if path:
            found[path] = queue["metadata"]["name"]
    return found


def _all_queues(demo: Demo) -> dict[str, str] | None:
    queues = _queues(demo)
    return queues if queues.keys() >= QUEUES.keys() else None


def _unit(demo: Demo, name: str) -> dict[str, Any]:
    return demo.fleet.get(*UNIT, queue_unit_name(PYTORCHJOB[1], name), NAMESPACE) or {}


def _phase(demo: Demo, name: str) -> str | None:
    return (_unit(demo, name).get("status") or {}).get("phase")


def _held(demo: Demo, name: str) -> str | None:
    """The job's Scheduled condition's message, when it holds the job for the queue's max-jobs."""
    job = demo.fleet.get(*PYTORCHJOB, name, NAMESPACE) or {}
    conditions = (job.get("status") or {}).get("conditions") or []
    cond: dict[str, Any] = next((x for x in conditions if x.get("type") == "Scheduled"), {})
    message = str(cond.get("message") or "")
    held = cond.get("status") == "False" and cond.get("reason") == c.REASON_QUEUED
    return message if held and "1 of max 1 jobs already dequeued" in message else None


def _event(demo: Demo, name: str, reason: str) -> dict[str, Any] | None:
    """The job's newest Event with `reason` (this job's, by uid: not an earlier run's)."""
    uid = ((demo.fleet.get(*PYTORCHJOB, name, NAMESPACE) or {}).get("metadata") or {}).get("uid")
    events = [
        e
        for e in demo.fleet.events(NAMESPACE, name)
        if e.get("reason") == reason and e["involvedObject"].get("uid") == uid
    ]
    return events[-1] if uid and events else None


def run(demo: Demo) -> None:
    demo.step("The seeds' ElasticQuotaTree: `default` in root/child-2, kube-queue/max-jobs 1")
    demo.fleet.apply(seeds.QUOTA_TREE)
    demo.expect(lambda: _tree_in_force(demo), "the tree Active, its generation in force")
    queues = demo.expect(
        lambda: _all_queues(demo), "a Queue in kube-queue for root and for root/child-2"
    )
    for path, pattern in QUEUES.items():
        demo.verify(
            re.fullmatch(pattern, queues[path]) is not None,
            f"{path}'s Queue named {pattern} ({queues[path]})",
        )
    demo.kubectl("kubectl get elasticquotatree -n kube-system")
    demo.kubectl("kubectl get queue -n kube-queue")

    demo.step("The seeds' queued policy: suspension.scheduling, for jobs labelled fleet.dev/queue")
    demo.fleet.apply(seeds.QUEUED_POLICY)
    demo.say(
        f"  {seeds.QUEUED_POLICY['metadata']['name']}: PyTorchJobs labelled fleet.dev/queue=true"
        " wait in their quota's queue; the other stories' jobs are not queued"
    )

    demo.step(f"Two queued PyTorchJobs of {PODS} GPUs: {FIRST} runs, {SECOND} waits its turn")
    demo.fleet.apply(queued_job(FIRST))
    demo.expect(lambda: _phase(demo, FIRST) == "Running", f"QueueUnit pytorchjob-{FIRST} Running")
    first = demo.expect(lambda: demo.target("PyTorchJob", FIRST), f"{FIRST} placed")
    demo.fleet.apply(queued_job(SECOND))
    demo.expect(
        lambda: _phase(demo, SECOND) == "Enqueued", f"QueueUnit pytorchjob-{SECOND} Enqueued"
    )
    message = demo.expect(
        lambda: _held(demo, SECOND),
        f"{SECOND}'s Scheduled condition False, {c.REASON_QUEUED}: 1 of max 1 jobs dequeued",
    )
    demo.say(f"  {SECOND}: {message}")
    demo.verify(
        demo.target("PyTorchJob", SECOND) is None, f"{SECOND} placed nowhere while it waits"
    )
    demo.kubectl(f"kubectl get queueunit -n {NAMESPACE}")
    demo.kubectl("kubectl get queue -n kube-queue -o wide")

    demo.step(f"{FIRST} finishes in {first}: the queue releases {SECOND}")
    demo.cluster(first).mark_job(PYTORCHJOB, FIRST, NAMESPACE, "Succeeded")
    demo.say(f"  marked {FIRST}'s pods to succeed in {first} (kwok ends them as a kubelet would)")
    demo.expect(lambda: _phase(demo, FIRST) == "Succeed", f"QueueUnit pytorchjob-{FIRST} Succeed")
    demo.expect(lambda: _phase(demo, SECOND) == "Running", f"QueueUnit pytorchjob-{SECOND} Running")
    dequeued = demo.expect(
        lambda: _event(demo, SECOND, "Dequeued"), f"a Dequeued event on {SECOND}"
    )
    placed = demo.expect(
        lambda: _event(demo, SECOND, "ScheduleBindingSucceed"),
        f"a ScheduleBindingSucceed event on {SECOND}",
    )
    demo.verify(
        parse_time(dequeued["firstTimestamp"]) <= parse_time(placed["firstTimestamp"]),
        "Dequeued before ScheduleBindingSucceed",
    )
    demo.say(f"  Dequeued: {dequeued['message']}")
    demo.say(f"  ScheduleBindingSucceed: {placed['message']}")
    second = demo.expect(lambda: demo.target("PyTorchJob", SECOND), f"{SECOND} placed")
    demo.expect(
        lambda: demo.running_in(second, SECOND, PODS),
        f"{PODS} pods of {SECOND} Running in {second}",
    )
    rows = amc_rows(demo.amc("kubectl amc get pod -M"), SECOND)
    demo.verify(
        len(rows) == PODS
        and all(r["CLUSTER"] == second and r["STATUS"] == "Running" for r in rows),
        f"`kubectl amc get pod -M` lists {PODS} {SECOND} pods Running in {second}",
    )
    demo.kubectl(f"kubectl get queueunit -n {NAMESPACE}")


def reset(demo: Demo) -> None:
    """Delete the jobs (their QueueUnits go with them), the policy and the tree; fleet deletes
    the tree's Queues. What is left is the fleet as the other stories expect it."""
    demo.delete_jobs(PYTORCHJOB, [FIRST, SECOND], NAMESPACE)
    demo.fleet.delete(*POLICY, seeds.QUEUED_POLICY["metadata"]["name"], NAMESPACE)
    demo.fleet.delete(*TREE, seeds.QUOTA_TREE["metadata"]["name"], c.QUOTA_TREE_NAMESPACE)
    demo.expect(
        lambda: not _queues(demo) and not _unit(demo, FIRST) and not _unit(demo, SECOND),
        "the tree's Queues and the jobs' QueueUnits gone",
    )


STORY = Story(
    name="queue",
    title="the seeds' Kube Queue: max-jobs 1, the second job waits until the first finishes",
    run=run,
    reset=reset,
)
