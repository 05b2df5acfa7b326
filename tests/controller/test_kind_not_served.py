"""A member whose API server has no CRD for the job's kind is never chosen, and says why."""

from __future__ import annotations

from fleet.testing.workloads import gang_policy, pytorchjob
from tests.controller.harness import NAMESPACE, World

PYTORCH = ("kubeflow.org/v1", "PyTorchJob")


async def test_a_member_without_the_jobs_kind_is_not_chosen_and_says_why():
    world = World()
    big = world.add_member("member-1", gpus=8)
    world.add_member("member-2", gpus=1)  # too small for 3 GPUs
    connection = big.member.connection
    assert connection is not None
    connection.missing_kinds = {PYTORCH}
    world.apply_policy(gang_policy("gang", NAMESPACE))
    key = world.submit(pytorchjob("job"))

    await world.reconcile(key)

    status = (world.binding(key) or {}).get("status") or {}
    reasons = {r["cluster"]: (r["code"], r["reason"]) for r in status["pendingReasons"]}
    assert reasons["member-1"] == (
        "KindNotServed",
        "does not run PyTorchJob: no pytorchjobs.kubeflow.org CRD in the member",
    )
    assert reasons["member-2"][0] == "Insufficient"

    # The CRD is found (the connection's next look): the member can take it.
    connection.missing_kinds = set()
    await world.reconcile(key)
    clusters = ((world.binding(key) or {}).get("spec") or {}).get("clusters") or []
    assert [c["name"] for c in clusters] == ["member-1"]


async def test_deleting_a_job_asks_no_member_that_lacks_its_kind():
    from fleet.controller.keys import WorkloadKey
    from fleet.controller.member_copy import delete_copy

    world = World()
    fake = world.add_member("member-1")
    connection = fake.member.connection
    assert connection is not None
    connection.missing_kinds = {("jobset.x-k8s.io/v1alpha2", "JobSet")}
    key = WorkloadKey("jobset.x-k8s.io/v1alpha2", "JobSet", NAMESPACE, "js")
    asked = len(fake.api.requests)
    assert await delete_copy(fake.member, key, "uid") is False
    assert len(fake.api.requests) == asked
