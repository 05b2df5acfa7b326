"""The seeds' first story, across the fleet: a gang held whole until one member can hold it.

The seeds (ACK "Gang scheduling") submit a TFJob of 1 PS + 4 workers x 2 GPUs to a cluster with
4 GPUs: with gang scheduling all five pods stay Pending, none holds a GPU it cannot use, and
when 4 more GPUs arrive all five start at once. On a fleet the same job must wait on the fleet,
whole, while no member can hold it, and then go, whole, to the one member that can:

1. the seeds' PropagationPolicy for TFJobs and the seeds' TFJob, unchanged (its labels too);
2. no member can hold it (member-1 has 8 GPUs but one per node; member-2 and member-3 have 4):
   the GangBinding is Pending with one reason per member, and no member has a copy or a pod;
3. a 4-GPU node joins member-2 (a kwok fake node, as a node pool scaling up would add one);
4. fleet dispatches the gang whole to member-2: ScheduleBindingSucceed, and
   `kubectl amc get pod -M` shows the five pods Running, all in member-2.
"""

from __future__ import annotations

from typing import Any

from fleet.demo import seeds
from fleet.demo.runner import Demo, Story, amc_rows
from fleet.sandbox import NodePool

TFJOB = ("kubeflow.org/v1", "TFJob")
NAME = "tf-smoke-gpu"
NAMESPACE = seeds.NAMESPACE
PODS = 5
#: The member that gets the new node, and the node: one more 4-GPU machine, as in the seeds.
GROWS = "member-2"
NEW_NODES = NodePool(name="scaled-up", count=1, cpu="64", memory="256Gi", gpu=4)
NEW_NODE = f"{GROWS}-{NEW_NODES.name}-0"


def _pending_reasons(demo: Demo) -> list[dict[str, Any]] | None:
    status = demo.binding("TFJob", NAME).get("status") or {}
    if status.get("phase") != "Pending":
        return None
    reasons: list[dict[str, Any]] = status.get("pendingReasons") or []
    return reasons if {r.get("cluster") for r in reasons} >= set(demo.members) else None


def run(demo: Demo) -> None:
    demo.step("The seeds' TFJob: 1 PS + 4 workers x 2 GPUs, gang labels min-available 5")
    job = seeds.tfjob()
    labels = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]
    for key, value in labels.items():
        demo.say(f"  {key}: {value}")
    demo.fleet.apply(seeds.TFJOB_POLICY)
    # Created, as `kubectl apply` (client-side) does: server-side apply refuses the seeds'
    # `creationTimestamp: null` in the pod templates, which the CRD's schema does not declare.
    demo.fleet.create(job)
    demo.say("  applied to the fleet with the seeds' PropagationPolicy (Gang) for TFJobs")

    demo.step("No member can hold it: it waits on the fleet, whole, with a reason per member")
    reasons = demo.expect(lambda: _pending_reasons(demo), "a Pending GangBinding, a reason each")
    for r in sorted(reasons, key=lambda r: r["cluster"]):
        demo.say(f"  {r['cluster']}: {r['reason']}")
    demo.verify(
        all(r.get("code") == "Insufficient" for r in reasons),
        "every member rejected for capacity (code Insufficient)",
    )
    holders = [
        m
        for m in demo.members
        if demo.cluster(m).get(*TFJOB, NAME, NAMESPACE) is not None or demo.pods(m, NAME)
    ]
    demo.verify(not holders, f"no member holds a copy or a pod of {NAME} (held: {holders})")
    demo.say(
        "  ACK One's sum-of-free rule would send it to member-1 (8 GPUs free >= 8 needed), where"
    )
    demo.say("  no node can start a 2-GPU worker: the gang would wait there, holding its place.")
    demo.kubectl("kubectl get tfjob,gangbinding")

    demo.step(f"Capacity arrives: a 4-GPU node joins {GROWS}")
    added = demo.sandbox.add_nodes(GROWS, NEW_NODES)
    demo.say(f"  node {', '.join(added)} added to {GROWS} (a kwok fake node, 4 GPUs)")
    demo.kubectl("kubectl get nodes", context=GROWS)

    demo.step(f"fleet dispatches the gang whole to {GROWS}; all five pods start together")
    demo.expect(lambda: demo.target("TFJob", NAME) == GROWS, f"{NAME} placed in {GROWS}")
    demo.expect(
        lambda: demo.running_in(GROWS, NAME, PODS), f"all {PODS} pods of {NAME} Running in {GROWS}"
    )
    events = [
        e["message"]
        for e in demo.fleet.events(NAMESPACE, NAME)
        if e.get("reason") == "ScheduleBindingSucceed"
    ]
    demo.verify(bool(events), "a ScheduleBindingSucceed event on the TFJob")
    demo.say(f"  ScheduleBindingSucceed: {events[-1]}")
    table = demo.amc("kubectl amc get pod -M")
    rows = amc_rows(table, NAME)
    clusters = {row["CLUSTER"] for row in rows}
    demo.verify(
        len(rows) == PODS and clusters == {GROWS} and all(r["STATUS"] == "Running" for r in rows),
        f"`kubectl amc get pod -M` lists {PODS} {NAME} pods Running, all in {GROWS}",
    )


def reset(demo: Demo) -> None:
    """Delete the TFJob everywhere and remove the node this story added (if it is there)."""
    demo.delete_jobs(TFJOB, [NAME], NAMESPACE)
    if demo.cluster(GROWS).get("v1", "Node", NEW_NODE) is not None:
        demo.sandbox.remove_nodes(GROWS, [NEW_NODE])
        demo.say(f"  removed node {NEW_NODE} from {GROWS}")


STORY = Story(
    name="held-gang",
    title="the seeds' TFJob waits whole while no member can hold it, then runs whole",
    run=run,
    reset=reset,
)
