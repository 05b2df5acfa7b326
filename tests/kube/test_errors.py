"""Error mapping: every refusal names the verb, the object and the server, and a 403 is never
read as "not found"."""

from __future__ import annotations

import httpx
import pytest

from fleet.kube import (
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    Unreachable,
)
from tests.kube.fakes import FakeApi, status, sync_client

SECRET = "/api/v1/namespaces/fleet-system/secrets/member-1-kubeconfig"


@pytest.mark.parametrize(
    ("code", "reason", "cls", "flag"),
    [
        (403, "Forbidden", Forbidden, "forbidden"),
        (404, "NotFound", NotFound, "not_found"),
        (409, "AlreadyExists", Conflict, "conflict"),
        (410, "Expired", Gone, "gone"),
        (422, "Invalid", Invalid, "invalid"),
    ],
)
def test_each_refusal_has_its_class_and_flag(code: int, reason: str, cls: type, flag: str) -> None:
    api = FakeApi().on("PATCH", SECRET, status(code, reason, "the server's words"))
    client, _ = sync_client(api)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "member-1-kubeconfig", "namespace": "fleet-system"},
    }
    with pytest.raises(cls) as err:
        client.apply(secret, field_manager="t")
    e = err.value
    assert isinstance(e, ApiError) and isinstance(e, KubeError)
    assert (e.status, e.reason, e.message) == (code, reason, "the server's words")
    assert getattr(e, flag)
    others = {"forbidden", "not_found", "conflict", "gone", "invalid"} - {flag}
    assert not any(getattr(e, other) for other in others)
    assert (e.verb, e.target, e.server) == (
        "APPLY",
        "Secret fleet-system/member-1-kubeconfig",
        "fleet",
    )
    phrase = httpx.codes.get_reason_phrase(code)
    assert str(e) == (
        f"APPLY Secret fleet-system/member-1-kubeconfig on fleet: {code} {phrase}: "
        "the server's words"
    )


def test_a_forbidden_secret_is_forbidden_not_missing() -> None:
    message = 'secrets "member-1-kubeconfig" is forbidden: User "x" cannot get resource'
    api = FakeApi().on("GET", SECRET, status(403, "Forbidden", message))
    client, _ = sync_client(api)
    with pytest.raises(Forbidden) as err:
        client.get("v1", "Secret", "member-1-kubeconfig", "fleet-system")
    assert str(err.value).startswith(
        "GET Secret fleet-system/member-1-kubeconfig on fleet: 403 Forbidden: "
    )


def test_a_missing_object_is_none_but_a_kind_the_server_lacks_raises() -> None:
    client, _ = sync_client(FakeApi())
    assert client.get("v1", "Secret", "nope", "default") is None
    with pytest.raises(NotFound) as err:
        client.get("kubeflow.org/v1", "TFJob", "job", "default")
    assert "does not serve TFJob in kubeflow.org/v1" in str(err.value)
    assert "on fleet" in str(err.value)


def test_a_group_the_server_lacks_raises_not_found_naming_it() -> None:
    client, _ = sync_client(FakeApi())
    with pytest.raises(NotFound) as err:
        client.list("ray.io/v1", "RayJob", "default")
    assert str(err.value).startswith("DISCOVER RayJob (ray.io/v1) on fleet: 404 Not Found")


def test_an_answer_that_is_not_a_status_keeps_its_text() -> None:
    api = FakeApi().on("GET", SECRET, httpx.Response(403, text="<html>proxy says no</html>"))
    client, _ = sync_client(api)
    with pytest.raises(Forbidden) as err:
        client.get("v1", "Secret", "member-1-kubeconfig", "fleet-system")
    assert err.value.message == "<html>proxy says no</html>"


def test_a_delete_of_a_missing_object_is_false_and_a_forbidden_one_raises() -> None:
    pod = "/api/v1/namespaces/default/pods/p"
    api = FakeApi().on("DELETE", pod, status(404, "NotFound", "gone"))
    client, _ = sync_client(api)
    assert client.delete("v1", "Pod", "p", "default") is False
    api.script[("DELETE", pod)] = [status(403, "Forbidden", "no")]
    with pytest.raises(Forbidden):
        client.delete("v1", "Pod", "p", "default")
    api.script[("DELETE", pod)] = [status(409, "Conflict", "uid precondition failed")]
    assert client.delete("v1", "Pod", "p", "default", uid="u-1") is False
    api.script[("DELETE", pod)] = [httpx.Response(200, json={"kind": "Status"})]
    assert client.delete("v1", "Pod", "p", "default") is True


def test_a_conflict_without_uid_guard_raises() -> None:
    pod = "/api/v1/namespaces/default/pods/p"
    api = FakeApi().on("DELETE", pod, status(409, "Conflict", "busy"))
    client, _ = sync_client(api)
    with pytest.raises(Conflict):
        client.delete("v1", "Pod", "p", "default")


def test_no_answer_is_unreachable_naming_verb_object_and_server() -> None:
    api = FakeApi().on("GET", SECRET, httpx.ConnectError("connection refused"))
    client, _ = sync_client(api)
    with pytest.raises(Unreachable) as err:
        client.get("v1", "Secret", "member-1-kubeconfig", "fleet-system")
    assert str(err.value) == (
        "GET Secret fleet-system/member-1-kubeconfig on fleet: unreachable: "
        "ConnectError: connection refused"
    )
    assert isinstance(err.value, KubeError)
