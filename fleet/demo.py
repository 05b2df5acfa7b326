"""`fleet demo`: the seeds' example, end to end, on a local sandbox.

1. A fleet and three members with different GPU layouts (member-1's 8 GPUs are scattered over
   four nodes; member-2 has one whole 8-GPU node; member-3 two 4-GPU nodes).
2. fleet's CRDs, the members joined, and the controller running beside the sandbox.
3. The seeds' PropagationPolicy, and a gang that fits member-1 only by ACK's sum-of-free rule:
   fleet's node-level rule places it where it can really start, and says why not member-1.
4. The seeds' PyTorchJob (1 master + 2 workers): placed whole in one member, the
   ScheduleBindingSucceed event, `kubectl amc get ... -M` as ACK One prints it.
5. The job fails in its member: after tolerationSeconds it runs elsewhere.

Everything stays up afterwards to explore; `fleet sandbox down` stops it all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from fleet import amc
from fleet.install import install_crds, join, single_context
from fleet.kube import SyncKubeClient, load, read_kubeconfig_file
from fleet.sandbox import MemberSpec, NodePool, Sandbox, SandboxConfig
from fleet.sandbox.process import Component, free_ports, start, wait_ready
from fleet.testing.kube import ClusterClient
from fleet.testing.workloads import JOB_NAME_LABEL, gang_policy, pytorchjob

T = TypeVar("T")

DEMO_CONFIG = SandboxConfig(
    members=[
        MemberSpec(
            name="member-1",
            labels={"region": "region-1"},
            nodes=[NodePool(name="gpu", count=4, cpu="32", memory="128Gi", gpu=2)],
        ),
        MemberSpec(
            name="member-2",
            labels={"region": "region-2"},
            nodes=[NodePool(name="gpu", count=1, cpu="64", memory="512Gi", gpu=8)],
        ),
        MemberSpec(
            name="member-3",
            labels={"region": "region-3"},
            nodes=[NodePool(name="gpu", count=2, cpu="32", memory="256Gi", gpu=4)],
        ),
    ]
)

PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
BINDING = ("fleet.dev/v1alpha1", "GangBinding")

#: The seeds' PropagationPolicy: Gang, propagateDeps, failover after 30 s, purge Immediately.
SEED_POLICY = gang_policy(
    "example-policy", "default", toleration_seconds=30, purge_mode="Immediately"
)


def _step(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m", flush=True)


def _shell(command: str, kubeconfig: Path) -> None:
    """Show a kubectl command and its real output (when kubectl is installed)."""
    print(f"$ {command}", flush=True)
    args = command.split()
    if args[:2] == ["kubectl", "amc"]:
        amc.main([*args[2:], "--kubeconfig", str(kubeconfig), "--context", "fleet"])
        return
    if shutil.which("kubectl") is None:
        print("  (kubectl is not installed; skipping)")
        return
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    subprocess.run([*args, "--context", "fleet"], env=env, check=False)


def _wait(probe: Callable[[], T | None], what: str, timeout: float = 120) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"demo: timed out waiting for {what}")


def _start_controller(sandbox: Sandbox) -> None:
    """The controller joins the sandbox's processes, so `fleet sandbox down` stops it too."""
    if any(r.component == "fleet/controller" and r.alive() for r in sandbox.processes.records()):
        return
    port = free_ports(1)[0]
    controller = Component(
        name="fleet/controller",
        argv=[
            sys.executable,
            "-m",
            "fleet",
            "controller",
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "--context",
            "fleet",
            "--metrics-port",
            str(port),
            "--id",
            "demo",
        ],
        log=sandbox.root / "fleet" / "logs" / "fleet-controller.log",
        ports=[port],
        ready=lambda: _metrics_up(port),
        env={"PYTHONUNBUFFERED": "1"},
    )
    wait_ready([start(controller, sandbox.processes, die_with_parent=False)], timeout=60)
    print(f"controller running (log {controller.log}, metrics http://127.0.0.1:{port}/metrics)")


def _metrics_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
            return True
    except OSError:
        return False


def _setup_fleet(kubeconfig: Path) -> None:
    with SyncKubeClient(load(str(kubeconfig), "fleet"), name="fleet") as fleet:
        install_crds(fleet)
        config = read_kubeconfig_file(kubeconfig)
        for member in DEMO_CONFIG.members:
            join(fleet, member.name, single_context(config, member.name), member.labels)


def _api(kubeconfig: Path, context: str) -> ClusterClient:
    """A client for the demo's own questions (the same one the end-to-end tests use)."""
    return ClusterClient(str(kubeconfig), context, field_manager="fleet-demo")


def _pods(kubeconfig: Path, member: str, job: str) -> list[dict[str, Any]]:
    with _api(kubeconfig, member) as api:
        return api.pods("default", f"{JOB_NAME_LABEL}={job}")


def _clear_previous_run(fleet: ClusterClient, kubeconfig: Path) -> None:
    """A second `fleet demo` on the same sandbox starts from the same clean slate."""
    names = ("pytorch-test", "big-gang")
    for name in names:
        fleet.delete(*PYTORCHJOB, name, "default")
    _wait(
        lambda: (
            all(_pods(kubeconfig, m.name, n) == [] for m in DEMO_CONFIG.members for n in names)
            and all(fleet.get(*PYTORCHJOB, n, "default") is None for n in names)
        ),
        "the previous demo's jobs to be gone",
    )


def _target(fleet: ClusterClient, name: str) -> str | None:
    binding = fleet.get(*BINDING, f"pytorchjob-{name}", "default")
    clusters = ((binding or {}).get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


def _running_in(kubeconfig: Path, member: str, job: str) -> bool:
    pods = _pods(kubeconfig, member, job)
    return bool(pods) and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def run(state_dir: Path | None = None) -> int:
    sandbox = Sandbox(state_dir)
    _step("1. A fleet and three member clusters, built from upstream Go modules")
    sandbox.up(DEMO_CONFIG)
    kubeconfig = sandbox.kubeconfig
    for s in sandbox.status():
        print(
            f"  {s.name:9} {'Healthy' if s.healthy else s.detail:8} {s.nodes} nodes, {s.gpus} GPUs"
        )

    _step("2. fleet's CRDs, the members joined, the controller started")
    _setup_fleet(kubeconfig)
    _start_controller(sandbox)
    with _api(kubeconfig, "fleet") as fleet:
        _story(fleet, kubeconfig)
    print(
        f"\nThe sandbox and the controller keep running. Explore with:\n"
        f"  export KUBECONFIG={kubeconfig}   # contexts: fleet, member-1, member-2, member-3\n"
        f"  kubectl amc get pod -M\n"
        f"Stop everything with: fleet sandbox down"
        + (f" --state-dir {state_dir}" if state_dir else "")
    )
    return 0


def _story(fleet: ClusterClient, kubeconfig: Path) -> None:
    """Steps 2 (members Ready) to 5, on a running sandbox with the controller started."""
    _wait(
        lambda: all(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (
                    (fleet.get("fleet.dev/v1alpha1", "MemberCluster", m.name) or {}).get("status")
                    or {}
                ).get("conditions")
                or []
            )
            for m in DEMO_CONFIG.members
        ),
        "members Ready",
    )
    _shell("kubectl get membercluster", kubeconfig)

    _clear_previous_run(fleet, kubeconfig)
    fleet.apply(SEED_POLICY)  # the seeds' PropagationPolicy: Gang, failover after 30s
    _step("3. Fragmentation: 2 workers x 4 GPUs. member-1 has 8 GPUs free in sum, 2 per node")
    big = pytorchjob("big-gang", namespace="default", workers=2, gpus=4, master_gpus=0)
    fleet.apply(big)
    chosen = _wait(lambda: _target(fleet, "big-gang"), "big-gang placed")
    _wait(lambda: _running_in(kubeconfig, chosen, "big-gang"), "big-gang running")
    binding = fleet.get(*BINDING, "pytorchjob-big-gang", "default") or {}
    scheduled = next(
        (
            x
            for x in (binding.get("status") or {}).get("conditions") or []
            if x["type"] == "Scheduled"
        ),
        {"message": ""},
    )
    print(f"  fleet placed big-gang in {chosen}. The binding says why:")
    print(textwrap.fill(scheduled["message"], 96, initial_indent="    ", subsequent_indent="    "))
    print("  ACK One's sum-of-free rule accepts member-1 (8 free >= 8 needed); the gang would")
    print("  wait there, whole, because no node of member-1 can hold a 4-GPU worker.")

    _step("4. The seeds' example: a PyTorchJob with 1 master and 2 workers")
    # OnFailure pods restart in place; after backoffLimit restarts the job is Failed.
    job = pytorchjob("pytorch-test", namespace="default", workers=2, gpus=1, backoff_limit=2)
    fleet.apply(job)
    first = _wait(lambda: _target(fleet, "pytorch-test"), "pytorch-test placed")
    _wait(lambda: _running_in(kubeconfig, first, "pytorch-test"), "pytorch-test running")
    _wait(
        lambda: ((fleet.get(*PYTORCHJOB, "pytorch-test", "default") or {}).get("status") or {}).get(
            "replicaStatuses"
        ),
        "status mirrored",
    )
    _shell("kubectl get pytorchjob", kubeconfig)
    _shell("kubectl get events --field-selector reason=ScheduleBindingSucceed", kubeconfig)
    _shell("kubectl amc get pytorchjob -M", kubeconfig)
    _shell("kubectl amc get pod -M", kubeconfig)

    _step(f"5. Failover: pytorch-test fails in {first}; tolerationSeconds is 30")
    with _api(kubeconfig, first) as member:
        member.mark_job(PYTORCHJOB, "pytorch-test", "default", "Failed")
    started = time.monotonic()
    print(
        "  marked its pods to crash (kwok restarts them as a kubelet would; after backoffLimit 2"
        " the job is Failed); waiting ...",
        flush=True,
    )

    def moved() -> str | None:
        target = _target(fleet, "pytorch-test")
        return target if target and target != first else None

    second = _wait(moved, "failover", 180)
    _wait(lambda: _running_in(kubeconfig, second, "pytorch-test"), "running again", 120)
    print(f"  pytorch-test moved {first} -> {second} {time.monotonic() - started:.0f}s later")
    _shell("kubectl amc get pytorchjob -M", kubeconfig)
    _shell("kubectl describe pytorchjob pytorch-test", kubeconfig)
