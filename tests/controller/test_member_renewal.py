"""A joined member's bound token is renewed before it expires, by the leader, with the token it
holds, and taken in without reconnecting: the member stays Ready across renewals."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
import yaml

from fleet.api import constants as c
from fleet.api import format_time
from fleet.api.membership import (
    IssuedToken,
    MemberEndpoint,
    kubeconfig_secret,
    member_kubeconfig,
)
from fleet.controller.members.renewal import RenewableToken
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
        #: The token each TokenRequest was authenticated with.
        self.requested_with: list[str] = []
        self.now = clock_now
        self.api.interceptors.append(self)

    def __call__(self, request: httpx.Request) -> httpx.Response | None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token not in self.valid:
            return httpx.Response(401, json={"kind": "Status", "code": 401})
        if request.method == "POST" and request.url.path.endswith("/serviceaccounts/fleet/token"):
            self.requested_with.append(token)
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


def _joined_secret(members: Members, issued: float) -> dict[str, Any]:
    config = member_kubeconfig("m1", MemberEndpoint(URL), "fleet-member/fleet", "token-0")
    token = IssuedToken("token-0", issued=issued, expires=issued + LIFETIME)
    secret = kubeconfig_secret(
        "m1-kubeconfig",
        SECRET_NAMESPACE,
        config,
        token_type="bound",
        service_account="fleet-member/fleet",
        token=token,
    )
    return members.fleet_api.put(secret)


def _stored_token(members: Members) -> str:
    secret = members.fleet_api.get("v1", "Secret", "m1-kubeconfig", SECRET_NAMESPACE) or {}
    config = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
    return str(config["users"][0]["user"]["token"])


async def test_the_leader_renews_with_its_current_token_and_the_member_stays_ready():
    members = RenewingMembers()
    registry = members.registry
    registry.token_renew_before, registry.renew_retry = RENEW_BEFORE, 0.01
    member_api = TokenMember(members, members.clock.now)
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


async def test_a_secret_not_made_by_join_is_never_renewed():
    members = RenewingMembers()
    registry = members.registry
    registry.token_renew_before, registry.renew_retry = RENEW_BEFORE, 0.01
    registry.writes_enabled = True
    member_api = TokenMember(members, members.clock.now)
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
