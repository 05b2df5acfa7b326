"""`fleet sandbox up --provider kind`: the same topology on kind, for machines that run Docker.

Thin on purpose: one kind cluster per sandbox cluster, the upstream components installed from
their published manifests at the pinned versions, kwok for the fake GPU nodes (the same Stages
and node shapes as the process sandbox), and the same merged kubeconfig with contexts `fleet`,
`member-1`, .... It cannot run on machines without a Docker engine, which is where fleet is
developed, so only the plan is tested there.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import yaml

from fleet.sandbox.config import SandboxConfig, node_manifest
from fleet.sandbox.errors import SandboxError
from fleet.sandbox.toolchain import KWOK, SCHEDULER_PLUGINS, TRAINING_OPERATOR

_ASSETS = Path(__file__).parent / "assets"
_RELEASES = "https://github.com/kubernetes-sigs/kwok/releases/download"


@dataclasses.dataclass(frozen=True)
class Step:
    what: str
    argv: tuple[str, ...]
    stdin: str | None = None


def plan(config: SandboxConfig, state: Path) -> list[Step]:
    """Every command `up` runs, in order (pure, so it can be read and tested)."""
    for scheduler in ("koordinator", "kubernetes"):
        if named := [m.name for m in config.members if m.scheduler == scheduler]:
            raise SandboxError(
                f"members {', '.join(named)}: scheduler {scheduler} is not supported with "
                "--provider kind yet; use the default provider (processes)"
            )
    steps: list[Step] = []
    names = ["fleet", *(m.name for m in config.members)]
    for name in names:
        kubeconfig = state / name / "kubeconfig"
        steps.append(
            Step(
                f"{name}: create the kind cluster",
                (
                    "kind",
                    "create",
                    "cluster",
                    "--name",
                    f"fleet-{name}",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--wait",
                    "120s",
                ),
            )
        )
    for member in config.members:
        kc = ("--kubeconfig", str(state / member.name / "kubeconfig"))
        steps += [
            Step(
                f"{member.name}: training operator {TRAINING_OPERATOR}",
                (
                    "kubectl",
                    *kc,
                    "apply",
                    "--server-side",
                    "-k",
                    "github.com/kubeflow/training-operator.git/manifests/overlays/standalone"
                    f"?ref={TRAINING_OPERATOR}",
                ),
            ),
            Step(
                f"{member.name}: scheduler-plugins {SCHEDULER_PLUGINS} as a second scheduler",
                (
                    "helm",
                    *kc,
                    "install",
                    "scheduler-plugins",
                    "oci://registry.k8s.io/scheduler-plugins/charts/as-a-second-scheduler",
                    "--version",
                    SCHEDULER_PLUGINS.removeprefix("v"),
                    "--namespace",
                    "scheduler-plugins",
                    "--create-namespace",
                ),
            ),
            Step(
                f"{member.name}: point the training operator at the coscheduling profile",
                (
                    "kubectl",
                    *kc,
                    "-n",
                    "kubeflow",
                    "patch",
                    "deployment",
                    "training-operator",
                    "--type=json",
                    "-p",
                    '[{"op":"add","path":"/spec/template/spec/containers/0/args/-",'
                    f'"value":"--gang-scheduler-name={config.gang_scheduler_name}"}}]',
                ),
            ),
            Step(
                f"{member.name}: kwok {KWOK} and fleet's pod stages",
                ("kubectl", *kc, "apply", "-f", f"{_RELEASES}/{KWOK}/kwok.yaml"),
            ),
            Step(
                f"{member.name}: fleet's kwok stages",
                ("kubectl", *kc, "apply", "-f", str(_ASSETS / "kwok-stages.yaml")),
            ),
            Step(
                f"{member.name}: fake nodes",
                ("kubectl", *kc, "apply", "-f", "-"),
                stdin=yaml.safe_dump_all(
                    [
                        node_manifest(member.name, pool, i)
                        for pool in member.nodes
                        for i in range(pool.count)
                    ]
                ),
            ),
        ]
    return steps


def up_with_kind(config: SandboxConfig, state: Path) -> None:
    missing = [tool for tool in ("docker", "kind", "kubectl", "helm") if shutil.which(tool) is None]
    if missing:
        raise SandboxError(
            f"--provider kind needs {', '.join(missing)} on PATH (and a running Docker engine); "
            "without Docker use the default provider, which runs the same components as processes"
        )
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        raise SandboxError("--provider kind needs a running Docker engine (`docker info` failed)")
    for step in plan(config, state):
        print(f"[sandbox/kind] {step.what}", flush=True)
        (state / "fleet").mkdir(parents=True, exist_ok=True)
        done = subprocess.run(step.argv, input=step.stdin, text=True, check=False)
        if done.returncode != 0:
            raise SandboxError(f"--provider kind: {step.what} failed: {' '.join(step.argv)}")
    merge_kubeconfigs(["fleet", *(m.name for m in config.members)], state)


def merge_kubeconfigs(names: list[str], state: Path) -> Path:
    """One kubeconfig with contexts named after the clusters, as the process sandbox writes."""
    clusters, users, contexts = [], [], []
    for name in names:
        cfg = yaml.safe_load((state / name / "kubeconfig").read_text())
        clusters.append({"name": name, "cluster": cfg["clusters"][0]["cluster"]})
        users.append({"name": f"{name}-admin", "user": cfg["users"][0]["user"]})
        contexts.append({"name": name, "context": {"cluster": name, "user": f"{name}-admin"}})
    merged = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
        "current-context": "fleet",
    }
    out = state / "kubeconfig"
    out.write_text(yaml.safe_dump(merged))
    out.chmod(0o600)
    return out
