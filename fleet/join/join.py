"""`fleet join NAME`: make fleet's own identity in a member, with the user's credentials, once.

The plan (fleet.api.membership) is written member side first, then a token of fleet's
ServiceAccount is requested, then the fleet side (kubeconfig Secret, MemberCluster). Every
write is a server-side apply, so running it again updates in place and changes nothing that is
already right (the token is issued anew: re-running join also rotates it). When the member or
the fleet refuses a write, what this run created is deleted again, newest first, and the error
names what was refused: nothing half-made stays behind. Objects that were there before the run
are left as they were found or updated, never deleted.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from fleet.api._time import parse_time, to_epoch
from fleet.api.membership import (
    TOKEN_SECRET,
    IssuedToken,
    JoinPlan,
    MemberEndpoint,
    redacted,
    token_request,
)
from fleet.kube import ApiError, Connection, KubeError, SyncKubeClient

__all__ = ["FIELD_MANAGER", "JoinError", "describe", "dry_run", "endpoint_of", "join"]

FIELD_MANAGER = "fleet-join"
#: How long a long-lived token Secret may take to be filled by the member's token controller.
TOKEN_SECRET_WAIT = 30.0


class JoinError(Exception):
    """`fleet join` (or unjoin) could not do what was asked; the message is one line."""


def describe(obj: Mapping[str, Any]) -> str:
    """`kind/name` (with the namespace, if any), as kubectl prints it."""
    meta = obj.get("metadata") or {}
    where = f" -n {meta['namespace']}" if meta.get("namespace") else ""
    return f"{str(obj.get('kind')).lower()}/{meta.get('name')}{where}"


def one_line(text: str) -> str:
    return " ".join(text.split())


def endpoint_of(connection: Connection) -> MemberEndpoint:
    """The member's server and CA as the user's kubeconfig reaches it (the CA read from the
    kubeconfig's data or file, never fetched from the server), with the TLS server name and
    proxy the connection uses (fleet.kube reads them, and refuses a proxy it cannot speak)."""
    ca = connection.tls.ca.data if connection.tls.ca is not None else None
    return MemberEndpoint(
        server=connection.server,
        ca_data=base64.b64encode(ca).decode() if ca else None,
        tls_server_name=connection.tls_server_name,
        proxy_url=connection.proxy,
    )


@dataclasses.dataclass
class _Written:
    client: SyncKubeClient
    obj: Mapping[str, Any]


class _Run:
    """The writes of one run, to roll back on failure."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.created: list[_Written] = []

    def apply(self, client: SyncKubeClient, side: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        existed = (
            client.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
            is not None
        )
        client.apply(obj, field_manager=FIELD_MANAGER)
        if not existed:
            self.created.append(_Written(client, obj))
        self.say(f"{side}: {describe(obj)} {'configured' if existed else 'created'}")

    def roll_back(self) -> list[str]:
        """Delete what this run created, newest first; what could not be deleted."""
        left = []
        for written in reversed(self.created):
            meta = written.obj.get("metadata") or {}
            try:
                written.client.delete(
                    written.obj["apiVersion"],
                    written.obj["kind"],
                    meta["name"],
                    meta.get("namespace"),
                )
            except KubeError:
                left.append(f"{describe(written.obj)} in {written.client.name}")
        self.created = []
        return left


def _bound_token(member: SyncKubeClient, plan: JoinPlan, now: Callable[[], float]) -> IssuedToken:
    issued = now()
    answer = member.create_subresource(
        "v1",
        "ServiceAccount",
        plan.service_account,
        "token",
        token_request(plan.token_seconds),
        plan.namespace,
    )
    status = answer.get("status") or {}
    expires = status.get("expirationTimestamp")
    return IssuedToken(
        token=str(status.get("token") or ""),
        issued=issued,
        expires=to_epoch(parse_time(expires)) if expires else issued + plan.token_seconds,
    )


def _secret_token(
    member: SyncKubeClient, plan: JoinPlan, sleep: Callable[[float], None]
) -> IssuedToken:
    deadline = time.monotonic() + TOKEN_SECRET_WAIT
    while True:
        secret = member.get("v1", "Secret", TOKEN_SECRET, plan.namespace) or {}
        token = (secret.get("data") or {}).get("token")
        if token:
            return IssuedToken(base64.b64decode(token).decode())
        if time.monotonic() > deadline:
            raise JoinError(
                f"secret/{TOKEN_SECRET} -n {plan.namespace} in {member.name} got no token within "
                f"{TOKEN_SECRET_WAIT:.0f}s: is the member's token controller running? "
                "(or use --token-type bound)"
            )
        sleep(0.5)


def join(
    fleet: SyncKubeClient,
    member: SyncKubeClient,
    plan: JoinPlan,
    *,
    say: Callable[[str], None] = print,
    now: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> IssuedToken:
    """Write `plan` (member side, a token, fleet side); JoinError, with everything this run
    created deleted again, when a side refuses."""
    run = _Run(say)
    side = f"member {plan.name}"
    try:
        for obj in plan.member:
            run.apply(member, side, obj)
        if plan.token_type == "bound":
            token = _bound_token(member, plan, now)
        else:
            token = _secret_token(member, plan, sleep)
        if not token.token:
            raise JoinError(f"{member.name} issued an empty token for {plan.service_account_ref}")
        side = "fleet"
        for obj in plan.fleet_objects(token):
            run.apply(fleet, side, obj)
    except (KubeError, JoinError) as e:
        left = run.roll_back()
        undone = (
            f"; could not delete {', '.join(left)}"
            if left
            else "; nothing this run created was left behind"
        )
        refused = f"the {side} refused: {e}" if isinstance(e, ApiError) else str(e)
        raise JoinError(one_line(f"{plan.name}: {refused}{undone}")) from None
    if token.expires is not None:
        hours = (token.expires - (token.issued or now())) / 3600
        say(f"token: bound, expires in {hours:.1f} h, renewed by the controller")
    else:
        say("token: long-lived (service-account-token Secret), not renewed")
    return token


def dry_run(plan: JoinPlan) -> str:
    """Every object `join` would write, on either side, as YAML documents (token redacted)."""
    placeholder = IssuedToken("<redacted>", issued=None, expires=None)
    docs = [f"# member {plan.name}\n" + yaml.safe_dump(obj, sort_keys=False) for obj in plan.member]
    request = (
        f"# member {plan.name}: POST serviceaccounts/{plan.service_account}/token "
        f"-n {plan.namespace}\n"
        + yaml.safe_dump(token_request(plan.token_seconds), sort_keys=False)
        if plan.token_type == "bound"
        else f"# member {plan.name}: the token is read from secret/{TOKEN_SECRET}\n"
    )
    docs.append(request)
    docs += [
        "# fleet\n" + yaml.safe_dump(redacted(obj), sort_keys=False)
        for obj in plan.fleet_objects(placeholder)
    ]
    header = (
        f"# fleet join {plan.name} --dry-run: nothing was sent; a {plan.token_type} token "
        "(redacted below)\n"
    )
    return header + "---\n".join(docs)
