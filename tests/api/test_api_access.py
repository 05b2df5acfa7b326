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
        assert _grants(rules, "", access.plural(kind)) == {"create", "patch"}, kind
    # Read-only where fleet only reads; no update, no deletecollection, no wildcard anywhere.
    assert _grants(rules, "", "nodes") == {"list", "watch"}
    assert _grants(rules, "", "namespaces") == {"get", "list", "create"}
    every_verb = {v for r in rules for v in r.verbs}
    assert every_verb <= {"get", "list", "watch", "create", "patch", "delete"}
    assert all("*" not in r.resources and r.group != "*" for r in rules)
    assert _grants(rules, "rbac.authorization.k8s.io", "clusterroles") == set()


def test_the_token_role_lets_fleet_request_its_own_tokens_only():
    (rule,) = access.token_rules("fleet")
    assert rule.as_policy_rule() == {
        "apiGroups": [""],
        "resources": ["serviceaccounts/token"],
        "verbs": ["create"],
        "resourceNames": ["fleet"],
    }


def test_each_verb_says_why():
    for rule in (
        *access.member_rules(),
        *access.token_rules(),
        *access.fleet_rules(),
        *access.fleet_namespaced_rules(),
    ):
        assert rule.verbs and all(why.strip() for why in rule.why.values()), rule


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
    assert {v for r in every for v in r.verbs} <= {"get", "list", "watch"}
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
    assert {verb for _, _, verb in granted} <= {"get", "list", "watch"}
    # The hand-written role is gone: only the generated file has one.
    assert "kind: ClusterRole" not in (REPO / "helm/fleet/templates/dashboard.yaml").read_text()


def test_the_dashboards_informer_may_watch_reservations_through_fleets_identity():
    """`fleet dashboard` reaches a member with fleet's stored token: its Reservation informer
    lists, then watches (a watch refused 403 left the Reservations view empty)."""
    granted = _grants(access.member_rules(), access.RESERVATION_GROUP, "reservations")
    assert granted == {"create", "list", "watch", "delete"}
