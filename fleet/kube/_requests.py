"""What fleet asks of an API server, written once for the async and the sync client.

Each verb is a generator: it yields the Calls it needs (a discovery document, then the object)
and receives their decoded answers, or has their errors thrown into it (so `get` can turn a
404 into None, and discovery can fill its cache). A client only sends: the async client awaits
each Call, the sync client blocks on it. Request building, error mapping, retry policy and
discovery are therefore the same everywhere.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from tenacity import retry_if_exception, stop_after_attempt, wait_exponential_jitter

from fleet.kube._discovery import (
    Discovery,
    Resource,
    group_version_path,
    preferred_versions,
)
from fleet.kube._errors import ApiError, KubeError, NotFound, Unreachable, api_error

Obj = dict[str, Any]
T = TypeVar("T")

#: Server-side printing: what `kubectl get` shows, columns and all.
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def dry_run_params(dry_run: bool) -> dict[str, str]:
    """The query of a server-side dry run (`dryRun=All`: every admission step runs, nothing is
    stored), or none. A dry run is a question, not a change: it is asked once, never retried."""
    return {"dryRun": "All"} if dry_run else {}


_PATCH_TYPES: Mapping[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


@dataclass(frozen=True)
class Call:
    """One HTTP request, with what it is about (for error messages) and whether a failure that
    may be transient can be retried (not for creates: a retried POST could create twice)."""

    method: str
    path: str
    verb: str
    target: str
    params: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    content_type: str = "application/json"
    accept: str | None = None
    retry: bool = True
    timeout: httpx.Timeout | None = None

    def build(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        headers = {}
        if self.body is not None:
            headers["Content-Type"] = self.content_type
        if self.accept:
            headers["Accept"] = self.accept
        return http.build_request(
            self.method,
            self.path,
            params=dict(self.params) or None,
            content=None if self.body is None else json.dumps(self.body),
            headers=headers or None,
            timeout=self.timeout if self.timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )


Op = Generator[Call, Any, T]


def resource_of(path: str) -> str:
    """The resource (with its subresource) a request path names: `pods`, `pytorchjobs/status`,
    `gangbindings`; `discovery` or `version` for the others. What request counts are kept by."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return parts[0] if parts else "/"
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    if not rest:
        return "discovery"
    return rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")


@dataclass(frozen=True)
class Done(Generic[T]):
    value: T


def resume(op: Op[T], value: Any = None, error: BaseException | None = None) -> Call | Done[T]:
    """Feed an answer (or an error) to `op`; its next Call, or Done with its result."""
    try:
        return op.throw(error) if error is not None else op.send(value)
    except StopIteration as stop:
        return Done(stop.value)


def error_from_response(call: Call, status: int, text: str, server: str) -> ApiError:
    """The ApiError for an error answer, from its Status object when the server sent one."""
    reason, message = "", text.strip()[:500]
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or message)
    return api_error(status, reason, message, server, verb=call.verb, target=call.target, body=text)


def decode(call: Call, response: httpx.Response, server: str) -> Any:
    if response.status_code >= 400:
        raise error_from_response(call, response.status_code, response.text, server)
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise ApiError(
            response.status_code,
            "",
            f"the answer is not JSON: {response.text[:200]!r}",
            server,
            verb=call.verb,
            target=call.target,
        ) from None


def unreachable(call: Call, exc: httpx.TransportError, server: str) -> Unreachable:
    return Unreachable(f"{type(exc).__name__}: {exc}", server, verb=call.verb, target=call.target)


def transient(exc: BaseException) -> bool:
    """Worth another try: no answer, throttled (429), or a server-side failure (5xx)."""
    return isinstance(exc, Unreachable) or (isinstance(exc, ApiError) and exc.retriable)


def retry_policy(retries: int) -> dict[str, Any]:
    """tenacity's arguments for retried Calls (the caller adds its own `sleep`)."""
    return {
        "retry": retry_if_exception(transient),
        "stop": stop_after_attempt(retries),
        "wait": wait_exponential_jitter(multiplier=0.2, max=3.0),
        "reraise": True,
    }


def watch_event(line: str, call: Call, server: str) -> Obj | None:
    """One line of a watch stream; None for a blank line. An ERROR event (410 Gone when the
    resourceVersion is too old) raises its ApiError; a line cut short, Unreachable."""
    if not line.strip():
        return None
    try:
        event: Obj = json.loads(line)
    except ValueError:
        cause = f"malformed watch event {line[:100]!r}"
        raise Unreachable(cause, server, verb=call.verb, target=call.target) from None
    if event.get("type") == "ERROR":
        status = event.get("object") or {}
        raise api_error(
            int(status.get("code") or 500),
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
            server,
            verb=call.verb,
            target=call.target,
            body=line,
        )
    return event


class Requests:
    """The verbs, as generators of Calls, for one server (`server` names it in errors)."""

    def __init__(self, server: str, discovery: Discovery | None = None) -> None:
        self.server = server
        self.discovery = discovery or Discovery()

    # -- discovery ------------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> Op[Resource]:
        """Where `kind` of `api_version` lives. A kind missing from the cached document is looked
        up again (a CRD installed since); NotFound if the server does not serve it."""
        if found := self.discovery.find(api_version, kind):
            return found
        call = Call(
            "GET",
            group_version_path(api_version),
            verb="DISCOVER",
            target=f"{kind} ({api_version})",
        )
        listing = yield call
        self.discovery.learn(api_version, listing or {})
        if found := self.discovery.find(api_version, kind):
            return found
        raise NotFound(
            404,
            "NotFound",
            f"the server does not serve {kind} in {api_version}",
            self.server,
            verb=call.verb,
            target=call.target,
        )

    def lookup(self, word: str) -> Op[Resource]:
        """The resource a user means by `word`, across every group (as `kubectl get <word>`)."""
        if found := self.discovery.match(word):
            return found
        if not self.discovery.complete:
            core = yield Call("GET", "/api/v1", verb="DISCOVER", target="v1")
            self.discovery.learn("v1", core or {})
            groups = yield Call("GET", "/apis", verb="DISCOVER", target="API groups")
            versions = preferred_versions(groups or {})
            for api_version in versions:
                try:
                    listing = yield Call(
                        "GET", group_version_path(api_version), verb="DISCOVER", target=api_version
                    )
                except KubeError:
                    continue  # an aggregated API that is down hides only its own kinds
                self.discovery.learn(api_version, listing or {})
            self.discovery.mark_complete(versions)
        if found := self.discovery.match(word):
            return found
        raise NotFound(
            404,
            "NotFound",
            f"the server doesn't have a resource type {word!r}",
            self.server,
            verb="DISCOVER",
            target=word,
        )

    # -- verbs ----------------------------------------------------------------------------------

    def version(self) -> Op[Obj]:
        result: Obj = yield Call("GET", "/version", verb="GET", target="/version")
        return result

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Op[Obj | None]:
        """The object, or None if it does not exist (a 403 is raised, never read as missing)."""
        res = yield from self.resource(api_version, kind)
        try:
            obj: Obj = yield Call(
                "GET", res.path(namespace, name), verb="GET", target=res.describe(namespace, name)
            )
        except NotFound:
            return None
        return obj

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Op[Obj]:
        """The list object (items plus metadata.resourceVersion, for a following watch). With
        `limit`, one page: `metadata.continue` then names the next one (`continue_token`)."""
        res = yield from self.resource(api_version, kind)
        params = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if limit:
            params["limit"] = str(limit)
        if continue_token:
            params["continue"] = continue_token
        result: Obj = yield Call(
            "GET", res.path(namespace), verb="LIST", target=res.describe(namespace), params=params
        )
        return result

    def table(
        self,
        res: Resource,
        namespace: str | None = None,
        name: str | None = None,
        *,
        label_selector: str | None = None,
    ) -> Op[Obj | None]:
        """Server-side printing of a list (or one object): what `kubectl get` shows, each row
        with its object's metadata. None if the named object does not exist."""
        params = {"includeObject": "Metadata"}
        if label_selector:
            params["labelSelector"] = label_selector
        try:
            table: Obj = yield Call(
                "GET",
                res.path(namespace, name),
                verb="GET" if name else "LIST",
                target=res.describe(namespace, name),
                params=params,
                accept=TABLE,
            )
        except NotFound:
            if name:
                return None
            raise
        return table

    def create(
        self, obj: Mapping[str, Any], namespace: str | None = None, *, dry_run: bool = False
    ) -> Op[Obj]:
        """POST: never retried blindly; a 409 (Conflict) means it is already there. `dry_run`
        answers with the object as admission made it, and keeps nothing."""
        res = yield from self.resource(obj["apiVersion"], obj["kind"])
        meta = obj.get("metadata") or {}
        ns = namespace or meta.get("namespace")
        created: Obj = yield Call(
            "POST",
            res.path(ns),
            verb="CREATE",
            target=res.describe(ns, meta.get("name") or meta.get("generateName")),
            params=dry_run_params(dry_run),
            body=obj,
            retry=False,
        )
        return created

    def create_subresource(
        self,
        api_version: str,
        kind: str,
        name: str,
        subresource: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
    ) -> Op[Obj]:
        """POST to an object's subresource (a ServiceAccount's `token`, a Pod's `eviction`)."""
        res = yield from self.resource(api_version, kind)
        created: Obj = yield Call(
            "POST",
            res.path(namespace, name, subresource),
            verb="CREATE",
            target=f"{res.describe(namespace, name)} {subresource}",
            body=body,
            retry=False,
        )
        return created

    def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> Op[Obj]:
        """Server-side apply: idempotent, so it is retried. `dry_run` asks the server whether it
        would take the object and keeps nothing; `field_validation="Strict"` refuses unknown
        fields."""
        res = yield from self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        params = {
            "fieldManager": field_manager,
            "force": "true" if force else "false",
            **dry_run_params(dry_run),
        }
        if field_validation:
            params["fieldValidation"] = field_validation
        applied: Obj = yield Call(
            "PATCH",
            res.path(meta.get("namespace"), meta["name"]),
            verb="APPLY",
            target=res.describe(meta.get("namespace"), meta["name"]),
            params=params,
            body=obj,
            content_type="application/apply-patch+yaml",
            retry=not dry_run,  # a question, not a change: ask once
        )
        return applied

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any] | builtins.list[Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        patch_type: str = "merge",
    ) -> Op[Obj]:
        res = yield from self.resource(api_version, kind)
        target = res.describe(namespace, name) + (f" {subresource}" if subresource else "")
        patched: Obj = yield Call(
            "PATCH",
            res.path(namespace, name, subresource),
            verb="PATCH",
            target=target,
            body=patch,
            content_type=_PATCH_TYPES[patch_type],
        )
        return patched

    def replace(self, obj: Mapping[str, Any], *, subresource: str | None = None) -> Op[Obj]:
        """PUT with the object's resourceVersion: Conflict (409) if someone else wrote first."""
        res = yield from self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        ns = meta.get("namespace")
        replaced: Obj = yield Call(
            "PUT",
            res.path(ns, meta["name"], subresource),
            verb="REPLACE",
            target=res.describe(ns, meta["name"]) + (f" {subresource}" if subresource else ""),
            body=obj,
            retry=False,
        )
        return replaced

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        uid: str | None = None,
    ) -> Op[bool]:
        """Delete; False if it was already gone. `uid` guards against deleting a newer object
        that reuses the name (False then too)."""
        res = yield from self.resource(api_version, kind)
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            yield Call(
                "DELETE",
                res.path(namespace, name),
                verb="DELETE",
                target=res.describe(namespace, name),
                body=body,
            )
        except ApiError as e:
            if e.not_found or (e.conflict and uid):
                return False
            raise
        return True

    def log_call(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        follow: bool = False,
        tail_lines: int | None = None,
    ) -> Call:
        """A pod's log (`GET .../pods/<pod>/log`), read as a stream: with `follow` the server
        keeps it open as the container writes, so there is no read timeout then."""
        params = {}
        if container:
            params["container"] = container
        if follow:
            params["follow"] = "true"
        if tail_lines is not None:
            params["tailLines"] = str(tail_lines)
        target = f"Pod {namespace}/{pod} log" + (f" (container {container})" if container else "")
        return Call(
            "GET",
            f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/log",
            verb="GET",
            target=target,
            params=params,
            accept="text/plain, */*",
            retry=False,
            timeout=httpx.Timeout(connect=5.0, read=None if follow else 60.0, write=10, pool=10),
        )

    def watch_call(
        self,
        res: Resource,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> Call:
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        return Call(
            "GET",
            res.path(namespace),
            verb="WATCH",
            target=res.describe(namespace),
            params=params,
            timeout=httpx.Timeout(connect=5.0, read=timeout_seconds + 30, write=10, pool=10),
        )
