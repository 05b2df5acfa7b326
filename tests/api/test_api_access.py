"""fleet's permissions come from one place: the rules in fleet.api.access, copied into the Helm
chart and docs/security.md, and derived from the kinds fleet dispatches."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from fleet.api import access, rbacgen
from fleet.api.constants import DEPENDENCY_KINDS
from fleet.core.kinds import ADAPTERS

REPO = Path(__file__).resolve().parents[2]


def _grants(rules, group: str, resource: str) -> set[str]:
    return {v for r in rules if r.group == group and resource in r.resources for v in r.verbs}


def test_the_chart_and_the_docs_are_what_the_rules_generate():
    stale = [
        str(path.relative_to(REPO))
        for path, text in rbacgen.render(REPO).items()
        if path.read_text() != text
    ]
    assert not stale, "run: python -m fleet.api.rbacgen --write ."
    assert rbacgen.main(["--check", str(REPO)]) == 0


def test_every_kind_fleet_dispatches_may_be_written_in_a_member_and_nothing_else_may():
    rules = access.member_rules()
    for api_version, kind in access.job_kinds():
        verbs = _grants(rules, access.group_of(api_version), access.plural(kind))
        assert verbs == {"get", "list", "watch", "create", "patch", "delete"}, kind
    for kind in DEPENDENCY_KINDS:
        # Written, never read: whose an object is, is learnt from the writes (dependencies.py);
        # deleted by UID when fleet created it and no job of fleet's there uses it any more.
        assert _grants(rules, "", access.plural(kind)) == {"create", "patch", "delete"}, kind
    # Read-only where fleet only reads; no update, no deletecollection, no wildcard anywhere.
    assert _grants(rules, "", "nodes") == {"list", "watch"}
    # patch: a ServiceAccount fleet copied is listed on a namespace fleet created (the guard
    # lets it change only its own namespaces, never their labels). No list: people list them
    # through the viewer.
    assert _grants(rules, "", "namespaces") == {"get", "create", "patch"}
    every_verb = {v for r in rules for v in r.verbs}
    assert every_verb <= {"get", "list", "watch", "create", "patch", "delete", "bind"}
    assert all("*" not in r.resources and r.group != "*" for r in rules)
    # RBAC: only binding the viewer's ClusterRole (by name), only creating RoleBindings.
    (bind,) = [r for r in rules if r.resources == ("clusterroles",)]
    assert bind.verbs == ("bind",)
    assert bind.resource_names == (access.viewer_cluster_role(),)
    assert _grants(rules, "rbac.authorization.k8s.io", "rolebindings") == {"create"}
    assert _grants(rules, "rbac.authorization.k8s.io", "clusterrolebindings") == set()
    unguarded = access.member_rules(guarded=False)
    assert not [r for r in unguarded if r.group == "rbac.authorization.k8s.io"]


def test_the_dispatch_identity_reads_only_what_the_controller_reads():
    """People read through the viewer: the dispatch token reads no log, no event, no pod by
    name, lists no namespace (it gets one: kube-system, the member's cluster id, and those it
    created, before listing a ServiceAccount on them), and watches no Reservation."""
    rules = access.member_rules()
    assert _grants(rules, "", "pods") == {"list", "watch"}
    assert _grants(rules, "", "pods/log") == set()
    assert _grants(rules, "", "events") == set()
    assert "list" not in _grants(rules, "", "namespaces")
    assert _grants(rules, access.RESERVATION_GROUP, "reservations") == {"create", "list", "delete"}


def test_the_viewer_reads_and_never_writes_nor_reads_secrets():
    rules = (*access.viewer_rules(), *access.viewer_cluster_rules())
    assert {v for r in rules for v in r.verbs} <= {"get", "list", "watch"}
    touched = {res for r in rules for res in r.resources}
    assert not touched & {"secrets", "configmaps", "serviceaccounts/token", "serviceaccounts"}
    assert _grants(access.viewer_rules(), "", "pods/log") == {"get"}
    assert _grants(access.viewer_rules(), "", "pods") == {"get", "list", "watch"}
    # Cluster-wide: nodes and Reservations only, never a pod.
    assert {res for r in access.viewer_cluster_rules() for res in r.resources} == {
        "nodes",
        "reservations",
    }


def test_the_viewer_secrets_role_never_has_an_empty_name_list():
    (rule,) = access.viewer_secrets_rules(["b", "a", "a"])
    assert rule.resource_names == ("a-viewer-kubeconfig", "b-viewer-kubeconfig")
    assert rule.verbs == ("get",)
    import pytest

    with pytest.raises(ValueError):
        access.viewer_secrets_rules([])


def test_the_renewer_role_requests_tokens_of_the_dispatch_identity_only():
    (rule,) = access.renewer_rules("fleet")
    assert rule.as_policy_rule() == {
        "apiGroups": [""],
        "resources": ["serviceaccounts/token"],
        "verbs": ["create"],
        "resourceNames": ["fleet"],
    }


def test_each_verb_says_why():
    for rule in (
        *access.member_rules(),
        *access.renewer_rules(),
        *access.fleet_rules(),
        *access.fleet_namespaced_rules(),
    ):
        assert rule.verbs and all(why.strip() for why in rule.why.values()), rule


def test_the_controller_lists_and_watches_secrets_only_where_member_kubeconfigs_are_kept():
    cluster_wide = access.fleet_rules()
    # Cluster-wide, only `get` of what propagateDeps reads (and namespaces): no list or watch,
    # so the controller cannot dump every Secret of the fleet.
    for kind in DEPENDENCY_KINDS:
        assert _grants(cluster_wide, "", access.plural(kind)) == {"get"}, kind
    assert _grants(cluster_wide, "", "secrets") == {"get"}
    # Namespaces are followed by the queue (a reclaim opt-out label): list and watch too.
    assert _grants(cluster_wide, "", "namespaces") == {"get", "list", "watch", "create"}
    # In the namespaces holding member kubeconfigs (a Role): read, watch, renew; no create or
    # delete (fleet join writes them).
    secrets = {"get", "list", "watch", "patch"}
    assert _grants(access.fleet_namespaced_rules(), "", "secrets") == secrets
    assert _grants(access.fleet_secrets_rules(), "", "secrets") == secrets
    chart = (REPO / rbacgen.CHART_RBAC).read_text()
    assert "{{- range .Values.controller.secretsNamespaces }}" in chart
    deployment = (REPO / "helm/fleet/templates/deployment.yaml").read_text()
    assert (
        "--secrets-namespaces={{ .Release.Namespace }}"
        "{{ range .Values.controller.secretsNamespaces }},{{ . }}{{ end }}"
    ) in deployment


def test_the_rules_for_a_kinds_other_objects_are_what_its_adapter_declares():
    from fleet.core.kinds import ADAPTERS

    member, fleet = access.member_rules(), access.fleet_rules()
    declared = 0
    for adapter in ADAPTERS:
        in_member, on_fleet = adapter.accesses()
        for rules, accesses in ((member, in_member), (fleet, on_fleet)):
            for a in accesses:
                declared += 1
                for resource in a.resources:
                    assert set(a.why) <= _grants(rules, a.group, resource), (adapter, a)
    assert declared >= 3  # a TrainJob's runtimes (both sides) and the PodGroup
    # The PodGroup, once, for every kind whose gang fleet writes on coscheduling members.
    assert _grants(member, "scheduling.x-k8s.io", "podgroups") == {"create", "patch"}
    assert _grants(member, "trainer.kubeflow.org", "trainingruntimes") >= {"create"}
    assert _grants(fleet, "trainer.kubeflow.org", "clustertrainingruntimes") == {
        "get",
        "list",
        "watch",
    }


def test_a_new_kinds_declared_objects_get_a_rule_with_no_edit_here(monkeypatch):
    from fleet.core.kinds import Access
    from fleet.core.kinds.job import BatchJob

    class Widget(BatchJob):
        api_version = "example.com/v1"
        kind = "Widget"
        member_access = (
            Access("example.com", ("gadgets",), {"create": "a widget's gadget"}, "Gadgets."),
        )

    monkeypatch.setattr(access, "ADAPTERS", (*access.ADAPTERS, Widget()))
    assert _grants(access.member_rules(), "example.com", "gadgets") == {"create"}
    assert _grants(access.member_rules(), "example.com", "widgets") >= {"create", "delete"}
    assert _grants(access.fleet_rules(), "example.com", "gadgets") == set()


def test_the_dashboard_reads_every_kind_fleet_dispatches_and_writes_nothing():
    rules = access.dashboard_rules()
    for api_version, kind in access.job_kinds():
        assert _grants(rules, access.group_of(api_version), access.plural(kind)) == {"get"}, kind
    for group, resource in (
        ("fleet.dev", "memberclusters"),
        ("fleet.dev", "gangbindings"),
        ("scheduling.sigs.k8s.io", "elasticquotatrees"),
        ("scheduling.x-k8s.io", "queues"),
        ("scheduling.x-k8s.io", "queueunits"),
    ):
        assert {"list", "watch"} <= _grants(rules, group, resource), resource
    every = [*rules, *access.dashboard_namespaced_rules()]
    # Its one write: asking the fleet what a user behind its proxy may do.
    assert {v for r in every for v in r.verbs} <= {"get", "list", "watch", "create"}
    assert {(r.group, res) for r in every if "create" in r.verbs for res in r.resources} == {
        ("authorization.k8s.io", "subjectaccessreviews")
    }
    assert _grants(rules, "", "secrets") == set()  # cluster-wide: none
    assert _grants(access.dashboard_namespaced_rules(), "", "secrets") == {"get"}


def _template_objects(path: Path) -> list[dict]:
    """A generated template's objects, its Helm directives blanked (no helm needed)."""
    text = "\n".join(
        re.sub(r"\{\{.*?\}\}", "x", line)
        for line in path.read_text().splitlines()
        if not re.fullmatch(r"\s*\{\{-?.*?\}\}\s*", line)
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_the_charts_dashboard_role_lets_it_read_every_adapters_kind():
    """The file the chart ships (generated; the drift test above keeps it so), read as YAML:
    no kind's log is refused in the cluster (jobsets, rayjobs, rayclusters, trainjobs were)."""
    objects = _template_objects(REPO / rbacgen.DASHBOARD_RBAC)
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    assert role["metadata"]["name"] == "fleet-dashboard"
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for adapter in ADAPTERS:
        api_version, kind = adapter.type
        wanted = (access.group_of(api_version), access.plural(kind), "get")
        assert wanted in granted, f"the chart's dashboard cannot read {kind}"
    assert len(ADAPTERS) >= 11
    writes = {(g, r) for g, r, verb in granted if verb not in ("get", "list", "watch")}
    assert writes == {("authorization.k8s.io", "subjectaccessreviews")}
    # The dashboard reads member kubeconfigs only through the Role join keeps (viewer Secrets).
    (binding,) = [o for o in objects if o["kind"] == "RoleBinding"]
    assert binding["roleRef"]["name"] == access.VIEWER_SECRETS_ROLE
    assert not [o for o in objects if o["kind"] == "Role"]
    # The hand-written role is gone: only the generated file has one.
    assert "kind: ClusterRole" not in (REPO / "helm/fleet/templates/dashboard.yaml").read_text()


def test_the_dashboards_informer_may_watch_reservations_through_the_viewer():
    """`fleet dashboard` reaches a member with the viewer's token: its Reservation informer
    lists, then watches (a watch refused 403 left the Reservations view empty)."""
    granted = _grants(access.viewer_cluster_rules(), access.RESERVATION_GROUP, "reservations")
    assert granted == {"list", "watch"}


def test_the_dashboard_and_amc_users_reach_no_dispatch_or_renewer_secret():
    """The dashboard reads Secrets only through the Role fleet-viewer-kubeconfigs, whose names
    are the viewer kubeconfigs: never `<member>-kubeconfig` (the dispatch token) nor
    `<member>-renewer` (the renewer's)."""
    assert _grants(access.dashboard_rules(), "", "secrets") == set()
    (rule,) = access.viewer_secrets_rules(["m", "m-renewer"])
    assert rule.resource_names == ("m-renewer-viewer-kubeconfig", "m-viewer-kubeconfig")
    assert all(n.endswith("-viewer-kubeconfig") for n in rule.resource_names)
    chart = (REPO / "helm/fleet/templates/dashboard-rbac.yaml").read_text()
    assert "secrets" not in chart
    assert f"kind: Role, name: {access.VIEWER_SECRETS_ROLE}" in chart
