"""Dispatch latency on the sandbox: fleet create -> member object created.

    .venv/bin/python bench/dispatch.py [--jobs 100] [--state-dir DIR]

Brings up its own sandbox (fleet + 3 members), starts one controller process, then measures:
1. sequential: one job at a time, the time from the fleet-side create call returning to the
   member copy's ADDED event arriving on a watch (p50 / p90 / p99 / max);
2. burst: N jobs created at once; the time until the last member copy exists, and jobs/s.
Prints the figures; nothing is asserted. The sandbox is torn down at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from fleet.install import install_crds, join, single_context
from fleet.kube import KubeClient, SyncKubeClient, load, read_kubeconfig_file
from fleet.sandbox import MemberSpec, NodePool, Sandbox, SandboxConfig
from fleet.sandbox.process import free_ports
from fleet.testing.controller import ControllerProcess
from fleet.testing.workloads import gang_policy, pytorchjob

CONFIG = SandboxConfig(
    members=[
        MemberSpec(name=f"member-{i}", nodes=[NodePool(count=2, cpu="256", gpu=8)])
        for i in (1, 2, 3)
    ]
)
NS = "bench"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _watch_members(kubeconfig: Path, seen: dict[str, float], stop: asyncio.Event) -> None:
    async def one(member: str) -> None:
        client = KubeClient(load(str(kubeconfig), member), name=member)
        try:
            while not stop.is_set():
                listing = await client.list("kubeflow.org/v1", "PyTorchJob", NS)
                rv = listing["metadata"]["resourceVersion"]
                for item in listing["items"]:
                    seen.setdefault(item["metadata"]["name"], time.monotonic())
                async for event in client.watch(
                    "kubeflow.org/v1",
                    "PyTorchJob",
                    namespace=NS,
                    resource_version=rv,
                    timeout_seconds=60,
                ):
                    if event["type"] == "ADDED":
                        seen.setdefault(event["object"]["metadata"]["name"], time.monotonic())
        finally:
            await client.aclose()

    tasks = [asyncio.create_task(one(m.name)) for m in CONFIG.members]
    await stop.wait()
    for t in tasks:
        t.cancel()


async def _bench(kubeconfig: Path, jobs: int) -> None:
    fleet = KubeClient(load(str(kubeconfig), "fleet"), name="fleet")
    seen: dict[str, float] = {}
    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch_members(kubeconfig, seen, stop))
    await fleet.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, field_manager="b"
    )
    await fleet.apply(gang_policy("bench", NS, toleration_seconds=None), field_manager="b")
    await asyncio.sleep(2)

    def job(name: str) -> dict:
        return pytorchjob(name, namespace=NS, workers=1, gpus=0, cpu="100m")

    latencies = []
    for i in range(jobs):
        name = f"seq-{i:03d}"
        await fleet.create(job(name))
        sent = time.monotonic()
        while name not in seen:
            await asyncio.sleep(0.002)
        latencies.append(seen[name] - sent)
    print(f"sequential, {jobs} jobs: fleet create -> member object created")
    print(
        f"  p50 {_pct(latencies, 0.5) * 1000:.0f} ms   p90 {_pct(latencies, 0.9) * 1000:.0f} ms"
        f"   p99 {_pct(latencies, 0.99) * 1000:.0f} ms   max {max(latencies) * 1000:.0f} ms"
        f"   mean {statistics.mean(latencies) * 1000:.0f} ms"
    )

    names = [f"burst-{i:03d}" for i in range(jobs)]
    started = time.monotonic()
    semaphore = asyncio.Semaphore(20)

    async def submit(name: str) -> None:
        async with semaphore:
            await fleet.create(job(name))

    await asyncio.gather(*(submit(n) for n in names))
    submitted = time.monotonic() - started
    while not all(n in seen for n in names):
        await asyncio.sleep(0.01)
    total = max(seen[n] for n in names) - started
    burst = sorted(seen[n] - started for n in names)
    print(f"burst of {jobs} jobs created at once (submitted in {submitted:.1f}s)")
    print(
        f"  all {jobs} member objects created after {total:.1f}s: {jobs / total:.1f} jobs/s"
        f"   (median job {_pct(burst, 0.5):.1f}s after the burst started)"
    )
    stop.set()
    await watcher
    await fleet.aclose()


def _setup(kubeconfig: Path) -> None:
    with SyncKubeClient(load(str(kubeconfig), "fleet"), name="fleet") as fleet:
        install_crds(fleet)
        config = read_kubeconfig_file(kubeconfig)
        for m in CONFIG.members:
            join(fleet, m.name, single_context(config, m.name))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="leave the sandbox and logs up")
    parser.add_argument(
        "controller_args", nargs="*", help="extra `fleet controller` flags, after --"
    )
    args = parser.parse_args()
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    sandbox = Sandbox(state)
    sandbox.up(CONFIG, die_with_parent=not args.keep)
    port = free_ports(1)[0]
    controller = ControllerProcess(sandbox.kubeconfig, "bench", state, "--metrics-port", str(port))
    try:
        _setup(sandbox.kubeconfig)
        controller.start()
        time.sleep(5)
        asyncio.run(_bench(sandbox.kubeconfig, args.jobs))
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        reconciles = [line for line in metrics.splitlines() if line.startswith("fleet_reconciles")]
        print(f"  controller: {', '.join(reconciles)} for {2 * args.jobs} jobs")
    finally:
        controller.stop()
        if not args.keep:
            sandbox.down(progress=lambda _m: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
