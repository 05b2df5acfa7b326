"""`fleet join NAME`: make fleet's own identity in a member, with the user's credentials, once.

The plan (fleet.api.membership) is written member side first, then a token of fleet's
ServiceAccount is requested, then the fleet side (kubeconfig Secret, MemberCluster). The fleet
side waits until the member's API server applies the admission policies just written there
(fleet.join.in_force), for the controller acts through a new MemberCluster at once: the guard,
without which fleet's token acts with RBAC alone, proven with that token itself; on a member
that gang-schedules with Kubernetes' own PodGroup, the scheduling-group policy, without which
pods join no gang. Every write is a server-side apply, so running it again updates in place
and changes nothing that is already right (the token is issued anew: re-running join also
rotates it). When the member or the fleet refuses a write, what this run created is deleted
again, newest first, and the error names what was refused: nothing half-made stays behind.
Objects that were there before the run are left as they were found or updated, never deleted.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import yaml

from fleet.api import constants as c
from fleet.api._time import parse_time, to_epoch
from fleet.api.access import (
    RENEWER_ROLE,
    RENEWER_SERVICE_ACCOUNT,
    SERVICE_ACCOUNT,
    VIEWER_SECRETS_ROLE,
    VIEWER_SERVICE_ACCOUNT,
    member_cluster_role,
    viewer_cluster_role,
    viewer_nodes_role,
)
from fleet.api.guard import ADMISSION_API_VERSION, admission_policy_name, token_policy_name
from fleet.api.membership import (
    KUBECONFIG_KEY,
    REDACTED,
    RENEWER_TOKEN_SECRET,
    TOKEN_SECRET,
    VIEWER_TOKEN_SECRET,
    IssuedToken,
    JoinPlan,
    MemberEndpoint,
    cluster_id_of,
    identity_of,
    redacted,
    token_request,
)
from fleet.api.schedulinggroup import MUTATING_API_VERSION, scheduling_group_name
from fleet.controller.members.connection import GANG_SCHEDULER_KINDS, gang_scheduler_of
from fleet.join.errors import JoinError
from fleet.join.in_force import (
    IN_FORCE_WAIT,
    PROBE_INTERVAL,
    wait_guard_in_force,
    wait_scheduling_group_in_force,
)
from fleet.join.viewer import grant_viewer_secret, viewer_secrets_role, viewer_token
from fleet.kube import ApiError, Connection, KubeError, NotFound, SyncKubeClient

__all__ = [
    "FIELD_MANAGER",
    "JoinError",
    "Previous",
    "describe",
    "dry_run",
    "endpoint_of",
    "holder_of",
    "identity_objects",
    "join",
    "made_by",
    "previous_join",
    "request_token",
    "secret_token",
]

MEMBER_CLUSTER = (c.FLEET_API_VERSION, "MemberCluster")

FIELD_MANAGER = "fleet-join"
#: How long a long-lived token Secret may take to be filled by the member's token controller.
TOKEN_SECRET_WAIT = 30.0
#: The Role (and RoleBinding) of joins before the renewer, letting the dispatch identity request
#: its own tokens: deleted by a re-join (`_forget_previous`).
OLD_TOKEN_ROLE = "fleet-token"
_RBAC = "rbac.authorization.k8s.io/v1"


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


def request_token(
    member: SyncKubeClient,
    plan: JoinPlan,
    account: str,
    seconds: int,
    now: Callable[[], float],
    sleep: Callable[[float], None],
) -> IssuedToken:
    """A bound token of `account` in fleet's namespace of the member, lasting `seconds`,
    requested with the user's credentials. A refusal by the token policy
    (fleet.api.guard.token_policy, the dispatch identity's only) just written with a new lifetime
    is asked again while the API server has not loaded it yet (a re-join with a longer
    --token-expiration), for IN_FORCE_WAIT at most."""
    waited = 0.0
    while True:
        issued = now()
        try:
            answer = member.create_subresource(
                "v1", "ServiceAccount", account, "token", token_request(seconds), plan.namespace
            )
            break
        except ApiError as e:
            loading = plan.guarded and token_policy_name(plan.namespace) in e.message
            if not loading or waited >= IN_FORCE_WAIT:
                raise
        sleep(PROBE_INTERVAL)
        waited += PROBE_INTERVAL
    status = answer.get("status") or {}
    expires = status.get("expirationTimestamp")
    return IssuedToken(
        token=str(status.get("token") or ""),
        issued=issued,
        expires=to_epoch(parse_time(expires)) if expires else issued + seconds,
    )


def _bound_token(
    member: SyncKubeClient,
    plan: JoinPlan,
    now: Callable[[], float],
    sleep: Callable[[float], None],
) -> IssuedToken:
    """A token of the dispatch identity, lasting what join was asked for."""
    return request_token(member, plan, plan.service_account, plan.token_seconds, now, sleep)


def secret_token(
    member: SyncKubeClient,
    plan: JoinPlan,
    sleep: Callable[[float], None],
    name: str = TOKEN_SECRET,
) -> IssuedToken:
    """The token the member's token controller filled into the service-account-token Secret
    `name` of fleet's namespace there."""
    deadline = time.monotonic() + TOKEN_SECRET_WAIT
    while True:
        secret = member.get("v1", "Secret", name, plan.namespace) or {}
        token = (secret.get("data") or {}).get("token")
        if token:
            return IssuedToken(base64.b64decode(token).decode())
        if time.monotonic() > deadline:
            raise JoinError(
                f"secret/{name} -n {plan.namespace} in {member.name} got no token within "
                f"{TOKEN_SECRET_WAIT:.0f}s: is the member's token controller running?"
                + (" (or use --token-type bound)" if name == TOKEN_SECRET else "")
            )
        sleep(0.5)


def _rotate(member: SyncKubeClient, plan: JoinPlan, say: Callable[[str], None]) -> None:
    """`fleet join --rotate`: every token issued so far is made worthless by deleting the
    ServiceAccounts they belong to (and their token Secrets) before the plan makes them again
    with new UIDs: a bound token names its ServiceAccount's UID, a Secret's token its Secret.
    The viewer's too: join issues it a new token anyway, and the RoleBindings the controller made
    for it name it, not its UID, so they hold for the new one.
    Only this fleet's are deleted (`_check_member_side` has refused another fleet's)."""
    for kind, name in (
        ("Secret", TOKEN_SECRET),
        ("Secret", RENEWER_TOKEN_SECRET),
        ("Secret", VIEWER_TOKEN_SECRET),
        ("ServiceAccount", SERVICE_ACCOUNT),
        ("ServiceAccount", RENEWER_SERVICE_ACCOUNT),
        ("ServiceAccount", VIEWER_SERVICE_ACCOUNT),
    ):
        found = member.get("v1", kind, name, plan.namespace)
        if found is None or not made_by(found, plan.fleet_id):
            continue
        member.delete("v1", kind, name, plan.namespace)
        say(f"member {plan.name}: {kind.lower()}/{name} -n {plan.namespace} deleted (--rotate)")


@dataclasses.dataclass(frozen=True)
class Previous:
    """What an earlier `fleet join` of the same name left: the MemberCluster, its Secret, the
    cluster it reached and the identity it made there."""

    member: Mapping[str, Any]
    secret: Mapping[str, Any] | None
    cluster_id: str | None
    server: str | None
    identity: tuple[str, str] | None
    token_type: str | None

    def describe(self) -> str:
        name = self.member["metadata"]["name"]
        where = f"server {self.server}" if self.server else "an unknown server"
        cluster = f"cluster {self.cluster_id}" if self.cluster_id else "a cluster not recorded"
        return f"membercluster/{name} is {cluster} at {where}"


def previous_join(fleet: SyncKubeClient, name: str) -> Previous | None:
    """The MemberCluster `name` as an earlier join left it (None: there is none)."""
    existing = fleet.get(*MEMBER_CLUSTER, name)
    if existing is None:
        return None
    spec = existing.get("spec") or {}
    ref = spec.get("kubeconfigSecretRef") or {}
    secret = None
    if ref.get("name") and ref.get("namespace"):
        secret = fleet.get("v1", "Secret", ref["name"], ref["namespace"])
    server = None
    if secret is not None:
        raw = (secret.get("data") or {}).get(ref.get("key") or KUBECONFIG_KEY)
        try:
            config = yaml.safe_load(base64.b64decode(raw)) if raw else None
            server = (config or {})["clusters"][0]["cluster"]["server"]
        except (ValueError, KeyError, IndexError, TypeError, yaml.YAMLError):
            server = None
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    return Previous(
        member=existing,
        secret=secret,
        cluster_id=spec.get("id") or cluster_id_of(secret),
        server=server,
        identity=identity_of(secret) if secret is not None else None,
        token_type=annotations.get(c.TOKEN_TYPE_ANNOTATION),
    )


def same_cluster(previous: Previous, cluster_id: str, server: str) -> bool:
    """Whether `previous` was joined for the cluster `cluster_id` (by its recorded id; for a join
    that recorded none, by its server)."""
    if previous.cluster_id:
        return bool(previous.cluster_id == cluster_id)
    return previous.server is None or previous.server == server


def made_by(obj: Mapping[str, Any] | None, fleet_id: str) -> bool:
    """Whether `obj` (a member object `fleet join` makes) belongs to the fleet `fleet_id`: it
    carries that fleet's id, or no fleet id at all (made by a join before ids were recorded)."""
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    if labels.get(c.JOINED_BY_LABEL) != c.JOINED_BY:
        return False
    return bool(labels.get(c.FLEET_ID_LABEL, fleet_id) == fleet_id)


def identity_objects(namespace: str) -> list[tuple[str, str, str, str | None]]:
    """(apiVersion, kind, name, namespace) of what join makes in a member for the identity in
    `namespace`, in the order it is removed (the reverse of the order it is made)."""
    role = member_cluster_role(namespace)
    viewer, viewer_cluster = viewer_cluster_role(namespace), viewer_nodes_role(namespace)
    guard = admission_policy_name(namespace)
    tokens = token_policy_name(namespace)
    groups = scheduling_group_name(namespace)
    return [
        (_RBAC, "ClusterRoleBinding", role, None),
        (_RBAC, "ClusterRoleBinding", viewer, None),
        (_RBAC, "ClusterRoleBinding", viewer_cluster, None),
        (_RBAC, "ClusterRole", role, None),
        (_RBAC, "ClusterRole", viewer, None),
        (_RBAC, "ClusterRole", viewer_cluster, None),
        (MUTATING_API_VERSION, "MutatingAdmissionPolicyBinding", groups, None),
        (MUTATING_API_VERSION, "MutatingAdmissionPolicy", groups, None),
        (ADMISSION_API_VERSION, "ValidatingAdmissionPolicyBinding", tokens, None),
        (ADMISSION_API_VERSION, "ValidatingAdmissionPolicy", tokens, None),
        (ADMISSION_API_VERSION, "ValidatingAdmissionPolicyBinding", guard, None),
        (ADMISSION_API_VERSION, "ValidatingAdmissionPolicy", guard, None),
        ("v1", "Namespace", namespace, None),
    ]


def holder_of(fleet: SyncKubeClient, cluster_id: str, name: str) -> str | None:
    """The MemberCluster other than `name` that is the cluster `cluster_id` (its spec.id, as
    join records it), if any."""
    if not cluster_id:
        return None
    for item in fleet.list(*MEMBER_CLUSTER).get("items") or []:
        meta = item.get("metadata") or {}
        if meta.get("name") == name or meta.get("deletionTimestamp"):
            continue
        if str((item.get("spec") or {}).get("id") or "") == cluster_id:
            return str(meta.get("name"))
    return None


def _check_identity(fleet: SyncKubeClient, plan: JoinPlan) -> None:
    """One cluster, one registration: a cluster another MemberCluster already is is refused
    (its capacity would count twice, a failover from one name would land in the same cluster
    under the other, and unjoining one would delete the identity the other uses). Re-joining
    the same name stays allowed: that is how its token is issued anew."""
    other = holder_of(fleet, plan.cluster_id, plan.name)
    if other is not None:
        raise JoinError(
            f"{plan.name}: this kubeconfig reaches cluster {plan.cluster_id} at server "
            f"{plan.endpoint.server}, which is already joined as membercluster/{other} "
            f"(spec.id): a cluster is joined once. Unjoin it first (fleet unjoin {other}), or "
            f"re-join it under that name (fleet join {other})"
        )


def _check_member_side(member: SyncKubeClient, plan: JoinPlan) -> None:
    """Another fleet's identity in the same member namespace is never taken over: each fleet
    keeps its own, so one fleet's unjoin never deletes the other's. A namespace to open
    (`--namespaces`) must exist: join opens namespaces, it does not make them (one fleet
    creates is fleet's already)."""
    missing = [n for n in plan.open_namespaces if member.get("v1", "Namespace", n) is None]
    if missing:
        raise JoinError(
            f"{plan.name}: --namespaces {','.join(missing)}: no such namespace in "
            f"{member.name}; create it first (kubectl create namespace), or leave it out: "
            "fleet creates a job's namespace it does not find, and may dispatch there"
        )
    account = member.get("v1", "ServiceAccount", SERVICE_ACCOUNT, plan.namespace)
    if account is not None and not made_by(account, plan.fleet_id):
        labels = (account.get("metadata") or {}).get("labels") or {}
        owner = labels.get(c.FLEET_ID_LABEL) or "something other than fleet join"
        raise JoinError(
            f"{plan.name}: serviceaccount/{SERVICE_ACCOUNT} -n {plan.namespace} in "
            f"{member.name} belongs to {owner}, not to this fleet ({plan.fleet_id}); join with "
            "another --member-namespace"
        )


def _check_previous(
    fleet: SyncKubeClient,
    plan: JoinPlan,
    previous: Previous | None,
    *,
    force: bool,
    say: Callable[[str], None],
    sleep: Callable[[float], None],
    timeout: float,
) -> bool:
    """One registration, one cluster: a join under an existing name that reaches another
    cluster is refused (the copies fleet keeps there would be forgotten and run again in the new
    one), unless `force`, which first moves the member's jobs off as `fleet unjoin --move`."""
    if previous is None or same_cluster(previous, plan.cluster_id, plan.endpoint.server):
        return False
    this = f"this kubeconfig reaches cluster {plan.cluster_id} at server {plan.endpoint.server}"
    if not force:
        raise JoinError(
            f"{plan.name}: {previous.describe()}; {this}. Refusing to re-point it: its jobs would "
            "run in both. Unjoin it first, or re-join with --force to move its jobs off first"
        )
    from fleet.join.unjoin import move_jobs

    say(f"fleet: {previous.describe()}; {this}: --force moves its jobs off first")
    move_jobs(fleet, previous.member, timeout, say, sleep)
    return True


def _forget_previous(
    fleet: SyncKubeClient,
    member: SyncKubeClient,
    plan: JoinPlan,
    previous: Previous | None,
    say: Callable[[str], None],
) -> None:
    """What the previous join of this cluster left that this one does not use: the old
    namespace's identity (a new --member-namespace), the long-lived token Secret (a switch to
    bound tokens), the renewer (a switch to a long-lived token), the Role that let the dispatch
    identity request its own tokens (a join before the renewer). Only objects of this fleet's
    are deleted."""
    if previous is None or previous.identity is None:
        return
    if not same_cluster(previous, plan.cluster_id, plan.endpoint.server):
        return
    old_namespace, _ = previous.identity
    stale: list[tuple[str, str, str, str | None]] = []
    if old_namespace != plan.namespace:
        stale = identity_objects(old_namespace)
    else:
        stale = [
            (_RBAC, "RoleBinding", OLD_TOKEN_ROLE, plan.namespace),
            (_RBAC, "Role", OLD_TOKEN_ROLE, plan.namespace),
        ]
        if previous.token_type == c.TOKEN_TYPE_SECRET and plan.token_type != "secret":
            stale.append(("v1", "Secret", TOKEN_SECRET, plan.namespace))
            stale.append(("v1", "Secret", VIEWER_TOKEN_SECRET, plan.namespace))
        if not plan.renews:
            stale += [
                (_RBAC, "RoleBinding", RENEWER_ROLE, plan.namespace),
                (_RBAC, "Role", RENEWER_ROLE, plan.namespace),
                ("v1", "Secret", RENEWER_TOKEN_SECRET, plan.namespace),
                ("v1", "ServiceAccount", RENEWER_SERVICE_ACCOUNT, plan.namespace),
            ]
    if not plan.renews:
        # The fleet side of a renewer no longer used.
        old = fleet.get("v1", "Secret", plan.renewer_secret_name, plan.secrets_namespace)
        if old is not None and made_by(old, plan.fleet_id):
            fleet.delete("v1", "Secret", plan.renewer_secret_name, plan.secrets_namespace)
            say(f"fleet: old secret/{plan.renewer_secret_name} deleted (no longer used)")
    for api_version, kind, name, namespace in stale:
        try:
            found = member.get(api_version, kind, name, namespace)
            if found is None or not made_by(found, plan.fleet_id):
                continue
            member.delete(api_version, kind, name, namespace)
        except NotFound:
            continue  # the member does not serve that kind (an older Kubernetes): none of it
        except KubeError as e:
            say(f"member {plan.name}: could not delete the old {kind.lower()}/{name}: {e}")
            continue
        say(f"member {plan.name}: old {kind.lower()}/{name} deleted (no longer used)")


def _untaint(fleet: SyncKubeClient, name: str) -> None:
    """A forced re-join's member takes jobs again: the unjoining taint goes."""
    existing = fleet.get(*MEMBER_CLUSTER, name) or {}
    taints = list((existing.get("spec") or {}).get("taints") or [])
    kept = [t for t in taints if t.get("key") != c.UNJOINING_TAINT_KEY]
    if kept != taints:
        fleet.patch(*MEMBER_CLUSTER, name, {"spec": {"taints": kept or None}})


def join(
    fleet: SyncKubeClient,
    member: SyncKubeClient,
    plan: JoinPlan,
    *,
    say: Callable[[str], None] = print,
    now: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    force: bool = False,
    rotate: bool = False,
    timeout: float = 300.0,
    token_transport: httpx.BaseTransport | None = None,
) -> IssuedToken:
    """Write `plan` (member side, a token, fleet side); JoinError, with everything this run
    created deleted again, when a side refuses. A name already joined to another cluster is
    refused unless `force` (its jobs are moved off first). The fleet side is written only once
    the admission policies just written in the member are in force there: on a guarded member,
    the guard, proven with the new token itself (`wait_guard_in_force`; `token_transport`
    replaces the network of that token's client, in tests); on a native-gang member, the
    scheduling-group policy (`wait_scheduling_group_in_force`). A cluster another
    MemberCluster already is (its spec.id) is refused before anything is written. `rotate`
    first deletes fleet's ServiceAccounts in the member (`_rotate`): every token issued before
    is refused from then on."""
    _check_identity(fleet, plan)
    previous = previous_join(fleet, plan.name)
    moved = _check_previous(
        fleet, plan, previous, force=force, say=say, sleep=sleep, timeout=timeout
    )
    _check_member_side(member, plan)
    if not plan.guarded:
        say(
            f"warning: {member.name} serves no ValidatingAdmissionPolicy (Kubernetes < 1.30): "
            "fleet's identity there is limited by RBAC alone, so its token can read Secrets "
            "through patch and write objects fleet did not create (docs/security.md); the "
            f"MemberCluster's {c.CONDITION_GUARDED} condition says so"
        )
    run = _Run(say)
    side = f"member {plan.name}"
    try:
        if rotate:
            _rotate(member, plan, say)
        for obj in plan.member:
            run.apply(member, side, obj)
        if plan.native_gang:
            # Before the MemberCluster exists: the controller dispatches to it at once.
            wait_scheduling_group_in_force(member, plan, say, sleep)
        if plan.token_type == "bound":
            token = _bound_token(member, plan, now, sleep)
        else:
            token = secret_token(member, plan, sleep)
        if not token.token:
            raise JoinError(f"{member.name} issued an empty token for {plan.service_account_ref}")
        renewer = (
            secret_token(member, plan, sleep, RENEWER_TOKEN_SECRET).token if plan.renews else None
        )
        if plan.guarded:
            # Before the fleet side too: the controller acts with the token at once.
            wait_guard_in_force(member, plan, token.token, say, sleep, token_transport)
        viewer = viewer_token(member, plan, now, sleep)
        if not viewer.token:
            raise JoinError(f"{member.name} issued an empty token for {plan.viewer_ref}")
        side = "fleet"
        for obj in plan.fleet_objects(token, renewer):
            run.apply(fleet, side, obj)
        run.apply(fleet, side, plan.viewer_secret(viewer))
        if grant_viewer_secret(fleet, plan.secrets_namespace, plan.name):
            run.created.append(_Written(fleet, viewer_secrets_role(plan.secrets_namespace)))
        say(
            f"fleet: role/{VIEWER_SECRETS_ROLE} -n {plan.secrets_namespace} lets get "
            f"secret/{plan.viewer_secret_name} (bind kubectl amc users to it)"
        )
        if moved:
            _untaint(fleet, plan.name)
    except (KubeError, JoinError) as e:
        left = run.roll_back()
        undone = (
            f"; could not delete {', '.join(left)}"
            if left
            else "; nothing this run created was left behind"
        )
        refused = f"the {side} refused: {e}" if isinstance(e, ApiError) else str(e)
        raise JoinError(one_line(f"{plan.name}: {refused}{undone}")) from None
    _forget_previous(fleet, member, plan, previous, say)
    _record_gang_scheduler(fleet, member, plan.name, say)
    if token.expires is not None:
        hours = (token.expires - (token.issued or now())) / 3600
        say(
            f"token: bound, expires in {hours:.1f} h, renewed by the controller as "
            f"{plan.namespace}/{RENEWER_SERVICE_ACCOUNT}"
        )
    else:
        say("token: long-lived (service-account-token Secret), not renewed")
    if viewer.expires is not None:
        days = (viewer.expires - (viewer.issued or now())) / 86400
        say(
            f"viewer token: read only, expires in {days:.1f} d, not renewed "
            f"(`fleet join {plan.name}` again issues a new one)"
        )
    return token


def detect_gang_scheduler(member: SyncKubeClient) -> str | None:
    """The member's gang scheduler by the controller's rule (`gang_scheduler_of`), from the
    kinds it serves."""
    served = set()
    for api_version, kind, _ in GANG_SCHEDULER_KINDS:
        try:
            member.resource(api_version, kind)
        except ApiError:
            continue
        served.add((api_version, kind))
        break  # the most specific one served decides
    return gang_scheduler_of(served)


def _record_gang_scheduler(
    fleet: SyncKubeClient, member: SyncKubeClient, name: str, say: Callable[[str], None]
) -> None:
    """Write the detected gang scheduler on the new MemberCluster's status, so its GANG column
    is right from the first `kubectl get membercluster` (the controller detects it again on
    every connection, and a spec.gangScheduler still wins). Best effort: the join stands
    without it."""
    try:
        found = detect_gang_scheduler(member)
        if found is not None:
            fleet.patch(
                *MEMBER_CLUSTER, name, {"status": {"gangScheduler": found}}, subresource="status"
            )
    except KubeError as e:
        say(f"gang scheduler: not detected yet ({one_line(str(e))}); the controller will")
        return
    say(f"gang scheduler: {found or 'none detected'}")


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
    if plan.token_type == "bound":
        docs.append(
            f"# member {plan.name}: POST serviceaccounts/{VIEWER_SERVICE_ACCOUNT}/token "
            f"-n {plan.namespace}\n"
            + yaml.safe_dump(token_request(plan.viewer_token_seconds), sort_keys=False)
        )
    docs += [
        "# fleet\n" + yaml.safe_dump(redacted(obj), sort_keys=False)
        for obj in (
            *plan.fleet_objects(placeholder, REDACTED if plan.renews else None),
            plan.viewer_secret(placeholder),
        )
    ]
    docs.append(
        f"# fleet: role/{VIEWER_SECRETS_ROLE} -n {plan.secrets_namespace} also names "
        f"secret/{plan.viewer_secret_name}\n"
    )
    header = (
        f"# fleet join {plan.name} --dry-run: nothing was sent; a {plan.token_type} token "
        "(redacted below)\n"
    )
    return header + "---\n".join(docs)
