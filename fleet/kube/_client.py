"""An async Kubernetes client on httpx: the verbs fleet needs, discovery, and watches.

One instance per API server. Reads and idempotent writes retry on connection errors, 429 and
5xx with exponential backoff (tenacity); creates are not retried blindly, callers treat a 409
as "already there" and adopt the object instead.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from fleet.kube._connection import Connection

Obj = dict[str, Any]


class ApiError(Exception):
    """The API server refused a request; `status` is the HTTP code."""

    def __init__(self, status: int, reason: str, message: str, server: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = message
        where = f" ({server})" if server else ""
        super().__init__(f"{status} {reason}: {message}{where}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


class Unreachable(Exception):
    """The API server did not answer (connection refused, timeout, TLS failure)."""


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, Unreachable):
        return True
    return isinstance(exc, ApiError) and (exc.status == 429 or exc.status >= 500)


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        return f"{base}/{quote(name)}" if name else base


class KubeClient:
    """Talks to one API server."""

    def __init__(
        self,
        connection: Connection,
        *,
        name: str = "",
        timeout: float = 15.0,
        retries: int = 4,
    ) -> None:
        self.name = name or connection.server
        self.server = connection.server
        self._retries = retries
        self._http = httpx.AsyncClient(
            base_url=connection.server,
            verify=connection.ssl_context,
            headers=dict(connection.headers),
            timeout=httpx.Timeout(timeout, connect=5.0),
            limits=httpx.Limits(max_connections=50, max_keepalive_connections=20),
        )
        self._resources: dict[tuple[str, str], Resource] = {}

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- plumbing ---------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        retry: bool = True,
    ) -> Any:
        async def once() -> Any:
            try:
                r = await self._http.request(
                    method,
                    path,
                    params=params,
                    content=None if body is None else json.dumps(body),
                    headers={"Content-Type": content_type} if body is not None else None,
                )
            except httpx.TransportError as e:
                raise Unreachable(f"{self.name}: {type(e).__name__}: {e}") from e
            if r.status_code >= 400:
                raise self._error(r)
            return r.json() if r.content else None

        if not retry:
            return await once()
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(self._retries),
            wait=wait_exponential_jitter(multiplier=0.2, max=3.0),
            reraise=True,
        ):
            with attempt:
                return await once()
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, r: httpx.Response) -> ApiError:
        try:
            status = r.json()
            return ApiError(
                r.status_code, status.get("reason", ""), status.get("message", r.text), self.name
            )
        except ValueError:
            return ApiError(r.status_code, r.reason_phrase, r.text[:300], self.name)

    # -- discovery --------------------------------------------------------------------------

    async def resource(self, api_version: str, kind: str) -> Resource:
        """Look a kind up once (cached); raises ApiError 404 if the server does not serve it."""
        key = (api_version, kind)
        if key in self._resources:
            return self._resources[key]
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        listing = await self._send("GET", path)
        for item in listing.get("resources", []):
            if "/" in item["name"]:
                continue
            found = Resource(api_version, item["kind"], item["name"], bool(item["namespaced"]))
            self._resources[(api_version, item["kind"])] = found
        if key not in self._resources:
            raise ApiError(404, "NotFound", f"{self.name} serves no {kind} in {api_version}")
        return self._resources[key]

    def forget_discovery(self) -> None:
        self._resources.clear()

    # -- verbs ------------------------------------------------------------------------------

    async def version(self) -> Obj:
        result: Obj = await self._send("GET", "/version")
        return result

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        res = await self.resource(api_version, kind)
        try:
            obj: Obj = await self._send("GET", res.path(namespace, name))
        except ApiError as e:
            if e.not_found:
                return None
            raise
        return obj

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Obj:
        """The whole list object (items plus metadata.resourceVersion, for a following watch)."""
        res = await self.resource(api_version, kind)
        params = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        result: Obj = await self._send("GET", res.path(namespace), params=params)
        return result

    async def create(self, obj: Mapping[str, Any]) -> Obj:
        res = await self.resource(obj["apiVersion"], obj["kind"])
        ns = obj.get("metadata", {}).get("namespace")
        created: Obj = await self._send("POST", res.path(ns), body=obj, retry=False)
        return created

    async def apply(self, obj: Mapping[str, Any], *, field_manager: str, force: bool = True) -> Obj:
        """Server-side apply: idempotent, so it is retried."""
        res = await self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        applied: Obj = await self._send(
            "PATCH",
            res.path(meta.get("namespace"), meta["name"]),
            params={"fieldManager": field_manager, "force": "true" if force else "false"},
            body=obj,
            content_type="application/apply-patch+yaml",
        )
        return applied

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any] | builtins.list[Any],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        patch_type: str = "merge",
    ) -> Obj:
        res = await self.resource(api_version, kind)
        path = res.path(namespace, name) + (f"/{subresource}" if subresource else "")
        content_type = {
            "merge": "application/merge-patch+json",
            "json": "application/json-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        patched: Obj = await self._send("PATCH", path, body=patch, content_type=content_type)
        return patched

    async def replace(self, obj: Mapping[str, Any], *, subresource: str | None = None) -> Obj:
        """PUT with the object's resourceVersion: fails with 409 if someone else wrote first."""
        res = await self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        path = res.path(meta.get("namespace"), meta["name"]) + (
            f"/{subresource}" if subresource else ""
        )
        replaced: Obj = await self._send("PUT", path, body=obj, retry=False)
        return replaced

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        uid: str | None = None,
    ) -> bool:
        """Delete (idempotent: False if it was already gone). `uid` guards against deleting a
        newer object that reuses the name."""
        res = await self.resource(api_version, kind)
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await self._send("DELETE", res.path(namespace, name), body=body)
        except ApiError as e:
            if e.not_found:
                return False
            if e.conflict and uid:
                return False
            raise
        return True

    async def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[Obj]:
        """Yield watch events (type, object) until the server closes the stream.

        A 410 Gone (as an HTTP status or an ERROR event) raises ApiError(410): the caller lists
        again and resumes from the new resourceVersion.
        """
        res = await self.resource(api_version, kind)
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
        timeout = httpx.Timeout(connect=5.0, read=timeout_seconds + 30, write=10, pool=10)
        try:
            async with self._http.stream(
                "GET", res.path(namespace), params=params, timeout=timeout
            ) as r:
                if r.status_code >= 400:
                    await r.aread()
                    raise self._error(r)
                async for line in r.aiter_lines():
                    if not line:
                        continue
                    event: Obj = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise ApiError(
                            int(status.get("code") or 500),
                            status.get("reason", ""),
                            status.get("message", ""),
                            self.name,
                        )
                    yield event
        except httpx.TransportError as e:
            raise Unreachable(f"{self.name}: watch {kind}: {type(e).__name__}: {e}") from e
