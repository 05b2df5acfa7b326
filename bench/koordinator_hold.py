"""Does a Koordinator member keep a reclaim's freed room for the claimant? koord-scheduler alone.

    .venv/bin/python bench/koordinator_hold.py [--runs 5] [--ways 'pending;...'] [--preemption]
        [--state-dir DIR]

Issue #26 asks that, while fleet holds the room a reclaim frees for its claimant, a member-local
pod created in the grace period does not take it on a member that takes Reservations. fleet's
part is to make the claimant's Reservations in the member during the grace period
(`reserving.hold_room`); whether they keep the room is koord-scheduler's doing. This bench
measures that part alone, with no fleet, on a sandbox member running koord-scheduler v1.8.0.

Every trial, in a fresh namespace on one fresh 4-GPU node: two victim pods (2 GPUs each) run;
the claimant's two Reservations (2 GPUs each, owned by the claimant's pods) are made; a
member-local pod (2 GPUs, no Reservation) is created while the victims still run (the grace
period); the victims are deleted; the claimant's two pods are created. The trial is won when both
claimant pods run and the local pod does not.

Ways:
- `pending`: plain Reservations (what `hold_room` makes): they wait in koord-scheduler's queue
  while the victims run, beside the local pod.
- `pending, no template namespace`: the same, their template naming no namespace, so that
  koord-scheduler makes their reserve pods in `default`. v1.8.0's Reservation preemption finds
  a preemptor reserve pod only there (its pod lister looks a reserve pod up by name in
  `default` alone, `delegatingPodLister`): one in any other namespace fails every preemption
  with "Could not get the updated preemptor pod object ... not found".
- `pre-allocated`: `spec.preAllocation` Reservations (allocatePolicy Restricted, allocateOnce
  false) that also name the victims' pods as owners, so each is bound at once to a running victim
  pod and should keep its room when that pod goes (Koordinator's pre-allocation); the local pod
  is created after both are bound.
- `pre-allocated, local first`: the same with the local pod created before the Reservations.

`--preemption` runs the member's koord-scheduler with Reservation preemption on
(`MemberSpec.reservation_preemption`: the Reservation plugin's `enablePreemption`). Then a
pending Reservation that does not fit may preempt the pods in its way (the victims, plain pods
of priority 0 here; a Reservation without a priority of its own has the highest) and is
nominated on the node, which keeps pods of equal or lower priority (the local pod) off that room
until the Reservation is scheduled there. The victims are then deleted by the scheduler before
the bench deletes them; in fleet they are the evicted gang's pods, which fleet deletes anyway.

Prints, per way, how many trials the claimant won, and the machine's load (before and after).
Nothing is asserted. The sandbox is torn down at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This script's directory holds bench/queue.py, which would shadow the standard library's
# `queue`: search the repository, not this directory.
# The repository first, so a worktree's bench runs that worktree's fleet, not the one the venv
# was installed from.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != _HERE)]

from fleet.sandbox import MemberSpec, NodePool, Sandbox, SandboxConfig
from fleet.testing.kube import ClusterClient, wait_until

MEMBER = "member-1"
RESERVATION = ("scheduling.koordinator.sh/v1alpha1", "Reservation")
OWNER = "bench.fleet.dev/owner"
NODE = "bench.fleet.dev/trial"
GPUS = 2  # per pod and per Reservation: two victims fill the 4-GPU node, so do two claimants
SETTLE = 5.0  # seconds given to the scheduler after the victims go, before the claimants come

DEFAULT_NAMESPACE = "pending, no template namespace"
WAYS = ("pending", DEFAULT_NAMESPACE, "pre-allocated", "pre-allocated, local first")


def config(*, preemption: bool) -> SandboxConfig:
    return SandboxConfig(
        members=[
            MemberSpec(
                name=MEMBER,
                nodes=[NodePool(name="base", count=1, cpu="64", gpu=0)],
                scheduler="koordinator",
                operators=[],
                reservation_preemption=preemption,
            )
        ]
    )


def _requests() -> dict[str, Any]:
    return {
        "requests": {"nvidia.com/gpu": GPUS, "cpu": "1"},
        "limits": {"nvidia.com/gpu": GPUS},
    }


def _pod(name: str, namespace: str, owner: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {OWNER: owner}},
        "spec": {
            "nodeSelector": {NODE: node},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "pause", "resources": _requests()}],
        },
    }


def _reservation(
    name: str, namespace: str | None, node: str, owners: list[str], pre: bool
) -> dict[str, Any]:
    """`namespace`: the template's (None: none, so the reserve pod is in `default`)."""
    spec: dict[str, Any] = {
        "ttl": "600s",
        "allocateOnce": not pre,
        "owners": [{"labelSelector": {"matchLabels": {OWNER: o}}} for o in owners],
        "template": {
            "metadata": {"namespace": namespace} if namespace else {},
            "spec": {
                "nodeSelector": {NODE: node},
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "c", "resources": _requests()}],
            },
        },
    }
    if pre:
        spec |= {"preAllocation": True, "allocatePolicy": "Restricted"}
    return {
        "apiVersion": RESERVATION[0],
        "kind": RESERVATION[1],
        "metadata": {"name": name},
        "spec": spec,
    }


class Bench:
    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.member = ClusterClient(str(sandbox.kubeconfig), MEMBER)
        self.count = 0

    def _phase(self, namespace: str, name: str) -> str:
        pod = self.member.get("v1", "Pod", name, namespace) or {}
        return str((pod.get("status") or {}).get("phase") or "")

    def _leaving(self, namespace: str, name: str) -> bool:
        """Gone or being deleted before the bench deletes it: the scheduler preempted it."""
        pod = self.member.get("v1", "Pod", name, namespace)
        return pod is None or bool(pod["metadata"].get("deletionTimestamp"))

    def _owners(self, name: str) -> int:
        found = self.member.get(*RESERVATION, name) or {}
        return len((found.get("status") or {}).get("currentOwners") or [])

    def _bound(self, name: str) -> None:
        wait_until(lambda: self._owners(name) == 1, timeout=30, what=f"{name} bound to a victim")

    def trial(self, way: str) -> bool:
        self.count += 1
        ns = f"hold-{self.count}"
        node = f"t{self.count}"
        nodes = self.sandbox.add_nodes(MEMBER, NodePool(name=node, gpu=4, labels={NODE: node}))
        self.member.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        names = [f"{ns}-r{i}" for i in range(2)]
        try:
            for i in range(2):
                self.member.create(_pod(f"victim-{i}", ns, f"{ns}-victim", node))
            wait_until(
                lambda: all(self._phase(ns, f"victim-{i}") == "Running" for i in range(2)),
                timeout=60,
                what="the victims running",
            )
            pre = way.startswith("pre-allocated")
            template_ns = None if way == DEFAULT_NAMESPACE else ns
            owners = [f"{ns}-claimant", *([f"{ns}-victim"] if pre else [])]
            if way == "pre-allocated, local first":
                self.member.create(_pod("local", ns, "local", node))
            for name in names:
                self.member.create(_reservation(name, template_ns, node, owners, pre))
                if pre:  # each bound to a victim before the next is made
                    self._bound(name)
            if way != "pre-allocated, local first":
                self.member.create(_pod("local", ns, "local", node))
            time.sleep(1.0)  # the local pod tried once and waits, as in a grace period
            preempted = sum(self._leaving(ns, f"victim-{i}") for i in range(2))
            for i in range(2):
                self.member.delete("v1", "Pod", f"victim-{i}", ns)
            time.sleep(SETTLE)
            for i in range(2):
                self.member.create(_pod(f"claimant-{i}", ns, f"{ns}-claimant", node))
            try:
                wait_until(
                    lambda: all(self._phase(ns, f"claimant-{i}") == "Running" for i in range(2)),
                    timeout=15,
                    what="the claimant running",
                )
                won = self._phase(ns, "local") != "Running"
            except AssertionError:
                won = False
            print(
                f"  {way}: trial {self.count}: {'claimant' if won else 'local pod'}"
                f"{f' ({preempted} victims preempted)' if preempted else ''}",
                flush=True,
            )
            return won
        finally:
            for name in names:
                self.member.delete(*RESERVATION, name)
            self.member.delete("v1", "Namespace", ns)
            self.sandbox.remove_nodes(MEMBER, nodes)


def _load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="trials per way (default 5)")
    parser.add_argument(
        "--ways",
        default=";".join(WAYS),
        help=f"separated by ';', of: {'; '.join(WAYS)} (default: all)",
    )
    parser.add_argument(
        "--preemption",
        action="store_true",
        help="koord-scheduler with Reservation preemption on (nomination)",
    )
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    ways = [w.strip() for w in args.ways.split(";") if w.strip()]
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        parser.error(f"unknown ways {unknown}: choose of {list(WAYS)}")
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="fleet-hold-"))
    sandbox = Sandbox(state)
    scheduler = "Reservation preemption on" if args.preemption else "no preemption"
    print(
        f"machine: {os.cpu_count()} CPUs, load average {_load()}; koord-scheduler with "
        f"{scheduler}; {args.runs} runs each way",
        flush=True,
    )
    sandbox.up(config(preemption=args.preemption), die_with_parent=True)
    results: dict[str, list[bool]] = {}
    try:
        bench = Bench(sandbox)
        for way in ways:
            results[way] = [bench.trial(way) for _ in range(args.runs)]
        print(f"results ({scheduler}; load average {_load()}):", flush=True)
        for way, won in results.items():
            print(f"  {way:28} the claimant got the room in {sum(won)}/{len(won)} trials")
    finally:
        sandbox.down(progress=lambda _m: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
