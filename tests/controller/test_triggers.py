"""What makes the controller look at a workload again, beside its own events."""

from __future__ import annotations

from fleet.controller.keys import WorkloadKey
from fleet.controller.triggers import Triggers
from fleet.testing.workloads import pytorchjob, trainjob
from tests.controller.harness import RecordingQueue

TRAINER = "trainer.kubeflow.org/v1alpha1"


async def test_a_runtime_that_appears_brings_back_the_trainjobs_that_may_read_it():
    queue = RecordingQueue()
    triggers = Triggers(queue)
    jobs = [trainjob("tj", "torch", namespace="a"), trainjob("tj", "torch", namespace="b")]
    jobs.append(pytorchjob("pt", namespace="a"))
    for i, job in enumerate(jobs):
        job["metadata"].update(uid=f"uid-{i}", resourceVersion="1", generation=1)
        triggers.workload_changed(job)
    in_a, in_b = (WorkloadKey.of(j) for j in jobs[:2])

    queue.added.clear()
    triggers.needed_changed(TRAINER, "TrainingRuntime", "a")
    assert queue.added == [in_a]

    queue.added.clear()
    triggers.needed_changed(TRAINER, "ClusterTrainingRuntime", None)
    assert sorted(queue.added, key=str) == sorted([in_a, in_b], key=str)

    queue.added.clear()
    triggers.needed_changed("v1", "ConfigMap", "a")  # nothing reads its gang from one
    assert queue.added == []
