"""Build the sandbox's upstream components from their Go modules, pinned in one place.

Every Kubernetes part the sandbox runs (API server, controller-manager, etcd, the coscheduling
scheduler and its PodGroup controller, kwok, the Kubeflow training operator) is compiled here from
the Go module proxy, because there is no container engine to pull images from. The pins below are
the only place a version is written; the Go modules we build from are generated from them into the
cache, and the cache is keyed by them, so a warm cache compiles nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path

from fleet.sandbox.errors import SandboxError
from fleet.sandbox.progress import (
    HEARTBEAT_SECONDS,
    Clock,
    Heartbeat,
    Progress,
    elapsed,
    plural,
)

#: Kubernetes release for every control-plane binary. scheduler-plugins must be on the same minor.
KUBERNETES = "v1.34.4"
#: Newest scheduler-plugins release on the 1.34 minor; its replace block is re-pinned to
#: KUBERNETES because the proxy this project is built against lacks some v0.34.7 staging modules.
SCHEDULER_PLUGINS = "v0.34.7"
#: The etcd server that k8s.io/kubernetes KUBERNETES itself requires (keeps one module graph).
ETCD = "v3.6.4"
KWOK = "v0.8.0"
TRAINING_OPERATOR = "v1.9.3"
#: helm renders and checks our chart in the tests; it is cached apart from the cluster binaries,
#: so bumping it rebuilds nothing else.
HELM = "v4.3.1"
#: Koordinator's koord-scheduler for Koordinator members (optional: built only when a sandbox
#: member asks for it, and cached apart, so the cluster binaries above are not rebuilt for it).
#: v1.8.0 is built against Kubernetes 1.35: its scheduler libraries are 1.35, talking to the 1.34
#: API servers above (one minor of skew, inside Kubernetes' supported client/server skew).
KOORDINATOR = "v1.8.0"
#: The Kubernetes libraries koord-scheduler is built with. KOORDINATOR's go.mod pins 1.35.2,
#: whose staging modules are incomplete on the module proxy; 1.35.4 is the same minor, complete.
KOORDINATOR_KUBERNETES = "v1.35.4"
#: The Kubernetes release of members that gang-schedule with Kubernetes' own Workload API
#: (`scheduler: kubernetes`): the first with `scheduling.k8s.io/v1beta1` PodGroups (gate
#: `GenericWorkload`, beta) and topology-aware PodGroup placement (gate
#: `TopologyAwareWorkloadScheduling`, alpha), served and scheduled by the upstream kube-apiserver
#: and kube-scheduler. Built only when a sandbox member asks for it, and cached apart (optional,
#: like koord-scheduler).
NATIVE_KUBERNETES = "v1.37.2"

#: Job operators beyond the training operator (optional: each built only when a sandbox member
#: runs it, cached apart, so the cluster binaries above are not rebuilt for them). The three
#: releases are all built on Kubernetes 1.34 libraries, so they share one Go module graph (the
#: same staging pins as the cluster binaries: the Go build cache is shared too). TRAINER v2.1.0
#: itself requires JOBSET v0.10.1: TrainJobs run as JobSets.
JOBSET = "v0.10.1"
TRAINER = "v2.1.0"
KUBERAY = "v1.5.1"

#: Staging modules of k8s.io/kubernetes, all replaced with their published versions.
_STAGING = [
    "api",
    "apiextensions-apiserver",
    "apimachinery",
    "apiserver",
    "cli-runtime",
    "client-go",
    "cloud-provider",
    "cluster-bootstrap",
    "code-generator",
    "component-base",
    "component-helpers",
    "controller-manager",
    "cri-api",
    "cri-client",
    "csi-translation-lib",
    "dynamic-resource-allocation",
    "endpointslice",
    "externaljwt",
    "kms",
    "kube-aggregator",
    "kube-controller-manager",
    "kube-proxy",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "metrics",
    "mount-utils",
    "pod-security-admission",
    "sample-apiserver",
]

#: Staging modules whose KUBERNETES-matching release is missing from the module proxy. None of
#: them is compiled into a binary we build; they only need to resolve in the module graph.
_STAGING_OVERRIDES = {
    "cli-runtime": "v0.34.2",
    "code-generator": "v0.34.2",
    "kube-proxy": "v0.34.2",
    "sample-apiserver": "v0.34.2",
}

#: Staging modules 1.37 added to k8s.io/kubernetes' module graph (the native members' build).
_NATIVE_STAGING = [*_STAGING, "cri-streaming", "streaming"]

#: Bumped whenever the recipe below changes in a way that changes the binaries.
_RECIPE = 3


def _staging_version(name: str) -> str:
    return _STAGING_OVERRIDES.get(name, "v0." + KUBERNETES.removeprefix("v1."))


@dataclasses.dataclass(frozen=True)
class Binary:
    """One executable and the Go package it is built from."""

    name: str
    package: str


@dataclasses.dataclass(frozen=True)
class GoModule:
    """A Go module of our own that requires upstream modules, so their mains can be built."""

    name: str
    go: str
    requires: Mapping[str, str]
    replaces: Mapping[str, str]
    binaries: Sequence[Binary]
    ldflags: str = ""

    def go_mod(self) -> str:
        lines = [
            f"module fleet.sandbox/toolchain/{self.name}",
            "",
            f"go {self.go}",
            "",
            "require (",
        ]
        lines += [f"\t{path} {version}" for path, version in sorted(self.requires.items())]
        lines.append(")")
        if self.replaces:
            lines += ["", "replace ("]
            lines += [f"\t{p} => {p} {v}" for p, v in sorted(self.replaces.items())]
            lines.append(")")
        return "\n".join(lines) + "\n"

    def tools_go(self) -> str:
        imports = "\n".join(f'\t_ "{b.package}"' for b in self.binaries)
        return f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"


def _k8s_ldflags(version: str) -> str:
    major, minor = version.removeprefix("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    return (
        f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} "
        f"-X {pkg}.gitMinor={minor} -X {pkg}.gitTreeState=clean"
    )


MODULES: tuple[GoModule, ...] = (
    GoModule(
        name="kubernetes",
        go="1.24.0",
        requires={
            "k8s.io/kubernetes": KUBERNETES,
            "sigs.k8s.io/scheduler-plugins": SCHEDULER_PLUGINS,
            "go.etcd.io/etcd/server/v3": ETCD,
        },
        replaces={"k8s.io/kubernetes": KUBERNETES}
        | {f"k8s.io/{name}": _staging_version(name) for name in _STAGING},
        binaries=(
            Binary("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
            Binary("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
            Binary("etcd", "go.etcd.io/etcd/server/v3"),
            Binary("kube-scheduler", "sigs.k8s.io/scheduler-plugins/cmd/scheduler"),
            Binary("podgroup-controller", "sigs.k8s.io/scheduler-plugins/cmd/controller"),
        ),
        ldflags=_k8s_ldflags(KUBERNETES),
    ),
    GoModule(
        name="kwok",
        go="1.26.0",
        requires={"sigs.k8s.io/kwok": KWOK},
        replaces={},
        binaries=(Binary("kwok", "sigs.k8s.io/kwok/cmd/kwok"),),
        ldflags="-s -w",
    ),
    GoModule(
        name="training-operator",
        go="1.23",
        requires={"github.com/kubeflow/training-operator": TRAINING_OPERATOR},
        replaces={},
        binaries=(
            Binary(
                "training-operator",
                "github.com/kubeflow/training-operator/cmd/training-operator.v1",
            ),
        ),
        ldflags="-s -w",
    ),
)

HELM_MODULE = GoModule(
    name="helm",
    go="1.26.0",
    requires={"helm.sh/helm/v4": HELM},
    replaces={},
    binaries=(Binary("helm", "helm.sh/helm/v4/cmd/helm"),),
    ldflags=f"-s -w -X helm.sh/helm/v4/internal/version.version={HELM}",
)


def _koordinator_module() -> GoModule:
    staging = "v0." + KOORDINATOR_KUBERNETES.removeprefix("v1.")
    # Replace directives of a dependency do not apply to the module that requires it, so the
    # ones koord-scheduler's build needs are restated here (same versions as its own go.mod).
    upstream_replaces = {
        "github.com/prometheus/prometheus": "v0.39.2",
        "github.com/grpc-ecosystem/grpc-gateway/v2": "v2.26.3",
        "google.golang.org/genproto": "v0.0.0-20230526161137-0005af68ea54",
        "google.golang.org/genproto/googleapis/api": "v0.0.0-20250303144028-a0af3efb3deb",
        "google.golang.org/genproto/googleapis/rpc": "v0.0.0-20250528174236-200df99c418a",
        "k8s.io/kube-openapi": "v0.0.0-20250910181357-589584f1c912",
        "sigs.k8s.io/controller-runtime": "v0.23.1",
    }
    return GoModule(
        name="koordinator",
        go="1.25.0",
        requires={"github.com/koordinator-sh/koordinator": KOORDINATOR},
        replaces={"k8s.io/kubernetes": KOORDINATOR_KUBERNETES}
        | {f"k8s.io/{name}": staging for name in _STAGING}
        | upstream_replaces,
        binaries=(
            Binary("koord-scheduler", "github.com/koordinator-sh/koordinator/cmd/koord-scheduler"),
        ),
        # component-base's version is what the scheduler reports: the Kubernetes libraries it
        # is built with, and (as build metadata) the Koordinator release.
        ldflags=_k8s_ldflags(KOORDINATOR_KUBERNETES).replace(
            f"gitVersion={KOORDINATOR_KUBERNETES}",
            f"gitVersion={KOORDINATOR_KUBERNETES}+koordinator-{KOORDINATOR}",
        ),
    )


KOORDINATOR_MODULE = _koordinator_module()

#: The control plane of a native-gang member: API server, controller-manager and the upstream
#: kube-scheduler, whose GangScheduling and TopologyPlacementGenerator plugins are on by default
#: once their feature gates are (components.py turns them on). etcd and kwok are the cluster
#: toolchain's: etcd's v3 API and kwok's client are the same for either release.
NATIVE_MODULE = GoModule(
    name="kubernetes-native",
    go="1.26.0",
    requires={"k8s.io/kubernetes": NATIVE_KUBERNETES},
    replaces={"k8s.io/kubernetes": NATIVE_KUBERNETES}
    | {f"k8s.io/{name}": "v0." + NATIVE_KUBERNETES.removeprefix("v1.") for name in _NATIVE_STAGING},
    binaries=(
        Binary("kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"),
        Binary("kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"),
        Binary("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
    ),
    ldflags=_k8s_ldflags(NATIVE_KUBERNETES),
)

#: The CRDs koord-scheduler watches, from the module it is built from: Reservation, its PodGroup
#: (scheduling.sigs.k8s.io, not scheduler-plugins' scheduling.x-k8s.io) and what its informers
#: list at start.
KOORDINATOR_CRD_SOURCES: tuple[tuple[str, str], ...] = tuple(
    ("github.com/koordinator-sh/koordinator", f"config/crd/bases/{name}.yaml")
    for name in (
        "scheduling.koordinator.sh_reservations",
        "scheduling.koordinator.sh_devices",
        "scheduling.koordinator.sh_podmigrationjobs",
        "scheduling.koordinator.sh_clusternetworktopologies",
        "scheduling.sigs.k8s.io_podgroups",
        "scheduling.sigs.k8s.io_elasticquotas",
        "slo.koordinator.sh_nodemetrics",
        "topology.node.k8s.io_noderesourcetopologies",
    )
)

#: CRDs the members need, taken from the very module versions we build (never copied into the repo).
CRD_SOURCES: tuple[tuple[str, str], ...] = (
    ("github.com/kubeflow/training-operator", "manifests/base/crds/kubeflow.org_pytorchjobs.yaml"),
    ("github.com/kubeflow/training-operator", "manifests/base/crds/kubeflow.org_tfjobs.yaml"),
    ("github.com/kubeflow/training-operator", "manifests/base/crds/kubeflow.org_mpijobs.yaml"),
    ("github.com/kubeflow/training-operator", "manifests/base/crds/kubeflow.org_xgboostjobs.yaml"),
    ("github.com/kubeflow/training-operator", "manifests/base/crds/kubeflow.org_paddlejobs.yaml"),
    ("github.com/kubeflow/training-operator", "manifests/base/crds/kubeflow.org_jaxjobs.yaml"),
    ("sigs.k8s.io/scheduler-plugins", "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"),
    ("sigs.k8s.io/scheduler-plugins", "config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml"),
)


def pins() -> dict[str, object]:
    """Everything that decides what the binaries are: the cache key is a hash of it."""
    return {
        "recipe": _RECIPE,
        "platform": _platform(),
        "modules": [
            {
                "name": m.name,
                "go.mod": m.go_mod(),
                "binaries": [dataclasses.asdict(b) for b in m.binaries],
                "ldflags": m.ldflags,
            }
            for m in MODULES
        ],
        "crds": [list(src) for src in CRD_SOURCES],
    }


def _platform() -> str:
    return f"{sys.platform}-{os.uname().machine}"


def cache_root() -> Path:
    """Where built toolchains live: outside the repository, shared by every checkout."""
    if env := os.environ.get("FLEET_CACHE_DIR"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fleet"


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """A built toolchain on disk: one folder of binaries and one of CRD manifests."""

    root: Path

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def crd_dir(self) -> Path:
        return self.root / "crds"

    @property
    def webhook_dir(self) -> Path:
        return self.root / "webhooks"

    @property
    def stamp(self) -> Path:
        return self.root / "toolchain.json"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def crds(self) -> list[Path]:
        return sorted(self.crd_dir.glob("*.yaml"))

    def is_complete(self) -> bool:
        if not self.stamp.is_file():
            return False
        wanted = [b.name for m in MODULES for b in m.binaries]
        return all(os.access(self.binary(n), os.X_OK) for n in wanted) and len(self.crds()) == len(
            CRD_SOURCES
        )


def toolchain_for_pins() -> Toolchain:
    digest = hashlib.sha256(json.dumps(pins(), sort_keys=True).encode()).hexdigest()[:16]
    return Toolchain(cache_root() / "toolchain" / f"k8s-{KUBERNETES}-{digest}")


def _default_progress(message: str) -> None:
    print(f"[toolchain] {message}", file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class BuiltBinary:
    """One binary of a toolchain, for the summary: where it is, its size, what building it took."""

    name: str
    path: Path
    size: int
    #: Seconds this run spent compiling it; None when the cache already had it.
    seconds: float | None


@dataclasses.dataclass(frozen=True)
class BuildResult:
    """What `build_modules` left: each module's folder (the CRDs are read from its module graph)
    and every binary, built now or found built, for the summary."""

    module_dirs: dict[str, Path]
    binaries: list[BuiltBinary]


def ensure_helm(progress: Progress | None = None) -> Path:
    """The pinned helm binary, built on first use (about 2 minutes cold on 2 cores)."""
    say = progress or _default_progress
    key = json.dumps([_platform(), HELM_MODULE.go_mod(), HELM_MODULE.ldflags]).encode()
    digest = hashlib.sha256(key).hexdigest()[:16]
    tools = Toolchain(cache_root() / "toolchain" / f"helm-{HELM}-{digest}")
    helm = tools.binary("helm")
    if os.access(helm, os.X_OK):
        return helm
    with _build_lock(tools.root, say):
        if os.access(helm, os.X_OK):
            return helm
        started = time.monotonic()
        go = find_go()
        say(f"building helm {HELM} into {tools.root} with {_go_version(go)}")
        result = build_modules(go, tools, (HELM_MODULE,), say)
        for line in summary(tools, result.binaries, time.monotonic() - started, "helm"):
            say(line)
    return helm


def koordinator_toolchain() -> Toolchain:
    """Where the pinned koord-scheduler and its CRDs are cached (built or not)."""
    key = json.dumps(
        [
            _platform(),
            KOORDINATOR_MODULE.go_mod(),
            KOORDINATOR_MODULE.ldflags,
            [list(src) for src in KOORDINATOR_CRD_SOURCES],
        ]
    ).encode()
    digest = hashlib.sha256(key).hexdigest()[:16]
    return Toolchain(cache_root() / "toolchain" / f"koordinator-{KOORDINATOR}-{digest}")


def _koordinator_complete(tools: Toolchain) -> bool:
    return (
        tools.stamp.is_file()
        and os.access(tools.binary("koord-scheduler"), os.X_OK)
        and len(tools.crds()) == len(KOORDINATOR_CRD_SOURCES)
    )


def ensure_koordinator(progress: Progress | None = None) -> Toolchain:
    """The pinned koord-scheduler and the CRDs it needs, built on first use (cold: about
    25 minutes on 2 shared cores, see docs/sandbox.md), cached apart from the cluster binaries."""
    return _built_apart(
        koordinator_toolchain(),
        _koordinator_complete,
        progress or _default_progress,
        KOORDINATOR_MODULE,
        "koordinator",
        lambda go: (
            f"building koord-scheduler (Koordinator {KOORDINATOR}, Kubernetes libraries "
            f"{KOORDINATOR_KUBERNETES}) with {go}; only sandboxes with a Koordinator member "
            "need it"
        ),
        {"koordinator": KOORDINATOR, "kubernetes": KOORDINATOR_KUBERNETES},
        crds=KOORDINATOR_CRD_SOURCES,
    )


def _built_apart(
    tools: Toolchain,
    complete: Callable[[Toolchain], bool],
    say: Progress,
    module: GoModule,
    what: str,
    headline: Callable[[str], str],
    stamp: Mapping[str, object],
    crds: Sequence[tuple[str, str]] = (),
) -> Toolchain:
    """An optional part cached apart from the cluster binaries (koord-scheduler, the
    native-gang control plane): found, or built under the lock from `module` (and its `crds`
    copied), stamped with what it was built from. `headline(go)` says what is built with which
    Go before the build starts."""
    if complete(tools):
        return tools
    with _build_lock(tools.root, say):
        if complete(tools):  # another process finished it while this one waited
            return tools
        started = time.monotonic()
        go = find_go()
        say(f"{headline(_go_version(go))}; into {tools.root}")
        result = build_modules(go, tools, (module,), say)
        if crds:
            say(f"copying {len(crds)} CRD manifests from the module just built")
            _collect_crds(go, tools, result.module_dirs, crds, (module,))
        record = {
            **stamp,
            "platform": _platform(),
            "go.mod": module.go_mod(),
            "ldflags": module.ldflags,
            "crds": [list(src) for src in crds],
        }
        tools.stamp.write_text(json.dumps(record, indent=2, sort_keys=True))
        for line in summary(tools, result.binaries, time.monotonic() - started, what):
            say(line)
    return tools


def native_toolchain() -> Toolchain:
    """Where the pinned native-gang control plane is cached (built or not)."""
    key = json.dumps([_platform(), NATIVE_MODULE.go_mod(), NATIVE_MODULE.ldflags]).encode()
    digest = hashlib.sha256(key).hexdigest()[:16]
    return Toolchain(cache_root() / "toolchain" / f"native-{NATIVE_KUBERNETES}-{digest}")


def _native_complete(tools: Toolchain) -> bool:
    return tools.stamp.is_file() and all(
        os.access(tools.binary(b.name), os.X_OK) for b in NATIVE_MODULE.binaries
    )


def ensure_native(progress: Progress | None = None) -> Toolchain:
    """The pinned Kubernetes control plane of native-gang members, built on first use (cold:
    about 12 minutes on 2 cores, see docs/sandbox.md), cached apart from the cluster binaries."""
    return _built_apart(
        native_toolchain(),
        _native_complete,
        progress or _default_progress,
        NATIVE_MODULE,
        "native",
        lambda go: (
            f"building Kubernetes {NATIVE_KUBERNETES} (kube-apiserver, kube-controller-manager, "
            f"kube-scheduler with the Workload API's gang scheduling) with {go}; only "
            "sandboxes with a native-gang member need it"
        ),
        {"kubernetes": NATIVE_KUBERNETES},
    )


@dataclasses.dataclass(frozen=True)
class OperatorPart:
    """One job operator of the operators toolchain: its binary, and the CRD and webhook
    manifests a member that runs it needs, all from the module version it is built from."""

    #: How a sandbox member names it (`operators: [jobset, ...]`).
    name: str
    binary: Binary
    crds: tuple[tuple[str, str], ...]
    #: Its admission webhook manifests; the sandbox registers them (see components.py).
    webhooks: tuple[tuple[str, str], ...] = ()

    def files(self) -> tuple[tuple[str, str, str], ...]:
        """(module, path in it, file name in the toolchain) of every manifest it needs; webhook
        manifests are renamed after the operator, upstream names them all manifests.yaml."""
        return tuple((m, rel, f"crds/{Path(rel).name}") for m, rel in self.crds) + tuple(
            (m, rel, f"webhooks/{self.name}.yaml") for m, rel in self.webhooks
        )


_JOBSET_MODULE = "sigs.k8s.io/jobset"
_TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
_KUBERAY_MODULE = "github.com/ray-project/kuberay/ray-operator"

#: The operators a member can run besides the training operator, by the name members use.
OPERATOR_PARTS: dict[str, OperatorPart] = {
    "jobset": OperatorPart(
        name="jobset",
        binary=Binary("jobset-controller", _JOBSET_MODULE),
        crds=((_JOBSET_MODULE, "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"),),
        webhooks=((_JOBSET_MODULE, "config/components/webhook/manifests.yaml"),),
    ),
    "trainer": OperatorPart(
        name="trainer",
        binary=Binary(
            "trainer-controller-manager", f"{_TRAINER_MODULE}/cmd/trainer-controller-manager"
        ),
        crds=tuple(
            (_TRAINER_MODULE, f"manifests/base/crds/trainer.kubeflow.org_{kind}.yaml")
            for kind in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
        ),
        webhooks=((_TRAINER_MODULE, "manifests/base/webhook/manifests.yaml"),),
    ),
    "kuberay": OperatorPart(
        name="kuberay",
        binary=Binary("kuberay-operator", _KUBERAY_MODULE),
        # The operator runs its RayService controller too, whose informer needs that CRD.
        crds=tuple(
            (_KUBERAY_MODULE, f"config/crd/bases/ray.io_{kind}.yaml")
            for kind in ("rayclusters", "rayjobs", "rayservices")
        ),
    ),
}

OPERATORS_MODULE = GoModule(
    name="operators",
    go="1.25.0",
    requires={
        _JOBSET_MODULE: JOBSET,
        _TRAINER_MODULE: TRAINER,
        _KUBERAY_MODULE: KUBERAY,
    },
    # The cluster binaries' staging pins: their 1.34 libraries resolve on the proxy, and the
    # packages compiled for the cluster binaries are reused from the Go build cache.
    replaces={"k8s.io/kubernetes": KUBERNETES}
    | {f"k8s.io/{name}": _staging_version(name) for name in _STAGING},
    binaries=tuple(part.binary for part in OPERATOR_PARTS.values()),
    ldflags="-s -w",
)


def operators_toolchain() -> Toolchain:
    """Where the pinned job operators and their manifests are cached (built or not)."""
    key = json.dumps(
        [
            _platform(),
            OPERATORS_MODULE.go_mod(),
            OPERATORS_MODULE.ldflags,
            [list(f) for part in OPERATOR_PARTS.values() for f in part.files()],
        ]
    ).encode()
    digest = hashlib.sha256(key).hexdigest()[:16]
    return Toolchain(cache_root() / "toolchain" / f"operators-{digest}")


def _operators_complete(tools: Toolchain, names: Sequence[str]) -> bool:
    parts = [OPERATOR_PARTS[n] for n in names]
    return all(
        os.access(tools.binary(p.binary.name), os.X_OK)
        and all((tools.root / dest).is_file() for _m, _rel, dest in p.files())
        for p in parts
    )


def ensure_operators(names: Collection[str], progress: Progress | None = None) -> Toolchain:
    """The named job operators (keys of OPERATOR_PARTS; others are ignored) and their manifests,
    each built on first use and cached apart from the cluster binaries (cold times in
    docs/sandbox.md)."""
    say = progress or _default_progress
    tools = operators_toolchain()
    wanted = sorted(set(names) & OPERATOR_PARTS.keys())
    if _operators_complete(tools, wanted):
        return tools
    with _build_lock(tools.root, say):
        if _operators_complete(tools, wanted):
            return tools
        started = time.monotonic()
        go = find_go()
        parts = [OPERATOR_PARTS[n] for n in wanted]
        versions = {"jobset": JOBSET, "trainer": TRAINER, "kuberay": KUBERAY}
        say(
            "building job operators "
            + ", ".join(f"{n} {versions[n]}" for n in wanted)
            + f" into {tools.root} with {_go_version(go)}; only sandboxes whose members run "
            "them need them"
        )
        module = dataclasses.replace(OPERATORS_MODULE, binaries=tuple(p.binary for p in parts))
        result = build_modules(go, tools, (module,), say)
        files = [f for p in parts for f in p.files()]
        say(f"copying {plural(len(files), 'manifest', 'manifests')} from the modules just built")
        for module_path, rel, dest in files:
            target = tools.root / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(
                _module_dir(go, result.module_dirs[module.name], module_path) / rel, target
            )
        tools.stamp.write_text(
            json.dumps(
                {
                    "operators": {n: versions[n] for n in OPERATOR_PARTS},
                    "platform": _platform(),
                    "go.mod": OPERATORS_MODULE.go_mod(),
                    "ldflags": OPERATORS_MODULE.ldflags,
                },
                indent=2,
                sort_keys=True,
            )
        )
        for line in summary(tools, result.binaries, time.monotonic() - started, "job operators"):
            say(line)
    return tools


def ensure_toolchain(progress: Progress | None = None) -> Toolchain:
    """Return the pinned toolchain, building whatever is missing (cold: ~15 min on 2 cores)."""
    say = progress or _default_progress
    toolchain = toolchain_for_pins()
    if toolchain.is_complete():
        return toolchain
    with _build_lock(toolchain.root, say):
        if toolchain.is_complete():  # another process finished it while this one waited
            return toolchain
        return _build_toolchain(toolchain, say)


@contextlib.contextmanager
def _build_lock(root: Path, say: Progress) -> Iterator[None]:
    """Hold an exclusive lock on `root` while building into it.

    Two builds into one cache (`make demo` beside `make test`, two pytest sessions) would write
    the same module folders and binaries at once; the second waits for the first and then finds
    the toolchain built. The lock dies with its process, so a killed build never blocks the next.
    """
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another process is building into {root}; waiting for it to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_toolchain(toolchain: Toolchain, say: Progress) -> Toolchain:
    go = find_go()
    started = time.monotonic()
    binaries = sum(len(m.binaries) for m in MODULES)
    say(
        f"building the sandbox toolchain into {toolchain.root}: {binaries} binaries from "
        f"{len(MODULES)} Go modules ({_pinned_versions()}) with {_go_version(go)}; a cold build "
        "takes about 15 minutes on 2 cores, later runs reuse it"
    )
    result = build_modules(go, toolchain, MODULES, say)
    say(f"copying {len(CRD_SOURCES)} CRD manifests from the modules just resolved")
    _collect_crds(go, toolchain, result.module_dirs, CRD_SOURCES, MODULES)
    toolchain.stamp.write_text(json.dumps(pins(), indent=2, sort_keys=True))
    for line in summary(toolchain, result.binaries, time.monotonic() - started, "toolchain"):
        say(line)
    return toolchain


def summary(
    toolchain: Toolchain, binaries: Sequence[BuiltBinary], seconds: float, what: str
) -> list[str]:
    """What was built, how big and how long each took, and where it is cached."""
    width = max((len(b.name) for b in binaries), default=0)
    lines = [f"{what} ready in {elapsed(seconds)}, cached in {toolchain.root}:"]
    for b in binaries:
        took = "already built" if b.seconds is None else f"built in {elapsed(b.seconds)}"
        lines.append(f"  {b.name:<{width}}  {_megabytes(b.size):>9}  {took}  {b.path}")
    if crds := toolchain.crds():
        manifests = plural(len(crds), "CRD manifest", "CRD manifests")
        lines.append(f"  {manifests} in {toolchain.crd_dir}")
    lines.append(f"  Go logs of each step in {toolchain.root / 'logs'}")
    return lines


def build_modules(
    go: str,
    toolchain: Toolchain,
    modules: Sequence[GoModule],
    say: Progress,
    *,
    interval: float = HEARTBEAT_SECONDS,
    clock: Clock = time.monotonic,
) -> BuildResult:
    """Resolve each module and compile its binaries into the toolchain (skipping built ones).

    Every step says what it does and what it is built from before it starts, repeats that with
    the time elapsed and how far it got every `interval` seconds while it runs, and gives its time
    when done.
    """
    toolchain.bin_dir.mkdir(parents=True, exist_ok=True)
    toolchain.crd_dir.mkdir(parents=True, exist_ok=True)
    logs = toolchain.root / "logs"
    logs.mkdir(exist_ok=True)
    module_dirs: dict[str, Path] = {}
    built: list[BuiltBinary] = []
    total = sum(len(m.binaries) for m in modules)
    for module in modules:
        src = toolchain.root / "src" / module.name
        src.mkdir(parents=True, exist_ok=True)
        (src / "go.mod").write_text(module.go_mod())
        (src / "tools.go").write_text(module.tools_go())
        log = logs / f"{module.name}-modules.log"
        requires = ", ".join(f"{path} {version}" for path, version in module.requires.items())
        pinned = len(set(module.replaces) - set(module.requires))
        say(
            f"[{module.name}] resolving Go modules for "
            f"{plural(len(module.binaries), 'binary', 'binaries')}: {requires}"
            + (f" (+{pinned} more pinned by replace)" if pinned else "")
            + f"; log {log}"
        )
        # Resolve only what the binaries import, for this platform: `go mod tidy` would fetch
        # every module any build tag or OS could need (8 minutes instead of 1, cold).
        packages = [b.package for b in module.binaries]
        with Heartbeat(
            say,
            f"[{module.name}] resolving Go modules",
            detail=functools.partial(_resolve_detail, log),
            interval=interval,
            clock=clock,
        ) as step:
            _run_go(go, ["list", "-mod=mod", "-deps", *packages], src, log, module.name)
        say(f"[{module.name}] modules ready in {elapsed(step.seconds())}; {_resolve_detail(log)}")
        module_dirs[module.name] = src
        for binary in module.binaries:
            target = toolchain.binary(binary.name)
            if os.access(target, os.X_OK):
                built.append(BuiltBinary(binary.name, target, target.stat().st_size, None))
                say(f"[{binary.name}] already built: {target}")
                continue
            log = logs / f"{binary.name}.log"
            say(
                f"[{binary.name}] compiling {binary.package} "
                f"({_source_module(module, binary)}), binary {len(built) + 1} of {total}; log {log}"
            )
            partial = target.with_suffix(".partial")
            # -v names each package as it is compiled: the heartbeat counts them from the log.
            args = ["build", "-v", "-trimpath", "-buildvcs=false", "-o", str(partial)]
            if module.ldflags:
                args += ["-ldflags", module.ldflags]
            with Heartbeat(
                say,
                f"[{binary.name}] compiling",
                detail=functools.partial(_compile_detail, log),
                interval=interval,
                clock=clock,
            ) as step:
                _run_go(go, [*args, binary.package], src, log, binary.name)
            partial.replace(target)
            seconds = step.seconds()
            size = target.stat().st_size
            built.append(BuiltBinary(binary.name, target, size, seconds))
            say(
                f"[{binary.name}] built in {elapsed(seconds)} ({_megabytes(size)}); "
                f"{_compile_detail(log)}"
            )
    return BuildResult(module_dirs, built)


def _pinned_versions() -> str:
    names = {
        "Kubernetes": KUBERNETES,
        "scheduler-plugins": SCHEDULER_PLUGINS,
        "etcd": ETCD,
        "kwok": KWOK,
        "training-operator": TRAINING_OPERATOR,
    }
    return ", ".join(f"{name} {version}" for name, version in names.items())


def _source_module(module: GoModule, binary: Binary) -> str:
    """The required module (and version) that provides a binary's main package."""
    owners = [
        p for p in module.requires if binary.package == p or binary.package.startswith(p + "/")
    ]
    if not owners:
        return module.name
    path = max(owners, key=len)
    return f"{path} {module.requires[path]}"


def _log_lines(log: Path) -> list[str]:
    try:
        return log.read_text(errors="replace").splitlines()[1:]  # line 1 is the command
    except OSError:
        return []


def _is_package(line: str) -> bool:
    return bool(line) and not line.startswith(("#", "go: ")) and not any(c.isspace() for c in line)


def _resolve_detail(log: Path) -> str:
    lines = _log_lines(log)
    downloads = [
        ln.removeprefix("go: downloading ") for ln in lines if ln.startswith("go: downloading ")
    ]
    packages = sum(1 for ln in lines if _is_package(ln))
    parts = []
    if downloads:
        parts.append(
            f"{plural(len(downloads), 'module', 'modules')} downloaded, last {downloads[-1]}"
        )
    parts.append(f"{plural(packages, 'package', 'packages')} listed")
    return "; ".join(parts)


def _compile_detail(log: Path) -> str:
    packages = [ln for ln in _log_lines(log) if _is_package(ln)]
    if not packages:
        return "no package compiled yet"
    return f"{plural(len(packages), 'package', 'packages')} compiled, last {packages[-1]}"


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


def _go_version(go: str) -> str:
    """`go1.26.8 (/usr/local/go/bin/go)`: the compiler is an input of the build too."""
    out = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, env=_go_env(), check=False
    )
    version = out.stdout.strip() if out.returncode == 0 else "unknown version"
    return f"{version} ({go})"


def _collect_crds(
    go: str,
    toolchain: Toolchain,
    module_dirs: Mapping[str, Path],
    sources: Sequence[tuple[str, str]],
    modules: Sequence[GoModule],
) -> None:
    owner = {req: m.name for m in modules for req in m.requires}
    for module_path, rel in sources:
        module_dir = _module_dir(go, module_dirs[owner[module_path]], module_path)
        shutil.copyfile(module_dir / rel, toolchain.crd_dir / Path(rel).name)


def _module_dir(go: str, src: Path, module_path: str) -> Path:
    """Where the module graph of `src` keeps `module_path` (in the Go module cache)."""
    out = subprocess.run(
        [go, "list", "-m", "-json", module_path],
        cwd=src,
        capture_output=True,
        text=True,
        env=_go_env(),
        check=False,
    )
    if out.returncode != 0:
        raise SandboxError(f"cannot locate module {module_path}: {out.stderr.strip()}")
    return Path(json.loads(out.stdout)["Dir"])


def find_go() -> str:
    go = os.environ.get("FLEET_GO") or shutil.which("go")
    if not go:
        raise SandboxError(
            "the sandbox builds Kubernetes components from Go modules, but no `go` is on PATH; "
            "install Go >= 1.24 (https://go.dev/doc/install) or set FLEET_GO to its path"
        )
    return go


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-mod=mod")
    env["GOFLAGS"] = env["GOFLAGS"].replace("-mod=vendor", "-mod=mod")
    return env


def _run_go(go: str, args: list[str], cwd: Path, log: Path, component: str) -> None:
    with log.open("w") as out:
        out.write(f"$ go {' '.join(args)}  (in {cwd})\n")
        out.flush()
        proc = subprocess.run(
            [go, *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=_go_env(), check=False
        )
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise SandboxError(
            f"building {component} failed (go {args[0]} exited {proc.returncode}); "
            f"full log: {log}\n{tail}"
        )
