"""Controller memory at scale, on the sandbox: 3 members x 1,000 fake nodes and 20,000 pods.

    .venv/bin/python bench/scale.py [--nodes 1000] [--pods 20000] [--runs 3]

Brings up its own sandbox (members without the training operator: nothing here runs a job),
creates the kwok nodes and then the pods, already bound to nodes (`spec.nodeName`, so no
scheduler is involved) and spread evenly over every member's nodes. Then, `--runs` times, starts
a fresh controller and measures:
- the time from the controller's start to every MemberCluster being Ready (which needs the node
  and pod watches listed and in sync);
- the controller's RSS once Ready and `--settle` seconds later, and its peak (VmHWM).
Prints the median of the runs and every run; nothing is asserted. The sandbox is torn down at
the end (`--keep` leaves it up). `--compare DIR` also runs, alternately, a controller from
another checkout (e.g. `git archive main | tar -x -C DIR`) against the same sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# This script's directory holds bench/queue.py, which would shadow the standard library's
# `queue` (anyio imports it): search the repository, not this directory.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from fleet.install import install_crds
from fleet.join import join_member
from fleet.kube import (
    Conflict,
    KubeClient,
    SyncKubeClient,
    Unreachable,
    load,
    read_kubeconfig_file,
)
from fleet.sandbox import MemberSpec, NodePool, Sandbox, SandboxConfig
from fleet.testing.controller import ControllerProcess

NS = "scale"


def _config(members: int, nodes: int) -> SandboxConfig:
    return SandboxConfig(
        members=[
            MemberSpec(name=f"member-{i}", nodes=[NodePool(count=nodes, cpu="96", gpu=8)])
            for i in range(1, members + 1)
        ],
        training_operator=False,
    )


def _pod(name: str, node: str, index: int) -> dict[str, object]:
    """A bound pod like a training job's worker: requests, labels, an env, a probe."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"app": "scale", "training.kubeflow.org/replica-index": str(index % 8)},
        },
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.example.com/train:1.0",
                    "command": ["python", "-m", "train", "--epochs", "90"],
                    "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(8)],
                    "resources": {
                        "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


async def _create_pods(kubeconfig: Path, member: str, nodes: list[str], pods: int) -> None:
    client = KubeClient(load(str(kubeconfig), member), name=member)
    try:
        await client.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            field_manager="bench",
        )
        semaphore = asyncio.Semaphore(8)

        async def one(i: int) -> None:
            async with semaphore:
                for attempt in range(8):  # a loaded machine times connections out now and then
                    try:
                        await client.create(_pod(f"p-{i:05d}", nodes[i % len(nodes)], i))
                        return
                    except Conflict:
                        return  # an earlier attempt got there
                    except Unreachable:
                        await asyncio.sleep(0.5 * (attempt + 1))
                raise RuntimeError(f"pod p-{i:05d} could not be created in {member}")

        await asyncio.gather(*(one(i) for i in range(pods)))
    finally:
        await client.aclose()


def _status_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def _all_ready(fleet: SyncKubeClient, members: int) -> bool:
    items = fleet.list("fleet.dev/v1alpha1", "MemberCluster")["items"]
    ready = 0
    for item in items:
        for cond in (item.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                ready += 1
    return ready == members


def _run(
    sandbox: Sandbox, state: Path, members: int, settle: float, k: int, code: Path | None
) -> dict[str, float]:
    controller = ControllerProcess(sandbox.kubeconfig, f"scale-{k}", state)
    with SyncKubeClient(load(str(sandbox.kubeconfig), "fleet"), name="fleet") as fleet:
        started = time.monotonic()
        here = Path.cwd()
        if code is not None:
            os.chdir(code)  # `python -m fleet` imports the checkout it starts in
        try:
            controller.start()
        finally:
            os.chdir(here)
        assert controller.popen is not None
        pid = controller.popen.pid
        try:
            while not _all_ready(fleet, members):
                if not controller.running:
                    raise RuntimeError(f"controller exited:\n{controller.tail()}")
                time.sleep(0.2)
            ready = time.monotonic() - started
            at_ready = _status_kib(pid)
            time.sleep(settle)
            later = _status_kib(pid)
        finally:
            controller.stop()
    return {
        "ready_s": ready,
        "rss_ready_mib": at_ready["VmRSS"] / 1024,
        "rss_settled_mib": later["VmRSS"] / 1024,
        "peak_mib": later["VmHWM"] / 1024,
    }


def _mark_not_ready(fleet: SyncKubeClient) -> None:
    """Clear the MemberClusters' status, so the next controller's Ready is its own."""
    for item in fleet.list("fleet.dev/v1alpha1", "MemberCluster")["items"]:
        item["status"] = {}
        fleet.replace(item, subresource="status")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=1000, help="per member (at most 1000)")
    parser.add_argument("--pods", type=int, default=20000, help="in all, spread over members")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=15.0)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="leave the sandbox up")
    parser.add_argument("--compare", type=Path, help="also run the controller of this checkout")
    args = parser.parse_args()
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="fleet-scale-"))
    config = _config(args.members, args.nodes)
    sandbox = Sandbox(state)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    t0 = time.monotonic()
    sandbox.up(config, die_with_parent=not args.keep, progress=lambda _m: None)
    print(f"sandbox up with {args.members} x {args.nodes} nodes in {time.monotonic() - t0:.0f}s")
    try:
        t0 = time.monotonic()
        per_member = args.pods // args.members

        async def create_all() -> None:
            await asyncio.gather(
                *(
                    _create_pods(
                        sandbox.kubeconfig,
                        m.name,
                        [f"{m.name}-node-{i}" for i in range(args.nodes)],
                        per_member,
                    )
                    for m in config.members
                )
            )

        asyncio.run(create_all())
        print(f"{per_member * args.members} pods created in {time.monotonic() - t0:.0f}s")
        with SyncKubeClient(load(str(sandbox.kubeconfig), "fleet"), name="fleet") as fleet:
            install_crds(fleet)
            kubeconfig = read_kubeconfig_file(sandbox.kubeconfig)
            for m in config.members:
                join_member(
                    fleet, m.name, kubeconfig, context=m.name, base=sandbox.kubeconfig.parent
                )
        variants: list[tuple[str, Path | None]] = [("this checkout", None)]
        if args.compare:
            variants.append((str(args.compare), args.compare.resolve()))
        results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in variants}
        for k in range(args.runs):
            for label, code in variants:
                with SyncKubeClient(load(str(sandbox.kubeconfig), "fleet"), name="fleet") as fleet:
                    _mark_not_ready(fleet)
                run = _run(sandbox, state, args.members, args.settle, k, code)
                results[label].append(run)
                print(
                    f"  {label} run {k + 1}: Ready after {run['ready_s']:.1f}s, RSS at Ready "
                    f"{run['rss_ready_mib']:.0f} MiB, {args.settle:.0f}s later "
                    f"{run['rss_settled_mib']:.0f} MiB, peak {run['peak_mib']:.0f} MiB",
                    flush=True,
                )
        for label, runs in results.items():

            def med(key: str, runs: list[dict[str, float]] = runs) -> float:
                return statistics.median(r[key] for r in runs)

            print(
                f"{label}: {args.members} members x {args.nodes} nodes, "
                f"{per_member * args.members} pods, median of {len(runs)} runs: start -> members "
                f"Ready {med('ready_s'):.1f}s; controller RSS at Ready "
                f"{med('rss_ready_mib'):.0f} MiB, settled {med('rss_settled_mib'):.0f} MiB, peak "
                f"{med('peak_mib'):.0f} MiB (load average {os.getloadavg()[0]:.1f})"
            )
    finally:
        if not args.keep:
            sandbox.down(progress=lambda _m: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
