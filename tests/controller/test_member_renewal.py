"""A joined member's bound token is renewed before it expires, by the leader, with the token it
holds, and taken in without reconnecting: the member stays Ready across renewals."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import yaml

from fleet.api import constants as c
from fleet.api import format_time
from fleet.api.conditions import condition_of
from fleet.api.membership import (
    IssuedToken,
    MemberEndpoint,
    kubeconfig_secret,
    member_kubeconfig,
    renewer_secret,
)
from fleet.controller.events import EventRecorder
from fleet.controller.members.renewal import RenewableToken
from fleet.controller.metrics import Metrics
from fleet.kube import Connection, KubeClient
from tests.controller.registry_harness import SECRET_NAMESPACE, Members

URL = "https://m1.test"
LIFETIME = 600.0
RENEW_BEFORE = 570.0  # renewed 30 s after it was issued


class TokenMember:
    """The member's authentication and TokenRequest: only tokens it issued are accepted."""

    def __init__(self, members: Members, clock_now: Any) -> None:
        self.api = members.server(URL)
        self.valid = {"token-0"}
        #: Tokens of the renewer: they may request tokens of fleet's ServiceAccount, nothing
        #: else (its Role), and tokens of fleet's may request none (it has no Role).
        self.renewers: set[str] = set()
        #: Each TokenRequest's expirationSeconds.
        self.asked_seconds: list[int] = []
        #: The token each TokenRequest was authenticated with.
        self.requested_with: list[str] = []
        self.now = clock_now
        self.api.interceptors.append(self)

    def __call__(self, request: httpx.Request) -> httpx.Response | None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        asks_token = request.method == "POST" and request.url.path.endswith(
            "/serviceaccounts/fleet/token"
        )
        if token in self.renewers and not asks_token and request.url.path.startswith("/api"):
            if request.url.path.rstrip("/") in ("/api", "/api/v1"):
                return None  # discovery: every authenticated identity may
            return httpx.Response(403, json={"kind": "Status", "code": 403})
        if token not in self.valid and token not in self.renewers:
            return httpx.Response(401, json={"kind": "Status", "code": 401})
        if asks_token and self.renewers and token not in self.renewers:
            return httpx.Response(403, json={"kind": "Status", "code": 403})
        if asks_token:
            self.requested_with.append(token)
            self.asked_seconds.append(json.loads(request.content)["spec"]["expirationSeconds"])
            new = f"token-{len(self.requested_with)}"
            self.valid.add(new)
            expires = format_time(self.now() + LIFETIME)
            return httpx.Response(
                201, json={"status": {"token": new, "expirationTimestamp": expires}}
            )
        return None


class RenewingMembers(Members):
    """Members whose clients authenticate with a renewable token, as the real ones do."""

    def _connect(self, name: str, connection: Connection) -> KubeClient:
        # The Connection fleet.kubeconfig built when it checked the Secret, token and all.
        server = connection.server
        token = connection.bearer_token()
        assert token is not None

        async def no_wait(_seconds: float) -> None:
            await asyncio.sleep(0)

        client = KubeClient(
            Connection(server, auth=RenewableToken(token)),
            name=name,
            transport=self.servers[server].transport(),
            sleep=no_wait,
            retries=1,
        )
        self.connected.append((server, client))
        return client


def _renewing(
    *, retry: float = 0.01, writes: bool = True, renewers: set[str] | None = None
) -> tuple[RenewingMembers, TokenMember]:
    """Members renewing `RENEW_BEFORE` ahead, trying again after `retry` s, leading (`writes`),
    and the member's API server that issues their tokens (to the renewers named)."""
    members = RenewingMembers()
    registry = members.registry
    registry.token_renew_before, registry.renew_retry = RENEW_BEFORE, retry
    registry.writes_enabled = writes
    member_api = TokenMember(members, members.clock.now)
    if renewers is not None:
        member_api.renewers = renewers
    return members, member_api


def _joined_secret(
    members: Members, issued: float, *, renewer: str | None = None
) -> dict[str, Any]:
    """The Secrets `fleet join` writes: the kubeconfig with token-0 and, with `renewer` (its
    token), the renewer's Secret it names."""
    config = member_kubeconfig("m1", MemberEndpoint(URL), "fleet-member/fleet", "token-0")
    token = IssuedToken("token-0", issued=issued, expires=issued + LIFETIME)
    if renewer is not None:
        members.fleet_api.put(
            renewer_secret("m1-renewer", SECRET_NAMESPACE, renewer, "fleet-member/fleet-renewer")
        )
    secret = kubeconfig_secret(
        "m1-kubeconfig",
        SECRET_NAMESPACE,
        config,
        token_type="bound",
        service_account="fleet-member/fleet",
        token=token,
        renewer="m1-renewer" if renewer is not None else "",
        seconds=int(LIFETIME) if renewer is not None else None,
    )
    return members.fleet_api.put(secret)


def _stored_token(members: Members) -> str:
    secret = members.fleet_api.get("v1", "Secret", "m1-kubeconfig", SECRET_NAMESPACE) or {}
    config = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    return str(config["users"][0]["user"]["token"])


async def test_the_leader_renews_with_its_current_token_and_the_member_stays_ready():
    members, member_api = _renewing(writes=False)
    registry = members.registry
    try:
        _joined_secret(members, issued=members.clock.now())
        mc = members.member_cluster("m1")
        await registry.sync(mc)
        member = registry.get("m1")
        assert member is not None
        await members.until(lambda: member.ready)

        # A standby renews nothing, even when the token is due: it saw the renewal due (twice)
        # and left it to the leader.
        members.clock.advance(40)
        await members.until(lambda: registry.renewals_left["m1"] >= 2)
        assert member_api.requested_with == []
        assert registry.renewals["m1"] == 0

        registry.writes_enabled = True
        await members.until(lambda: _stored_token(members) == "token-1")
        # Taken in from the Secret (as its watch would): the same connection, the new token.
        await registry.sync(mc)
        members.clock.advance(40)
        await members.until(lambda: _stored_token(members) == "token-2")
        await registry.sync(mc)

        assert member_api.requested_with == ["token-0", "token-1"]
        assert len(members.connected) == 1, "a renewal reconnected the member"
        assert members.listener.health == [("m1", True)], "Ready blinked"
        auth = members.connected[0][1].connection.auth
        assert isinstance(auth, RenewableToken) and auth.token() == "token-2"
        assert registry.renewals["m1"] == 2
        secret = members.fleet_api.get("v1", "Secret", "m1-kubeconfig", SECRET_NAMESPACE) or {}
        annotations = secret["metadata"]["annotations"]
        assert annotations[c.TOKEN_EXPIRES_ANNOTATION] == format_time(
            members.clock.now() + LIFETIME
        )
        # The old tokens are no longer used: revoke them and the member still answers.
        member_api.valid = {"token-2"}
        before = len(member_api.api.asked("GET", "/version"))
        await members.until(lambda: len(member_api.api.asked("GET", "/version")) > before + 2)
        assert member.ready
    finally:
        await members.stop()


async def test_the_renewer_renews_and_the_dispatch_token_asks_for_nothing():
    """The TokenRequest is sent as the renewer (its token read from its own Secret), for the
    lifetime join chose; the dispatch token, which the member would refuse it, never asks."""
    members, member_api = _renewing(renewers={"renewer-0"})
    registry = members.registry
    try:
        _joined_secret(members, issued=members.clock.now() - 40, renewer="renewer-0")
        mc = members.member_cluster("m1")
        await registry.sync(mc)
        member = registry.get("m1")
        assert member is not None
        await members.until(lambda: _stored_token(members) == "token-1")
        await registry.sync(mc)
        assert member_api.requested_with == ["renewer-0"]
        assert member_api.asked_seconds == [int(LIFETIME)]
        auth = members.connected[0][1].connection.auth
        assert isinstance(auth, RenewableToken) and auth.token() == "token-1"
        await members.until(lambda: member.ready)
        # The renewer's token never reaches the kubeconfig Secret.
        secret = members.fleet_api.get("v1", "Secret", "m1-kubeconfig", SECRET_NAMESPACE) or {}
        assert b"renewer-0" not in base64.b64decode(secret["data"]["kubeconfig"])
    finally:
        await members.stop()


async def test_a_dispatch_token_that_expired_while_the_controller_was_down_is_renewed():
    """A controller down longer than the token's lifetime: the member refuses the stored token
    (401, NotReady), and the renewer gets a new one: the member is Ready again, no re-join."""
    members, member_api = _renewing(renewers={"renewer-0"})
    registry = members.registry
    member_api.valid = set()  # token-0 expired
    try:
        _joined_secret(members, issued=members.clock.now() - 2 * LIFETIME, renewer="renewer-0")
        await registry.sync(members.member_cluster("m1"))
        member = registry.get("m1")
        assert member is not None
        await members.until(lambda: member.ready)
        assert member_api.requested_with == ["renewer-0"]
        assert _stored_token(members) == "token-1"
        assert len(members.connected) == 1
    finally:
        await members.stop()


async def test_a_missing_renewer_secret_is_said_in_the_condition():
    members, member_api = _renewing(retry=60.0, renewers={"renewer-0"})
    registry = members.registry
    registry.start()
    try:
        _joined_secret(members, issued=members.clock.now() - 40, renewer="renewer-0")
        members.fleet_api.remove("v1", "Secret", "m1-renewer", SECRET_NAMESPACE)
        await registry.sync(members.member_cluster("m1"))
        await members.until(lambda: _condition(members, "TokenRenewed").get("status") == "False")
        condition = _condition(members, "TokenRenewed")
        assert condition["reason"] == "RenewerUnavailable"
        assert f"{SECRET_NAMESPACE}/m1-renewer" in condition["message"]
        assert member_api.requested_with == []
    finally:
        await members.stop()


async def test_a_secret_not_made_by_join_is_never_renewed():
    members, member_api = _renewing()
    registry = members.registry
    try:
        secret = _joined_secret(members, issued=members.clock.now() - 100)
        del secret["metadata"]["annotations"][c.TOKEN_TYPE_ANNOTATION]
        members.fleet_api.put(secret)
        await registry.sync(members.member_cluster("m1"))
        member = registry.get("m1")
        assert member is not None
        await members.until(lambda: member.ready)
        assert member.renewal is None and member_api.requested_with == []
    finally:
        await members.stop()


# -- a refused renewal is shown, and never overwrites a re-join --------------------------------


def _refusing(member_api: TokenMember, refusals: int | None) -> list[str]:
    """The member refuses the next `refusals` TokenRequests (None: all) with 403, as when the
    Role fleet join made was removed; the tokens they were asked with, in order."""
    refused: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response | None:
        if request.method != "POST" or not request.url.path.endswith("/token"):
            return None
        if refusals is not None and len(refused) >= refusals:
            return None
        refused.append(request.headers.get("authorization", ""))
        message = (
            'serviceaccounts "fleet" is forbidden: User "system:serviceaccount:fleet-member:fleet" '
            'cannot create resource "serviceaccounts/token" in API group "" in the namespace '
            '"fleet-member"'
        )
        return httpx.Response(
            403,
            json={"kind": "Status", "code": 403, "reason": "Forbidden", "message": message},
        )

    member_api.api.interceptors.insert(0, refuse)
    return refused


def _condition(members: Members, type_: str) -> dict[str, Any]:
    mc = members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", "m1") or {}
    return condition_of((mc.get("status") or {}).get("conditions"), type_)


def _observed(members: Members) -> tuple[EventRecorder, Metrics]:
    registry = members.registry
    registry.events = EventRecorder(
        members.fleet_api.client("events"), instance="test", clock=members.clock
    )
    registry.metrics = Metrics()
    return registry.events, registry.metrics


async def test_a_refused_renewal_shows_in_the_condition_an_event_and_a_metric_at_once():
    members = RenewingMembers()
    registry = members.registry
    # One attempt, then a long wait: whatever shows, shows after that one attempt.
    registry.token_renew_before, registry.renew_retry = RENEW_BEFORE, 60.0
    registry.writes_enabled = True
    _, metrics = _observed(members)
    member_api = TokenMember(members, members.clock.now)
    refused = _refusing(member_api, None)
    registry.start()
    try:
        joined_at = members.clock.now() - 40  # due already
        _joined_secret(members, issued=joined_at)
        await registry.sync(members.member_cluster("m1"))
        member = registry.get("m1")
        assert member is not None
        await members.until(lambda: _condition(members, "TokenRenewed").get("status") == "False")

        condition = _condition(members, "TokenRenewed")
        assert condition["reason"] == "Forbidden"
        assert "403" in condition["message"] and "serviceaccounts/token" in condition["message"]
        await members.until(lambda: bool(members.fleet_api.events("TokenRenewalFailed")))
        (event,) = members.fleet_api.events("TokenRenewalFailed", about="m1")
        assert event["type"] == "Warning" and "403" in event["message"]
        assert metrics.token_renewal_failures.values == {("m1", "Forbidden"): 1.0}
        assert metrics.token_expiry.values == {"m1": joined_at + LIFETIME}
        assert "fleet_token_renewal_failures_total" in metrics.render()
        mc = members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", "m1") or {}
        renewal = mc["status"]["tokenRenewal"]
        assert renewal["lastRenewalTime"] == format_time(joined_at)
        assert renewal["expirationTime"] == format_time(joined_at + LIFETIME)
        assert renewal["nextAttemptTime"] == format_time(members.clock.now() + 60.0)
        assert renewal["consecutiveFailures"] == 1
        assert len(refused) == 1, "shown only after more than one attempt"

        # The token still works until it expires: the member stays Ready.
        await members.until(lambda: member.ready)
        assert _condition(members, "Ready")["status"] == "True"
        assert members.listener.health == [("m1", True)]
    finally:
        await members.stop()


async def test_renewals_that_recover_say_so_once():
    members = RenewingMembers()
    registry = members.registry
    registry.token_renew_before, registry.renew_retry = RENEW_BEFORE, 0.01
    registry.writes_enabled = True
    _, metrics = _observed(members)
    member_api = TokenMember(members, members.clock.now)
    refused = _refusing(member_api, 3)
    registry.start()
    members.clock.advance(0.5)  # a renewal at a fraction of a second, as on a real clock
    try:
        _joined_secret(members, issued=members.clock.now() - 40)
        mc = members.member_cluster("m1")
        await registry.sync(mc)
        await members.until(lambda: _stored_token(members) == "token-1")
        await members.until(lambda: _condition(members, "TokenRenewed").get("status") == "True")
        # The Secret's watch brings the renewed token back: still "renewed", not "issued".
        await registry.sync(mc)
        await registry.write_statuses()

        assert len(refused) == 3
        assert _condition(members, "TokenRenewed")["reason"] == "TokenRenewed"
        assert metrics.token_renewal_failures.values == {("m1", "Forbidden"): 3.0}
        assert metrics.token_renewals.values == {"m1": 1.0}
        # One Warning for the three identical refusals, one Normal for the recovery.
        assert len(members.fleet_api.events("TokenRenewalFailed", about="m1")) == 1
        (recovered,) = members.fleet_api.events("TokenRenewed", about="m1")
        assert recovered["type"] == "Normal"
        mc = members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", "m1") or {}
        assert mc["status"]["tokenRenewal"]["consecutiveFailures"] == 0
    finally:
        await members.stop()


async def test_a_renewal_never_overwrites_a_secret_that_changed_since_it_was_read():
    members = RenewingMembers()
    registry = members.registry
    registry.token_renew_before, registry.renew_retry = RENEW_BEFORE, 0.01
    registry.resync_after_error = 0.01
    registry.writes_enabled = True
    member_api = TokenMember(members, members.clock.now)
    try:
        _joined_secret(members, issued=members.clock.now() - 40)
        await registry.sync(members.member_cluster("m1"))
        member = registry.get("m1")
        assert member is not None

        def rejoin_meanwhile(request: httpx.Request) -> httpx.Response | None:
            # `fleet join` writes its own new token between the renewal's read and its write.
            if request.method == "POST" and request.url.path.endswith("/token"):
                member_api.api.interceptors.remove(rejoin_meanwhile)
                member_api.valid.add("token-rejoined")
                _rejoined_secret(members)
            return None

        member_api.api.interceptors.insert(0, rejoin_meanwhile)
        await members.until(lambda: member_api.requested_with == ["token-0"])
        # The renewal's write was refused by the precondition and the re-join's token kept;
        # the registry read the Secret again and uses that token.
        auth = members.connected[0][1].connection.auth
        assert isinstance(auth, RenewableToken)
        await members.until(lambda: auth.token() == "token-rejoined")
        assert _stored_token(members) == "token-rejoined"
        patches = members.fleet_api.asked("PATCH", "/secrets/m1-kubeconfig")
        assert patches and all(b'"resourceVersion"' in p.content for p in patches)
        assert registry.renewals["m1"] == 0
    finally:
        await members.stop()


async def test_a_secret_whose_metadata_alone_changed_is_still_renewed():
    members, member_api = _renewing()
    registry = members.registry
    try:
        _joined_secret(members, issued=members.clock.now() - 40)
        await registry.sync(members.member_cluster("m1"))

        def label_meanwhile(request: httpx.Request) -> httpx.Response | None:
            if request.method == "POST" and request.url.path.endswith("/token"):
                member_api.api.interceptors.remove(label_meanwhile)
                members.fleet_api.merge(
                    "v1",
                    "Secret",
                    "m1-kubeconfig",
                    SECRET_NAMESPACE,
                    {"metadata": {"labels": {"team": "a"}}},
                )
            return None

        member_api.api.interceptors.insert(0, label_meanwhile)
        await members.until(lambda: _stored_token(members) == "token-1")
        conflicts = members.fleet_api.asked("PATCH", "/secrets/m1-kubeconfig")
        assert len(conflicts) == 2, "the first write was not conditional"
        secret = members.fleet_api.get("v1", "Secret", "m1-kubeconfig", SECRET_NAMESPACE) or {}
        assert secret["metadata"]["labels"]["team"] == "a"
    finally:
        await members.stop()


def _rejoined_secret(members: Members) -> None:
    config = member_kubeconfig("m1", MemberEndpoint(URL), "fleet-member/fleet", "token-rejoined")
    now = members.clock.now()
    token = IssuedToken("token-rejoined", issued=now, expires=now + LIFETIME)
    members.fleet_api.put(
        kubeconfig_secret(
            "m1-kubeconfig",
            SECRET_NAMESPACE,
            config,
            token_type="bound",
            service_account="fleet-member/fleet",
            token=token,
        )
    )
