"""The Helm chart as a user installs it: every object it renders is one the fleet API server takes,
its Deployment starts the controller with flags the controller has, and the controller the other
end-to-end tests drive runs with exactly the chart's permissions."""

from __future__ import annotations

import copy
import secrets

import pytest
import yaml

from fleet.api import RESOURCES
from fleet.api.access import group_of, plural
from fleet.cli import build_parser
from fleet.core.kinds import ADAPTERS
from fleet.kube import ApiError
from fleet.testing.chart import RBAC_KINDS, render_chart
from fleet.testing.kube import ClusterClient

from .conftest import NAMESPACE, Fleet

_RENDER_CASES = {
    "defaults": (),
    "one replica, sum estimator, extra flag": (
        "replicas=1",
        "controller.estimator=sum",
        "controller.extraArgs={--verbose}",
    ),
}
#: The ingress controller the dashboard's NetworkPolicy admits (the chart refuses an ingress
#: without one).
_INGRESS_PEER = (
    "dashboard.networkPolicy.ingressFrom[0].namespaceSelector.matchLabels"
    ".kubernetes\\.io/metadata\\.name=ingress-nginx"
)
_DASHBOARD = ("dashboard.enabled=true", "dashboard.ingress.enabled=true", _INGRESS_PEER)


@pytest.mark.parametrize(
    "values", [*_RENDER_CASES.values(), _DASHBOARD], ids=[*_RENDER_CASES.keys(), "dashboard"]
)
def test_every_rendered_object_is_accepted_by_the_api_server(live: Fleet, values):
    rendered = render_chart(NAMESPACE, *values)
    kinds = sorted(o["kind"] for o in rendered)
    assert kinds.count("CustomResourceDefinition") == len(RESOURCES) and "Deployment" in kinds
    for obj in rendered:
        if obj["kind"] != "CustomResourceDefinition":  # installed already; the CRD test compares
            live.api.dry_run(obj)


def test_the_dry_run_is_strict(live: Fleet):
    deployment = next(o for o in render_chart(NAMESPACE) if o["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(ApiError) as err:
        live.api.dry_run(deployment)
    # Server-side apply reports a field outside the schema as a 500 naming it (upstream's code).
    assert "livenesProbe: field not declared in schema" in err.value.body


@pytest.mark.toolchain
@pytest.mark.parametrize("values", _RENDER_CASES.values(), ids=_RENDER_CASES.keys())
def test_the_deployment_passes_flags_the_controller_has(values):
    rendered = {o["kind"]: o for o in render_chart(NAMESPACE, *values)}
    pod = rendered["Deployment"]["spec"]["template"]["spec"]
    args = build_parser().parse_args(pod["containers"][0]["args"])  # exits on an unknown flag
    assert args.lease_namespace == NAMESPACE
    assert pod["serviceAccountName"] == rendered["ServiceAccount"]["metadata"]["name"]


@pytest.mark.toolchain
def test_the_dashboard_is_off_by_default_and_read_only_when_on():
    assert not [o for o in render_chart(NAMESPACE) if "dashboard" in o["metadata"]["name"]]
    rendered = [
        o for o in render_chart(NAMESPACE, *_DASHBOARD) if "dashboard" in o["metadata"]["name"]
    ]
    kinds = {o["kind"]: o for o in rendered}
    assert set(kinds) >= {"Deployment", "Service", "Ingress", "ClusterRole", "RoleBinding"}
    # Its Secrets: the members' viewer kubeconfigs only, through the Role `fleet join` keeps
    # (docs/security.md); the chart grants it no Secret of its own.
    assert "Role" not in kinds
    assert kinds["RoleBinding"]["roleRef"]["name"] == "fleet-viewer-kubeconfigs"
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    args = build_parser().parse_args(pod["containers"][0]["args"])  # exits on an unknown flag
    assert (args.host, args.port) == ("0.0.0.0", 8765)
    assert pod["serviceAccountName"] == kinds["ServiceAccount"]["metadata"]["name"]
    verbs = {
        (v, resource)
        for o in rendered
        if o["kind"] in ("ClusterRole", "Role")
        for r in o["rules"]
        for v in r["verbs"]
        for resource in r["resources"]
    }
    # Read only: the one create is a SubjectAccessReview (asking the fleet whether a user may
    # see a job), which stores nothing.
    writes = {(v, resource) for v, resource in verbs if v not in ("get", "list", "watch")}
    assert writes == {("create", "subjectaccessreviews")}


@pytest.mark.toolchain
def test_the_rendered_dashboard_role_reads_every_adapters_kind():
    """A job's log in the cluster: the fleet object of every kind fleet dispatches is readable
    (the hand-written role lacked jobsets, rayjobs, rayclusters and trainjobs)."""
    rendered = render_chart(NAMESPACE, *_DASHBOARD)
    (role,) = [
        o
        for o in rendered
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "fleet-dashboard"
    ]
    granted = {
        (group, resource)
        for rule in role["rules"]
        if "get" in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    missing = [
        a.type[1] for a in ADAPTERS if (group_of(a.type[0]), plural(a.type[1])) not in granted
    ]
    assert not missing, f"the chart's dashboard cannot read {missing}"


@pytest.mark.toolchain
def test_the_dashboard_answers_its_service_names_and_admits_only_the_named_peers():
    def dashboard_objects(*values: str) -> dict[str, dict]:
        rendered = render_chart(NAMESPACE, *values)
        return {o["kind"]: o for o in rendered if "dashboard" in o["metadata"]["name"]}

    service_names = {
        "fleet-dashboard",
        f"fleet-dashboard.{NAMESPACE}",
        f"fleet-dashboard.{NAMESPACE}.svc",
        f"fleet-dashboard.{NAMESPACE}.svc.cluster.local",
    }
    # No ingress: the Service's names only, and a NetworkPolicy that admits nobody.
    alone = dashboard_objects("dashboard.enabled=true")
    pod = alone["Deployment"]["spec"]["template"]["spec"]
    assert set(build_parser().parse_args(pod["containers"][0]["args"]).allow_host) == service_names
    policy = alone["NetworkPolicy"]["spec"]
    assert (
        policy["podSelector"]["matchLabels"]
        == alone["Deployment"]["spec"]["selector"]["matchLabels"]
    )
    assert policy["policyTypes"] == ["Ingress"] and policy["ingress"] == []

    # An ingress: its host is answered, its controller (named) admitted, and nothing else.
    fronted = dashboard_objects(*_DASHBOARD, "dashboard.allowHosts={dash.example.com}")
    pod = fronted["Deployment"]["spec"]["template"]["spec"]
    assert set(build_parser().parse_args(pod["containers"][0]["args"]).allow_host) == {
        *service_names,
        "fleet.example.com",
        "dash.example.com",
    }
    assert fronted["NetworkPolicy"]["spec"]["ingress"] == [
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}
                    }
                }
            ],
            "ports": [{"protocol": "TCP", "port": 8765}],
        }
    ]
    # An ingress its NetworkPolicy would not admit is refused at render, saying what to set.
    with pytest.raises(AssertionError, match=r"dashboard\.networkPolicy\.ingressFrom"):
        render_chart(NAMESPACE, "dashboard.enabled=true", "dashboard.ingress.enabled=true")
    off = dashboard_objects(*_DASHBOARD, "dashboard.networkPolicy.enabled=false")
    assert "NetworkPolicy" not in off


def test_the_end_to_end_controller_runs_as_the_charts_service_account(live: Fleet):
    """So every other e2e test also proves the chart's RBAC is enough."""
    config = yaml.safe_load(live.kubeconfig.read_text())
    client = ClusterClient(str(live.kubeconfig), config["current-context"])
    try:
        review = client.create(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
    finally:
        client.close()
    rendered = {o["kind"]: o for o in render_chart(NAMESPACE)}
    assert set(rendered) >= RBAC_KINDS
    account = rendered["ServiceAccount"]["metadata"]["name"]
    assert (
        review["status"]["userInfo"]["username"] == f"system:serviceaccount:{NAMESPACE}:{account}"
    )
    assert live.leader() is not None  # the chart's Role lets it hold the Lease


@pytest.mark.toolchain
def test_secrets_are_listed_and_watched_only_in_the_namespaces_holding_kubeconfigs():
    rendered = render_chart(NAMESPACE, "controller.secretsNamespaces={team-a,team-b}")
    pod = next(o for o in rendered if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    args = build_parser().parse_args(pod["containers"][0]["args"])
    assert args.secrets_namespaces == f"{NAMESPACE},team-a,team-b"
    secret_verbs: dict[tuple[str, str], set[str]] = {}
    for obj in rendered:
        if obj["kind"] not in ("ClusterRole", "Role") or "dashboard" in obj["metadata"]["name"]:
            continue
        where = (obj["kind"], obj["metadata"].get("namespace") or "")
        for rule in obj["rules"]:
            if "secrets" in rule["resources"] and "" in rule["apiGroups"]:
                secret_verbs.setdefault(where, set()).update(rule["verbs"])
    renew = {"get", "list", "watch", "patch"}
    assert secret_verbs == {
        ("ClusterRole", ""): {"get"},
        ("Role", NAMESPACE): renew,
        ("Role", "team-a"): renew,
        ("Role", "team-b"): renew,
    }
    bindings = [o for o in rendered if o["kind"] == "RoleBinding"]
    assert {(b["metadata"]["namespace"], b["subjects"][0]["namespace"]) for b in bindings} >= {
        ("team-a", NAMESPACE),
        ("team-b", NAMESPACE),
    }


def test_the_charts_pods_are_admitted_where_the_restricted_profile_is_enforced(live: Fleet):
    """The controller's and the dashboard's pods, as their Deployments render them by default,
    pass the `restricted` PodSecurity profile: the API server's own PodSecurity admission
    (built in) admits them, as a dry run, in a namespace that enforces it; and refuses a pod
    without the chart's securityContext there, so the check can fail."""
    namespace = "restricted-" + secrets.token_hex(3)
    live.api.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
            },
        }
    )
    try:
        deployments = [o for o in render_chart(NAMESPACE, *_DASHBOARD) if o["kind"] == "Deployment"]
        assert {d["metadata"]["name"] for d in deployments} == {
            "fleet-controller",
            "fleet-dashboard",
        }
        for deployment in deployments:
            spec = deployment["spec"]["template"]["spec"]
            # The pod's ServiceAccount must exist (ServiceAccount admission) for a pod to be
            # admitted at all.
            live.api.create(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": spec["serviceAccountName"], "namespace": namespace},
                }
            )
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": deployment["metadata"]["name"], "namespace": namespace},
                "spec": spec,
            }
            live.api.dry_run(pod)  # admitted, or ApiError says which rule
            bare = copy.deepcopy(pod)
            bare["spec"].pop("securityContext")
            for container in bare["spec"]["containers"]:
                container.pop("securityContext")
            with pytest.raises(ApiError) as refused:
                live.api.dry_run(bare)
            assert 'violates PodSecurity "restricted' in refused.value.message
    finally:
        live.api.delete("v1", "Namespace", namespace)
