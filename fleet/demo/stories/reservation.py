"""A gang placed through reservations on the Koordinator member (ACK's `enableReservation`).

member-4 runs koord-scheduler. Between fleet's decision and the pods' start a member's capacity
can be taken by something fleet does not see; with `spec.reservation.enabled` on member-4's
MemberCluster fleet first reserves every pod's place there, and dispatches only when the member
has reserved them all:

1. reservations on for member-4 (fleet detects it as `Koordinator`), and a 4-GPU node joins it
   (the layout gives member-4 no GPUs, so the other stories' gangs never go there);
2. a PyTorchJob (1 master + 2 workers, 1 GPU each) under a policy that sends it to member-4:
   the binding goes `Reserving` (event) with one Reservation per pod, `fleet-<uid>-<role>-<i>`;
3. all Available: event `Reserved`, the job is dispatched, its three pods run in member-4, each
   bound through one of those Reservations (koord-scheduler's pod annotation says which);
4. used, the Reservations are deleted: none left, the binding's `Reserved` condition `Released`.
"""

from __future__ import annotations

import json
from typing import Any

from fleet.demo import seeds
from fleet.demo.runner import Demo, Story
from fleet.sandbox import NodePool
from fleet.testing.workloads import gang_policy, pytorchjob

PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
MEMBER_CLUSTER = ("fleet.dev/v1alpha1", "MemberCluster")
RESERVATION = ("scheduling.koordinator.sh/v1alpha1", "Reservation")
POLICY = ("policy.one.alibabacloud.com/v1alpha1", "PropagationPolicy")
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
UID_LABEL = "fleet.dev/fleet-uid"
NAME = "reserved-gang"
NAMESPACE = seeds.NAMESPACE
PODS = 3
#: The Koordinator member of the demo's layout, and the GPUs this story gives it.
MEMBER = "member-4"
NEW_NODES = NodePool(name="reserved", count=1, cpu="64", memory="256Gi", gpu=4)
NEW_NODE = f"{MEMBER}-{NEW_NODES.name}-0"
#: Only this story's job carries it, so only it falls under `POLICY_NAME` (a labelSelector
#: match outranks example-policy's kind-only match).
STORY_LABEL = {"fleet.dev/story": "reservation"}
POLICY_NAME = "example-policy-reservation"


def policy() -> dict[str, Any]:
    """The seeds' gang policy, for this story's PyTorchJob only, placing it on member-4."""
    p = gang_policy(
        POLICY_NAME,
        NAMESPACE,
        toleration_seconds=seeds.TOLERATION_SECONDS,
        cluster_names=[MEMBER],
    )
    for selector in p["spec"]["resourceSelectors"]:
        selector["labelSelector"] = {"matchLabels": dict(STORY_LABEL)}
    return p


def job() -> dict[str, Any]:
    """1 master + 2 workers, 1 GPU each, labelled for `policy()`."""
    j = pytorchjob(NAME, namespace=NAMESPACE, workers=2, gpus=1)
    j["metadata"]["labels"] = dict(STORY_LABEL)
    return j


def _member(demo: Demo) -> dict[str, Any]:
    return demo.fleet.get(*MEMBER_CLUSTER, MEMBER) or {}


def _event(demo: Demo, reason: str) -> str | None:
    messages = [
        str(e.get("message", ""))
        for e in demo.fleet.events(NAMESPACE, NAME)
        if e.get("reason") == reason
    ]
    return messages[-1] if messages else None


def _reserved_through(pod: dict[str, Any]) -> str:
    """The Reservation koord-scheduler bound the pod through ('' when none)."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ALLOCATED, "")
    try:
        return str(json.loads(raw).get("name", ""))
    except (ValueError, AttributeError):
        return str(raw)


def _released(demo: Demo) -> dict[str, Any] | None:
    conditions = (demo.binding("PyTorchJob", NAME).get("status") or {}).get("conditions") or []
    return next(
        (c for c in conditions if c.get("type") == "Reserved" and c.get("reason") == "Released"),
        None,
    )


def run(demo: Demo) -> None:
    demo.step(f"{MEMBER} runs koord-scheduler: fleet reserves there before it dispatches")
    demo.fleet.apply(
        {
            "apiVersion": MEMBER_CLUSTER[0],
            "kind": MEMBER_CLUSTER[1],
            "metadata": {"name": MEMBER},
            "spec": {"reservation": {"enabled": True}},
        }
    )
    demo.expect(
        lambda: (_member(demo).get("status") or {}).get("gangScheduler") == "Koordinator",
        f"MemberCluster {MEMBER} detected as Koordinator",
    )
    reservation = (_member(demo).get("spec") or {}).get("reservation") or {}
    demo.verify(reservation.get("enabled") is True, f"{MEMBER} spec.reservation.enabled")
    added = demo.sandbox.add_nodes(MEMBER, NEW_NODES)
    demo.say(f"  node {', '.join(added)} added to {MEMBER} (4 GPUs)")
    demo.kubectl("kubectl get membercluster")

    demo.step(f"A PyTorchJob of {PODS} GPUs for {MEMBER}: the binding goes Reserving")
    demo.fleet.apply(policy())
    demo.fleet.apply(job())
    uid = str(
        demo.expect(lambda: demo.fleet.get(*PYTORCHJOB, NAME, NAMESPACE), NAME)["metadata"]["uid"]
    )
    reserving = demo.expect(lambda: _event(demo, "Reserving"), "a Reserving event on the job")
    demo.say(f"  Reserving: {reserving}")
    demo.verify(MEMBER in reserving, f"reserving in {MEMBER}")

    demo.step(f"Every Reservation Available: the job is dispatched and runs in {MEMBER}")
    reserved = demo.expect(lambda: _event(demo, "Reserved"), "a Reserved event on the job")
    demo.say(f"  Reserved: {reserved}")
    demo.expect(lambda: demo.target("PyTorchJob", NAME) == MEMBER, f"{NAME} placed in {MEMBER}")
    demo.expect(
        lambda: demo.running_in(MEMBER, NAME, PODS),
        f"all {PODS} pods of {NAME} Running in {MEMBER}",
    )
    through = {
        p["metadata"]["name"]: _reserved_through(p) for p in demo.pods(MEMBER, NAME, NAMESPACE)
    }
    for pod, name in sorted(through.items()):
        demo.say(f"  {pod} bound through Reservation {name}")
    demo.verify(
        len(set(through.values())) == PODS
        and all(n.startswith(f"fleet-{uid}-") for n in through.values()),
        f"each pod consumed its own Reservation fleet-{uid}-<role>-<i>",
    )

    demo.step("Used, the Reservations are cleaned up")
    demo.expect(
        lambda: not demo.cluster(MEMBER).items(*RESERVATION, None, f"{UID_LABEL}={uid}"),
        f"no Reservation of {NAME} left in {MEMBER}",
    )
    released = demo.expect(lambda: _released(demo), "the binding's Reserved condition Released")
    demo.say(f"  Reserved={released.get('status')} {released.get('reason')}")
    demo.verify(demo.running_in(MEMBER, NAME, PODS), f"{NAME} still Running in {MEMBER}")


def reset(demo: Demo) -> None:
    """Delete the job (its Reservations go with it) and the node this story added."""
    demo.delete_jobs(PYTORCHJOB, [NAME], NAMESPACE)
    if demo.cluster(MEMBER).get("v1", "Node", NEW_NODE) is not None:
        demo.sandbox.remove_nodes(MEMBER, [NEW_NODE])
        demo.say(f"  removed node {NEW_NODE} from {MEMBER}")


STORY = Story(
    name="reservation",
    title="a gang placed through Koordinator Reservations, consumed, then cleaned up",
    run=run,
    reset=reset,
)
