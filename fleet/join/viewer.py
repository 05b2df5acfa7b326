"""The people's identity in a member: its token, its Secret on the fleet, who may read that Secret.

`fleet join` makes, beside fleet's dispatch identity, a read-only one (`fleet-viewer`,
fleet.api.access.viewer_rules) for `kubectl amc` and `fleet dashboard`, and keeps its kubeconfig
in a Secret of its own (`<member>-viewer-kubeconfig`). Who may read those Secrets on the fleet is
one Role per namespace holding member kubeconfigs, `fleet-viewer-kubeconfigs`, whose
resourceNames name exactly the viewer Secrets there: join adds its member's, unjoin takes it away
(and deletes the Role rather than leave it with no names, which would mean every Secret). Bind
users and the dashboard to that Role; the dispatch Secrets need nobody's RBAC but the
controller's.

The viewer's token is not renewed (a credential able to mint it would let its holder read what
the viewer reads; the dispatch token must not): a bound token lives `--viewer-token-expiration`
(30 days by default), and `fleet join NAME` again issues a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleet.api import constants as c
from fleet.api.access import (
    RBAC_GROUP,
    VIEWER_SECRETS_ROLE,
    VIEWER_SERVICE_ACCOUNT,
    as_policy_rules,
    viewer_cluster_role,
    viewer_secrets_rules,
)
from fleet.api.membership import VIEWER_TOKEN_SECRET, IssuedToken, JoinPlan
from fleet.join.errors import JoinError
from fleet.kube import Conflict, KubeError, NotFound, SyncKubeClient

__all__ = [
    "delete_viewer_bindings",
    "forget_viewer_secret",
    "grant_viewer_secret",
    "viewer_secret_names",
    "viewer_secrets_role",
    "viewer_token",
]

_RBAC = f"{RBAC_GROUP}/v1"
_ATTEMPTS = 5


def viewer_secret_names(role: dict[str, Any] | None) -> set[str]:
    """The Secrets the Role `fleet-viewer-kubeconfigs` lets `get` (empty: no Role)."""
    names: set[str] = set()
    for rule in (role or {}).get("rules") or []:
        names |= set(rule.get("resourceNames") or [])
    return names


def _members_of(names: set[str]) -> set[str]:
    suffix = "-viewer-kubeconfig"
    return {n[: -len(suffix)] for n in names if n.endswith(suffix)}


def _role(namespace: str, members: set[str], existing: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": VIEWER_SECRETS_ROLE,
        "namespace": namespace,
        "labels": {c.JOINED_BY_LABEL: c.JOINED_BY},
    }
    if existing is not None:
        meta["resourceVersion"] = (existing.get("metadata") or {}).get("resourceVersion")
    return {
        "apiVersion": _RBAC,
        "kind": "Role",
        "metadata": meta,
        "rules": as_policy_rules(viewer_secrets_rules(sorted(members))),
    }


def viewer_secrets_role(namespace: str) -> dict[str, Any]:
    """The Role's identity (for a rollback's delete)."""
    return {
        "apiVersion": _RBAC,
        "kind": "Role",
        "metadata": {"name": VIEWER_SECRETS_ROLE, "namespace": namespace},
    }


def grant_viewer_secret(fleet: SyncKubeClient, namespace: str, member: str) -> bool:
    """Add `member`'s viewer Secret to the Role's names in `namespace`; True when the Role was
    created (a rollback deletes it). A concurrent join's write is read again and kept."""
    for _ in range(_ATTEMPTS):
        existing = fleet.get(_RBAC, "Role", VIEWER_SECRETS_ROLE, namespace)
        members = _members_of(viewer_secret_names(existing)) | {member}
        try:
            if existing is None:
                fleet.create(_role(namespace, members, None), namespace)
                return True
            if member in _members_of(viewer_secret_names(existing)):
                return False
            fleet.replace(_role(namespace, members, existing))
            return False
        except Conflict:
            continue
    raise JoinError(f"role/{VIEWER_SECRETS_ROLE} -n {namespace} kept changing; run join again")


def forget_viewer_secret(fleet: SyncKubeClient, namespace: str, member: str) -> None:
    """Take `member`'s viewer Secret off the Role's names; the Role goes with its last name."""
    for _ in range(_ATTEMPTS):
        existing = fleet.get(_RBAC, "Role", VIEWER_SECRETS_ROLE, namespace)
        members = _members_of(viewer_secret_names(existing))
        if existing is None or member not in members:
            return
        try:
            if members == {member}:
                fleet.delete(_RBAC, "Role", VIEWER_SECRETS_ROLE, namespace)
            else:
                fleet.replace(_role(namespace, members - {member}, existing))
            return
        except Conflict:
            continue


def viewer_token(
    member: SyncKubeClient,
    plan: JoinPlan,
    now: Callable[[], float],
    sleep: Callable[[float], None],
) -> IssuedToken:
    """A token of the viewer, requested with the user's credentials (nothing fleet holds may
    request one): bound, or, with `--token-type secret`, read from its long-lived Secret."""
    from fleet.join.join import request_token, secret_token

    if plan.token_type == "secret":
        return secret_token(member, plan, sleep, VIEWER_TOKEN_SECRET)
    return request_token(
        member, plan, VIEWER_SERVICE_ACCOUNT, plan.viewer_token_seconds, now, sleep
    )


def delete_viewer_bindings(
    member: SyncKubeClient, identity_namespace: str, say: Callable[[str], None], name: str
) -> None:
    """Delete the viewer's RoleBindings the controller made in the namespaces it dispatched to
    (labelled fleet.dev/viewer=true, of the viewer's ClusterRole of this identity)."""
    role = viewer_cluster_role(identity_namespace)
    try:
        listing = member.list(_RBAC, "RoleBinding", label_selector=f"{c.VIEWER_ANNOTATION}=true")
    except NotFound:
        return
    for binding in listing.get("items") or []:
        meta = binding.get("metadata") or {}
        if (binding.get("roleRef") or {}).get("name") != role:
            continue
        try:
            member.delete(_RBAC, "RoleBinding", meta["name"], meta.get("namespace"))
        except NotFound:
            continue
        except KubeError as e:
            say(
                f"member {name}: could not delete rolebinding/{meta['name']} -n "
                f"{meta.get('namespace')}: {e}"
            )
            continue
        say(f"member {name}: rolebinding/{meta['name']} -n {meta.get('namespace')} deleted")
