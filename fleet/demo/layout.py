"""The demo's fleet: four members whose GPU layouts make the stories happen, and its setup.

    member-1  eight 1-GPU nodes   8 GPUs, scattered: the sum of free GPUs says "fits" to every
                                  gang below, yet no node can hold a 2-GPU pod
    member-2  one 4-GPU node      the seeds' test cluster ("当前测试集群有4个GPU卡")
    member-3  one 4-GPU node
    member-4  one CPU-only node   runs koord-scheduler (Koordinator); no GPUs, so no GPU gang
                                  goes there until the reservation story gives it a 4-GPU node

No member can hold the seeds' TFJob (4 workers x 2 GPUs, 1 PS) until a story adds a node; a
story that adds nodes removes them again in its `reset`, so every story starts from this.
"""

from __future__ import annotations

import sys
import urllib.request
from functools import partial

from fleet.demo.runner import Demo
from fleet.install import install_crds
from fleet.join import join_member
from fleet.kube import SyncKubeClient, load, read_kubeconfig_file
from fleet.sandbox import MemberSpec, NodePool, SandboxConfig
from fleet.sandbox.process import Component, free_ports, start, wait_ready

DEMO_CONFIG = SandboxConfig(
    members=[
        MemberSpec(
            name="member-1",
            labels={"region": "region-1"},
            nodes=[NodePool(name="gpu", count=8, cpu="32", memory="128Gi", gpu=1)],
        ),
        MemberSpec(
            name="member-2",
            labels={"region": "region-2"},
            nodes=[NodePool(name="gpu", count=1, cpu="64", memory="256Gi", gpu=4)],
        ),
        MemberSpec(
            name="member-3",
            labels={"region": "region-3"},
            nodes=[NodePool(name="gpu", count=1, cpu="64", memory="256Gi", gpu=4)],
        ),
        MemberSpec(
            name="member-4",
            labels={"region": "region-4"},
            nodes=[NodePool(name="cpu", count=1, cpu="64", memory="256Gi", gpu=0)],
            scheduler="koordinator",
        ),
    ]
)


def bring_up(demo: Demo, *, die_with_parent: bool = False) -> None:
    """The sandbox with the demo's layout, fleet's CRDs, the members joined, the controller
    running, and every member Ready; as steps of the story `setup`."""
    demo.story, demo.steps = "setup", 0
    demo.step(
        "A fleet and four member clusters (member-4 on koord-scheduler), built from upstream "
        "Go modules"
    )
    demo.sandbox.up(DEMO_CONFIG, die_with_parent=die_with_parent)
    for s in demo.sandbox.status():
        health = "Healthy" if s.healthy else s.detail
        demo.say(f"  {s.name:9} {health:8} {s.nodes} nodes, {s.gpus} GPUs")
        demo.verify(s.healthy, f"{s.name} healthy")

    demo.step("fleet's CRDs, the members joined, the controller started")
    with SyncKubeClient(load(str(demo.kubeconfig), "fleet"), name="fleet") as fleet:
        install_crds(fleet)
        config = read_kubeconfig_file(demo.kubeconfig)
        for member in DEMO_CONFIG.members:  # as a user would: fleet's own identity, no admin's
            join_member(
                fleet,
                member.name,
                config,
                member.labels,
                context=member.name,
                base=demo.kubeconfig.parent,
                # The seeds' jobs live in `default`, which fleet did not create: opened to it.
                open_namespaces=("default",),
            )
    start_controller(demo, die_with_parent=die_with_parent)
    for member in DEMO_CONFIG.members:
        demo.expect(partial(_ready, demo, member.name), f"MemberCluster {member.name} Ready")
    demo.kubectl("kubectl get membercluster")


def _ready(demo: Demo, member: str) -> bool:
    mc = demo.fleet.get("fleet.dev/v1alpha1", "MemberCluster", member) or {}
    conditions = (mc.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def start_controller(demo: Demo, *, die_with_parent: bool = False) -> None:
    """The controller joins the sandbox's processes, so `fleet sandbox down` stops it too."""
    sandbox = demo.sandbox
    if any(r.component == "fleet/controller" and r.alive() for r in sandbox.processes.records()):
        demo.say("  the controller is already running")
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
            # The reclaim story's victim is deleted 5 s after its eviction is recorded (30 s
            # by default: see docs/queue.md), so the story does not idle.
            "--queue-reclaim-grace",
            "5",
        ],
        log=sandbox.root / "fleet" / "logs" / "fleet-controller.log",
        ports=[port],
        ready=lambda: _metrics_up(port),
        env={"PYTHONUNBUFFERED": "1"},
    )
    wait_ready([start(controller, sandbox.processes, die_with_parent=die_with_parent)], timeout=60)
    demo.say(
        f"  controller running (log {controller.log}, metrics http://127.0.0.1:{port}/metrics)"
    )


def _metrics_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
            return True
    except OSError:
        return False
