"""Command lines of the sandbox's components, one function each.

Pure: they turn a cluster's layout (folders, ports, certificates) into `Component`s and write no
files, so what every process is started with can be read, and tested, in one place.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import ssl
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

from fleet.sandbox.pki import SNI_NAME, ClusterPki, tls_context
from fleet.sandbox.process import Component
from fleet.sandbox.toolchain import Toolchain

#: Ports each cluster needs, in this order. Members use all of them, the fleet the first four.
PORT_NAMES = (
    "etcd",
    "etcd_peer",
    "apiserver",
    "controller_manager",
    "scheduler",
    "kwok",
    "podgroup_metrics",
    "podgroup_probe",
    "operator_metrics",
    "operator_probe",
    "operator_webhook",
    "koord_services",
    "jobset_metrics",
    "jobset_probe",
    "jobset_webhook",
    "trainer_metrics",
    "trainer_probe",
    "trainer_webhook",
    "kuberay_metrics",
    "kuberay_probe",
)


@dataclasses.dataclass(frozen=True)
class ClusterLayout:
    """Where one sandbox cluster keeps its files, and which ports it listens on."""

    name: str
    root: Path
    ports: dict[str, int]

    @property
    def pki(self) -> ClusterPki:
        return ClusterPki(self.root / "pki")

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    def config(self, name: str) -> Path:
        return self.root / "config" / name

    @property
    def serving_certs(self) -> Path:
        """The webhook serving certificate (tls.crt, tls.key, for 127.0.0.1, signed by the
        cluster's CA) where controller-runtime looks for it: $TMPDIR/k8s-webhook-server."""
        return self.root / "tmp" / "k8s-webhook-server" / "serving-certs"


def _http_ok(url: str, verify: ssl.SSLContext | bool = False) -> Callable[[], bool]:
    """A readiness probe: does `url` answer 200? (Self-signed health ports are not verified.)"""

    def probe() -> bool:
        try:
            r = httpx.get(url, verify=verify, timeout=2.0)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    return probe


def etcd(tc: Toolchain, c: ClusterLayout) -> Component:
    client = f"http://127.0.0.1:{c.ports['etcd']}"
    peer = f"http://127.0.0.1:{c.ports['etcd_peer']}"
    return Component(
        name=f"{c.name}/etcd",
        argv=[
            str(tc.binary("etcd")),
            f"--name={c.name}",
            f"--data-dir={c.root / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={c.name}={peer}",
            "--initial-cluster-state=new",
            # A throwaway test cluster: durability costs more than it buys here.
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=2147483648",
            "--log-level=warn",
        ],
        log=c.log("etcd"),
        ports=[c.ports["etcd"], c.ports["etcd_peer"]],
        ready=_http_ok(f"{client}/health"),
    )


#: The feature gates of a native-gang member (`scheduler: kubernetes`), on every control-plane
#: process: the Workload API and gang scheduling (beta in 1.37, off by default) and
#: topology-aware PodGroup placement (alpha). With them on, kube-scheduler's default profile
#: runs GangScheduling, TopologyPlacementGenerator and PodGroupPodsCount: no plugin config.
NATIVE_FEATURE_GATES = ("GenericWorkload=true", "TopologyAwareWorkloadScheduling=true")
#: The native PodGroup's API version is beta: served only when asked for.
NATIVE_RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"


def _gates(native: bool) -> list[str]:
    return [f"--feature-gates={','.join(NATIVE_FEATURE_GATES)}"] if native else []


def kube_apiserver(tc: Toolchain, c: ClusterLayout, *, native: bool = False) -> Component:
    """The API server; `native`: a native-gang member's (tc is then the native toolchain),
    serving the Workload API's PodGroup."""
    pki = c.pki
    return Component(
        name=f"{c.name}/kube-apiserver",
        argv=[
            str(tc.binary("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{c.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={c.ports['apiserver']}",
            f"--tls-cert-file={pki.serving_crt}",
            f"--tls-private-key-file={pki.serving_key}",
            # A second certificate, for clients that name SNI_NAME (tls-server-name).
            f"--tls-sni-cert-key={pki.sni_crt},{pki.sni_key}:{SNI_NAME}",
            f"--client-ca-file={pki.ca_crt}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            "--endpoint-reconciler-type=none",
            # Nodes would start with a not-ready taint that only the node-lifecycle controller
            # lifts; the sandbox runs without it (see kube_controller_manager).
            "--disable-admission-plugins=TaintNodesByCondition",
            # pods/log goes to the node's kubelet, which for fake nodes is kwok's server: at
            # the node's InternalIP (127.0.0.1; its Hostname resolves nowhere) and
            # daemonEndpoints port. kwok serves a throwaway certificate, so no kubelet CA is
            # given (the API server then does not verify it, as for any kubelet without one).
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false",
            *_gates(native),
            *([f"--runtime-config={NATIVE_RUNTIME_CONFIG}"] if native else []),
            "--v=1",
        ],
        log=c.log("kube-apiserver"),
        ports=[c.ports["apiserver"]],
        ready=_http_ok(
            f"{c.endpoint}/readyz", tls_context(pki.ca_crt, pki.admin_crt, pki.admin_key)
        ),
    )


def _delegated_auth(c: ClusterLayout) -> list[str]:
    return [
        f"--kubeconfig={c.kubeconfig}",
        f"--authentication-kubeconfig={c.kubeconfig}",
        f"--authorization-kubeconfig={c.kubeconfig}",
        "--bind-address=127.0.0.1",
        # Health endpoints are always allowed; skipping the front-proxy CA lookup keeps the
        # logs free of errors about a CA the sandbox does not use.
        "--authentication-skip-lookup=true",
    ]


#: Fake nodes send no heartbeats; without the node-lifecycle controller they never go stale.
_MEMBER_CONTROLLERS = "*,-node-lifecycle-controller"
#: The fleet only stores workloads: no controller may turn them into pods there (as in a Karmada
#: control plane), but namespaces, garbage collection and service accounts work as usual.
_FLEET_CONTROLLERS = ",".join(
    (
        "namespace-controller",
        "garbage-collector-controller",
        "serviceaccount-controller",
        "serviceaccount-token-controller",
        "clusterrole-aggregation-controller",
        "root-ca-certificate-publisher-controller",
    )
)


def kube_controller_manager(tc: Toolchain, c: ClusterLayout, *, native: bool = False) -> Component:
    return Component(
        name=f"{c.name}/kube-controller-manager",
        argv=[
            str(tc.binary("kube-controller-manager")),
            *_delegated_auth(c),
            f"--secure-port={c.ports['controller_manager']}",
            f"--service-account-private-key-file={c.pki.sa_key}",
            f"--root-ca-file={c.pki.ca_crt}",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            f"--controllers={_FLEET_CONTROLLERS if c.name == 'fleet' else _MEMBER_CONTROLLERS}",
            "--concurrent-gc-syncs=5",
            *_gates(native),
            "--v=1",
        ],
        log=c.log("kube-controller-manager"),
        ports=[c.ports["controller_manager"]],
        ready=_http_ok(f"https://127.0.0.1:{c.ports['controller_manager']}/healthz"),
        restart=True,
    )


def scheduler_config(c: ClusterLayout, gang_scheduler_name: str) -> dict[str, object]:
    """Two profiles, both with Coscheduling (profiles must share one queue-sort plugin)."""

    def profile(name: str) -> dict[str, object]:
        return {
            "schedulerName": name,
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
            },
            "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}],
        }

    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(c.kubeconfig), "qps": 100, "burst": 200},
        "profiles": [profile("default-scheduler"), profile(gang_scheduler_name)],
    }


def native_scheduler_config(c: ClusterLayout) -> dict[str, object]:
    """The upstream kube-scheduler of a native-gang member: one profile, the default one, whose
    plugins the feature gates complete (`NATIVE_FEATURE_GATES`)."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(c.kubeconfig), "qps": 100, "burst": 200},
        "profiles": [{"schedulerName": "default-scheduler"}],
    }


def kube_scheduler(tc: Toolchain, c: ClusterLayout, *, native: bool = False) -> Component:
    """scheduler-plugins' kube-scheduler with Coscheduling, or (`native`, tc the native
    toolchain) the upstream kube-scheduler with Kubernetes' own gang scheduling."""
    return Component(
        name=f"{c.name}/kube-scheduler",
        argv=[
            str(tc.binary("kube-scheduler")),
            f"--config={c.config('scheduler.yaml')}",
            *_gates(native),
            f"--authentication-kubeconfig={c.kubeconfig}",
            f"--authorization-kubeconfig={c.kubeconfig}",
            "--authentication-skip-lookup=true",
            "--bind-address=127.0.0.1",
            f"--secure-port={c.ports['scheduler']}",
            # Coscheduling registers no Node events, so a gang it rejected is retried only by
            # the queue's periodic flush (every 30s, after this long; upstream default 5m).
            "--pod-max-in-unschedulable-pods-duration=10s",
            "--v=1",
        ],
        log=c.log("kube-scheduler"),
        ports=[c.ports["scheduler"]],
        ready=_http_ok(f"https://127.0.0.1:{c.ports['scheduler']}/healthz"),
        restart=True,
    )


#: The profile of koord-scheduler on a Koordinator member: it is the member's default scheduler,
#: as the ACK scheduler is, so pods and Reservations need no schedulerName.
KOORDINATOR_PROFILE = "default-scheduler"
#: The smallest plugin set that gives gangs (Coscheduling: the seeds' pod-group labels and the
#: gang.scheduling.koordinator.sh annotations, GangGroups included) and Reservations; the other
#: Koordinator plugins (load awareness, NUMA, devices, quotas) are left out.
_KOORDINATOR_PLUGINS: dict[str, list[str]] = {
    "preEnqueue": ["Coscheduling"],
    "preFilter": ["Reservation", "Coscheduling"],
    "filter": ["Reservation"],
    "postFilter": ["Reservation", "Coscheduling"],
    "preScore": ["Reservation", "Coscheduling"],
    "score": ["Reservation"],
    "reserve": ["Reservation", "Coscheduling"],
    "permit": ["Coscheduling"],
    "preBind": ["Reservation", "Coscheduling", "DefaultPreBind"],
    "bind": ["Reservation", "DefaultBinder"],
    "postBind": ["Coscheduling"],
}
#: Extension points whose upstream defaults Koordinator replaces rather than extends.
_KOORDINATOR_REPLACES = ("postFilter", "bind")


def koord_scheduler_config(
    c: ClusterLayout, *, reservation_preemption: bool = False
) -> dict[str, object]:
    """One profile, the member's default scheduler, with Coscheduling and Reservation.

    `reservation_preemption`: the Reservation plugin's `enablePreemption` (koord-scheduler
    v1.8.0, `ReservationArgs`; off by default there too). On, the plugin's PostFilter runs
    upstream's preemption for every pod it schedules, a Reservation's reserve pod included: a
    pending Reservation that does not fit deletes preemptible pods of lower priority (a
    Reservation with no priority of its own has the highest, `math.MaxInt32`) and is nominated
    on the node, and that nomination, in the scheduler's memory only (koordinator#3069), keeps
    pods of equal or lower priority off the room until the Reservation is scheduled there.
    Upstream's DefaultPreemption stays off either way (`_KOORDINATOR_REPLACES`): this is the
    one preemption a member's koord-scheduler runs."""
    plugins: dict[str, object] = {}
    for point, names in _KOORDINATOR_PLUGINS.items():
        entry: dict[str, object] = {
            "enabled": [
                {"name": n, "weight": 5000} if point == "score" else {"name": n} for n in names
            ]
        }
        if point in _KOORDINATOR_REPLACES:
            entry["disabled"] = [{"name": "*"}]
        plugins[point] = entry
    profile: dict[str, object] = {"schedulerName": KOORDINATOR_PROFILE, "plugins": plugins}
    if reservation_preemption:
        profile["pluginConfig"] = [
            {
                "name": "Reservation",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "ReservationArgs",
                    "enablePreemption": True,
                },
            }
        ]
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(c.kubeconfig), "qps": 100, "burst": 200},
        "profiles": [profile],
    }


def koord_scheduler(ktc: Toolchain, c: ClusterLayout) -> Component:
    """koord-scheduler (Koordinator's build of kube-scheduler) on a Koordinator member.

    It runs under the same component name as the coscheduling scheduler ("kube-scheduler"), so
    stopping and starting a member's scheduler works alike for both kinds.
    """
    return Component(
        name=f"{c.name}/kube-scheduler",
        argv=[
            str(ktc.binary("koord-scheduler")),
            f"--config={c.config('koord-scheduler.yaml')}",
            f"--authentication-kubeconfig={c.kubeconfig}",
            f"--authorization-kubeconfig={c.kubeconfig}",
            "--authentication-skip-lookup=true",
            "--bind-address=127.0.0.1",
            f"--secure-port={c.ports['scheduler']}",
            # Its insecure/services HTTP server defaults to 0.0.0.0:10251, which a second
            # sandbox with a Koordinator member on the same machine cannot bind.
            "--address=127.0.0.1",
            f"--port={c.ports['koord_services']}",
            "--pod-max-in-unschedulable-pods-duration=10s",
            "--v=2",
        ],
        log=c.log("kube-scheduler"),
        ports=[c.ports["scheduler"], c.ports["koord_services"]],
        ready=_http_ok(f"https://127.0.0.1:{c.ports['scheduler']}/healthz"),
        restart=True,
    )


def podgroup_controller(tc: Toolchain, c: ClusterLayout) -> Component:
    return Component(
        name=f"{c.name}/podgroup-controller",
        argv=[
            str(tc.binary("podgroup-controller")),
            f"--kubeconfig={c.kubeconfig}",
            f"--metricsAddr=127.0.0.1:{c.ports['podgroup_metrics']}",
            f"--probeAddr=127.0.0.1:{c.ports['podgroup_probe']}",
            "--qps=50",
            "--burst=100",
        ],
        log=c.log("podgroup-controller"),
        ports=[c.ports["podgroup_metrics"], c.ports["podgroup_probe"]],
        ready=_http_ok(f"http://127.0.0.1:{c.ports['podgroup_probe']}/readyz"),
        restart=True,
    )


#: kwok's ClusterLogs: every fake container "prints" one canned training log (a file beside it).
KWOK_LOGS = Path(__file__).parent / "assets" / "kwok-logs.yaml"


def kwok(tc: Toolchain, c: ClusterLayout, stages: Path) -> Component:
    """kwok plays the fake nodes and pods, and is their kubelet for logs.

    Its server (--server-address) answers the kubelet's /containerLogs from the ClusterLogs in
    KWOK_LOGS; the node stage writes its port (--node-port) into each node's
    status.daemonEndpoints, so the API server's pods/log reaches it (see kube_apiserver). kwok
    reads the log file relative to its working directory, the assets folder.
    """
    return Component(
        name=f"{c.name}/kwok",
        argv=[
            str(tc.binary("kwok")),
            f"--kubeconfig={c.kubeconfig}",
            f"--config={stages}",
            f"--config={KWOK_LOGS}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--server-address=127.0.0.1:{c.ports['kwok']}",
            f"--node-port={c.ports['kwok']}",
            "--node-lease-duration-seconds=0",
            # The fake nodes' InternalIP: where the API server finds their kubelet (kwok).
            "--node-ip=127.0.0.1",
            "--cidr=10.244.0.1/16",
        ],
        log=c.log("kwok"),
        ports=[c.ports["kwok"]],
        ready=_http_ok(f"http://127.0.0.1:{c.ports['kwok']}/healthz"),
        restart=True,
        cwd=KWOK_LOGS.parent,
    )


def training_operator(tc: Toolchain, c: ClusterLayout, gang_scheduler_name: str) -> Component:
    """The Kubeflow training operator, making scheduler-plugins PodGroups for every job.

    An empty `gang_scheduler_name` (Koordinator members) turns its gang scheduling off: it makes
    no PodGroup and leaves schedulerName alone; koord-scheduler reads the gang from the pods'
    own labels and annotations.

    Its webhook certificate rotator only needs the Secret to exist and a cert file in the
    serving-cert folder; the webhook itself is never registered, so nothing calls it. TMPDIR gives
    each member's operator its own serving-cert folder.
    """
    return Component(
        name=f"{c.name}/training-operator",
        argv=[
            str(tc.binary("training-operator")),
            f"--kubeconfig={c.kubeconfig}",
            *([f"--gang-scheduler-name={gang_scheduler_name}"] if gang_scheduler_name else []),
            "--enable-scheme=pytorchjob",
            "--enable-scheme=tfjob",
            "--enable-scheme=mpijob",
            "--enable-scheme=xgboostjob",
            "--enable-scheme=paddlejob",
            "--enable-scheme=jaxjob",
            f"--metrics-bind-address=127.0.0.1:{c.ports['operator_metrics']}",
            f"--health-probe-bind-address=127.0.0.1:{c.ports['operator_probe']}",
            f"--webhook-server-port={c.ports['operator_webhook']}",
            "--controller-threads=4",
            "--zap-log-level=info",
        ],
        env={"MY_POD_NAMESPACE": "kubeflow", "TMPDIR": str(c.root / "tmp")},
        log=c.log("training-operator"),
        ports=[c.ports["operator_metrics"], c.ports["operator_probe"], c.ports["operator_webhook"]],
        ready=_http_ok(f"http://127.0.0.1:{c.ports['operator_probe']}/readyz"),
        restart=True,
    )


def jobset_config(c: ClusterLayout) -> dict[str, object]:
    """The JobSet controller's configuration file: its own certificate management off (the
    sandbox serves the webhook with the cluster CA's certificate, see `webhook_configurations`),
    every listener on 127.0.0.1, no leader election."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "internalCertManagement": {"enable": False},
        "leaderElection": {"leaderElect": False},
        "webhook": {
            "host": "127.0.0.1",
            "port": c.ports["jobset_webhook"],
            "certDir": str(c.serving_certs),
        },
        "metrics": {
            "bindAddress": f"127.0.0.1:{c.ports['jobset_metrics']}",
            "certDir": str(c.serving_certs),
        },
        "health": {"healthProbeBindAddress": f"127.0.0.1:{c.ports['jobset_probe']}"},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def _controller_runtime_component(
    otc: Toolchain, c: ClusterLayout, name: str, binary: str, config: str, ports: str
) -> Component:
    """A controller-runtime manager configured by a file (`config`), its metrics, probe and
    webhook on the ports `<ports>_metrics`, `_probe` and `_webhook`; ready on /readyz. Its
    webhook certificate comes from $TMPDIR, like the training operator's."""
    return Component(
        name=f"{c.name}/{name}",
        argv=[
            str(otc.binary(binary)),
            f"--kubeconfig={c.kubeconfig}",
            f"--config={c.config(config)}",
            "--zap-devel=false",
            "--zap-log-level=info",
        ],
        env={"TMPDIR": str(c.root / "tmp")},
        log=c.log(name),
        ports=[c.ports[f"{ports}_metrics"], c.ports[f"{ports}_probe"], c.ports[f"{ports}_webhook"]],
        ready=_http_ok(f"http://127.0.0.1:{c.ports[f'{ports}_probe']}/readyz"),
        restart=True,
    )


def jobset_controller(otc: Toolchain, c: ClusterLayout) -> Component:
    """The JobSet controller (sigs.k8s.io/jobset): JobSets into child Jobs and a headless
    Service; the member's own Job controller makes the pods."""
    return _controller_runtime_component(
        otc, c, "jobset-controller", "jobset-controller", "jobset.yaml", "jobset"
    )


def trainer_config(c: ClusterLayout) -> dict[str, object]:
    """The Trainer v2 controller's configuration file, set up as the JobSet controller's."""
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "certManagement": {"enable": False},
        "leaderElection": {"leaderElect": False},
        "webhook": {"host": "127.0.0.1", "port": c.ports["trainer_webhook"]},
        "metrics": {
            "bindAddress": f"127.0.0.1:{c.ports['trainer_metrics']}",
            "secureServing": False,
        },
        "health": {"healthProbeBindAddress": f"127.0.0.1:{c.ports['trainer_probe']}"},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def trainer_controller(otc: Toolchain, c: ClusterLayout) -> Component:
    """The Kubeflow Trainer v2 controller: TrainJobs, with the (Cluster)TrainingRuntime they
    name, into JobSets (and a scheduler-plugins PodGroup when the runtime asks for
    coscheduling)."""
    return _controller_runtime_component(
        otc, c, "trainer-controller", "trainer-controller-manager", "trainer.yaml", "trainer"
    )


def kuberay_operator(otc: Toolchain, c: ClusterLayout) -> Component:
    """The KubeRay operator: RayClusters into a head pod and worker pods, RayJobs into a
    RayCluster plus a submitter Job once that cluster is ready.

    It runs without a batch scheduler on every member. Its scheduler-plugins integration
    (`--batch-scheduler=scheduler-plugins`) makes PodGroups for RayClusters only: with it, every
    RayJob is refused at submission ("currently only RayCluster is supported", v1.5.1 and
    v1.6.0 alike), so the gang of a Ray job is written by fleet, like a JobSet's. Its webhook is
    off unless ENABLE_WEBHOOKS=true, as in its Helm chart, so none is served.
    """
    return Component(
        name=f"{c.name}/kuberay-operator",
        argv=[
            str(otc.binary("kuberay-operator")),
            f"--kubeconfig={c.kubeconfig}",
            f"--metrics-addr=127.0.0.1:{c.ports['kuberay_metrics']}",
            f"--health-probe-bind-address=127.0.0.1:{c.ports['kuberay_probe']}",
            "--enable-leader-election=false",
            "--log-stdout-encoder=console",
        ],
        log=c.log("kuberay-operator"),
        ports=[c.ports["kuberay_metrics"], c.ports["kuberay_probe"]],
        ready=_http_ok(f"http://127.0.0.1:{c.ports['kuberay_probe']}/readyz"),
        restart=True,
    )


#: The webhook port of each operator whose webhooks the sandbox registers.
WEBHOOK_PORTS = {"jobset": "jobset_webhook", "trainer": "trainer_webhook"}


def webhook_configurations(
    operator: str, manifests: Iterable[dict[str, Any]], c: ClusterLayout, ca_pem: bytes
) -> list[dict[str, Any]]:
    """The operator's own webhook configurations, pointed at its process on 127.0.0.1.

    Upstream's manifests name a Service (there is none: the operator is a local process), so
    each webhook gets the URL `https://127.0.0.1:<port><path>` and the cluster CA, which signed
    the serving certificate. Configurations are renamed after the operator (upstream's names
    collide between operators). Webhooks on core pods are left out: JobSet's only act for
    exclusive placement (`alpha.jobset.sigs.k8s.io/exclusive-topology`), which the sandbox does
    not use, and upstream scopes them with a kustomize patch these manifests lack.
    """
    base = f"https://127.0.0.1:{c.ports[WEBHOOK_PORTS[operator]]}"
    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in manifests:
        if doc.get("kind") not in (
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ):
            continue
        doc = copy.deepcopy(doc)
        doc["metadata"] = {"name": f"{operator}-{doc['metadata']['name']}"}
        hooks = []
        for hook in doc.get("webhooks") or []:
            if any("" in (rule.get("apiGroups") or []) for rule in hook.get("rules") or []):
                continue
            path = ((hook.get("clientConfig") or {}).get("service") or {}).get("path", "")
            hook["clientConfig"] = {"url": base + path, "caBundle": bundle}
            hooks.append(hook)
        if hooks:
            doc["webhooks"] = hooks
            out.append(doc)
    return out
