"""The seeds' fleet example (ACK One, seed 001): a PyTorchJob placed whole, then failed over.

1. The seeds' PropagationPolicy (Gang, failover after 30 s, purge Immediately) and a PyTorchJob
   with 1 master + 2 workers: placed whole in one member, the ScheduleBindingSucceed event, and
   `kubectl amc get pytorchjob -M` / `get pod -M` as ACK One prints them.
2. The job fails in its member (kwok crashes its pods, the training operator gives up after
   backoffLimit): after tolerationSeconds fleet deletes that copy and runs the job elsewhere.
"""

from __future__ import annotations

import time

from fleet.demo import seeds
from fleet.demo.runner import Demo, Story
from fleet.testing.workloads import pytorchjob

PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
NAME = "pytorch-test"
NAMESPACE = seeds.NAMESPACE
PODS = 3


def _mirrored(demo: Demo) -> bool:
    job = demo.fleet.get(*PYTORCHJOB, NAME, NAMESPACE) or {}
    return bool((job.get("status") or {}).get("replicaStatuses"))


def run(demo: Demo) -> None:
    demo.step("The seeds' example: a PyTorchJob with 1 master and 2 workers, 1 GPU each")
    demo.fleet.apply(seeds.PYTORCHJOB_POLICY)
    # OnFailure pods restart in place; after backoffLimit restarts the job is Failed.
    demo.fleet.apply(pytorchjob(NAME, namespace=NAMESPACE, workers=2, gpus=1, backoff_limit=2))
    first = demo.expect(lambda: demo.target("PyTorchJob", NAME), f"{NAME} placed")
    demo.expect(lambda: demo.running_in(first, NAME, PODS), f"{NAME} Running in {first}")
    demo.expect(lambda: _mirrored(demo), f"{NAME}'s member status mirrored onto the fleet")
    demo.kubectl("kubectl get pytorchjob")
    demo.kubectl("kubectl get events --field-selector reason=ScheduleBindingSucceed")
    demo.amc("kubectl amc get pytorchjob -M")
    demo.amc("kubectl amc get pod -M")

    demo.step(f"Failover: {NAME} fails in {first}; tolerationSeconds is {seeds.TOLERATION_SECONDS}")
    demo.cluster(first).mark_job(PYTORCHJOB, NAME, NAMESPACE, "Failed")
    started = time.monotonic()
    demo.say(
        "  marked its pods to crash (kwok restarts them as a kubelet would; after backoffLimit 2"
        " the job is Failed)"
    )

    def moved() -> str | None:
        target = demo.target("PyTorchJob", NAME)
        return target if target and target != first else None

    second = demo.expect(moved, f"{NAME} failed over from {first}", 180)
    demo.expect(lambda: demo.running_in(second, NAME, PODS), f"{NAME} Running in {second}")
    demo.expect(
        lambda: demo.cluster(first).get(*PYTORCHJOB, NAME, NAMESPACE) is None,
        f"the failed copy deleted from {first} (purge Immediately)",
    )
    demo.say(f"  {NAME} moved {first} -> {second} {time.monotonic() - started:.0f}s later")
    demo.amc("kubectl amc get pytorchjob -M")
    demo.amc(f"kubectl amc describe pytorchjob {NAME}")


def reset(demo: Demo) -> None:
    demo.delete_jobs(PYTORCHJOB, [NAME], NAMESPACE)


STORY = Story(
    name="failover",
    title="the seeds' PyTorchJob placed whole, then failed over when it fails in its member",
    run=run,
    reset=reset,
)
