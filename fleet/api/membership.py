"""What joining a member makes, on either side, as plain objects (no I/O).

In the member: a namespace, fleet's dispatch ServiceAccount, the ClusterRole of fleet.api.access
and its binding, the admission policies (the guard, the token cap), and either (bound tokens)
the renewer: a second ServiceAccount whose Role lets it request tokens of the dispatch one, and
its long-lived token Secret; or (the `secret` token type) a long-lived service-account-token
Secret of the dispatch ServiceAccount. On the fleet: the kubeconfig Secret, which holds the
member's server, its CA and a token of the dispatch ServiceAccount (never the credentials of
whoever ran `fleet join`), the renewer's token in a Secret of its own (read by the controller
alone), and the MemberCluster.

`fleet join` (fleet.join) sends these; the controller's token renewal
(controller/members/renewal) rewrites the Secret through `renewed_secret`, so the kubeconfig
shape is written in one place.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
from collections.abc import Mapping
from typing import Any, Final, Literal

import yaml

from fleet.api import constants as c
from fleet.api._time import format_time
from fleet.api.access import (
    DEFAULT_MEMBER_NAMESPACE,
    FLEET_SECRETS_NAMESPACE,
    RENEWER_ROLE,
    RENEWER_SERVICE_ACCOUNT,
    SERVICE_ACCOUNT,
    VIEWER_SERVICE_ACCOUNT,
    as_policy_rules,
    member_cluster_role,
    member_rules,
    renewer_rules,
    viewer_cluster_role,
    viewer_cluster_rules,
    viewer_nodes_role,
    viewer_rules,
    viewer_secret_name,
)
from fleet.api.guard import PROTECTED_NAMESPACES, admission_objects, open_label, token_objects
from fleet.api.schedulinggroup import scheduling_group_name, scheduling_group_objects

__all__ = [
    "DEFAULT_TOKEN_SECONDS",
    "DEFAULT_VIEWER_TOKEN_SECONDS",
    "KUBECONFIG_KEY",
    "REDACTED",
    "RENEWER_TOKEN_SECRET",
    "TOKEN_SECRET",
    "VIEWER_TOKEN_SECRET",
    "IssuedToken",
    "JoinPlan",
    "MemberEndpoint",
    "TokenType",
    "cluster_id_of",
    "default_fleet_id",
    "identity_of",
    "kubeconfig_secret",
    "member_kubeconfig",
    "plan_join",
    "redacted",
    "renewed_secret",
    "renewer_secret",
    "token_request",
    "viewer_binding",
]

TokenType = Literal["bound", "secret"]

#: A bound token lives 24 hours by default: a leaked one is useful for a day at most, and the
#: controller renews it at 80% of that (fleet.core.tokens), so it may be down for almost five
#: hours before a member needs `fleet join` again. An API server may cap it lower
#: (--service-account-max-token-expiration); the expiry it answers with is the one used.
DEFAULT_TOKEN_SECONDS: Final = 24 * 3600
#: The people's read-only token (the viewer's) lives 30 days by default and is not renewed:
#: renewing it would need a credential that may mint it, and the dispatch token must not
#: (docs/security.md). `fleet join NAME` again issues a new one.
DEFAULT_VIEWER_TOKEN_SECONDS: Final = 30 * 24 * 3600
#: TokenRequest's lower bound on expirationSeconds.
MIN_TOKEN_SECONDS: Final = 600
#: The long-lived token Secret of the `secret` token type, in fleet's namespace in the member.
TOKEN_SECRET: Final = "fleet-token"
#: The viewer's long-lived token Secret (`secret` token type), beside it.
VIEWER_TOKEN_SECRET: Final = "fleet-viewer-token"
#: The renewer's long-lived token Secret (bound tokens), in fleet's namespace in the member.
RENEWER_TOKEN_SECRET: Final = "fleet-renewer-token"
KUBECONFIG_KEY: Final = "kubeconfig"
#: What a dry run prints instead of a token.
REDACTED: Final = "<redacted>"

_RBAC_GROUP: Final = "rbac.authorization.k8s.io"
_RBAC: Final = f"{_RBAC_GROUP}/v1"


@dataclasses.dataclass(frozen=True)
class MemberEndpoint:
    """How the controller reaches the member: its server, the CA that signs it (base64 PEM, as
    the user's kubeconfig had it; None: the system's CAs) and, if set, the TLS server name and
    the proxy, as kubectl reaches it with the user's kubeconfig."""

    server: str
    ca_data: str | None = None
    tls_server_name: str | None = None
    proxy_url: str | None = None


@dataclasses.dataclass(frozen=True)
class IssuedToken:
    """A token of fleet's ServiceAccount; `issued`/`expires` are epoch seconds (None: a
    long-lived token Secret's, which does not expire)."""

    token: str
    issued: float | None = None
    expires: float | None = None


@dataclasses.dataclass(frozen=True)
class JoinPlan:
    """Everything `fleet join NAME` writes, in the order it is written (and the reverse order
    of its rollback). The fleet-side Secret is made once the token is known (`fleet_objects`)."""

    name: str
    namespace: str
    service_account: str
    token_type: TokenType
    token_seconds: int
    member: tuple[dict[str, Any], ...]
    endpoint: MemberEndpoint
    labels: Mapping[str, str]
    secrets_namespace: str = FLEET_SECRETS_NAMESPACE
    #: The fleet's id: the managed-by mark of what it writes in members, and the FLEET_ID_LABEL
    #: of what join writes there.
    fleet_id: str = ""
    #: The member's cluster id (its kube-system namespace's UID), recorded on both sides.
    cluster_id: str = ""
    #: Whether `member` holds the admission policy (fleet.api.guard): False on a member that
    #: does not serve ValidatingAdmissionPolicy (Kubernetes < 1.30).
    guarded: bool = True
    #: Whether `member` holds the scheduling-group policy (fleet.api.schedulinggroup): the
    #: member gang-schedules with Kubernetes' own PodGroup.
    native_gang: bool = False
    #: The lifetime asked for the viewer's token (people's, read only; not renewed).
    viewer_token_seconds: int = DEFAULT_VIEWER_TOKEN_SECONDS
    #: The member namespaces the joining user opens to this fleet (`--namespaces`): labelled
    #: `open-to.fleet.dev/<fleet id>: "true"` with the user's credentials, last.
    open_namespaces: tuple[str, ...] = ()

    @property
    def secret_name(self) -> str:
        return f"{self.name}-kubeconfig"

    @property
    def viewer_secret_name(self) -> str:
        return viewer_secret_name(self.name)

    @property
    def viewer_ref(self) -> str:
        return f"{self.namespace}/{VIEWER_SERVICE_ACCOUNT}"

    def viewer_secret(self, token: IssuedToken) -> dict[str, Any]:
        """The fleet-side Secret holding the people's kubeconfig of this member: the one
        `kubectl amc` and `fleet dashboard` read (and users need RBAC on), never renewed."""
        config = member_kubeconfig(self.name, self.endpoint, self.viewer_ref, token.token)
        more = {c.CLUSTER_ID_ANNOTATION: self.cluster_id} if self.cluster_id else {}
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": self.viewer_secret_name,
                "namespace": self.secrets_namespace,
                "labels": {**_labels(), c.VIEWER_ANNOTATION: "true"},
                "annotations": {
                    c.SERVICE_ACCOUNT_ANNOTATION: self.viewer_ref,
                    **more,
                    **_token_annotations(token),
                },
            },
            "data": {KUBECONFIG_KEY: base64.b64encode(yaml.safe_dump(config).encode()).decode()},
        }
        return secret

    @property
    def renewer_secret_name(self) -> str:
        return f"{self.name}-renewer"

    @property
    def renews(self) -> bool:
        """Whether the member holds a renewer (bound tokens): its token is stored too."""
        return self.token_type == "bound"

    def fleet_objects(
        self, token: IssuedToken, renewer: str | None = None
    ) -> tuple[dict[str, Any], ...]:
        """The fleet side, in the order written: the namespace, the renewer's Secret (a bound
        token's; `renewer` is its token), the kubeconfig Secret naming it, the MemberCluster."""
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.secrets_namespace},
        }
        secret = kubeconfig_secret(
            self.secret_name,
            self.secrets_namespace,
            self.stored_kubeconfig(token.token),
            token_type=self.token_type,
            service_account=self.service_account_ref,
            token=token,
            cluster_id=self.cluster_id,
            guard=admission_objects(self.namespace, self.fleet_id)[0]["metadata"]["name"]
            if self.guarded
            else "",
            scheduling_group=scheduling_group_name(self.namespace) if self.native_gang else "",
            viewer_role=viewer_cluster_role(self.namespace) if self.guarded else "",
            renewer=self.renewer_secret_name if renewer is not None else "",
            seconds=self.token_seconds if self.token_type == "bound" else None,
        )
        renewers = (
            [
                renewer_secret(
                    self.renewer_secret_name,
                    self.secrets_namespace,
                    renewer,
                    f"{self.namespace}/{RENEWER_SERVICE_ACCOUNT}",
                )
            ]
            if renewer is not None
            else []
        )
        spec: dict[str, Any] = {"id": self.cluster_id} if self.cluster_id else {}
        member = {
            "apiVersion": c.FLEET_API_VERSION,
            "kind": "MemberCluster",
            "metadata": {"name": self.name, "labels": dict(self.labels)},
            "spec": {
                **spec,
                "kubeconfigSecretRef": {
                    "namespace": self.secrets_namespace,
                    "name": self.secret_name,
                    "key": KUBECONFIG_KEY,
                },
            },
        }
        return (namespace, *renewers, secret, member)

    @property
    def service_account_ref(self) -> str:
        return f"{self.namespace}/{self.service_account}"

    def stored_kubeconfig(self, token: str) -> dict[str, Any]:
        """The kubeconfig the fleet keeps for this member, with `token`: what the controller
        connects with, and what `fleet join` proves the guard with before storing it."""
        return member_kubeconfig(self.name, self.endpoint, self.service_account_ref, token)


def _labels(fleet_id: str = "") -> dict[str, str]:
    mark = {c.FLEET_ID_LABEL: fleet_id} if fleet_id else {}
    return {c.JOINED_BY_LABEL: c.JOINED_BY, **mark}


def plan_join(
    name: str,
    endpoint: MemberEndpoint,
    *,
    labels: Mapping[str, str] | None = None,
    namespace: str = DEFAULT_MEMBER_NAMESPACE,
    token_type: TokenType = "bound",
    token_seconds: int = DEFAULT_TOKEN_SECONDS,
    secrets_namespace: str = FLEET_SECRETS_NAMESPACE,
    fleet_id: str = "",
    cluster_id: str = "",
    guarded: bool = True,
    native_gang: bool = False,
    viewer_token_seconds: int = DEFAULT_VIEWER_TOKEN_SECONDS,
    open_namespaces: tuple[str, ...] = (),
) -> JoinPlan:
    """The objects that make fleet's identity in the member named `name`: the admission policy
    (when `guarded`) is written before the ClusterRoleBinding, so the identity never holds its
    rights unguarded. On a member with Kubernetes' own gang scheduling (`native_gang`), the
    policy that joins fleet's pods to their PodGroup too (`fleet.api.schedulinggroup`)."""
    if token_seconds < MIN_TOKEN_SECONDS:
        raise ValueError(
            f"--token-expiration {token_seconds}: TokenRequest issues no token shorter "
            f"than {MIN_TOKEN_SECONDS} seconds"
        )
    if viewer_token_seconds < MIN_TOKEN_SECONDS:
        raise ValueError(
            f"--viewer-token-expiration {viewer_token_seconds}: TokenRequest issues no token "
            f"shorter than {MIN_TOKEN_SECONDS} seconds"
        )
    if name.endswith("-viewer"):
        # Its dispatch Secret, NAME-kubeconfig, would be the viewer Secret of the member named
        # without the suffix, which `kubectl amc` users and the dashboard may read.
        raise ValueError(
            f"{name}: a member name may not end in -viewer (its kubeconfig Secret would be "
            f"{viewer_secret_name(name[: -len('-viewer')])}, the people's Secret of another "
            "member); choose another name"
        )
    closed = [n for n in open_namespaces if n in (*PROTECTED_NAMESPACES, namespace)]
    if closed:
        raise ValueError(
            f"--namespaces {','.join(closed)}: fleet never writes in the system namespaces or "
            "in its own member namespace"
        )
    account = SERVICE_ACCOUNT
    role = member_cluster_role(namespace)
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    meta = {"labels": _labels(fleet_id)}
    guard = list(admission_objects(namespace, fleet_id)) if guarded else []
    # Every TokenRequest for the dispatch identity capped at its lifetime, whoever asks.
    guard += list(token_objects(namespace, fleet_id, token_seconds)) if guarded else []
    groups = list(scheduling_group_objects(namespace, fleet_id)) if native_gang else []
    renewer = token_type == "bound"
    member: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, **meta}},
        _service_account(account, namespace, meta),
        *([_service_account(RENEWER_SERVICE_ACCOUNT, namespace, meta)] if renewer else []),
        *guard,
        *groups,
        {
            "apiVersion": _RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": role, **meta},
            "rules": as_policy_rules(member_rules(namespace, guarded=guarded)),
        },
        {
            "apiVersion": _RBAC,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, **meta},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": subject,
        },
    ]
    member += _viewer_objects(namespace, meta, guarded)
    if renewer:
        member += [
            {
                "apiVersion": _RBAC,
                "kind": "Role",
                "metadata": {"name": RENEWER_ROLE, "namespace": namespace, **meta},
                "rules": as_policy_rules(renewer_rules(account)),
            },
            {
                "apiVersion": _RBAC,
                "kind": "RoleBinding",
                "metadata": {"name": RENEWER_ROLE, "namespace": namespace, **meta},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": RENEWER_ROLE,
                },
                "subjects": [
                    {
                        "kind": "ServiceAccount",
                        "name": RENEWER_SERVICE_ACCOUNT,
                        "namespace": namespace,
                    }
                ],
            },
            _token_secret(RENEWER_TOKEN_SECRET, RENEWER_SERVICE_ACCOUNT, namespace, meta),
        ]
    if token_type == "secret":
        member.append(_token_secret(TOKEN_SECRET, account, namespace, meta))
        member.append(_token_secret(VIEWER_TOKEN_SECRET, VIEWER_SERVICE_ACCOUNT, namespace, meta))
    # Opened last, once the guard that makes the label mean something is there.
    member += [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": opened, "labels": {open_label(fleet_id): "true"}},
        }
        for opened in open_namespaces
    ]
    return JoinPlan(
        name=name,
        namespace=namespace,
        service_account=account,
        token_type=token_type,
        token_seconds=token_seconds,
        member=tuple(member),
        endpoint=endpoint,
        labels=dict(labels or {}),
        secrets_namespace=secrets_namespace,
        fleet_id=fleet_id,
        cluster_id=cluster_id,
        guarded=guarded,
        native_gang=native_gang,
        viewer_token_seconds=viewer_token_seconds,
        open_namespaces=tuple(open_namespaces),
    )


def _cluster_role_binding(name: str, role: str, subject: dict[str, str], meta: Any) -> Any:
    return {
        "apiVersion": _RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, **meta},
        "roleRef": {"apiGroup": _RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }


def _viewer_objects(namespace: str, meta: Mapping[str, Any], guarded: bool) -> list[dict[str, Any]]:
    """The people's read-only identity: its ServiceAccount, the ClusterRole the controller binds
    in each namespace it dispatches to (`viewer_binding`), and its cluster-wide reads (nodes,
    Reservations) bound here. On a member without the guard, nothing could hold the dispatch
    token to binding only this role to only this account, so it may bind nothing, and the
    viewer's role is bound cluster-wide here instead (docs/security.md)."""
    subject = {"kind": "ServiceAccount", "name": VIEWER_SERVICE_ACCOUNT, "namespace": namespace}
    role, cluster = viewer_cluster_role(namespace), viewer_nodes_role(namespace)
    objects: list[dict[str, Any]] = [
        _service_account(VIEWER_SERVICE_ACCOUNT, namespace, meta),
        {
            "apiVersion": _RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": role, **meta},
            "rules": as_policy_rules(viewer_rules()),
        },
        {
            "apiVersion": _RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": cluster, **meta},
            "rules": as_policy_rules(viewer_cluster_rules()),
        },
        _cluster_role_binding(cluster, cluster, subject, meta),
    ]
    if not guarded:
        objects.append(_cluster_role_binding(role, role, subject, meta))
    return objects


def viewer_binding(identity_namespace: str, namespace: str, fleet_id: str) -> dict[str, Any]:
    """The RoleBinding the controller makes in `namespace` of a member the first time it
    dispatches there: the viewer's ClusterRole to the viewer's ServiceAccount of the identity in
    `identity_namespace`, with fleet's mark (the only RoleBinding the guard admits)."""
    role = viewer_cluster_role(identity_namespace)
    return {
        "apiVersion": _RBAC,
        "kind": "RoleBinding",
        "metadata": {
            "name": role,
            "namespace": namespace,
            "labels": {c.MANAGED_BY_LABEL: fleet_id, c.VIEWER_ANNOTATION: "true"},
        },
        "roleRef": {"apiGroup": _RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": VIEWER_SERVICE_ACCOUNT,
                "namespace": identity_namespace,
            }
        ],
    }


def _service_account(name: str, namespace: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, **meta},
    }


def _token_secret(
    name: str, account: str, namespace: str, meta: Mapping[str, Any]
) -> dict[str, Any]:
    """A long-lived service-account-token Secret of `account`, filled by the member's token
    controller."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"kubernetes.io/service-account.name": account},
            **meta,
        },
    }


def token_request(seconds: int) -> dict[str, Any]:
    """A TokenRequest for the API server's own audience, expiring after `seconds`."""
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": int(seconds)},
    }


def member_kubeconfig(
    name: str, endpoint: MemberEndpoint, service_account: str, token: str
) -> dict[str, Any]:
    """The kubeconfig fleet keeps for a member: its server, its CA, one token. Nothing else."""
    cluster: dict[str, Any] = {"server": endpoint.server}
    if endpoint.ca_data:
        cluster["certificate-authority-data"] = endpoint.ca_data
    if endpoint.tls_server_name:
        cluster["tls-server-name"] = endpoint.tls_server_name
    if endpoint.proxy_url:
        cluster["proxy-url"] = endpoint.proxy_url
    user = f"system:serviceaccount:{service_account.replace('/', ':')}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
    }


def _token_annotations(token: IssuedToken) -> dict[str, str]:
    if token.issued is None or token.expires is None:
        return {}
    return {
        c.TOKEN_ISSUED_ANNOTATION: format_time(token.issued),
        c.TOKEN_EXPIRES_ANNOTATION: format_time(token.expires),
    }


def kubeconfig_secret(
    name: str,
    namespace: str,
    kubeconfig: Mapping[str, Any],
    *,
    token_type: TokenType,
    service_account: str,
    token: IssuedToken,
    cluster_id: str = "",
    guard: str = "",
    scheduling_group: str = "",
    viewer_role: str = "",
    renewer: str = "",
    seconds: int | None = None,
) -> dict[str, Any]:
    """The fleet-side Secret holding a member's kubeconfig, annotated with what the controller
    needs to renew its token (the renewer's Secret, `renewer`; empty: none), the cluster the
    token belongs to, the admission policy that guards it there (empty: none) and the
    scheduling-group policy join installed there (empty: none)."""
    more = {c.CLUSTER_ID_ANNOTATION: cluster_id} if cluster_id else {}
    if renewer:
        more[c.RENEWER_SECRET_ANNOTATION] = renewer
    if seconds is not None:
        more[c.TOKEN_SECONDS_ANNOTATION] = str(int(seconds))
    more[c.ADMISSION_POLICY_ANNOTATION] = guard or c.NO_ADMISSION_POLICY
    if scheduling_group:
        more[c.SCHEDULING_GROUP_POLICY_ANNOTATION] = scheduling_group
    if viewer_role:
        more[c.VIEWER_ROLE_ANNOTATION] = viewer_role
    annotations = {
        c.TOKEN_TYPE_ANNOTATION: token_type,
        c.SERVICE_ACCOUNT_ANNOTATION: service_account,
        **more,
        **_token_annotations(token),
    }
    return _fleet_secret(
        name, namespace, annotations, KUBECONFIG_KEY, yaml.safe_dump(dict(kubeconfig))
    )


def renewer_secret(name: str, namespace: str, token: str, service_account: str) -> dict[str, Any]:
    """The fleet-side Secret holding the renewer's token (`service_account`, namespace/name in
    the member): read by the controller alone, when it renews the dispatch token. Kept apart
    from the kubeconfig Secret so that whoever may read that one cannot extend its token."""
    annotations = {c.SERVICE_ACCOUNT_ANNOTATION: service_account}
    return _fleet_secret(name, namespace, annotations, c.RENEWER_TOKEN_KEY, token)


def _fleet_secret(
    name: str, namespace: str, annotations: dict[str, str], key: str, value: str
) -> dict[str, Any]:
    """An Opaque fleet-side Secret with fleet's labels, holding `value` under `key`."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": _labels(),
            "annotations": annotations,
        },
        "data": {key: base64.b64encode(value.encode()).decode()},
    }


def default_fleet_id(kube_system_uid: str) -> str:
    """A fleet's id unless told otherwise: `fleet-` and the start of its API server's
    kube-system namespace UID, stable for a fleet and different between fleets. The controller
    and `fleet join` both derive it here, so the mark join's admission policy checks is the one
    the controller writes."""
    return c.DEFAULT_FLEET_ID_PREFIX + kube_system_uid.replace("-", "")[:12]


def cluster_id_of(secret: Mapping[str, Any] | None) -> str | None:
    """The member cluster id a kubeconfig Secret `fleet join` wrote was issued for (None: not
    recorded, a Secret of an older join or made by hand)."""
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(c.CLUSTER_ID_ANNOTATION) or "") or None


def identity_of(secret: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, ServiceAccount) of fleet's identity in the member, from a Secret `fleet join`
    wrote; None for a Secret made any other way."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    namespace, slash, name = str(annotations.get(c.SERVICE_ACCOUNT_ANNOTATION) or "").partition("/")
    return (namespace, name) if slash and namespace and name else None


def renewed_secret(
    secret: Mapping[str, Any],
    kubeconfig: Mapping[str, Any],
    token: IssuedToken,
    key: str = KUBECONFIG_KEY,
) -> dict[str, Any]:
    """A merge patch of `secret` (a member's kubeconfig Secret) to `kubeconfig` with every user's
    token replaced by `token`, and the token's times."""
    config = copy.deepcopy(dict(kubeconfig))
    for user in config.get("users") or []:
        body = user.get("user") or {}
        if "token" in body:
            body["token"] = token.token
    data = base64.b64encode(yaml.safe_dump(config).encode()).decode()
    return {
        "metadata": {
            "name": (secret.get("metadata") or {}).get("name"),
            "namespace": (secret.get("metadata") or {}).get("namespace"),
            "annotations": _token_annotations(token),
        },
        "data": {key: data},
    }


def redacted(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` with the token of a kubeconfig Secret replaced by REDACTED (dry runs)."""
    out = copy.deepcopy(dict(obj))
    if out.get("kind") == "Secret" and c.RENEWER_TOKEN_KEY in (out.get("data") or {}):
        del out["data"]
        out["stringData"] = {c.RENEWER_TOKEN_KEY: REDACTED}
    if out.get("kind") == "Secret" and KUBECONFIG_KEY in (out.get("data") or {}):
        config = yaml.safe_load(base64.b64decode(out["data"][KUBECONFIG_KEY]))
        for user in config.get("users") or []:
            if "token" in (user.get("user") or {}):
                user["user"]["token"] = REDACTED
        del out["data"]
        out["stringData"] = {KUBECONFIG_KEY: yaml.safe_dump(config)}
    return out
