"""Do reservations matter? A member-local workload races a gang fleet has just placed.

    .venv/bin/python bench/reservation_race.py [--runs 5] \
        [--wait-seconds 15] [--timeout 60]

Brings up its own sandbox: member-1 (coscheduling, the fallback) and member-2 (koord-scheduler,
the preferred member). Every trial adds one fresh 4-GPU node to each member, labelled for that
trial only (the job and the local workload select it, so no trial sees another's capacity or
fleet's in-flight hold of it), and submits a 3-pod gang (1 GPU each) preferring member-2.

- race: the bench watches the fleet binding (polled every 10 ms); the moment it names member-2
  (fleet's decision is written) it creates a member-local pod asking for 2 of that node's 4 GPUs,
  which koord-scheduler binds at once: capacity fleet counted is taken after its decision and
  before the gang's pods arrive.
- no race: the same without the local pod (what reservations cost when nothing goes wrong).

Each way: member-2's MemberCluster with `spec.reservation` off, and on (`waitSeconds`
`--wait-seconds`). Per trial: dispatch latency, from the create call returning to every pod of
the gang Running (in whichever member), or "did not start" after `--timeout`; and where it ran.
Prints the share of gangs that started within 30 s, p50/p99 latencies and their medians, and the
machine and its load. Nothing is asserted. The sandbox is torn down at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# This script's directory holds bench/queue.py, which would shadow the standard library's
# `queue`: search the repository, not this directory.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from fleet.api.guard import open_label
from fleet.api.membership import default_fleet_id
from fleet.install import install_crds
from fleet.join import join_member
from fleet.kube import SyncKubeClient, load, read_kubeconfig_file
from fleet.sandbox import MemberSpec, NodePool, Sandbox, SandboxConfig
from fleet.testing.controller import ControllerProcess
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.workloads import JOB_NAME_LABEL, gang_policy, pytorchjob

FALLBACK = "member-1"
KOORD = "member-2"
MEMBERS = (FALLBACK, KOORD)
NS = "race"
GPUS_PER_NODE = 4
GANG_PODS = 3  # 1 Master + 2 Workers, 1 GPU each
LOCAL_GPUS = 2  # the local workload: with it bound, the gang (3) no longer fits in 4
WITHIN = 30.0
PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
BINDING = ("fleet.dev/v1alpha1", "GangBinding")
MEMBER_CLUSTER = ("fleet.dev/v1alpha1", "MemberCluster")
RESERVATION = ("scheduling.koordinator.sh/v1alpha1", "Reservation")

CONFIG = SandboxConfig(
    members=[
        MemberSpec(
            name=m,
            nodes=[NodePool(name="base", count=1, cpu="64", gpu=0)],
            scheduler="koordinator" if m == KOORD else "coscheduling",
        )
        for m in MEMBERS
    ]
)


@dataclass(frozen=True)
class Trial:
    """One gang: seconds from create to all pods Running (None: not within the timeout),
    the member it ran in, and whether the local workload won member-2's GPUs."""

    latency: float | None
    member: str | None
    local_bound: bool | None = None


def percentile(values: list[float | None], q: float) -> float | None:
    """The q-quantile (nearest rank, 0 < q <= 1) of latencies where None (never started) ranks
    above every number; None when the quantile falls among those that never started."""
    ordered = sorted(values, key=lambda v: (v is None, v or 0.0))
    if not ordered:
        return None
    rank = min(len(ordered) - 1, max(0, -(-len(ordered) * q // 1) - 1))
    return ordered[int(rank)]


def share_within(values: list[float | None], seconds: float) -> float:
    """The share of gangs that started within `seconds` (0.0 for no gangs)."""
    if not values:
        return 0.0
    return sum(1 for v in values if v is not None and v <= seconds) / len(values)


def _fmt(value: float | None, timeout: float) -> str:
    return f"> {timeout:.0f} s" if value is None else f"{value:.1f} s"


class Race:
    def __init__(self, sandbox: Sandbox, wait_seconds: int, timeout: float) -> None:
        self.sandbox = sandbox
        self.wait_seconds = wait_seconds
        self.timeout = timeout
        self.c = {n: ClusterClient(str(sandbox.kubeconfig), n) for n in ("fleet", *MEMBERS)}
        self.count = 0

    def setup(self) -> None:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        # Made in the members by their admins: opened to the fleet, as `fleet join --namespaces`
        # opens one (fleet dispatches only into namespaces it made or that are opened to it).
        uid = (self.c["fleet"].get("v1", "Namespace", "kube-system") or {})["metadata"]["uid"]
        opened = {
            **ns,
            "metadata": {"name": NS, "labels": {open_label(default_fleet_id(uid)): "true"}},
        }
        for name, client in self.c.items():
            client.apply(ns if name == "fleet" else opened)
        policy = gang_policy("race", NS, toleration_seconds=None)
        policy["spec"]["placement"]["clusterAffinities"] = [
            {"affinityName": "koordinator", "clusterNames": [KOORD]},
            {"affinityName": "fallback", "clusterNames": [FALLBACK]},
        ]
        self.c["fleet"].apply(policy)
        wait_until(
            lambda: (
                ((self.c["fleet"].get(*MEMBER_CLUSTER, KOORD) or {}).get("status") or {}).get(
                    "gangScheduler"
                )
                == "Koordinator"
            ),
            timeout=120,
            what=f"{KOORD} Ready with Koordinator detected",
        )

    def reservations(self, enabled: bool) -> None:
        """member-2's `spec.reservation`: applied by this bench's field manager, or dropped."""
        spec: dict[str, Any] = {}
        if enabled:
            spec["reservation"] = {
                "enabled": True,
                "ttlSeconds": 600,
                "waitSeconds": self.wait_seconds,
            }
        self.c["fleet"].apply(
            {
                "apiVersion": MEMBER_CLUSTER[0],
                "kind": MEMBER_CLUSTER[1],
                "metadata": {"name": KOORD},
                "spec": spec,
            }
        )
        time.sleep(2)  # the controller's MemberCluster watch picks the setting up

    def target(self, name: str) -> str | None:
        b = self.c["fleet"].get(*BINDING, f"pytorchjob-{name}", NS)
        clusters = ((b or {}).get("spec") or {}).get("clusters") or []
        return str(clusters[0]["name"]) if clusters else None

    def running_in(self, name: str) -> str | None:
        for member in MEMBERS:
            pods = self.c[member].pods(NS, f"{JOB_NAME_LABEL}={name}")
            if len(pods) == GANG_PODS and all(p["status"].get("phase") == "Running" for p in pods):
                return member
        return None

    def gone(self, name: str) -> bool:
        return all(
            not self.c[m].pods(NS, f"{JOB_NAME_LABEL}={name}")
            and self.c[m].get(*PYTORCHJOB, name, NS) is None
            for m in MEMBERS
        )

    def local_pod(self, name: str, label: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "nodeSelector": {"race": label},
                "containers": [
                    {
                        "name": "local",
                        "image": "local",
                        "resources": {
                            "requests": {"nvidia.com/gpu": LOCAL_GPUS},
                            "limits": {"nvidia.com/gpu": LOCAL_GPUS},
                        },
                    }
                ],
            },
        }

    def trial(self, mode: str, race: bool) -> Trial:
        self.count += 1
        name = f"{mode}-{'race' if race else 'calm'}-{self.count}"
        label = f"t{self.count}"
        pool = NodePool(name=label, cpu="64", gpu=GPUS_PER_NODE, labels={"race": label})
        nodes = {
            m: self.sandbox.add_nodes(
                m,
                pool,
            )
            for m in MEMBERS
        }
        time.sleep(2)  # the controller's node watches see the new nodes before the job exists
        local = f"local-{self.count}"
        job = pytorchjob(name, namespace=NS, workers=2, gpus=1, node_selector={"race": label})
        try:
            self.c["fleet"].create(job)
            created = time.monotonic()
            if race:
                decided = wait_until(lambda: self.target(name), timeout=60, interval=0.01)
                if decided == KOORD:
                    self.c[KOORD].create(self.local_pod(local, label))
            deadline = created + self.timeout
            member = None
            while member is None and time.monotonic() < deadline:
                member = self.running_in(name)
                if member is None:
                    time.sleep(0.05)
            latency = time.monotonic() - created if member else None
            local_bound = None
            if race:
                pod = self.c[KOORD].get("v1", "Pod", local, NS)
                local_bound = bool(((pod or {}).get("spec") or {}).get("nodeName"))
            return Trial(latency, member, local_bound)
        finally:
            self.c["fleet"].delete(*PYTORCHJOB, name, NS)
            self.c[KOORD].delete("v1", "Pod", local, NS)
            wait_until(lambda: self.gone(name), timeout=120, what=f"{name} gone")
            for m, names in nodes.items():
                self.sandbox.remove_nodes(m, names)


def _report(label: str, trials: list[Trial], timeout: float) -> None:
    latencies = [t.latency for t in trials]
    where = ", ".join(
        f"{m or 'not started'}: {sum(1 for t in trials if t.member == m)}" for m in (*MEMBERS, None)
    )
    line = (
        f"  {label:<28} started within {WITHIN:.0f} s: {share_within(latencies, WITHIN):4.0%}   "
        f"p50 {_fmt(percentile(latencies, 0.5), timeout)}   "
        f"p99 {_fmt(percentile(latencies, 0.99), timeout)}   ran in {where}"
    )
    bound = [t.local_bound for t in trials if t.local_bound is not None]
    if bound:
        line += f"   local pod won the GPUs: {sum(bound)}/{len(bound)}"
    print(line, flush=True)
    print(
        "    per trial: " + ", ".join(_fmt(t.latency, timeout) for t in trials),
        flush=True,
    )


def _setup(kubeconfig: Path) -> None:
    with SyncKubeClient(load(str(kubeconfig), "fleet"), name="fleet") as fleet:
        install_crds(fleet)
        config = read_kubeconfig_file(kubeconfig)
        for m in MEMBERS:
            join_member(fleet, m, config, context=m, base=kubeconfig.parent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="trials per way (default 5)")
    parser.add_argument("--wait-seconds", type=int, default=15, help="reservation waitSeconds")
    parser.add_argument("--timeout", type=float, default=60.0, help="give a gang up after this")
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args()
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="fleet-race-"))
    sandbox = Sandbox(state)
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"{args.runs} runs each way; waitSeconds {args.wait_seconds}; timeout {args.timeout:g} s",
        flush=True,
    )
    sandbox.up(CONFIG, die_with_parent=True)
    controller = ControllerProcess(sandbox.kubeconfig, "race", state)
    results: dict[tuple[str, bool], list[Trial]] = {}
    try:
        _setup(sandbox.kubeconfig)
        controller.start()
        bench = Race(sandbox, args.wait_seconds, args.timeout)
        bench.setup()
        for mode in ("off", "on"):
            bench.reservations(mode == "on")
            for race in (False, True):
                results[(mode, race)] = [bench.trial(mode, race) for _ in range(args.runs)]
        print(f"results (load average {os.getloadavg()[0]:.1f}):", flush=True)
        for (mode, race), trials in results.items():
            _report(f"reservations {mode}, {'race' if race else 'no race'}", trials, args.timeout)
        calm = {
            mode: [t.latency for t in results[(mode, False)] if t.latency is not None]
            for mode in ("off", "on")
        }
        if calm["off"] and calm["on"]:
            added = statistics.median(calm["on"]) - statistics.median(calm["off"])
            print(
                f"  added latency of reservations, no race (median on - median off): {added:+.2f} s"
            )
    finally:
        controller.stop()
        sandbox.down(progress=lambda _m: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
