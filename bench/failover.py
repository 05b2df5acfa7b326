"""Failover and takeover times on the sandbox.

    .venv/bin/python bench/failover.py [--trials 5] [--lease-seconds 15]

1. job failure: a running job's pods fail; time until every pod of the job runs in another
   member, minus tolerationSeconds (0 here, so it is all overhead: detection, decision, delete,
   create, gang scheduling in the new member);
2. member loss: every process of the member is killed; the same time, minus tolerationSeconds;
3. HA takeover: the leading controller is SIGKILLed; time until the standby holds the lease, and
   until a job created right after the kill is placed.
Prints medians and extremes; nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fleet.install import install_crds
from fleet.join import join_member
from fleet.kube import SyncKubeClient, load, read_kubeconfig_file
from fleet.sandbox import MemberSpec, NodePool, Sandbox, SandboxConfig
from fleet.testing.controller import ControllerProcess
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.workloads import JOB_NAME_LABEL, OUTCOME_LABEL, gang_policy, pytorchjob

MEMBERS = ("member-1", "member-2", "member-3")
CONFIG = SandboxConfig(
    members=[MemberSpec(name=m, nodes=[NodePool(count=1, cpu="64", gpu=8)]) for m in MEMBERS]
)
NS = "bench"


def _setup(kubeconfig: Path) -> None:
    with SyncKubeClient(load(str(kubeconfig), "fleet"), name="fleet") as fleet:
        install_crds(fleet)
        config = read_kubeconfig_file(kubeconfig)
        for m in MEMBERS:
            join_member(fleet, m, config, context=m, base=kubeconfig.parent)


class Bench:
    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.c = {n: ClusterClient(str(sandbox.kubeconfig), n) for n in ("fleet", *MEMBERS)}

    def target(self, name: str) -> str | None:
        b = self.c["fleet"].get("fleet.dev/v1alpha1", "GangBinding", f"pytorchjob-{name}", NS)
        clusters = ((b or {}).get("spec") or {}).get("clusters") or []
        return clusters[0]["name"] if clusters else None

    def running_in(self, member: str, name: str) -> bool:
        pods = self.c[member].pods(NS, f"{JOB_NAME_LABEL}={name}")
        return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)

    def start_job(self, name: str) -> str:
        job = pytorchjob(name, namespace=NS, workers=1, gpus=1, restart_policy="Never")
        self.c["fleet"].create(job)
        member = wait_until(lambda: self.target(name), what="placement")
        wait_until(lambda: self.running_in(member, name), what="running", timeout=120)
        return member

    def moved(self, name: str, away: str, started: float | None = None) -> float:
        """Seconds from `started` (default: now) until the job runs outside `away`."""
        started = time.monotonic() if started is None else started
        new = wait_until(
            lambda: (t := self.target(name)) and t != away and t,
            what="failover",
            timeout=180,
            interval=0.05,
        )
        wait_until(lambda: self.running_in(new, name), what="running", timeout=120, interval=0.05)
        return time.monotonic() - started

    def delete(self, name: str) -> None:
        """Remove a trial's job everywhere, so trials do not crowd each other."""
        self.c["fleet"].delete("kubeflow.org/v1", "PyTorchJob", name, NS)
        wait_until(
            lambda: (
                all(
                    self.c[m].get("kubeflow.org/v1", "PyTorchJob", name, NS) is None
                    for m in MEMBERS
                )
                and self.c["fleet"].get("kubeflow.org/v1", "PyTorchJob", name, NS) is None
            ),
            what=f"{name} deleted",
            timeout=120,
        )

    def fail(self, member: str, name: str) -> None:
        for pod in self.c[member].pods(NS, f"{JOB_NAME_LABEL}={name}"):
            self.c[member].patch(
                "v1",
                "Pod",
                pod["metadata"]["name"],
                {"metadata": {"labels": {OUTCOME_LABEL: "Failed"}}},
                NS,
            )

    def leader(self) -> str | None:
        lease = self.c["fleet"].get(
            "coordination.k8s.io/v1", "Lease", "fleet-controller", "kube-system"
        )
        return ((lease or {}).get("spec") or {}).get("holderIdentity") or None


def _summary(label: str, values: list[float]) -> None:
    print(
        f"  {label}: median {statistics.median(values):.1f}s, min {min(values):.1f}s, "
        f"max {max(values):.1f}s  (n={len(values)})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--lease-seconds", type=float, default=15.0)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="leave the sandbox and logs up")
    args = parser.parse_args()
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    sandbox = Sandbox(state)
    sandbox.up(CONFIG, die_with_parent=not args.keep)
    lease = ["--lease-seconds", str(args.lease_seconds)]
    replicas = [ControllerProcess(sandbox.kubeconfig, n, state, *lease) for n in ("a", "b")]
    try:
        _setup(sandbox.kubeconfig)
        for r in replicas:
            r.start()
        bench = Bench(sandbox)
        bench.c["fleet"].create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        bench.c["fleet"].create(gang_policy("bench", NS, toleration_seconds=0))
        wait_until(bench.leader, what="a leader", timeout=60)
        time.sleep(3)

        failures = []
        for i in range(args.trials):
            name = f"fail-{i}"
            first = bench.start_job(name)
            bench.fail(first, name)
            failures.append(bench.moved(name, first))
            bench.delete(name)
        print("job failure -> running elsewhere (tolerationSeconds 0, purgeMode Immediately)")
        _summary("overhead", failures)

        losses = []
        for i in range(args.trials):
            name = f"lost-{i}"
            first = bench.start_job(name)
            lost_at = time.monotonic()
            sandbox.stop_cluster(first, abrupt=True)
            try:
                losses.append(bench.moved(name, first, lost_at))
            finally:
                sandbox.start_cluster(first)
            wait_until(lambda f=first: _ready(bench, f), what="member back", timeout=120)
            bench.delete(name)
        print("member lost -> running elsewhere (tolerationSeconds 0)")
        _summary("overhead", losses)

        takeovers, dispatches = [], []
        for i in range(args.trials):
            leader = bench.leader()
            victim = next(r for r in replicas if r.identity == leader)
            killed = time.monotonic()
            victim.kill()
            bench.c["fleet"].create(
                pytorchjob(f"ha-{i}", namespace=NS, workers=1, gpus=0, cpu="100m")
            )
            wait_until(
                lambda v=victim.identity: bench.leader() not in (None, v),
                what="takeover",
                timeout=120,
                interval=0.05,
            )
            takeovers.append(time.monotonic() - killed)
            wait_until(
                lambda n=f"ha-{i}": bench.target(n), what="dispatch", timeout=120, interval=0.05
            )
            bench.delete(f"ha-{i}")
            dispatches.append(time.monotonic() - killed)
            victim.start()
            time.sleep(2)
        print(f"HA: leader SIGKILLed (lease {args.lease_seconds:.0f}s)")
        _summary("standby holds the lease after", takeovers)
        _summary("a job created at the kill is placed after", dispatches)
    finally:
        for r in replicas:
            r.stop()
        if not args.keep:
            sandbox.down(progress=lambda _m: None)
    return 0


def _ready(bench: Bench, member: str) -> bool:
    mc = bench.c["fleet"].get("fleet.dev/v1alpha1", "MemberCluster", member) or {}
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (mc.get("status") or {}).get("conditions") or []
    )


if __name__ == "__main__":
    sys.exit(main())
