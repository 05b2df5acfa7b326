"""Joining members to the fleet with fleet's own least-privilege identity, and unjoining them.

`fleet join` and `fleet unjoin` (the command line), the demo and the end-to-end fixtures all
come through `join_member`, so every member in every test is joined the way users join theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fleet.api.access import DEFAULT_MEMBER_NAMESPACE, FLEET_SECRETS_NAMESPACE
from fleet.api.guard import ADMISSION_API_VERSION
from fleet.api.membership import (
    DEFAULT_TOKEN_SECONDS,
    DEFAULT_VIEWER_TOKEN_SECONDS,
    IssuedToken,
    JoinPlan,
    MemberEndpoint,
    TokenType,
    default_fleet_id,
    member_kubeconfig,
    plan_join,
)
from fleet.api.schedulinggroup import MUTATING_API_VERSION, NATIVE_POD_GROUP
from fleet.install import single_context
from fleet.join.join import JoinError, dry_run, endpoint_of, join
from fleet.join.renewal_access import check_renewal_access
from fleet.join.unjoin import bound_jobs, unjoin
from fleet.kube import (
    NotFound,
    SyncKubeClient,
    Trust,
    from_kubeconfig,
    kubeconfig_files,
    merge_kubeconfig_files,
    read_kubeconfig_file,
)
from fleet.kubeconfig import check_kubeconfig

__all__ = [
    "JoinError",
    "bound_jobs",
    "cluster_id",
    "dry_run",
    "fleet_id_of",
    "join",
    "join_member",
    "member_client",
    "plan_for",
    "serves_native_gang",
    "unjoin",
    "user_kubeconfig",
]


def user_kubeconfig(path: str | None = None) -> dict[str, Any]:
    """The user's own kubeconfig, as kubectl reads it: `path`, else the `$KUBECONFIG` files
    merged, else ~/.kube/config (relative file paths resolved against each file's folder)."""
    if path:
        files = [Path(path).expanduser()]
    else:
        files = kubeconfig_files() or [Path.home() / ".kube" / "config"]
    if not any(f.exists() for f in files):
        read_kubeconfig_file(files[0])  # raises, naming the file
    return merge_kubeconfig_files(files)


def member_client(
    config: Mapping[str, Any], context: str | None = None, base: Path | None = None
) -> tuple[SyncKubeClient, Mapping[str, Any]]:
    """A client of the member with the user's own kubeconfig (kubectl's rules: files, exec
    plugins), and that context's cluster entry."""
    one = single_context(dict(config), context)
    source = f"member kubeconfig context {one['current-context']}"
    connection = from_kubeconfig(one, base=base, source=source, trust=Trust.USER)
    return SyncKubeClient(connection, name=one["current-context"]), one["clusters"][0]["cluster"]


def cluster_id(client: SyncKubeClient) -> str:
    """The cluster id of whatever `client` reaches: its kube-system namespace's UID (Karmada's
    Cluster spec.id). Two kubeconfigs reach the same cluster exactly when these agree."""
    namespace = client.get("v1", "Namespace", "kube-system") or {}
    uid = str((namespace.get("metadata") or {}).get("uid") or "")
    if not uid:
        raise JoinError(
            f"{client.name}: namespace kube-system not found: not a Kubernetes cluster?"
        )
    return uid


def fleet_id_of(fleet: SyncKubeClient, given: str | None = None) -> str:
    """The fleet's id as its controller derives it (`--fleet-id` when the controller is run
    with one: then pass the same here)."""
    return given or default_fleet_id(cluster_id(fleet))


def serves_admission_policies(client: SyncKubeClient) -> bool:
    """Whether the member serves ValidatingAdmissionPolicy (GA in Kubernetes 1.30)."""
    try:
        client.resource(ADMISSION_API_VERSION, "ValidatingAdmissionPolicy")
    except NotFound:
        return False
    return True


def serves_native_gang(client: SyncKubeClient) -> bool:
    """Whether the member gang-schedules with Kubernetes' own Workload API (it serves the
    native PodGroup) and can join pods to it by a MutatingAdmissionPolicy (GA in 1.36)."""
    for api_version, kind in (NATIVE_POD_GROUP, (MUTATING_API_VERSION, "MutatingAdmissionPolicy")):
        try:
            client.resource(api_version, kind)
        except NotFound:
            return False
    return True


def plan_for(
    name: str,
    client: SyncKubeClient,
    cluster: Mapping[str, Any],
    *,
    fleet_id: str | Callable[[], str],
    labels: Mapping[str, str] | None = None,
    namespace: str = DEFAULT_MEMBER_NAMESPACE,
    token_type: TokenType = "bound",
    token_seconds: int = DEFAULT_TOKEN_SECONDS,
    secrets_namespace: str = FLEET_SECRETS_NAMESPACE,
    viewer_token_seconds: int = DEFAULT_VIEWER_TOKEN_SECONDS,
    open_namespaces: tuple[str, ...] = (),
) -> JoinPlan:
    endpoint = endpoint_of(client.connection)
    _check_stored(name, endpoint, cluster)
    return plan_join(
        name,
        endpoint,
        labels=labels,
        namespace=namespace,
        token_type=token_type,
        token_seconds=token_seconds,
        secrets_namespace=secrets_namespace,
        fleet_id=fleet_id if isinstance(fleet_id, str) else fleet_id(),
        cluster_id=cluster_id(client),
        guarded=serves_admission_policies(client),
        native_gang=serves_native_gang(client),
        viewer_token_seconds=viewer_token_seconds,
        open_namespaces=open_namespaces,
    )


def _check_stored(name: str, endpoint: MemberEndpoint, cluster: Mapping[str, Any]) -> None:
    """The kubeconfig fleet will store passes the controller's rules (fleet.kubeconfig), or
    KubeconfigError names the field, before anything is written. A member the user reaches
    without verifying it (insecure-skip-tls-verify) is refused: fleet would have no CA to verify
    it with."""
    stored = member_kubeconfig(name, endpoint, "ns/sa", "token")
    if "insecure-skip-tls-verify" in cluster:
        stored["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = cluster[
            "insecure-skip-tls-verify"
        ]
    check_kubeconfig(stored, source=f"kubeconfig for {name}")


def join_member(
    fleet: SyncKubeClient,
    name: str,
    config: Mapping[str, Any],
    labels: Mapping[str, str] | None = None,
    *,
    context: str | None = None,
    base: Path | None = None,
    say: Callable[[str], None] = lambda _: None,
    fleet_id: str | None = None,
    force: bool = False,
    rotate: bool = False,
    **options: Any,
) -> IssuedToken:
    """Join the member `config` (the user's kubeconfig, `context` in it) as `name`."""
    client, cluster = member_client(config, context, base)
    with client:
        plan = plan_for(
            name,
            client,
            cluster,
            labels=labels,
            fleet_id=lambda: fleet_id_of(fleet, fleet_id),
            **options,
        )
        check_renewal_access(fleet, plan.secrets_namespace)
        return join(fleet, client, plan, say=say, force=force, rotate=rotate)
