"""Fragmentation: fleet places a gang where every pod has a node, not where the sum says so.

big-gang is 1 master + 2 workers x 2 GPUs. member-1 has 8 GPUs free in sum, but one per node:
ACK One's sum-of-free rule accepts it (8 >= 4) and the gang would wait there, whole, forever.
fleet's `nodes` estimator rejects member-1 and says why, and places the gang in a member where
both workers have a node; the binding's Scheduled condition carries the reasons.
"""

from __future__ import annotations

import textwrap

from fleet.demo import seeds
from fleet.demo.runner import Demo, Story
from fleet.testing.workloads import pytorchjob

PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
NAME = "big-gang"
NAMESPACE = seeds.NAMESPACE
SCATTERED = "member-1"


def run(demo: Demo) -> None:
    demo.step("2 workers x 2 GPUs; member-1 has 8 GPUs free in sum, but one per node")
    demo.fleet.apply(seeds.PYTORCHJOB_POLICY)
    demo.fleet.apply(pytorchjob(NAME, namespace=NAMESPACE, workers=2, gpus=2, master_gpus=0))
    chosen = demo.expect(lambda: demo.target("PyTorchJob", NAME), f"{NAME} placed")
    demo.verify(chosen != SCATTERED, f"{NAME} not placed in {SCATTERED} (placed in {chosen})")

    demo.step(f"It runs whole in {chosen}; the binding says why not {SCATTERED}")
    demo.expect(lambda: demo.running_in(chosen, NAME, 3), f"{NAME}'s 3 pods Running in {chosen}")
    conditions = (demo.binding("PyTorchJob", NAME).get("status") or {}).get("conditions") or []
    message = next((str(c.get("message")) for c in conditions if c["type"] == "Scheduled"), "")
    demo.say(f"  fleet placed {NAME} in {chosen}. The binding says why:")
    demo.say(textwrap.fill(message, 96, initial_indent="    ", subsequent_indent="    "))
    demo.verify(f"{SCATTERED}:" in message, f"the Scheduled condition gives {SCATTERED}'s reason")
    demo.say("  ACK One's sum-of-free rule accepts member-1 (8 free >= 4 needed); the gang would")
    demo.say("  wait there, whole, because no node of member-1 can hold a 2-GPU worker.")


def reset(demo: Demo) -> None:
    demo.delete_jobs(PYTORCHJOB, [NAME], NAMESPACE)


STORY = Story(
    name="fragmentation",
    title="a gang goes where every pod has a node, not where the free GPUs add up",
    run=run,
    reset=reset,
)
