"""The controller lists and watches Secrets only in the namespaces configured to hold member
kubeconfigs, namespaced, one watch per namespace; a MemberCluster naming a Secret elsewhere is
NotReady with a reason that says so, and nothing is read there."""

from __future__ import annotations

import httpx

from fleet.api import constants as c
from fleet.controller.members import MemberRegistry
from tests.controller.apiserver import status
from tests.controller.registry_harness import SECRET_NAMESPACE, Members


def _secret_lists(members: Members) -> list[httpx.Request]:
    return [
        r
        for r in members.fleet_api.requests
        if r.method == "GET" and r.url.path.endswith("/secrets")
    ]


async def test_the_secret_watch_is_namespaced_to_the_configured_namespace():
    members = Members()
    registry = members.registry
    members.server("https://m1.test")
    members.secret("m1", "https://m1.test")
    try:
        await registry.sync(members.member_cluster("m1"))
        member = registry.get("m1")
        assert member is not None
        await members.until(lambda: member.ready)
        await members.until(lambda: bool(_secret_lists(members)))

        paths = {r.url.path for r in _secret_lists(members)}
        assert paths == {f"/api/v1/namespaces/{SECRET_NAMESPACE}/secrets"}
        assert not members.fleet_api.asked("GET", "/api/v1/secrets")
    finally:
        await members.stop()


async def test_a_secret_outside_the_watched_namespaces_is_refused_with_a_reason():
    members = Members()
    registry = members.registry
    members.server("https://m1.test")
    secret = members.secret("m1", "https://m1.test")
    secret["metadata"]["namespace"] = "default"
    members.fleet_api.put(secret)
    mc = members.member_cluster("m1")
    mc["spec"]["kubeconfigSecretRef"]["namespace"] = "default"
    members.fleet_api.put(mc)
    registry.writes_enabled = True
    registry.start()
    try:
        await registry.sync(members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", "m1"))
        member = registry.get("m1")
        assert member is not None
        assert member.health.reason == c.REASON_KUBECONFIG_SECRET_NOT_WATCHED
        assert not member.ready and member.connection is None
        assert f"watches {SECRET_NAMESPACE}" in member.health.message
        assert "controller.secretsNamespaces" in member.health.message
        # Nothing was read or watched in `default`.
        assert not members.fleet_api.asked("GET", "/namespaces/default/secrets")

        def condition() -> dict[str, str]:
            obj = members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", "m1") or {}
            found = [
                x for x in (obj.get("status") or {}).get("conditions") or [] if x["type"] == "Ready"
            ]
            return found[0] if found else {}

        await members.until(lambda: condition().get("reason") == "KubeconfigSecretNotWatched")
        assert condition()["status"] == "False"
        await members.until(
            lambda: _condition(members, "KubeconfigWatched").get("status") == "False"
        )
        assert (
            "'default' is not one of fleet-system"
            in _condition(members, "KubeconfigWatched")["message"]
        )
    finally:
        await members.stop()


async def test_each_configured_namespace_is_watched_on_its_own():
    members = Members()
    members.registry = MemberRegistry(
        members.fleet_api.client("fleet"),
        members.listener,
        fleet_id="fleet-test",
        clock=members.clock,
        connect=members._connect,
        secrets_namespaces=(SECRET_NAMESPACE, "default"),
    )
    registry = members.registry
    for name, namespace in (("m1", SECRET_NAMESPACE), ("m2", "default")):
        url = f"https://{name}.test"
        members.server(url)
        secret = members.secret(name, url)
        secret["metadata"]["namespace"] = namespace
        members.fleet_api.put(secret)
        mc = members.member_cluster(name)
        mc["spec"]["kubeconfigSecretRef"]["namespace"] = namespace
        members.fleet_api.put(mc)
    try:
        for name in ("m1", "m2"):
            await registry.sync(members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", name))
        await members.until(lambda: all(m.ready for m in registry.members.values()))
        await members.until(lambda: len({r.url.path for r in _secret_lists(members)}) == 2)
        assert {r.url.path for r in _secret_lists(members)} == {
            f"/api/v1/namespaces/{SECRET_NAMESPACE}/secrets",
            "/api/v1/namespaces/default/secrets",
        }
    finally:
        await members.stop()


async def test_a_refused_secret_watch_shows_on_the_member_and_clears_when_granted():
    members = Members()
    registry = members.registry
    members.server("https://m1.test")
    members.secret("m1", "https://m1.test")
    forbidden = True

    def refuse_list(request: httpx.Request) -> httpx.Response | None:
        listing = request.method == "GET" and request.url.path.endswith("/secrets")
        if forbidden and listing:
            return status(
                403,
                "Forbidden",
                'secrets is forbidden: User "system:serviceaccount:fleet-system:fleet-controller" '
                'cannot list resource "secrets" in API group "" in the namespace "fleet-system"',
            )
        return None

    members.fleet_api.interceptors.append(refuse_list)
    registry.writes_enabled = True
    registry.start()
    try:
        await registry.sync(members.member_cluster("m1"))
        member = registry.get("m1")
        assert member is not None
        await members.until(
            lambda: _condition(members, "KubeconfigWatched").get("status") == "False"
        )
        watched = _condition(members, "KubeconfigWatched")
        assert watched["reason"] == "WatchFailed"
        assert "403" in watched["message"] and "controller.secretsNamespaces" in watched["message"]
        # The Secret itself could be read: the member works, only edits are not followed.
        await members.until(lambda: member.ready)

        forbidden = False  # the Role is granted: the informer's next list succeeds
        await members.until(lambda: bool(members.fleet_api.waiting(_lists)))
        members.fleet_api.release_parked(where=_lists)
        await members.until(
            lambda: _condition(members, "KubeconfigWatched").get("status") == "True"
        )
        assert _condition(members, "KubeconfigWatched")["reason"] == "Watching"
    finally:
        await members.stop()


def _lists(request: httpx.Request) -> bool:
    return request.method == "GET" and request.url.path.endswith("/secrets")


def _condition(members: Members, type_: str) -> dict[str, str]:
    obj = members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", "m1") or {}
    found = [x for x in (obj.get("status") or {}).get("conditions") or [] if x["type"] == type_]
    return found[0] if found else {}
