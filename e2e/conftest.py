"""End-to-end fixtures: the sandbox, fleet's CRDs, three joined members and a live controller.

The controller runs as a real `fleet controller` process (two replicas electing a leader), so
tests can SIGKILL it as a failing node would.
"""

from __future__ import annotations

import contextlib
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.amc import main
from fleet.api import binding_name
from fleet.api.guard import open_label
from fleet.core.kinds import adapter_for
from fleet.install import SECRETS_NAMESPACE, install_crds, single_context
from fleet.join import join_member
from fleet.kube import SyncKubeClient, load, read_kubeconfig_file
from fleet.sandbox import Sandbox
from fleet.sandbox.keepalive import restarts_in
from fleet.sandbox.process import free_ports, log_tail
from fleet.testing.chart import RBAC_KINDS, render_chart, service_account_kubeconfig
from fleet.testing.controller import ControllerProcess
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

MEMBERS = ("member-1", "member-2", "member-3")
PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
BINDING = ("fleet.dev/v1alpha1", "GangBinding")
MEMBER_CLUSTER = ("fleet.dev/v1alpha1", "MemberCluster")
POLICY = ("policy.one.alibabacloud.com/v1alpha1", "PropagationPolicy")
LEASE_SECONDS = 6
#: How often the e2e controllers sweep members for copies whose fleet object is gone.
SWEEP_SECONDS = 3
#: How often the e2e controllers ask each member whether its guard is in force.
GUARD_CHECK_SECONDS = 5
#: The fleet id the e2e controllers run with: the managed-by label of everything they create.
FLEET_ID = "fleet-e2e"
#: Kube Queue's placement timeout and first backoff for the e2e controllers (seconds).
QUEUE_PLACEMENT_TIMEOUT = 10
QUEUE_BACKOFF = 8
QUEUE_RECLAIM_GRACE = 8
#: Where the chart is installed (and the member kubeconfig Secrets live), as `fleet join` does.
NAMESPACE = SECRETS_NAMESPACE


class Fleet:
    """What e2e tests need: clients, the controller replicas, and questions about jobs."""

    def __init__(
        self,
        sandbox: Sandbox,
        clusters: dict[str, ClusterClient],
        log_dir: Path,
        kubeconfig: Path,
    ) -> None:
        self.sandbox = sandbox
        self.clusters = clusters
        self.api = clusters["fleet"]
        self.log_dir = log_dir
        #: What the replicas authenticate with: the Helm chart's ServiceAccount.
        self.kubeconfig = kubeconfig
        self.replicas: list[ControllerProcess] = []

    # -- controller replicas --------------------------------------------------------------

    def start_replica(self, identity: str) -> ControllerProcess:
        port = free_ports(1)[0]
        replica = ControllerProcess(
            self.kubeconfig,
            identity,
            self.log_dir,
            "--lease-seconds",
            str(LEASE_SECONDS),
            "--lease-namespace",
            NAMESPACE,
            "--metrics-port",
            str(port),
            "--fleet-id",
            FLEET_ID,
            # Kube Queue: short enough for e2e/test_queue.py to see a TimeoutBackoff.
            "--queue-placement-timeout",
            str(QUEUE_PLACEMENT_TIMEOUT),
            "--queue-backoff",
            str(QUEUE_BACKOFF),
            # Reclaim: a victim's copy deleted 8 s after its eviction is recorded.
            "--queue-reclaim-grace",
            str(QUEUE_RECLAIM_GRACE),
            "--sweep-interval",
            str(SWEEP_SECONDS),
            "--guard-check-interval",
            str(GUARD_CHECK_SECONDS),
            # e2e/test_join.py: a 600-second token (TokenRequest's shortest) renewed every 30 s.
            "--token-renew-before",
            "570",
        )
        replica.metrics_port = port
        self.replicas.append(replica.start())
        return replica

    def leader(self) -> str | None:
        lease = self.api.get("coordination.k8s.io/v1", "Lease", "fleet-controller", NAMESPACE)
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
        return holder or None

    def replica(self, identity: str) -> ControllerProcess:
        return next(r for r in self.replicas if r.identity == identity)

    def ensure_running(self) -> None:
        """Tests that kill replicas leave them dead; bring every replica back."""
        for replica in self.replicas:
            if not replica.running:
                replica.start()
        wait_until(self.leading, timeout=3 * LEASE_SECONDS + 10, what="a leading controller")

    def leading(self) -> str | None:
        """The replica that leads now: the Lease's holder, running, and saying on /metrics
        that it leads. (A killed replica stays the holder until its lease runs out.)"""
        holder = self.leader()
        replica = next((r for r in self.replicas if r.identity == holder), None)
        if replica is None or not replica.running:
            return None
        try:
            return holder if self.metrics(holder).value("fleet_leader") == 1 else None
        except OSError:
            return None

    def metrics(self, identity: str | None = None) -> Metrics:
        """The counters and gauges a replica (default: the leader) reports on /metrics."""
        replica = self.replica(identity or self.leader() or "")
        url = f"http://127.0.0.1:{replica.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return Metrics.parse(response.read().decode())

    def logs(self) -> str:
        return "\n".join(f"--- {r.identity}\n{r.tail(60)}" for r in self.replicas)

    def stopped_components(self) -> str:
        """Each sandbox process not running now, or started again after it died, with the end
        of its log: a member's scheduler or kwok that died explains a test that waited for
        nothing."""
        down = self.sandbox.processes.not_running()
        restarted = [
            (r, lines)
            for r in {r.component: r for r in self.sandbox.processes.records()}.values()
            if r not in down and (lines := restarts_in(Path(r.log)))
        ]
        return "\n".join(
            [f"--- {r.component} (not running)\n{log_tail(Path(r.log), 20)}" for r in down]
            + [
                f"--- {r.component} (restarted {len(lines)}x: {lines[-1]})\n"
                f"{log_tail(Path(r.log), 20)}"
                for r, lines in restarted
            ]
        )

    # -- questions ----------------------------------------------------------------------------

    def binding(
        self, namespace: str, name: str, kind: tuple[str, str] = PYTORCHJOB
    ) -> dict[str, Any] | None:
        return self.api.get(*BINDING, binding_name(kind[1], name), namespace)

    def target(self, namespace: str, name: str, kind: tuple[str, str] = PYTORCHJOB) -> str | None:
        binding = self.binding(namespace, name, kind) or {}
        clusters = (binding.get("spec") or {}).get("clusters") or []
        return clusters[0]["name"] if clusters else None

    def copies(self, namespace: str, name: str, api: tuple[str, str] = PYTORCHJOB) -> list[str]:
        """Members holding a copy of the job, in name order."""
        return [m for m in MEMBERS if self.clusters[m].get(*api, name, namespace) is not None]

    def job(
        self, namespace: str, name: str, kind: tuple[str, str] = PYTORCHJOB
    ) -> dict[str, Any] | None:
        return self.api.get(*kind, name, namespace)

    def fleet_state(self, namespace: str, name: str, kind: tuple[str, str]) -> str:
        """The state word the kind's adapter reads from the fleet job's (mirrored) status."""
        adapter = adapter_for(*kind)
        assert adapter is not None
        return adapter.state((self.job(namespace, name, kind) or {}).get("status"))

    def state(self, namespace: str, name: str) -> str | None:
        conditions = ((self.job(namespace, name) or {}).get("status") or {}).get("conditions")
        return conditions[-1]["type"] if conditions else None

    def events(self, namespace: str, name: str) -> list[tuple[str, str, str]]:
        return [
            (e["reason"], e["message"], (e.get("source") or {}).get("component", ""))
            for e in sorted(
                self.api.events(namespace, name),
                key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "",
            )
        ]

    def wait_running(
        self,
        namespace: str,
        name: str,
        member: str,
        timeout: float = 90,
        kind: tuple[str, str] = PYTORCHJOB,
        pods: int | None = None,
    ) -> list[dict[str, Any]]:
        """Wait until the job's pods (`pods` of them, if given) all run in `member` and the
        fleet job says Running; the pods then."""
        client = self.clusters[member]
        adapter = adapter_for(*kind)
        assert adapter is not None

        def running() -> list[dict[str, Any]] | None:
            found = client.pods(namespace, adapter.pod_selector(name))
            if pods is not None and len(found) != pods:
                return None
            ok = bool(found) and all(p["status"].get("phase") == "Running" for p in found)
            return found if ok else None

        found = wait_until(running, timeout=timeout, what=f"{name} running in {member}")
        wait_until(
            lambda: self.fleet_state(namespace, name, kind) == "Running",
            timeout=timeout,
            what=f"{name} Running on the fleet",
        )
        return found

    def mark(
        self,
        member: str,
        namespace: str,
        job: str,
        outcome: str,
        kind: tuple[str, str] = PYTORCHJOB,
    ) -> None:
        self.clusters[member].mark_job(kind, job, namespace, outcome)

    def observed(self, namespace: str, name: str, *, after: int = 0) -> dict[str, Any]:
        """Wait until fleet has acted on the binding's spec as it stands (its
        `status.observedGeneration` is its generation, and that generation is past `after`);
        the binding then."""

        def acted() -> dict[str, Any] | None:
            binding = self.binding(namespace, name) or {}
            generation = (binding.get("metadata") or {}).get("generation") or 0
            seen = (binding.get("status") or {}).get("observedGeneration")
            return binding if generation > after and seen == generation else None

        return wait_until(acted, what=f"fleet to act on the binding of {name}")

    def member_condition(self, member: str) -> dict[str, Any] | None:
        """The MemberCluster's Ready condition."""
        mc = self.api.get(*MEMBER_CLUSTER, member)
        conditions = ((mc or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Ready"), None)

    def member_taken_in(self, member: str) -> None:
        """Wait until the controller has taken in the MemberCluster's spec as it stands (its
        Ready condition's observedGeneration is the object's generation)."""

        def taken_in() -> bool:
            mc = self.api.get(*MEMBER_CLUSTER, member) or {}
            generation = (mc.get("metadata") or {}).get("generation")
            ready = self.member_condition(member) or {}
            return generation is not None and ready.get("observedGeneration") == generation

        wait_until(taken_in, what=f"the controller to take in MemberCluster {member}")

    def settle(self, namespace: str, name: str = "sentinel") -> None:
        """A signal that the controller has caught up with what was created before this call:
        a job created now, governed by a Gang policy that selects only jobs labelled
        `sentinel`, placed. (Nothing else marks "fleet looked at this and did nothing".)"""
        if self.api.get(*POLICY, "sentinel", namespace) is None:
            policy = gang_policy("sentinel", namespace, toleration_seconds=None)
            policy["spec"]["resourceSelectors"][0]["labelSelector"] = {
                "matchLabels": {"sentinel": "true"}
            }
            self.api.create(policy)
        job = pytorchjob(name, namespace=namespace, workers=1, gpus=0, cpu="100m")
        job["metadata"]["labels"] = {"sentinel": "true"}
        self.api.create(job)
        wait_until(lambda: self.target(namespace, name), what=f"the sentinel job {name} placed")


_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class Metrics:
    """One scrape of /metrics: `value(name, label=value, ...)` sums the matching samples."""

    def __init__(self, samples: list[tuple[str, dict[str, str], float]]) -> None:
        self.samples = samples

    @classmethod
    def parse(cls, text: str) -> Metrics:
        samples = []
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if line.startswith("#") or match is None:
                continue
            labels = dict(_LABEL.findall(match["labels"] or ""))
            samples.append((match["name"], labels, float(match["value"])))
        return cls(samples)

    def value(self, name: str, **labels: str) -> float:
        return sum(
            v
            for n, have, v in self.samples
            if n == name and all(have.get(k) == want for k, want in labels.items())
        )

    def families(self) -> set[str]:
        return {n for n, _, _ in self.samples}


def _bootstrap(kubeconfig: Path) -> None:
    with SyncKubeClient(load(str(kubeconfig), "fleet"), name="fleet") as fleet:
        install_crds(fleet)
        config = read_kubeconfig_file(kubeconfig)
        for i, member in enumerate(MEMBERS, start=1):
            # As users join theirs: the controller reaches each member with fleet's own
            # least-privilege identity alone, so every e2e test also proves those rules enough.
            join_member(
                fleet,
                member,
                config,
                {"region": f"region-{i}"},
                context=member,
                base=kubeconfig.parent,
                fleet_id=FLEET_ID,
                open_namespaces=("default",),
            )


@contextlib.contextmanager
def joined_apart(
    fleet: Fleet, member: str, taint: dict[str, str], gang_scheduler: str | None = None
) -> Iterator[ClusterClient]:
    """`member` joined as users join theirs (fleet join, the e2e fleet's id) and its
    MemberCluster tainted with `taint`, so that only policies tolerating it send gangs there:
    the Koordinator and native-gang members, for the modules about them. With
    `gang_scheduler`, waits until the MemberCluster names it. Deleted when the block ends."""
    kubeconfig = read_kubeconfig_file(fleet.sandbox.kubeconfig)
    with SyncKubeClient(load(str(fleet.sandbox.kubeconfig), "fleet"), name="fleet") as api:
        join_member(
            api,
            member,
            kubeconfig,
            {},
            context=member,
            base=fleet.sandbox.kubeconfig.parent,
            fleet_id=FLEET_ID,
            open_namespaces=("default",),
        )
    fleet.api.apply(
        {
            "apiVersion": "fleet.dev/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": member},
            "spec": {"taints": [taint]},
        }
    )
    try:
        if gang_scheduler is not None:
            wait_until(
                lambda: (
                    ((fleet.api.get(*MEMBER_CLUSTER, member) or {}).get("status") or {}).get(
                        "gangScheduler"
                    )
                    == gang_scheduler
                ),
                timeout=60,
                what=f"{member} with its gang scheduler detected ({gang_scheduler})",
            )
        yield fleet.clusters[member]
    finally:
        fleet.api.delete(*MEMBER_CLUSTER, member)


def _install_chart_rbac(kubeconfig: Path, api: ClusterClient) -> dict[str, Any]:
    """Apply the chart's RBAC as `helm install` would; a kubeconfig of its ServiceAccount."""
    rendered = render_chart(NAMESPACE)
    for obj in rendered:
        if obj["kind"] in RBAC_KINDS:
            api.apply(obj)
    account = next(o for o in rendered if o["kind"] == "ServiceAccount")["metadata"]["name"]
    base = single_context(yaml.safe_load(kubeconfig.read_text()), "fleet")
    return service_account_kubeconfig(api, base, NAMESPACE, account)


@pytest.fixture(scope="session")
def fleet(
    sandbox: Sandbox, clusters: dict[str, ClusterClient], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    _bootstrap(sandbox.kubeconfig)
    log_dir = tmp_path_factory.mktemp("controller-logs")
    kubeconfig = log_dir / "fleet-controller.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(_install_chart_rbac(sandbox.kubeconfig, clusters["fleet"]))
    )
    handle = Fleet(sandbox, clusters, log_dir, kubeconfig)
    handle.start_replica("ctl-a")
    handle.start_replica("ctl-b")
    try:
        wait_until(handle.leading, timeout=60, what="a leading controller")
        for member in MEMBERS:
            wait_until(
                lambda m=member: _ready(clusters["fleet"], m),
                timeout=60,
                what=f"MemberCluster {member} Ready",
            )
        yield handle
    finally:
        for replica in handle.replicas:
            replica.stop()


def _ready(api: ClusterClient, member: str) -> bool:
    mc = api.get("fleet.dev/v1alpha1", "MemberCluster", member)
    conditions = ((mc or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


class Amc:
    """`kubectl amc` with the sandbox's fleet kubeconfig, in this process."""

    def __init__(self, live: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
        self.args = ["--kubeconfig", str(live.sandbox.kubeconfig), "--context", "fleet"]
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([*argv, *self.args])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err


@pytest.fixture
def amc(live: Fleet, capsys: pytest.CaptureFixture[str]) -> Amc:
    return Amc(live, capsys)


@pytest.fixture
def namespace(namespace: str, clusters: dict[str, ClusterClient]) -> str:
    """The plugin's fresh namespace (made in the fleet and every member by their admins),
    opened to the e2e fleet in every member as `fleet join --namespaces` opens one: the member's
    admission policy lets fleet dispatch only into namespaces it created or that are opened to
    it (docs/security.md). Tests of a namespace fleet creates make theirs on the fleet alone."""
    for name, client in clusters.items():
        if name != "fleet":
            client.patch(
                "v1",
                "Namespace",
                namespace,
                {"metadata": {"labels": {open_label(FLEET_ID): "true"}}},
            )
    return namespace


@pytest.fixture
def live(fleet: Fleet, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """The fleet with its controller running; on failure, the controller logs are attached."""
    fleet.ensure_running()
    started = time.monotonic()
    yield fleet
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        # The short part first: a report cut to its start still says which process died.
        stopped = fleet.stopped_components() or "(none)"
        print(f"\nsandbox processes not running or restarted:\n{stopped}")
        print(f"\ncontroller logs ({time.monotonic() - started:.0f}s test):\n{fleet.logs()}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
