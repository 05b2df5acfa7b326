"""A local multi-cluster sandbox: one fleet control plane and N member clusters, as processes.

The fleet runs etcd, an API server and a controller-manager only: no scheduler, no nodes, no
training operator, so nothing can ever run a job there. Each member adds kwok with fake nodes, the
Kubeflow training operator and its gang scheduler: the coscheduling scheduler with its PodGroup
controller, or (`scheduler: koordinator`) koord-scheduler.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import os
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from fleet.kube import KubeError, Unreachable
from fleet.sandbox import components as comp
from fleet.sandbox.admin import AdminClient, kubeconfig, load_manifests
from fleet.sandbox.config import MemberSpec, NodePool, SandboxConfig, node_manifest
from fleet.sandbox.errors import SandboxError
from fleet.sandbox.pki import create_cluster_pki
from fleet.sandbox.process import (
    Component,
    ProcessTable,
    Started,
    free_ports,
    start,
    wait_ready,
)
from fleet.sandbox.progress import Heartbeat, Progress
from fleet.sandbox.toolchain import (
    OPERATOR_PARTS,
    Toolchain,
    ensure_koordinator,
    ensure_native,
    ensure_operators,
    ensure_toolchain,
)

FLEET = "fleet"
_ASSETS = Path(__file__).parent / "assets"
#: The training operator's cert rotator checks this fixed path for a mounted serving cert.
_ROTATOR_CERT = Path("/tmp/k8s-webhook-server/serving-certs/tls.crt")
#: Every process of a member, in start order (the fleet runs the first three).
_COMPONENT_ORDER = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "podgroup-controller",
    "kwok",
    "training-operator",
    "jobset-controller",
    "trainer-controller",
    "kuberay-operator",
)
#: The process of each job operator a member can run (`MemberSpec.operators`).
_OPERATOR_COMPONENTS = {
    "training-operator": "training-operator",
    "jobset": "jobset-controller",
    "trainer": "trainer-controller",
    "kuberay": "kuberay-operator",
}
#: The training operator's kinds (every scheme it runs in the sandbox).
_KUBEFLOW_CRDS = ("pytorchjobs", "tfjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs")
_MEMBER_CRDS = (*_KUBEFLOW_CRDS, "podgroups", "elasticquotas")
#: A Koordinator member: the Kubeflow CRDs from the toolchain, and every CRD of the Koordinator
#: toolchain (its own PodGroup, scheduling.sigs.k8s.io, stands in for scheduler-plugins').
_KOORDINATOR_MEMBER_CRDS = _KUBEFLOW_CRDS
#: A native-gang member: the Kubeflow CRDs only; its PodGroup is the API server's own.
_MEMBER_CRDS_BY_SCHEDULER = {"koordinator": _KOORDINATOR_MEMBER_CRDS, "kubernetes": _KUBEFLOW_CRDS}
_FLEET_CRDS = _KUBEFLOW_CRDS


def default_state_dir() -> Path:
    if env := os.environ.get("FLEET_SANDBOX_DIR"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "fleet" / "sandbox"


def _say(message: str) -> None:
    print(f"[sandbox] {message}", flush=True)


@dataclasses.dataclass(frozen=True)
class ClusterStatus:
    name: str
    endpoint: str
    healthy: bool
    detail: str
    nodes: int
    gpus: int
    processes_alive: int
    processes_total: int


class Sandbox:
    """One sandbox, identified by its state folder."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.root = (state_dir or default_state_dir()).resolve()
        self.processes = ProcessTable(self.root / "processes.jsonl")

    # -- layout -----------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.root / "sandbox.json"

    @property
    def kubeconfig(self) -> Path:
        """The merged kubeconfig: contexts `fleet`, `member-1`, ..."""
        return self.root / "kubeconfig"

    def _state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return state

    def exists(self) -> bool:
        return self.state_file.is_file()

    @property
    def config(self) -> SandboxConfig:
        state = self._state()
        if not state:
            raise SandboxError(f"no sandbox at {self.root}; run `fleet sandbox up`")
        return SandboxConfig.model_validate(state["config"])

    def cluster(self, name: str) -> comp.ClusterLayout:
        state = self._state()
        clusters = state.get("clusters") or {}
        if name not in clusters:
            known = ", ".join(clusters) or "none"
            raise SandboxError(f"no cluster {name!r} in the sandbox at {self.root} (has: {known})")
        return comp.ClusterLayout(name, self.root / name, dict(clusters[name]["ports"]))

    def cluster_names(self) -> list[str]:
        return list(self._state().get("clusters") or {})

    def members(self) -> list[str]:
        return [n for n in self.cluster_names() if n != FLEET]

    def admin(self, name: str) -> AdminClient:
        layout = self.cluster(name)
        return AdminClient(layout.endpoint, layout.pki, name)

    def is_up(self) -> bool:
        records = self.processes.records()
        return (
            self._state().get("phase") == "up" and bool(records) and all(r.alive() for r in records)
        )

    # -- up ---------------------------------------------------------------------------------

    def up(
        self,
        config: SandboxConfig | None = None,
        *,
        progress: Progress = _say,
        toolchain: Toolchain | None = None,
        die_with_parent: bool = False,
        timeout: float = 180.0,
    ) -> None:
        """Bring the sandbox up; on any failure stop what was started and say which part failed.

        `die_with_parent` ties every process to the calling process (tests use it so that not
        even a SIGKILLed pytest leaves a cluster running).
        """
        config = config or SandboxConfig.default()
        if self.is_up():
            if SandboxConfig.model_validate(self._state()["config"]) == config:
                progress(f"already up at {self.root}")
                return
            raise SandboxError(
                f"a sandbox with another configuration is up at {self.root}; "
                "run `fleet sandbox down` first"
            )
        if self.exists() or self.processes.records():
            self.down(progress=lambda _m: None)
        tc = toolchain or ensure_toolchain()
        ktc = ensure_koordinator() if config.needs_koordinator else None
        ntc = ensure_native() if config.needs_native else None
        extra = [op for op in config.operators if op in OPERATOR_PARTS]
        otc = ensure_operators(extra) if extra else None
        started_at = time.monotonic()
        where = _Where()
        try:
            self._up(
                config, _Toolchains(tc, ktc, otc, ntc), progress, die_with_parent, timeout, where
            )
        except BaseException as e:
            stopped = self.processes.stop_all(grace=3)
            self._write_state(config, phase="failed")
            if stopped:
                progress(f"stopped {len(stopped)} processes after the failure")
            if isinstance(e, SandboxError):
                raise SandboxError(f"sandbox start failed {where}: {e}") from e
            if isinstance(e, Exception):
                # A bug, not a broken component: keep the whole traceback for the report.
                trace = self.root / "up-failure.txt"
                trace.write_text("".join(traceback.format_exception(e)))
                logs = self.root / where.cluster / "logs" if where.cluster else self.root
                raise SandboxError(
                    f"sandbox start failed {where}: {type(e).__name__}: {e}; "
                    f"traceback: {trace}; component logs: {logs}"
                ) from e
            raise
        progress(
            f"up in {time.monotonic() - started_at:.1f}s: fleet + {len(config.members)} members; "
            f"kubeconfig {self.kubeconfig}"
        )

    def _write_state(
        self,
        config: SandboxConfig,
        *,
        phase: str,
        ports: dict[str, dict[str, int]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        state = self._state() | (extra or {})
        state["config"] = config.model_dump()
        state["phase"] = phase
        if ports is not None:
            state["clusters"] = {name: {"ports": p} for name, p in ports.items()}
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_file)

    def _up(
        self,
        config: SandboxConfig,
        tcs: _Toolchains,
        progress: Progress,
        die_with_parent: bool,
        timeout: float,
        where: _Where,
    ) -> None:
        tc, ktc, otc = tcs.cluster, tcs.koordinator, tcs.operators
        names = [FLEET] + [m.name for m in config.members]
        per_cluster = len(comp.PORT_NAMES)
        ports = free_ports(per_cluster * len(names))
        layouts = {
            name: comp.ClusterLayout(
                name,
                self.root / name,
                dict(
                    zip(
                        comp.PORT_NAMES, ports[i * per_cluster : (i + 1) * per_cluster], strict=True
                    )
                ),
            )
            for i, name in enumerate(names)
        }
        self._write_state(
            config,
            phase="starting",
            ports={n: lay.ports for n, lay in layouts.items()},
            extra={
                "toolchain": str(tc.root),
                "koordinator_toolchain": str(ktc.root) if ktc else None,
                "operators_toolchain": str(otc.root) if otc else None,
                "native_toolchain": str(tcs.native.root) if tcs.native else None,
                "die_with_parent": die_with_parent,
            },
        )
        for layout in layouts.values():
            where.at("preparing certificates and configuration", layout.name)
            self._prepare(layout, config)
        where.at("writing kubeconfigs")
        self._write_kubeconfigs(layouts)

        def launch(phase: str, components: Sequence[Component]) -> None:
            where.at(f"starting {phase}")
            progress(
                f"starting {phase}: {', '.join(c.name for c in components)} "
                f"(binaries in {tc.bin_dir})"
            )
            t0 = time.monotonic()
            started: list[Started] = [
                start(c, self.processes, die_with_parent=die_with_parent) for c in components
            ]
            wait_ready(started, timeout, progress=progress, what=f"starting {phase}")
            progress(f"{phase} ready in {time.monotonic() - t0:.1f}s")

        launch("etcd", [comp.etcd(tc, layouts[n]) for n in names])
        launch(
            "API servers",
            [tcs.control_plane(config, n).apiserver(layouts[n]) for n in names],
        )
        t0 = time.monotonic()
        installing = "installing CRDs and fake nodes"
        progress(f"{installing} in {', '.join(names)}")
        # Every cluster at once: the job operators' CRDs are large (a ClusterTrainingRuntime
        # embeds a whole JobSet), and one cluster after the other tripled this step.
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(names)) as pool:
            pending = {n: pool.submit(self._bootstrap, layouts[n], tcs, config) for n in names}

            def waiting() -> str:
                return "waiting for " + ", ".join(n for n, f in pending.items() if not f.done())

            with Heartbeat(progress, installing, detail=waiting):
                for name, future in pending.items():
                    where.at("installing CRDs and nodes", name)
                    future.result()
        progress(
            f"CRDs and {sum(self._node_count(m) for m in config.members)} fake nodes "
            f"created in {time.monotonic() - t0:.1f}s"
        )
        control: list[Component] = [
            tcs.control_plane(config, n).controller_manager(layouts[n]) for n in names
        ]
        stages = _ASSETS / "kwok-stages.yaml"
        for member in config.members:
            layout = layouts[member.name]
            if member.scheduler == "koordinator" and ktc is not None:
                control += [comp.koord_scheduler(ktc, layout), comp.kwok(tc, layout, stages)]
            elif member.scheduler == "kubernetes":
                control += [
                    tcs.control_plane(config, member.name).scheduler(layout),
                    comp.kwok(tc, layout, stages),
                ]
            else:
                control += [
                    comp.kube_scheduler(tc, layout),
                    comp.podgroup_controller(tc, layout),
                    comp.kwok(tc, layout, stages),
                ]
            control += [
                _operator_component(op, tcs, layout, config, member)
                for op in member.operators
                if config.runs(member, op)
            ]
        launch("controllers, schedulers, kwok and job operators", control)
        self._write_state(config, phase="up")

    @staticmethod
    def _node_count(member: MemberSpec) -> int:
        return sum(pool.count for pool in member.nodes)

    def _prepare(self, layout: comp.ClusterLayout, config: SandboxConfig) -> None:
        for sub in ("logs", "config", "etcd", "tmp"):
            (layout.root / sub).mkdir(parents=True, exist_ok=True)
        pki = create_cluster_pki(layout.root / "pki", layout.name)
        member = next((m for m in config.members if m.name == layout.name), None)
        if member is not None and config.runs(member, "jobset"):
            layout.config("jobset.yaml").write_text(yaml.safe_dump(comp.jobset_config(layout)))
        if member is not None and config.runs(member, "trainer"):
            layout.config("trainer.yaml").write_text(yaml.safe_dump(comp.trainer_config(layout)))
        if member is not None and member.scheduler == "koordinator":
            layout.config("koord-scheduler.yaml").write_text(
                yaml.safe_dump(
                    comp.koord_scheduler_config(
                        layout, reservation_preemption=member.reservation_preemption
                    )
                )
            )
        elif member is not None and member.scheduler == "kubernetes":
            layout.config("scheduler.yaml").write_text(
                yaml.safe_dump(comp.native_scheduler_config(layout))
            )
        else:
            layout.config("scheduler.yaml").write_text(
                yaml.safe_dump(comp.scheduler_config(layout, config.gang_scheduler_name))
            )
        serving = layout.serving_certs
        serving.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pki.webhook_crt, serving / "tls.crt")
        shutil.copyfile(pki.webhook_key, serving / "tls.key")
        if layout.name != FLEET and not _ROTATOR_CERT.exists():
            with contextlib.suppress(OSError):
                _ROTATOR_CERT.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(pki.webhook_crt, _ROTATOR_CERT)

    def _write_kubeconfigs(self, layouts: dict[str, comp.ClusterLayout]) -> None:
        for layout in layouts.values():
            cfg = kubeconfig([(layout.name, layout.endpoint, layout.pki)], layout.name)
            _write_private(layout.kubeconfig, yaml.safe_dump(cfg))
        merged = kubeconfig([(name, lay.endpoint, lay.pki) for name, lay in layouts.items()], FLEET)
        _write_private(self.kubeconfig, yaml.safe_dump(merged))

    def _bootstrap(
        self, layout: comp.ClusterLayout, tcs: _Toolchains, config: SandboxConfig
    ) -> None:
        tc, ktc, otc = tcs.cluster, tcs.koordinator, tcs.operators
        member = next((m for m in config.members if m.name == layout.name), None)
        koordinator = member is not None and member.scheduler == "koordinator"
        wanted = (
            _FLEET_CRDS
            if member is None
            else _MEMBER_CRDS_BY_SCHEDULER.get(member.scheduler, _MEMBER_CRDS)
        )
        crds = [
            doc
            for path in tc.crds()
            for doc in load_manifests(path)
            if doc["metadata"]["name"].split(".")[0] in wanted
        ]
        if koordinator and ktc is not None:
            crds += [doc for path in ktc.crds() for doc in load_manifests(path)]
        # The fleet gets the CRDs of every operator some member runs (users submit those kinds
        # there); a member those of the operators it runs, and their webhooks.
        operators = [
            op
            for op in (config.operators if member is None else member.operators)
            if op in OPERATOR_PARTS and (member is None or config.runs(member, op))
        ]
        webhooks: list[dict[str, Any]] = []
        if otc is not None:
            for op in operators:
                part = OPERATOR_PARTS[op]
                for _module, rel in part.crds:
                    crds += load_manifests(otc.crd_dir / Path(rel).name)
                if member is not None and op in comp.WEBHOOK_PORTS:
                    webhooks += comp.webhook_configurations(
                        op,
                        load_manifests(otc.webhook_dir / f"{op}.yaml"),
                        layout,
                        layout.pki.ca_crt.read_bytes(),
                    )
        with AdminClient(layout.endpoint, layout.pki, layout.name) as api:
            for crd in crds:
                api.apply(crd)
            if member is None:
                api.wait_established(c["metadata"]["name"] for c in crds)
                return
            api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow"}})
            api.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "training-operator-webhook-cert", "namespace": "kubeflow"},
                }
            )
            for pool in member.nodes:
                for i in range(pool.count):
                    node = node_manifest(member.name, pool, i)
                    api.apply(node)
                    api.apply_status(node)
            api.wait_established(c["metadata"]["name"] for c in crds)
            for hook in webhooks:
                api.apply(hook)

    # -- components at run time ---------------------------------------------------------------

    def stop_component(self, cluster: str, component: str) -> None:
        """Stop one component, e.g. a member's kube-apiserver to make the member unreachable."""
        if not self.processes.stop(f"{cluster}/{component}"):
            raise SandboxError(f"{cluster}/{component} is not running")

    def start_component(self, cluster: str, component: str, timeout: float = 60.0) -> None:
        """Start a stopped component again with the same command line, and wait for it."""
        self._start_components(cluster, [component], timeout)

    def stop_cluster(self, cluster: str, *, abrupt: bool = False) -> None:
        """Take a whole cluster down (every process; its etcd data stays), as when it is lost.

        `abrupt` kills at once (a crash or a cut network), instead of a graceful shutdown.
        """
        for component in reversed(_COMPONENT_ORDER):
            self.processes.stop(f"{cluster}/{component}", grace=0.0 if abrupt else 10.0)

    def start_cluster(self, cluster: str, timeout: float = 120.0) -> None:
        """Bring a stopped cluster back: etcd, then the API server, then everything else."""
        alive = {r.component for r in self.processes.records() if r.alive()}
        wanted = [c for c in self._components(cluster) if f"{cluster}/{c}" not in alive]
        for phase in (["etcd"], ["kube-apiserver"]):
            self._start_components(cluster, [c for c in wanted if c in phase], timeout)
        rest = [c for c in wanted if c not in ("etcd", "kube-apiserver")]
        self._start_components(cluster, rest, timeout)

    def _components(self, cluster: str) -> list[str]:
        if cluster == FLEET:
            return list(_COMPONENT_ORDER[:3])
        config = self.config
        member = next(m for m in config.members if m.name == cluster)
        skipped = {c for op, c in _OPERATOR_COMPONENTS.items() if not config.runs(member, op)}
        if member.scheduler != "coscheduling":  # no scheduler-plugins PodGroups to control
            skipped.add("podgroup-controller")
        return [c for c in _COMPONENT_ORDER if c not in skipped]

    def _is_koordinator(self, cluster: str) -> bool:
        member = next((m for m in self.config.members if m.name == cluster), None)
        return member is not None and member.scheduler == "koordinator"

    def _start_components(self, cluster: str, components: Sequence[str], timeout: float) -> None:
        state = self._state()
        layout = self.cluster(cluster)
        tc = Toolchain(Path(state["toolchain"]))
        config = self.config
        koordinator = self._is_koordinator(cluster)
        ktc = Toolchain(Path(state["koordinator_toolchain"])) if koordinator else tc
        otc = Toolchain(Path(state.get("operators_toolchain") or tc.root))
        native = state.get("native_toolchain")
        tcs = _Toolchains(tc, ktc, otc, Toolchain(Path(native)) if native else None)
        member = next((m for m in config.members if m.name == cluster), None)
        plane = tcs.control_plane(config, cluster)
        builders: dict[str, Callable[[], Component]] = {
            "etcd": lambda: comp.etcd(tc, layout),
            "kube-apiserver": lambda: plane.apiserver(layout),
            "kube-controller-manager": lambda: plane.controller_manager(layout),
            "kube-scheduler": lambda: (
                comp.koord_scheduler(ktc, layout) if koordinator else plane.scheduler(layout)
            ),
            "podgroup-controller": lambda: comp.podgroup_controller(tc, layout),
            "kwok": lambda: comp.kwok(tc, layout, _ASSETS / "kwok-stages.yaml"),
        }
        if member is not None:
            for op, name in _OPERATOR_COMPONENTS.items():
                builders[name] = functools.partial(
                    _operator_component, op, tcs, layout, config, member
                )
        unknown = [c for c in components if c not in builders]
        if unknown:
            raise SandboxError(f"unknown sandbox component(s) {', '.join(unknown)}")
        die_with_parent = state.get("die_with_parent", False)
        started = [
            start(builders[c](), self.processes, die_with_parent=die_with_parent)
            for c in components
        ]
        wait_ready(started, timeout)

    # -- nodes at run time --------------------------------------------------------------------

    def add_nodes(self, member: str, pool: NodePool) -> list[str]:
        """Add fake nodes to a running member (tests use it to make room appear)."""
        names = []
        with self.admin(member) as api:
            for i in range(pool.count):
                node = node_manifest(member, pool, i)
                api.apply(node)
                api.apply_status(node)
                names.append(node["metadata"]["name"])
        return names

    def remove_nodes(self, member: str, names: Sequence[str]) -> None:
        with self.admin(member) as api:
            for name in names:
                api.delete("v1", "Node", name)

    # -- down and status ----------------------------------------------------------------------

    def down(self, *, progress: Progress = _say) -> None:
        """Stop every process this sandbox started and remove its state; safe to repeat."""
        stopped = self.processes.stop_all()
        if stopped:
            progress(f"stopped {len(stopped)} processes")
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
            progress(f"removed {self.root}")
        elif not stopped:
            progress(f"nothing to do: no sandbox at {self.root}")

    def status(self) -> list[ClusterStatus]:
        state = self._state()
        if not state:
            raise SandboxError(f"no sandbox at {self.root}; run `fleet sandbox up`")
        records = self.processes.records()
        out = []
        for name in self.cluster_names():
            layout = self.cluster(name)
            mine = [r for r in records if r.component.startswith(f"{name}/")]
            alive = sum(r.alive() for r in mine)
            healthy, detail, nodes, gpus = False, "", 0, 0
            try:
                with self.admin(name) as api:
                    code = api.readyz()
                    healthy = code == 200
                    detail = "ready" if healthy else f"readyz {code}"
                    if healthy:
                        items = api.list("v1", "Node")
                        nodes = len(items)
                        gpus = sum(
                            int(
                                ((n.get("status") or {}).get("allocatable") or {}).get(
                                    "nvidia.com/gpu"
                                )
                                or 0
                            )
                            for n in items
                        )
            except Unreachable as e:
                detail = f"unreachable ({type(e.__cause__ or e).__name__})"
            except (KubeError, OSError) as e:
                detail = f"unhealthy: {e}"
            if healthy and alive < len(mine):
                dead = [r.component for r in mine if not r.alive()]
                healthy, detail = False, "stopped: " + ", ".join(dead)
            out.append(
                ClusterStatus(name, layout.endpoint, healthy, detail, nodes, gpus, alive, len(mine))
            )
        return out


@dataclasses.dataclass(frozen=True)
class _Toolchains:
    """The toolchains a sandbox runs from: the cluster binaries, and the optional parts."""

    cluster: Toolchain
    koordinator: Toolchain | None
    operators: Toolchain | None
    #: The native-gang members' control plane (`scheduler: kubernetes`).
    native: Toolchain | None = None

    def control_plane(self, config: SandboxConfig, cluster: str) -> ControlPlane:
        """What a cluster's API server, controller-manager and kube-scheduler run from: the
        native toolchain, with its feature gates, for a native-gang member; else the cluster
        toolchain."""
        member = next((m for m in config.members if m.name == cluster), None)
        if member is None or member.scheduler != "kubernetes":
            return ControlPlane(self.cluster)
        if self.native is None:
            raise SandboxError(
                f"{cluster} runs Kubernetes' own gang scheduling, but its toolchain was not built"
            )
        return ControlPlane(self.native, native=True)


@dataclasses.dataclass(frozen=True)
class ControlPlane:
    """A cluster's control-plane binaries and whether they run Kubernetes' own gang scheduling."""

    tools: Toolchain
    native: bool = False

    def apiserver(self, layout: comp.ClusterLayout) -> Component:
        return comp.kube_apiserver(self.tools, layout, native=self.native)

    def controller_manager(self, layout: comp.ClusterLayout) -> Component:
        return comp.kube_controller_manager(self.tools, layout, native=self.native)

    def scheduler(self, layout: comp.ClusterLayout) -> Component:
        return comp.kube_scheduler(self.tools, layout, native=self.native)


def _operator_component(
    operator: str,
    tcs: _Toolchains,
    layout: comp.ClusterLayout,
    config: SandboxConfig,
    member: MemberSpec,
) -> Component:
    """The process of one job operator in a member. On a Koordinator or native-gang member the
    operators make no PodGroups and leave schedulerName alone: koord-scheduler reads gangs from
    the pods, and on a native-gang member fleet writes the PodGroup."""
    gang = "" if member.scheduler != "coscheduling" else config.gang_scheduler_name
    if operator == "training-operator":
        return comp.training_operator(tcs.cluster, layout, gang)
    otc = tcs.operators
    if otc is None:
        raise SandboxError(f"{member.name} runs {operator}, but its toolchain was not built")
    if operator == "jobset":
        return comp.jobset_controller(otc, layout)
    if operator == "trainer":
        return comp.trainer_controller(otc, layout)
    return comp.kuberay_operator(otc, layout)


class _Where:
    """Which step of `up` is running, so a failure can say where it happened."""

    def __init__(self) -> None:
        self.phase = "before the first step"
        self.cluster: str | None = None

    def at(self, phase: str, cluster: str | None = None) -> None:
        self.phase, self.cluster = phase, cluster

    def __str__(self) -> str:
        return f"while {self.phase}" + (f" (cluster {self.cluster})" if self.cluster else "")


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
