"""`kubectl amc get`: one kind, in every member asked, printed as one table.

Tables are the members' own (server-side printing), so the columns are exactly what `kubectl
get` shows there, with CLUSTER after NAME (and NAMESPACE first with `-A`), and ADOPTION at the
end for the kinds fleet propagates. `-o wide` adds the columns the server marks as extra
(priority > 0). The kind is whatever word the members' discovery knows: plural, singular,
short name or `kind.group`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from fleet.amc.adoption import adoption, propagated
from fleet.amc.errors import AmcError, none_answered, report, warn
from fleet.amc.members import Fleet
from fleet.amc.output import cell, columns, document
from fleet.api import constants as c
from fleet.kube import Forbidden, NotFound, Obj, Resource, SyncKubeClient

OUTPUTS: Final = ("wide", "yaml", "json", "name")


@dataclass(frozen=True)
class GetRequest:
    """What the user asked for. `namespace` is None with `-A` (and ignored for cluster-scoped
    kinds); `members` is None with `-M`."""

    word: str
    name: str | None
    members: Sequence[str] | None
    namespace: str | None
    label_selector: str | None = None
    output: str | None = None


@dataclass(frozen=True)
class Listing:
    """One member's answer: the resource the word means there, and its table or objects."""

    resource: Resource
    table: Obj | None = None
    objects: tuple[Obj, ...] = ()


class NotServed:
    """The member answered, but serves no such kind (its CRD is not installed there)."""


def without_managed_fields(obj: Obj) -> Obj:
    """The object as `kubectl get -o yaml` prints it: without metadata.managedFields (server-side
    apply's bookkeeping, longer than the object itself)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


class FleetNamespaces:
    """The namespaces fleet dispatches to, as the fleet's GangBindings say (a binding lives in
    its job's namespace, and the copy in the member's namespace of the same name), read once
    and only when needed: the people's identity reads a member only in those namespaces, so an
    all-namespaces list it is refused is asked there, one namespace at a time."""

    def __init__(self, fleet: SyncKubeClient) -> None:
        self._fleet = fleet
        self._lock = threading.Lock()
        self._names: list[str] | None = None

    def __call__(self) -> list[str]:
        with self._lock:
            if self._names is None:
                listing = self._fleet.list(c.FLEET_API_VERSION, "GangBinding")
                self._names = sorted(
                    {
                        str((item.get("metadata") or {}).get("namespace") or "")
                        for item in listing.get("items") or []
                    }
                    - {""}
                )
            return self._names


def _ask_in(request: GetRequest, client: SyncKubeClient, res: Resource, ns: str | None) -> Listing:
    if request.output in ("yaml", "json"):
        if request.name:
            obj = client.get(res.api_version, res.kind, request.name, ns)
            return Listing(res, objects=(without_managed_fields(obj),) if obj is not None else ())
        listing = client.list(res.api_version, res.kind, ns, label_selector=request.label_selector)
        items = tuple(
            without_managed_fields({"apiVersion": res.api_version, "kind": res.kind, **item})
            for item in listing.get("items") or []
        )
        return Listing(res, objects=items)
    return Listing(
        res, table=client.table(res, ns, request.name, label_selector=request.label_selector)
    )


def _merged(res: Resource, parts: Sequence[Listing]) -> Listing:
    """One listing of the per-namespace ones (their tables have the same columns)."""
    objects = tuple(obj for part in parts for obj in part.objects)
    tables = [part.table for part in parts if part.table is not None]
    if not tables:
        return Listing(res, objects=objects)
    rows = [row for table in tables for row in table.get("rows") or []]
    return Listing(res, table={**tables[0], "rows": rows}, objects=objects)


def _ask(
    request: GetRequest, client: SyncKubeClient, namespaces: Callable[[], list[str]]
) -> Listing | NotServed:
    try:
        res = client.lookup(request.word)
    except NotFound:
        return NotServed()
    ns = request.namespace if res.namespaced else None
    if not res.namespaced:
        return _ask_in(request, client, res, ns)
    if ns is not None:
        try:
            return _ask_in(request, client, res, ns)
        except Forbidden:
            # The viewer reads a namespace only once fleet dispatched there in this member:
            # refused, it holds nothing of fleet's there, as a member without the namespace.
            return Listing(res, table={"rows": []})
    try:
        return _ask_in(request, client, res, None)
    except Forbidden as refused:
        # The viewer reads only where fleet dispatched: ask there, one namespace at a time. A
        # namespace it may not read in this member is one fleet never dispatched to here.
        parts = []
        for name in namespaces():
            try:
                parts.append(_ask_in(request, client, res, name))
            except Forbidden:
                continue
        if namespaces() and not parts:
            raise refused from None
        return _merged(res, parts)


# -- rendering (pure) -------------------------------------------------------------------------


def table_rows(
    table: Mapping[str, Any],
    cluster: str,
    now: datetime,
    *,
    wide: bool = False,
    adoption_column: bool = False,
    namespace_column: bool = False,
) -> tuple[list[str], list[list[str]]]:
    """A member's Table as kubectl amc prints it: NAME, CLUSTER, the member's columns (all of
    them with `wide`), ADOPTION if asked; NAMESPACE first if asked."""
    definitions = list(table.get("columnDefinitions") or [])
    keep = [i for i, col in enumerate(definitions) if wide or not col.get("priority")]
    names = [str(definitions[i].get("name") or "").upper() for i in keep]
    header = [*names[:1], "CLUSTER", *names[1:]]
    header = (["NAMESPACE"] if namespace_column else []) + header
    header += ["ADOPTION"] if adoption_column else []
    rows = []
    for row in table.get("rows") or []:
        values = row.get("cells") or []
        cells = [cell(values[i] if i < len(values) else None, definitions[i], now) for i in keep]
        metadata = (row.get("object") or {}).get("metadata") or {}
        line = [*cells[:1], cluster, *cells[1:]]
        line = ([str(metadata.get("namespace") or "")] if namespace_column else []) + line
        line += [adoption(metadata)] if adoption_column else []
        rows.append(line)
    return header, rows


def render_tables(blocks: Sequence[tuple[list[str], list[list[str]]]]) -> str:
    """Members' rows under one header; a new header only where the columns differ (members
    serving different versions of a kind)."""
    merged: dict[tuple[str, ...], list[list[str]]] = {}
    for header, rows in blocks:
        if rows:
            merged.setdefault(tuple(header), []).extend(rows)
    return "\n\n".join(columns(header, rows) for header, rows in merged.items())


def object_name(res: Resource, cluster: str, name: str) -> str:
    """`-o name`: `<cluster>/<kind>[.<group>]/<name>` (kubectl's form, under its cluster)."""
    kind = res.kind.lower() + (f".{res.group}" if res.group else "")
    return f"{cluster}/{kind}/{name}"


# -- the command ------------------------------------------------------------------------------


def _where(request: GetRequest, res: Resource | None) -> str:
    if res is not None and not res.namespaced:
        return ""
    return (
        " in all namespaces" if request.namespace is None else f" in namespace {request.namespace}"
    )


def _not_found(request: GetRequest, res: Resource, asked: str) -> AmcError:
    where = _where(request, res)
    return AmcError(f'{request.word} "{request.name}" not found{where} (asked {asked})')


def run(fleet: Fleet, request: GetRequest, now: datetime) -> int:
    """Print what the members hold; the exit code (EXIT_INCOMPLETE if a member could not be
    asked). AmcError when nothing can be shown."""
    names, problems = fleet.select(request.members)
    namespaces = FleetNamespaces(fleet.client)
    answer = fleet.ask(names, lambda _name, client: _ask(request, client, namespaces))
    problems = problems + answer.problems
    if not answer.values:
        raise none_answered(problems)
    listings = {n: v for n, v in answer.values.items() if isinstance(v, Listing)}
    not_served = [n for n, v in answer.values.items() if isinstance(v, NotServed)]
    if not listings:
        report(problems)
        asked = ", ".join(answer.values)
        raise AmcError(f"no member cluster serves a resource type {request.word!r} (asked {asked})")
    for name in not_served:
        warn(f"{name}: serves no resource type {request.word!r}")
    code = report(problems)
    some = next(iter(listings.values())).resource
    asked = ", ".join(listings)

    if request.output in ("yaml", "json"):
        objects = [obj for listing in listings.values() for obj in listing.objects]
        if request.name and not objects:
            raise _not_found(request, some, asked)
        single = request.name is not None and len(objects) == 1
        out = objects[0] if single else {"apiVersion": "v1", "kind": "List", "items": objects}
        sys.stdout.write(document(out, request.output))
        return code

    found = {n: v for n, v in listings.items() if v.table is not None}
    if request.output == "name":
        lines = [
            object_name(v.resource, n, name)
            for n, v in found.items()
            for row in (v.table or {}).get("rows") or []
            if (name := str(((row.get("object") or {}).get("metadata") or {}).get("name") or ""))
        ]
        if lines:
            print("\n".join(lines))
    else:
        blocks = [
            table_rows(
                v.table or {},
                n,
                now,
                wide=request.output == "wide",
                adoption_column=propagated(v.resource),
                namespace_column=request.namespace is None and v.resource.namespaced,
            )
            for n, v in found.items()
        ]
        text = render_tables(blocks)
        lines = text.splitlines()
        if text:
            print(text)
    if not lines:
        if request.name:
            raise _not_found(request, some, asked)
        print(f"No resources found{_where(request, some)} (asked {asked}).", file=sys.stderr)
    return code


__all__ = ["OUTPUTS", "GetRequest", "object_name", "render_tables", "run", "table_rows"]
