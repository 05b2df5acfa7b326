"""`fleet join --secrets-namespace NS` refuses a namespace where the controller could not follow
and renew the member's kubeconfig Secret, asking the fleet with SubjectAccessReviews."""

from __future__ import annotations

import json

import httpx
import pytest
import yaml

from fleet import cli
from fleet.join import JoinError
from fleet.join.renewal_access import check_renewal_access
from tests.controller.apiserver import FLEET_KINDS, Kind, MemoryApi, status
from tests.join.test_join import ENDPOINT, IDENTITY, TokenIssuer
from tests.kube.pki import inline_kubeconfig, make_pem

REVIEW = Kind(
    "authorization.k8s.io/v1",
    "SubjectAccessReview",
    "subjectaccessreviews",
    namespaced=False,
    status_subresource=False,
)
CONTROLLER = "system:serviceaccount:fleet-system:fleet-controller"


class Authorizer:
    """The fleet's answer to SubjectAccessReviews: `granted` holds (user, namespace, verb)."""

    def __init__(self, api: MemoryApi, granted: set[tuple[str, str, str]]) -> None:
        self.granted = granted
        self.asked: list[tuple[str, str, str]] = []
        api.interceptors.append(self)

    def __call__(self, request: httpx.Request) -> httpx.Response | None:
        if not (request.method == "POST" and request.url.path.endswith("/subjectaccessreviews")):
            return None
        spec = json.loads(request.content)["spec"]
        attributes = spec["resourceAttributes"]
        assert attributes["resource"] == "secrets" and attributes["group"] == ""
        asked = (spec["user"], attributes["namespace"], attributes["verb"])
        self.asked.append(asked)
        return httpx.Response(
            201, json={"spec": spec, "status": {"allowed": asked in self.granted}}
        )


def _fleet() -> MemoryApi:
    return MemoryApi([*FLEET_KINDS, REVIEW], namespaces=("default", "fleet-system", "team-a"))


def _granted(namespace: str, *verbs: str) -> set[tuple[str, str, str]]:
    return {(CONTROLLER, namespace, verb) for verb in verbs}


def test_the_charts_namespace_is_not_asked_about():
    fleet = _fleet()
    authorizer = Authorizer(fleet, set())
    check_renewal_access(fleet.sync_client("fleet"), "fleet-system")
    assert authorizer.asked == []


def test_a_namespace_where_the_controller_may_watch_and_renew_is_taken():
    fleet = _fleet()
    authorizer = Authorizer(fleet, _granted("team-a", "get", "list", "watch", "patch"))
    check_renewal_access(fleet.sync_client("fleet"), "team-a")
    assert {verb for _, _, verb in authorizer.asked} == {"get", "list", "watch", "patch"}


def test_a_namespace_the_controller_cannot_renew_in_is_refused_naming_what_is_missing():
    fleet = _fleet()
    Authorizer(fleet, _granted("team-a", "get"))
    with pytest.raises(JoinError) as refused:
        check_renewal_access(fleet.sync_client("fleet"), "team-a")
    message = str(refused.value)
    assert "may not list, watch, patch Secrets in namespace 'team-a'" in message
    assert "controller.secretsNamespaces={team-a}" in message


def test_a_review_the_user_may_not_send_refuses_another_namespace():
    fleet = _fleet()

    def forbid(request: httpx.Request) -> httpx.Response | None:
        if request.url.path.endswith("/subjectaccessreviews"):
            return status(403, "Forbidden", "User dev cannot create subjectaccessreviews")
        return None

    fleet.interceptors.append(forbid)
    with pytest.raises(JoinError, match="cannot check that the controller"):
        check_renewal_access(fleet.sync_client("fleet"), "team-a")


def test_the_command_line_refuses_before_anything_is_written(monkeypatch, tmp_path, capsys):
    from fleet import join as join_module
    from fleet import kube as kube_module
    from tests.controller.apiserver import MEMBER_KINDS

    fleet = _fleet()
    Authorizer(fleet, set())
    member = MemoryApi(MEMBER_KINDS, server=ENDPOINT.server)
    TokenIssuer(member)
    pem = make_pem()
    (tmp_path / "fleet").write_text(yaml.safe_dump(inline_kubeconfig(pem)))
    (tmp_path / "member").write_text(yaml.safe_dump(inline_kubeconfig(pem, ENDPOINT.server)))
    monkeypatch.setattr(kube_module, "SyncKubeClient", lambda *a, **kw: fleet.sync_client("fleet"))
    monkeypatch.setattr(
        join_module, "SyncKubeClient", lambda *a, **kw: member.sync_client("member-1")
    )
    argv = ["join", "member-1", "--member-kubeconfig", str(tmp_path / "member")]
    argv += ["--secrets-namespace", "team-a", "--kubeconfig", str(tmp_path / "fleet")]
    argv += ["--fleet-id", "fleet-x"]
    assert cli.main(argv) == 1

    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("fleet: error: join ")
    assert "may not get, list, watch, patch Secrets in namespace 'team-a'" in line
    for api_version, kind, name, namespace in IDENTITY:
        assert member.get(api_version, kind, name, namespace) is None, kind
    assert fleet.get("v1", "Secret", "member-1-kubeconfig", "team-a") is None
    assert fleet.get("fleet.dev/v1alpha1", "MemberCluster", "member-1") is None
