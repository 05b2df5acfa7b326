"""Dispatch latency and throughput on the sandbox: fleet create -> member object created.

    .venv/bin/python bench/dispatch.py [--jobs 100] [--no-operator] \
        [-- --workers 8 --member-qps 100 --member-burst 200]

Brings up its own sandbox (fleet + 3 members), starts one controller process, then measures:
1. sequential: one job at a time, the time from the fleet-side create call returning to the
   member copy's ADDED event arriving on a watch (p50 / p99 / max);
2. steady: `--rate` jobs/s (default 20) for `--jobs` jobs, the same latency (p50 / p99);
3. burst: `--jobs` jobs created at once (20 creates in flight); the time until the last member
   copy exists, jobs/s, and, from the controller's /metrics over the burst and `--settle`
   seconds after it (default 3; 30 counts the operators' Created and Running too): requests per
   job by server, verb and resource, and where the time went (controller CPU seconds; seconds spent
   waiting on the fleet API server and on the member API servers, summed over requests);
4. the limit: the controller is stopped and a bare script makes exactly the writes one
   dispatch needs (the job's create, the GangBinding's create and status write, the job's
   status write, the member copy's create), `--workers` jobs at once (the controller's
   concurrency), with no decisions; fleet's burst rate is reported as a ratio to it.
`--no-operator` runs the members without the training operator, so fleet is measured without
the operator's CPU. `--profile` samples the controller with py-spy during the burst
(`.venv/bin/pip install py-spy`) and prints where its CPU went. Prints the figures; nothing is
asserted. The sandbox is torn down at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

# This script's directory holds bench/queue.py, which would shadow the standard library's
# `queue` (anyio imports it): search the repository, not this directory.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from fleet.api import constants as c
from fleet.api.guard import open_label
from fleet.api.membership import default_fleet_id
from fleet.install import install_crds
from fleet.join import join_member
from fleet.kube import KubeClient, SyncKubeClient, load, read_kubeconfig_file
from fleet.sandbox import MemberSpec, NodePool, Sandbox, SandboxConfig
from fleet.sandbox.process import free_ports
from fleet.testing.controller import ControllerProcess
from fleet.testing.workloads import gang_policy, pytorchjob

MEMBERS = ("member-1", "member-2", "member-3")
NS = "bench"
LIMIT_NS = "limit"
_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? (\S+)$")


def _config(operator: bool) -> SandboxConfig:
    return SandboxConfig(
        # Pod slots for every job of every phase: without the operator no pod ever shows up to
        # release a job's in-flight reservation, which holds its slots for 120 s.
        members=[
            MemberSpec(name=m, nodes=[NodePool(count=2, cpu="256", gpu=8, pods=5000)])
            for m in MEMBERS
        ],
        training_operator=operator,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _job(name: str, namespace: str = NS) -> dict[str, Any]:
    return pytorchjob(name, namespace=namespace, workers=1, gpus=0, cpu="100m")


class Metrics:
    """The controller's /metrics, parsed: {(name, labels): value}."""

    def __init__(self, port: int) -> None:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        self.values: dict[tuple[str, str], float] = {}
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if match and not line.startswith("#"):
                self.values[(match[1], match[2] or "")] = float(match[3])

    def delta(self, before: Metrics, name: str) -> dict[str, float]:
        return {
            labels: value - before.values.get((n, labels), 0.0)
            for (n, labels), value in self.values.items()
            if n == name and value - before.values.get((n, labels), 0.0)
        }


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

    tasks = [asyncio.create_task(one(m)) for m in MEMBERS]
    await stop.wait()
    for t in tasks:
        t.cancel()


async def _wait_all(names: list[str], seen: dict[str, float], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not all(n in seen for n in names):
        if time.monotonic() > deadline:
            missing = [n for n in names if n not in seen]
            raise RuntimeError(f"{len(missing)} jobs never reached a member, e.g. {missing[:3]}")
        await asyncio.sleep(0.005)


def _latency_line(what: str, latencies: list[float]) -> str:
    return (
        f"{what}: p50 {_pct(latencies, 0.5) * 1000:.0f} ms   p99 "
        f"{_pct(latencies, 0.99) * 1000:.0f} ms   max {max(latencies) * 1000:.0f} ms"
    )


def _short(frame: str) -> str:
    """`func (path/to/module.py:12)` -> `func (module.py)`: one entry per function."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit('/', 1)[-1].split(':')[0]})" if where else name


def _profile_summary(path: Path, top: int = 14) -> None:
    """py-spy's collapsed stacks: the functions the controller's CPU went to (inclusive and
    self share of the samples)."""
    inclusive: dict[str, int] = defaultdict(int)
    own: dict[str, int] = defaultdict(int)
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[-1].split("/")[-1] for f in stack.split(";")
        ]
        for frame in set(frames):
            inclusive[frame] += n
        own[frames[-1]] += n
    if not total:
        print("  profile: no samples")
        return
    print(f"  profile ({total} samples): inclusive share, then self share")
    # The event loop and runpy frames hold everything; start below them.
    generic = ("runners.py", "runpy", "base_events.py", "events.py", "cli.py", "__main__.py")
    shown = [(f, n) for f, n in inclusive.items() if not any(g in f for g in generic)]
    for frame, n in sorted(shown, key=lambda kv: -kv[1])[:top]:
        print(f"    {n / total:5.1%}  {frame}")
    for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"    self {n / total:5.1%}  {frame}")


async def _bench(
    kubeconfig: Path,
    jobs: int,
    rate: float,
    port: int,
    profile: tuple[int, Path] | None,
    settle: float = 3.0,
) -> dict[str, float]:
    fleet = KubeClient(load(str(kubeconfig), "fleet"), name="fleet")
    seen: dict[str, float] = {}
    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch_members(kubeconfig, seen, stop))
    await fleet.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, field_manager="b"
    )
    await fleet.apply(gang_policy("bench", NS, toleration_seconds=None), field_manager="b")
    await asyncio.sleep(2)
    out: dict[str, float] = {}

    # 1. Sequential.
    latencies = []
    for i in range(jobs):
        name = f"seq-{i:04d}"
        await fleet.create(_job(name))
        sent = time.monotonic()
        await _wait_all([name], seen)
        latencies.append(seen[name] - sent)
    print(_latency_line(f"sequential, {jobs} jobs", latencies))
    out["seq_p50"], out["seq_p99"] = _pct(latencies, 0.5), _pct(latencies, 0.99)

    # 2. Steady rate.
    sent_at: dict[str, float] = {}

    async def submit_at(name: str, when: float) -> None:
        await asyncio.sleep(max(0.0, when - time.monotonic()))
        await fleet.create(_job(name))
        sent_at[name] = time.monotonic()

    names = [f"steady-{i:04d}" for i in range(jobs)]
    begin = time.monotonic() + 0.5
    await asyncio.gather(*(submit_at(n, begin + i / rate) for i, n in enumerate(names)))
    await _wait_all(names, seen)
    latencies = [seen[n] - sent_at[n] for n in names]
    print(_latency_line(f"steady {rate:g} jobs/s, {jobs} jobs", latencies))
    out["steady_p50"], out["steady_p99"] = _pct(latencies, 0.5), _pct(latencies, 0.99)

    # 3. Burst.
    await asyncio.sleep(3)  # let the steady phase's status echoes settle
    before = Metrics(port)
    spy = None
    if profile is not None:
        pid, out_path = profile
        tool = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        spy = subprocess.Popen(
            [
                tool,
                "record",
                "--pid",
                str(pid),
                "--format",
                "raw",
                "--output",
                str(out_path),
                "--rate",
                "200",
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    names = [f"burst-{i:04d}" for i in range(jobs)]
    started = time.monotonic()
    semaphore = asyncio.Semaphore(20)

    async def submit(name: str) -> None:
        async with semaphore:
            await fleet.create(_job(name))

    await asyncio.gather(*(submit(n) for n in names))
    submitted = time.monotonic() - started
    await _wait_all(names, seen)
    total = max(seen[n] for n in names) - started
    await asyncio.sleep(settle)  # the status mirrors that follow each dispatch
    after = Metrics(port)
    if spy is not None and profile is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)
    burst = sorted(seen[n] - started for n in names)
    out["burst_rate"] = jobs / total
    print(f"burst of {jobs} jobs created at once (submitted in {submitted:.1f}s)")
    print(
        f"  all {jobs} member objects created after {total:.1f}s: {jobs / total:.1f} jobs/s"
        f"   (median job {_pct(burst, 0.5):.1f}s after the burst started)"
    )
    cpu = sum(after.delta(before, "process_cpu_seconds_total").values())
    waits = after.delta(before, "fleet_api_request_seconds_total")
    fleet_wait = sum(v for k, v in waits.items() if 'server="fleet"' in k)
    member_wait = sum(v for k, v in waits.items() if 'server="fleet"' not in k)
    print(
        f"  where the time went (burst wall {total:.1f}s, then {settle:g}s of settling): "
        f"controller CPU {cpu:.1f}s; waiting on the fleet API {fleet_wait:.1f}s and on member APIs "
        f"{member_wait:.1f}s (summed over requests, concurrent ones overlap)"
    )
    out["cpu_s"], out["fleet_wait_s"], out["member_wait_s"] = cpu, fleet_wait, member_wait
    requests = after.delta(before, "fleet_api_requests_total")
    per: dict[str, float] = defaultdict(float)
    for labels, n in requests.items():
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        server = "fleet" if fields["server"] == "fleet" else "member"
        per[f"{server} {fields['verb']} {fields['resource']}"] += n
    print(f"  requests per job: {sum(per.values()) / jobs:.2f}")
    for key, n in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f"    {n / jobs:5.2f}  {key}")
    out["requests_per_job"] = sum(per.values()) / jobs
    reconciles = after.delta(before, "fleet_reconciles_total")
    print(f"  reconciles per job: {sum(reconciles.values()) / jobs:.2f}")
    if profile is not None and profile[1].exists():
        _profile_summary(profile[1])
    stop.set()
    await watcher
    await fleet.aclose()
    return out


async def _limit(kubeconfig: Path, jobs: int, concurrency: int) -> float:
    """Jobs/s of the bare writes of a dispatch, `concurrency` jobs at once, no decisions."""
    fleet = KubeClient(load(str(kubeconfig), "fleet"), name="fleet")
    members = [KubeClient(load(str(kubeconfig), m), name=m) for m in MEMBERS]
    try:
        await fleet.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LIMIT_NS}},
            field_manager="b",
        )
        # Made in the members by their admins: opened to the fleet, as `fleet join --namespaces`
        # opens one (fleet dispatches only into namespaces it made or that are opened to it).
        uid = ((await fleet.get("v1", "Namespace", "kube-system")) or {})["metadata"]["uid"]
        opened = {open_label(default_fleet_id(uid)): "true"}
        for m in members:
            await m.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": LIMIT_NS, "labels": opened},
                },
                field_manager="b",
            )
        # Templates: what the controller wrote for one of the burst's jobs.
        binding = (await fleet.list(c.FLEET_API_VERSION, "GangBinding", NS))["items"][0]
        done = await fleet.get(
            "kubeflow.org/v1", "PyTorchJob", binding["spec"]["resource"]["name"], NS
        )
        assert done is not None
        copies = (await members[0].list("kubeflow.org/v1", "PyTorchJob", NS))["items"]
        copies += (await members[1].list("kubeflow.org/v1", "PyTorchJob", NS))["items"]
        member_copy = copies[0]
        semaphore = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            name = f"limit-{i:04d}"
            async with semaphore:
                job = await fleet.create(_job(name, LIMIT_NS))
                b = copy.deepcopy(binding)
                b["metadata"] = {"name": f"pytorchjob-{name}", "namespace": LIMIT_NS}
                b["spec"]["resource"].update(name=name, namespace=LIMIT_NS)
                b["spec"]["resource"]["uid"] = job["metadata"]["uid"]
                b.pop("status", None)
                created = await fleet.create(b)
                await fleet.patch(
                    c.FLEET_API_VERSION,
                    "GangBinding",
                    created["metadata"]["name"],
                    {"status": binding.get("status") or {}},
                    LIMIT_NS,
                    subresource="status",
                )
                await fleet.patch(
                    "kubeflow.org/v1",
                    "PyTorchJob",
                    name,
                    {"status": done.get("status") or {}},
                    LIMIT_NS,
                    subresource="status",
                )
                m = copy.deepcopy(member_copy)
                labels = m["metadata"].get("labels") or {}
                m["metadata"] = {"name": name, "namespace": LIMIT_NS, "labels": labels}
                m.pop("status", None)
                await members[i % len(members)].create(m)

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(jobs)))
        return jobs / (time.monotonic() - started)
    finally:
        await fleet.aclose()
        for m in members:
            await m.aclose()


def _setup(kubeconfig: Path) -> None:
    with SyncKubeClient(load(str(kubeconfig), "fleet"), name="fleet") as fleet:
        install_crds(fleet)
        config = read_kubeconfig_file(kubeconfig)
        for m in MEMBERS:
            join_member(fleet, m, config, context=m, base=kubeconfig.parent)


def _workers(controller_args: list[str]) -> int:
    for i, arg in enumerate(controller_args):
        if arg == "--workers":
            return int(controller_args[i + 1])
        if arg.startswith("--workers="):
            return int(arg.split("=", 1)[1])
    return 4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--rate", type=float, default=20.0, help="jobs/s of the steady phase")
    parser.add_argument("--no-operator", action="store_true", help="members without it")
    parser.add_argument("--profile", action="store_true", help="py-spy the burst")
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="leave the sandbox and logs up")
    parser.add_argument(
        "--settle",
        type=float,
        default=3.0,
        help="seconds after the burst's last member copy during which requests still count "
        "(the mirrors of the operators' Created and Running); 30 counts a dispatch's whole life",
    )
    parser.add_argument(
        "controller_args", nargs="*", help="extra `fleet controller` flags, after --"
    )
    args = parser.parse_args()
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    sandbox = Sandbox(state)
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; training "
        f"operator {'off' if args.no_operator else 'on'}; controller flags "
        f"{' '.join(args.controller_args) or '(defaults)'}",
        flush=True,
    )
    sandbox.up(_config(not args.no_operator), die_with_parent=not args.keep)
    port = free_ports(1)[0]
    controller = ControllerProcess(
        sandbox.kubeconfig, "bench", state, "--metrics-port", str(port), *args.controller_args
    )
    try:
        _setup(sandbox.kubeconfig)
        controller.start()
        time.sleep(5)
        assert controller.popen is not None
        profile = (controller.popen.pid, state / "burst.pyspy") if args.profile else None
        out = asyncio.run(
            _bench(sandbox.kubeconfig, args.jobs, args.rate, port, profile, args.settle)
        )
        controller.stop()
        concurrency = _workers(args.controller_args)
        limit = asyncio.run(_limit(sandbox.kubeconfig, args.jobs, concurrency))
        print(
            f"limit: the bare writes of a dispatch, {concurrency} jobs at once: {limit:.1f} "
            f"jobs/s; fleet's burst reached {out['burst_rate']:.1f} jobs/s = "
            f"{out['burst_rate'] / limit:.0%} of it (load average {os.getloadavg()[0]:.1f})"
        )
    finally:
        controller.stop()
        if not args.keep:
            sandbox.down(progress=lambda _m: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
