"""`fleet unjoin NAME`: remove a member from the fleet, and fleet's identity from the member.

A member that still runs jobs is refused, naming them, unless the jobs are moved first
(`--move`: a NoExecute taint the controller answers with a failover of reason MemberUnjoined,
which does not count against maxFailovers) or left running unmanaged (`--leave`). The fleet
side (MemberCluster, kubeconfig Secret) goes first, so the controller lets go of the member
before its identity there is deleted; a member that cannot be reached is unjoined on the fleet
side with a note of what was left in it and how to remove it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from fleet.api import constants as c
from fleet.api.access import member_cluster_role
from fleet.api.membership import identity_of
from fleet.join.join import JoinError, one_line
from fleet.kube import KubeError, SyncKubeClient

__all__ = ["bound_jobs", "unjoin"]

MEMBER_CLUSTER = (c.FLEET_API_VERSION, "MemberCluster")


def bound_jobs(fleet: SyncKubeClient, name: str) -> list[str]:
    """`namespace/Kind/name` of every job whose GangBinding places it in `name`, or still has
    an old copy to remove there."""
    listing = fleet.list(c.FLEET_API_VERSION, "GangBinding")
    out = []
    for binding in listing.get("items") or []:
        spec = binding.get("spec") or {}
        targets = {t.get("name") for t in spec.get("clusters") or []}
        targets |= {t.get("fromCluster") for t in spec.get("gracefulEvictionTasks") or []}
        if name in targets:
            resource = spec.get("resource") or {}
            namespace = (binding.get("metadata") or {}).get("namespace") or ""
            out.append(f"{namespace}/{resource.get('kind')}/{resource.get('name')}")
    return sorted(out)


def _taint(fleet: SyncKubeClient, member: Mapping[str, Any]) -> None:
    taints = list((member.get("spec") or {}).get("taints") or [])
    if any(t.get("key") == c.UNJOINING_TAINT_KEY for t in taints):
        return
    taints.append({"key": c.UNJOINING_TAINT_KEY, "effect": "NoExecute"})
    name = member["metadata"]["name"]
    fleet.patch(*MEMBER_CLUSTER, name, {"spec": {"taints": taints}})


def _move(
    fleet: SyncKubeClient,
    member: Mapping[str, Any],
    timeout: float,
    say: Callable[[str], None],
    sleep: Callable[[float], None],
) -> None:
    name = member["metadata"]["name"]
    _taint(fleet, member)
    say(f"fleet: membercluster/{name} tainted {c.UNJOINING_TAINT_KEY}:NoExecute; moving its jobs")
    deadline = time.monotonic() + timeout
    while bound := bound_jobs(fleet, name):
        if time.monotonic() > deadline:
            raise JoinError(
                f"{name}: after {timeout:.0f}s these jobs still have a copy there: "
                f"{', '.join(bound)} (the {c.UNJOINING_TAINT_KEY} taint stays; run unjoin "
                "again to keep waiting, or with --leave)"
            )
        sleep(1.0)


def _member_side(namespace: str) -> list[tuple[str, str, str, str | None]]:
    role = member_cluster_role(namespace)
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        (rbac, "ClusterRoleBinding", role, None),
        (rbac, "ClusterRole", role, None),
        ("v1", "Namespace", namespace, None),
    ]


def _left_note(name: str, namespace: str, why: str) -> str:
    role = member_cluster_role(namespace)
    return one_line(
        f"note: left in member {name} ({why}): namespace/{namespace} (ServiceAccount, token Role "
        f"and RoleBinding), clusterrole/{role}, clusterrolebinding/{role}. Remove them with: "
        f"kubectl --context <{name}> delete --ignore-not-found clusterrolebinding/{role} "
        f"clusterrole/{role} "
        f"namespace/{namespace}"
    )


def unjoin(
    fleet: SyncKubeClient,
    member_client: SyncKubeClient | None,
    name: str,
    *,
    move: bool = False,
    leave: bool = False,
    timeout: float = 300.0,
    say: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Unjoin `name`; the notes about what was left in the member (empty: nothing)."""
    member = fleet.get(*MEMBER_CLUSTER, name)
    if member is None:
        raise JoinError(f"membercluster/{name} not found on the fleet")
    bound = bound_jobs(fleet, name)
    if bound and not (move or leave):
        raise JoinError(
            f"{name} still runs {len(bound)} job(s): {', '.join(bound)}; move them to other "
            "members first with --move, or leave them running there, unmanaged, with --leave"
        )
    if bound and move:
        _move(fleet, member, timeout, say, sleep)
    elif bound:
        say(f"fleet: leaving {', '.join(bound)} running in {name}, no longer managed by fleet")
    ref = (member.get("spec") or {}).get("kubeconfigSecretRef") or {}
    secret = fleet.get("v1", "Secret", ref.get("name") or "", ref.get("namespace") or "")
    identity = identity_of(secret) if secret is not None else None
    # The fleet side first: the controller lets go of the member before its identity goes.
    fleet.delete(*MEMBER_CLUSTER, name)
    say(f"fleet: membercluster/{name} deleted")
    if secret is not None:
        fleet.delete("v1", "Secret", ref["name"], ref.get("namespace"))
        say(f"fleet: secret/{ref['name']} -n {ref.get('namespace')} deleted")
    if identity is None:
        return [
            f"note: {name}'s kubeconfig Secret was not made by `fleet join`: "
            "fleet made no identity in the member, nothing was removed there"
        ]
    namespace, _ = identity
    if member_client is None:
        return [_left_note(name, namespace, "no --member-kubeconfig given")]
    for api_version, kind, obj_name, obj_namespace in _member_side(namespace):
        try:
            gone = member_client.delete(api_version, kind, obj_name, obj_namespace)
        except KubeError as e:
            return [_left_note(name, namespace, f"{type(e).__name__}: {e}")]
        state = "deleted" if gone else "already gone"
        say(f"member {name}: {kind.lower()}/{obj_name} {state}")
    return []
