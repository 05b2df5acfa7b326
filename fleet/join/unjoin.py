"""`fleet unjoin NAME`: remove a member from the fleet, and fleet's identity from the member.

A member that still runs jobs is refused, naming them, unless the jobs are moved first
(`--move`: a NoExecute taint the controller answers with a failover of reason MemberUnjoined,
which does not count against maxFailovers) or left running unmanaged (`--leave`). The fleet
side (MemberCluster, kubeconfig Secret) goes first, so the controller lets go of the member
before its identity there is deleted; a member that cannot be reached is unjoined on the fleet
side with a note of what was left in it and how to remove it.

A member that cannot be reached (its member context does not answer, or the controller says it
is not Ready) is never waited on for its old copies: `--move` waits only until no gang is bound
to it (`spec.clusters`). The eviction tasks naming it stay on their bindings as unfenced copies,
deleted by the controller if the cluster ever answers the fleet again, under any name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from fleet.api import constants as c
from fleet.api.access import viewer_secret_name
from fleet.api.guard import open_label
from fleet.core.gangmarks import KUBERNETES
from fleet.join.join import (
    MEMBER_CLUSTER,
    JoinError,
    identity_objects,
    made_by,
    one_line,
    previous_join,
    same_cluster,
)
from fleet.join.viewer import delete_viewer_bindings, forget_viewer_secret
from fleet.kube import KubeError, NotFound, SyncKubeClient

__all__ = ["bound_jobs", "move_jobs", "unjoin"]


def bound_jobs(
    fleet: SyncKubeClient, name: str, *, placed: bool = True, evictions: bool = True
) -> list[str]:
    """`namespace/Kind/name` of every job whose GangBinding places it in `name` (`placed`:
    `spec.clusters`), or still has an old copy to remove there (`evictions`:
    `spec.gracefulEvictionTasks[].fromCluster`)."""
    listing = fleet.list(c.FLEET_API_VERSION, "GangBinding")
    out = []
    for binding in listing.get("items") or []:
        if ((binding.get("status") or {}).get("phase")) == "Released":
            continue  # let go with the member: fleet no longer manages it
        spec = binding.get("spec") or {}
        targets: set[Any] = set()
        if placed:
            targets |= {t.get("name") for t in spec.get("clusters") or []}
        if evictions:
            targets |= {t.get("fromCluster") for t in spec.get("gracefulEvictionTasks") or []}
        if name in targets:
            resource = spec.get("resource") or {}
            namespace = (binding.get("metadata") or {}).get("namespace") or ""
            out.append(f"{namespace}/{resource.get('kind')}/{resource.get('name')}")
    return sorted(out)


def _taint(fleet: SyncKubeClient, member: Mapping[str, Any], value: str | None) -> None:
    """The unjoining taint (value `leave` for --leave), replacing one of the other kind."""
    taints = [
        t
        for t in (member.get("spec") or {}).get("taints") or []
        if t.get("key") != c.UNJOINING_TAINT_KEY or (t.get("value") or None) == value
    ]
    if any(t.get("key") == c.UNJOINING_TAINT_KEY for t in taints):
        return
    taint = {"key": c.UNJOINING_TAINT_KEY, "effect": "NoExecute"}
    if value:
        taint["value"] = value
    name = member["metadata"]["name"]
    fleet.patch(*MEMBER_CLUSTER, name, {"spec": {"taints": [*taints, taint]}})


def _wait_unbound(
    fleet: SyncKubeClient,
    name: str,
    timeout: float,
    what: str,
    sleep: Callable[[float], None],
    evictions: bool,
) -> None:
    deadline = time.monotonic() + timeout
    while bound := bound_jobs(fleet, name, evictions=evictions):
        if time.monotonic() > deadline:
            raise JoinError(
                f"{name}: after {timeout:.0f}s the controller has not {what} "
                f"{', '.join(bound)} (the {c.UNJOINING_TAINT_KEY} taint stays; is the "
                "controller running? run unjoin again to keep waiting)"
            )
        sleep(1.0)


def move_jobs(
    fleet: SyncKubeClient,
    member: Mapping[str, Any],
    timeout: float,
    say: Callable[[str], None],
    sleep: Callable[[float], None],
    *,
    leave: bool = False,
    evictions: bool = True,
) -> None:
    """Have the controller take every gang off `member` and wait until it has: failed over
    (reason MemberUnjoined), or with `leave` released (phase Released: the copies run on there,
    unmanaged, and none is started elsewhere). Without `evictions`, the old copies still to be
    removed there are not waited for (a member that cannot be reached: they stay recorded)."""
    name = member["metadata"]["name"]
    value = c.UNJOINING_LEAVE if leave else None
    _taint(fleet, member, value)
    taint = f"{c.UNJOINING_TAINT_KEY}{'=' + value if value else ''}:NoExecute"
    doing = "releasing" if leave else "moving"
    say(f"fleet: membercluster/{name} tainted {taint}; {doing} its jobs")
    _wait_unbound(fleet, name, timeout, "released" if leave else "moved", sleep, evictions)


def _made(namespace: str, secret: Mapping[str, Any] | None, member: Mapping[str, Any]) -> list[str]:
    """`kind/name` of every object `fleet join` made in the member for the identity in
    `namespace`, in the order they are removed: the admission policies and their bindings as
    its Secret records them (a native-gang member joined before that was recorded: by its
    gang scheduler)."""
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    guard = annotations.get(c.ADMISSION_POLICY_ANNOTATION)
    guarded = bool(guard) and guard != c.NO_ADMISSION_POLICY
    gang = (member.get("status") or {}).get("gangScheduler")
    groups = c.SCHEDULING_GROUP_POLICY_ANNOTATION in annotations or gang == KUBERNETES
    made = []
    for _, kind, name, _ns in identity_objects(namespace):
        if kind.startswith("ValidatingAdmissionPolicy") and not guarded:
            continue
        if kind.startswith("MutatingAdmissionPolicy") and not groups:
            continue
        made.append(f"{kind.lower()}/{name}")
    return made


def _left_note(name: str, made: list[str], why: str | None) -> str:
    """What was left in the member and the kubectl command that removes it."""
    because = f" ({why})" if why else ""
    listed = ", ".join(
        f"{obj} (ServiceAccounts, the renewer's Role, RoleBinding and token Secret)"
        if obj.startswith("namespace/")
        else obj
        for obj in made
    )
    return (
        f"left in member {name}{because}: {listed}, and the viewer's RoleBindings in the "
        f"namespaces fleet dispatched to (labelled {c.VIEWER_ANNOTATION}=true). Remove them "
        f"with: kubectl --context <{name}> delete --ignore-not-found {' '.join(made)} && "
        f"kubectl --context <{name}> delete rolebindings -A -l {c.VIEWER_ANNOTATION}=true"
    )


def _note(*parts: str) -> list[str]:
    """The notes `unjoin` returns: one line, or none."""
    said = [part for part in parts if part]
    return [one_line("note: " + "; ".join(said))] if said else []


def _not_ready(member: Mapping[str, Any]) -> str | None:
    """Why the controller cannot reach the member, from its Ready condition (None: Ready, or
    not known)."""
    for condition in (member.get("status") or {}).get("conditions") or []:
        if condition.get("type") == c.CONDITION_READY and condition.get("status") == "False":
            said = f"{condition.get('reason')}: {condition.get('message')}"
            return f"its Ready condition is False, {said}"
    return None


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
    fleet_id: str | None = None,
) -> list[str]:
    """Unjoin `name`; the notes about what was left in the member (empty: nothing). In the
    member, only what `fleet join` made for the fleet `fleet_id` is deleted (None: whatever join
    made there)."""
    member = fleet.get(*MEMBER_CLUSTER, name)
    if member is None:
        raise JoinError(f"membercluster/{name} not found on the fleet")
    bound = bound_jobs(fleet, name)
    if bound and not (move or leave):
        raise JoinError(
            f"{name} still runs {len(bound)} job(s): {', '.join(bound)}; move them to other "
            "members first with --move, or leave them running there, unmanaged, with --leave"
        )
    previous = previous_join(fleet, name)
    assert previous is not None
    # Why the member cannot be reached: by the member context (nothing can be removed there),
    # or by the controller (it cannot delete the old copies there). None: it can.
    unanswered = _check_same_cluster(member_client, previous) if member_client is not None else None
    lost = unanswered or _not_ready(member)
    if bound and move:
        move_jobs(fleet, member, timeout, say, sleep, evictions=lost is None)
    elif bound:
        move_jobs(fleet, member, timeout, say, sleep, leave=True, evictions=lost is None)
        say(f"fleet: left {', '.join(bound)} running in {name}, no longer managed by fleet")
    unfenced = bound_jobs(fleet, name, placed=False) if lost else []
    ref = (member.get("spec") or {}).get("kubeconfigSecretRef") or {}
    secret = previous.secret
    identity = previous.identity

    # The fleet side first: the controller lets go of the member before its identity goes.
    fleet.delete(*MEMBER_CLUSTER, name)
    say(f"fleet: membercluster/{name} deleted")
    if secret is not None:
        fleet.delete("v1", "Secret", ref["name"], ref.get("namespace"))
        say(f"fleet: secret/{ref['name']} -n {ref.get('namespace')} deleted")
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        renewer = annotations.get(c.RENEWER_SECRET_ANNOTATION)
        if renewer and fleet.delete("v1", "Secret", renewer, ref.get("namespace")):
            say(f"fleet: secret/{renewer} -n {ref.get('namespace')} deleted (the renewer's token)")
    if ref.get("namespace"):
        _forget_viewer(fleet, name, str(ref["namespace"]), say)
    reach = f"{name} could not be reached ({lost})" if lost else ""
    copies = (
        f"its copies of {', '.join(unfenced)} stay recorded on their bindings as unfenced, and "
        "are deleted if it ever answers the fleet again, under any name"
        if unfenced
        else ""
    )
    if identity is None:
        return _note(
            reach,
            copies,
            f"{name}'s kubeconfig Secret was not made by `fleet join`: "
            "fleet made no identity in the member, nothing was removed there",
        )
    namespace, _ = identity
    made = _made(namespace, secret, member)
    if member_client is None:
        return _note(reach, copies, _left_note(name, made, "no --member-kubeconfig given"))
    if unanswered:
        return _note(reach, copies, _left_note(name, made, None))
    try:
        delete_viewer_bindings(member_client, namespace, say, name)
    except KubeError as e:
        return _note(reach, copies, _left_note(name, made, f"{type(e).__name__}: {e}"))
    for api_version, kind, obj_name, obj_namespace in identity_objects(namespace):
        try:
            found = member_client.get(api_version, kind, obj_name, obj_namespace)
            if found is not None and fleet_id and not made_by(found, fleet_id):
                say(f"member {name}: {kind.lower()}/{obj_name} is another fleet's: left alone")
                continue
            gone = found is not None and member_client.delete(
                api_version, kind, obj_name, obj_namespace
            )
        except NotFound:
            continue  # the member does not serve that kind (an older Kubernetes): none of it
        except KubeError as e:
            return _note(reach, copies, _left_note(name, made, f"{type(e).__name__}: {e}"))
        state = "deleted" if gone else "already gone"
        say(f"member {name}: {kind.lower()}/{obj_name} {state}")
        labels = ((found or {}).get("metadata") or {}).get("labels") or {}
        fleet_id = fleet_id or labels.get(c.FLEET_ID_LABEL)
    if fleet_id:
        try:
            _close_namespaces(member_client, name, fleet_id, say)
        except KubeError as e:
            label = open_label(fleet_id)
            return _note(
                reach,
                copies,
                f"the label {label} was left on namespaces of {name} ({e}); remove it with: "
                f"kubectl --context <{name}> label namespace -l {label} {label}-",
            )
    return _note(reach, copies)


def _forget_viewer(
    fleet: SyncKubeClient, name: str, namespace: str, say: Callable[[str], None]
) -> None:
    """The people's kubeconfig of the member goes, and its name from the Role that lets read it."""
    secret = viewer_secret_name(name)
    if fleet.delete("v1", "Secret", secret, namespace):
        say(f"fleet: secret/{secret} -n {namespace} deleted")
    forget_viewer_secret(fleet, namespace, name)


def _close_namespaces(
    member_client: SyncKubeClient, name: str, fleet_id: str, say: Callable[[str], None]
) -> None:
    """Take off every namespace the label `fleet join --namespaces` opened it to this fleet
    with: what join wrote goes with the identity."""
    label = open_label(fleet_id)
    listed = member_client.list("v1", "Namespace", label_selector=label)
    for ns in listed.get("items") or []:
        ns_name = ns["metadata"]["name"]
        member_client.patch("v1", "Namespace", ns_name, {"metadata": {"labels": {label: None}}})
        say(f"member {name}: namespace/{ns_name} no longer open to fleet {fleet_id}")


def _check_same_cluster(member_client: SyncKubeClient, previous: Any) -> str | None:
    """Unjoin deletes only in the cluster the MemberCluster was joined for: a context that
    reaches another cluster (another member's) is refused before anything is changed. Why the
    context got no answer (None: it answered)."""
    from fleet.join import cluster_id

    try:
        reached = cluster_id(member_client)
    except KubeError as e:
        # Not reachable: nothing will be deleted there (the note says what was left).
        return f"{type(e).__name__}: {e}"
    server = member_client.connection.server
    if not same_cluster(previous, reached, server):
        raise JoinError(
            f"{previous.describe()}, but the member context reaches cluster {reached} at "
            f"server {server}: refusing to delete fleet's identity in another cluster; give the "
            "context of the member this name was joined for"
        )
    return None
