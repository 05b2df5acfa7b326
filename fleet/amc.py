"""`kubectl amc`: look at objects in every member cluster from the fleet, as ACK One's AMC does.

    kubectl amc get pytorchjob -M                      # every member, with CLUSTER and ADOPTION
    kubectl amc get pod -m member-1 -n team-a          # one member
    kubectl amc get pytorchjob pytorch-test -m member-1 -o yaml

Members and their kubeconfigs come from the fleet (MemberCluster objects and the Secrets they
name), so the same fleet kubeconfig that submits jobs is all a user needs. Tables come from the
members' own API servers (server-side printing), so columns are exactly what `kubectl get`
shows there, with a CLUSTER column after NAME and ADOPTION (Y when fleet manages the object).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from typing import Any

import httpx
import yaml

from fleet.api import constants as c
from fleet.core.kinds import KINDS
from fleet.kube import Connection, from_kubeconfig, load
from fleet.kubeconfig import KubeconfigError, kubeconfig_from_secret

_TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


class AmcError(RuntimeError):
    pass


def _client(conn: Connection) -> httpx.Client:
    return httpx.Client(
        base_url=conn.server, verify=conn.ssl_context, headers=dict(conn.headers), timeout=15.0
    )


def _get(client: httpx.Client, path: str, **kw: Any) -> Any:
    r = client.get(path, **kw)
    if r.status_code == 404:
        return None
    if r.status_code >= 400:
        raise AmcError(f"{client.base_url}{path}: {r.status_code} {r.text[:200]}")
    return r.json()


def members(fleet: httpx.Client) -> dict[str, Connection]:
    """Every member the fleet knows, connected with the kubeconfig from its Secret."""
    listing = _get(fleet, f"/apis/{c.FLEET_API_VERSION}/memberclusters") or {"items": []}
    out: dict[str, Connection] = {}
    for mc in listing["items"]:
        ref = (mc.get("spec") or {}).get("kubeconfigSecretRef") or {}
        secret = _get(fleet, f"/api/v1/namespaces/{ref.get('namespace')}/secrets/{ref.get('name')}")
        if secret is None:
            print(
                f"warning: {mc['metadata']['name']}: kubeconfig Secret not found", file=sys.stderr
            )
            continue
        try:
            resolved = kubeconfig_from_secret(secret, ref.get("key") or "kubeconfig")
        except KubeconfigError as e:
            print(f"warning: {mc['metadata']['name']}: {e}", file=sys.stderr)
            continue
        out[mc["metadata"]["name"]] = from_kubeconfig(resolved.config)
    return out


def resolve(client: httpx.Client, what: str) -> tuple[str, bool, str]:
    """`pytorchjob`, `pytorchjobs`, `PyTorchJob`, `po`, ... -> (collection path, namespaced,
    kind)."""
    want = what.lower()
    groups = [("/api/v1", "v1")]
    for group in (_get(client, "/apis") or {}).get("groups", []):
        version = group["preferredVersion"]["groupVersion"]
        groups.append((f"/apis/{version}", version))
    for prefix, _version in groups:
        for res in (_get(client, prefix) or {}).get("resources", []):
            if "/" in res["name"]:
                continue
            names = {res["name"], res.get("singularName", ""), res["kind"].lower()}
            names |= set(res.get("shortNames") or [])
            if want in names:
                return f"{prefix}/{{ns}}{res['name']}", bool(res["namespaced"]), res["kind"]
    raise AmcError(f"the server doesn't have a resource type {what!r}")


def _age(stamp: str) -> str:
    then = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    seconds = int((dt.datetime.now(dt.UTC) - then).total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 600:
        return f"{seconds // 60}m{seconds % 60}s"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _cell(value: Any, column: dict[str, Any]) -> str:
    if value is None:
        return "<none>"
    if column.get("format") == "date" or column.get("type") == "date":
        try:
            return _age(str(value))
        except ValueError:
            return str(value) or "<unknown>"  # the server already made it relative
    if isinstance(value, list):
        return ",".join(map(str, value)) or "<none>"
    return str(value)


#: Kinds fleet propagates to members: only these get an ADOPTION column (as ACK One prints).
PROPAGATED_KINDS = frozenset(
    [k.kind for k in KINDS] + ["ConfigMap", "Secret", "ServiceAccount", "PersistentVolumeClaim"]
)


def table_rows(
    table: dict[str, Any], cluster: str, *, adoption: bool = True
) -> tuple[list[str], list[list[str]]]:
    """The member's table with CLUSTER after NAME, and ADOPTION at the end if asked."""
    columns = [c for c in table["columnDefinitions"] if c.get("priority", 0) == 0]
    keep = [i for i, c in enumerate(table["columnDefinitions"]) if c.get("priority", 0) == 0]
    header = [col["name"].upper() for col in columns]
    header = [header[0], "CLUSTER", *header[1:]] + (["ADOPTION"] if adoption else [])
    rows = []
    for row in table.get("rows") or []:
        cells = [_cell(row["cells"][i], table["columnDefinitions"][i]) for i in keep]
        labels = ((row.get("object") or {}).get("metadata") or {}).get("labels") or {}
        adopted = "Y" if labels.get(c.MANAGED_BY_LABEL) == c.MANAGED_BY_VALUE else "N"
        rows.append([cells[0], cluster, *cells[1:]] + ([adopted] if adoption else []))
    return header, rows


def render(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kubectl amc",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="verb", required=True)
    get = sub.add_parser("get", help="list or show objects in member clusters")
    get.add_argument("resource")
    get.add_argument("name", nargs="?")
    scope = get.add_mutually_exclusive_group(required=True)
    scope.add_argument("-M", "--all-members", action="store_true", help="every member cluster")
    scope.add_argument("-m", "--member", help="one member cluster")
    get.add_argument("-n", "--namespace", default=None)
    get.add_argument("-A", "--all-namespaces", action="store_true")
    get.add_argument("-o", "--output", choices=["yaml", "json", "wide"], default=None)
    get.add_argument("--kubeconfig", help="the fleet's kubeconfig (default: $KUBECONFIG)")
    get.add_argument("--context", help="the fleet's context (default: current)")
    args = parser.parse_args(argv)
    try:
        return _get_command(args)
    except (AmcError, KubeconfigError, ValueError, httpx.HTTPError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _get_command(args: argparse.Namespace) -> int:
    fleet_conn = load(args.kubeconfig, args.context)
    with _client(fleet_conn) as fleet:
        known = members(fleet)
    if args.member:
        if args.member not in known:
            raise AmcError(f"no member cluster named {args.member!r} (have: {', '.join(known)})")
        known = {args.member: known[args.member]}
    namespace = args.namespace or fleet_conn.default_namespace or "default"
    header: list[str] = []
    rows: list[list[str]] = []
    documents = []
    for cluster, conn in sorted(known.items()):
        with _client(conn) as member:
            try:
                template, namespaced, kind = resolve(member, args.resource)
            except (AmcError, httpx.HTTPError) as e:
                print(f"warning: {cluster}: {e}", file=sys.stderr)
                continue
            ns = f"namespaces/{namespace}/" if namespaced and not args.all_namespaces else ""
            path = template.format(ns=ns)
            if args.name:
                path += f"/{args.name}"
            if args.output in ("yaml", "json"):
                obj = _get(member, path)
                if obj is not None:
                    documents.append(obj)
                continue
            table = _get(
                member, path, headers={"Accept": _TABLE}, params={"includeObject": "Metadata"}
            )
            if table is None:
                continue
            header, cluster_rows = table_rows(table, cluster, adoption=kind in PROPAGATED_KINDS)
            rows += cluster_rows
    if args.output == "yaml":
        print(yaml.safe_dump_all(documents, sort_keys=False), end="")
        return 0 if documents else 1
    if args.output == "json":
        print(json.dumps(documents[0] if len(documents) == 1 else documents, indent=2))
        return 0 if documents else 1
    if not rows:
        where = "any member" if args.all_members else args.member
        print(f"No resources found in {namespace} namespace of {where}.", file=sys.stderr)
        return 0
    print(render(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
