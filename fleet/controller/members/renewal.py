"""Renewing a joined member's bound token before it expires, with no human step.

`fleet join` stores a TokenRequest token of fleet's dispatch ServiceAccount in the member, with
when it was issued and when it expires (annotations on the kubeconfig Secret). Before it expires
(`fleet.core.tokens.renew_at`), the leading controller asks the member for a new one,
authenticated as the renewer (a second ServiceAccount whose Role allows exactly that; its token
is in a Secret of its own that the kubeconfig Secret names, `Renewal.renewer`), and writes it
into the Secret. The dispatch token cannot request tokens, so whoever holds it cannot extend
it; and an expired dispatch token (a controller down longer than its lifetime) is renewed all
the same, so the member recovers with no `fleet join`. A Secret of a join before the renewer
names none: its token is renewed with itself, as then (its old Role allows it), until the
member is joined again. The Secret's watch takes it in like any rotation, but a change of the token
alone is swapped into the live client (`RenewableToken`): the member's watches, its snapshot
and its health go on untouched, so a renewal never makes a Ready member blink.

A renewal that fails (the member is down, the Role was removed) is retried; the member turns
NotReady with the API server's 401 only if the token runs out first. `fleet join` again mends
that. Until then the failure is shown where an operator looks (`RenewalState`): the
MemberCluster's TokenRenewed condition and status.tokenRenewal, a Warning Event, and the
fleet_token_renewal_failures_total and fleet_member_token_expiry_timestamp_seconds metrics.

The write into the Secret is conditional on the Secret being the one the renewal read (its
resourceVersion): a `fleet join` that re-joined the member meanwhile wrote a token of its own,
which a renewal in flight must not overwrite with one issued from the old Secret (`Superseded`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from fleet.api import constants as c
from fleet.api._time import parse_time, to_epoch
from fleet.api.membership import IssuedToken, identity_of, renewed_secret, token_request
from fleet.core.tokens import renew_at
from fleet.kube import ApiError, BearerToken, Connection, KubeClient, Obj, Unreachable

if TYPE_CHECKING:
    from fleet.controller.members.writer import MemberWriter

log = logging.getLogger(__name__)

#: How long a failed renewal waits before it tries again.
RETRY_SECONDS = 15.0


class RenewableToken(BearerToken):
    """A bearer token that is replaced in place, for the requests that follow."""

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.current = token

    def token(self) -> str:
        return self.current

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.current}"
        yield request

    def __repr__(self) -> str:
        return "RenewableToken(<hidden>)"


def connect_renewable(name: str, connection: Connection) -> KubeClient:
    """The member's client, its token (if it authenticates with one) replaceable in place.
    `connection` is the one fleet.kubeconfig built when it checked the Secret: not read again."""
    if isinstance(connection.auth, BearerToken):
        connection = dataclasses.replace(connection, auth=RenewableToken(connection.auth.token()))
    return KubeClient(connection, name=name)


def renewable_token(client: KubeClient | None) -> RenewableToken | None:
    auth = client.connection.auth if client is not None else None
    return auth if isinstance(auth, RenewableToken) else None


def shape(config: Mapping[str, Any]) -> str:
    """A digest of a kubeconfig without its tokens: equal shapes differ by the token alone."""
    users = [
        {**user, "user": {k: v for k, v in (user.get("user") or {}).items() if k != "token"}}
        for user in config.get("users") or []
    ]
    stripped = {**config, "users": users}
    return hashlib.sha256(json.dumps(stripped, sort_keys=True, default=str).encode()).hexdigest()


class RenewerUnavailable(ValueError):
    """The renewer's Secret the kubeconfig Secret names is missing or holds no token."""


class Superseded(Exception):
    """The Secret changed since the renewal read it (a re-join wrote a new token): the renewal
    leaves it alone; the Secret's watch takes the new one in and renews that one."""


@dataclasses.dataclass
class RenewalState:
    """What the MemberCluster's status says of a member's bound token (epoch seconds)."""

    #: When the token in use was issued (by `fleet join`, or by the last renewal).
    issued: float
    expires: float
    #: When the controller next tries to renew it.
    next_attempt: float
    #: Renewed by this controller (not yet: the token `fleet join` stored, or one renewed
    #: before it started).
    renewed: bool = False
    #: The last attempt's refusal: (reason, message); None after a success.
    failure: tuple[str, str] | None = None
    #: Consecutive failed attempts.
    failures: int = 0


def failure_reason(error: Exception) -> str:
    """A CamelCase reason for a refused renewal: the API server's own (`Forbidden`), else what
    kind of failure it was."""
    if isinstance(error, ApiError):
        return error.reason or f"HTTP{error.status}"
    if isinstance(error, Unreachable):
        return "Unreachable"
    if isinstance(error, RenewerUnavailable):
        return "RenewerUnavailable"
    return "InvalidAnswer"


@dataclasses.dataclass(frozen=True)
class Renewal:
    """What renewing a member's token needs, read from its kubeconfig Secret."""

    secret: Mapping[str, Any]
    key: str
    config: Mapping[str, Any]
    namespace: str
    service_account: str
    issued: float
    expires: float
    #: The Secret (in the kubeconfig Secret's namespace) holding the renewer's token; None: a
    #: join before the renewer, whose token renews itself.
    renewer: str | None = None
    #: The lifetime `fleet join` chose (None: a join that did not record it).
    seconds: int | None = None

    @property
    def lifetime(self) -> int:
        """What each renewal asks for: the lifetime join chose (the member's token policy
        refuses more), else the last token's."""
        if self.seconds is not None:
            return self.seconds
        return max(round(self.expires - self.issued), 600)

    def due(self, now: float, renew_before: float | None) -> float:
        return renew_at(self.issued, self.expires, now, renew_before=renew_before)


def renewal_of(secret: Mapping[str, Any], key: str, config: Mapping[str, Any]) -> Renewal | None:
    """The renewal of a Secret `fleet join` wrote with a bound token; None for any other."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    identity = identity_of(secret)
    if annotations.get(c.TOKEN_TYPE_ANNOTATION) != c.TOKEN_TYPE_BOUND or identity is None:
        return None
    try:
        issued = to_epoch(parse_time(str(annotations[c.TOKEN_ISSUED_ANNOTATION])))
        expires = to_epoch(parse_time(str(annotations[c.TOKEN_EXPIRES_ANNOTATION])))
    except (KeyError, ValueError):
        log.warning(
            "Secret %s: a bound token without valid %s/%s annotations is not renewed",
            (secret.get("metadata") or {}).get("name"),
            c.TOKEN_ISSUED_ANNOTATION,
            c.TOKEN_EXPIRES_ANNOTATION,
        )
        return None
    namespace, account = identity
    renewer = str(annotations.get(c.RENEWER_SECRET_ANNOTATION) or "") or None
    seconds = str(annotations.get(c.TOKEN_SECONDS_ANNOTATION) or "")
    return Renewal(
        secret,
        key,
        config,
        namespace,
        account,
        issued,
        expires,
        renewer,
        int(seconds) if seconds.isdigit() else None,
    )


async def renewer_auth(fleet: KubeClient, renewal: Renewal) -> BearerToken | None:
    """The renewer's token, read from its Secret on the fleet at each renewal (None: a Secret
    of a join before the renewer). RenewerUnavailable when it is missing or holds none."""
    if renewal.renewer is None:
        return None
    namespace = (renewal.secret.get("metadata") or {}).get("namespace")
    found = await fleet.get("v1", "Secret", renewal.renewer, namespace)
    raw = ((found or {}).get("data") or {}).get(c.RENEWER_TOKEN_KEY)
    token = base64.b64decode(raw).decode() if raw else ""
    if not token:
        state = "not found" if found is None else f"has no {c.RENEWER_TOKEN_KEY!r} key"
        raise RenewerUnavailable(
            f"Secret {namespace}/{renewal.renewer} (the renewer's token, named by the "
            f"kubeconfig Secret's {c.RENEWER_SECRET_ANNOTATION}) {state}: the token cannot be "
            "renewed; `fleet join` again writes it"
        )
    return BearerToken(token)


async def renew(
    member: MemberWriter, fleet: KubeClient, renewal: Renewal, now: float
) -> tuple[IssuedToken, Obj]:
    """Request a new token as the renewer (or, for a join before it, with the current token)
    and write it into the fleet's Secret, if the Secret is still the one `renewal` read; the
    token and the Secret as written.

    Superseded: the Secret's kubeconfig changed meanwhile (nothing was written)."""
    answer = await member.create_subresource(
        "v1",
        "ServiceAccount",
        renewal.service_account,
        "token",
        token_request(renewal.lifetime),
        renewal.namespace,
        auth=await renewer_auth(fleet, renewal),
    )
    status = answer.get("status") or {}
    stamp = status.get("expirationTimestamp")
    expires = to_epoch(parse_time(stamp)) if stamp else now + renewal.lifetime
    token = IssuedToken(str(status.get("token") or ""), issued=now, expires=expires)
    if not token.token:
        raise ValueError(f"{member.member.name} answered the TokenRequest without a token")
    return token, await write_renewed(fleet, renewal, token)


async def write_renewed(fleet: KubeClient, renewal: Renewal, token: IssuedToken) -> Obj:
    """Merge-patch the renewed token into the Secret with its resourceVersion as precondition.

    On a Conflict the Secret is read again: if its data is what the renewal read (only its
    metadata moved: a label, an annotation), the patch is sent again on the new version;
    otherwise someone else wrote a kubeconfig (a re-join) and it is left as it is."""
    secret = renewal.secret
    for _attempt in range(3):
        meta = secret.get("metadata") or {}
        name, namespace = str(meta["name"]), meta.get("namespace")
        patch = renewed_secret(secret, renewal.config, token, renewal.key)
        if meta.get("resourceVersion"):
            patch["metadata"]["resourceVersion"] = meta["resourceVersion"]
        try:
            return await fleet.patch("v1", "Secret", name, patch, namespace)
        except ApiError as e:
            if not e.conflict:
                raise
        current = await fleet.get("v1", "Secret", name, namespace)
        if current is None or current.get("data") != renewal.secret.get("data"):
            raise Superseded(
                f"Secret {namespace}/{name} changed since the renewal read it "
                "(a re-join?); the new kubeconfig is kept"
            )
        secret = current
    raise Superseded(f"Secret {namespace}/{name} keeps changing; the renewal tries again later")
