"""The async Kubernetes client on httpx: the controller's verbs, discovery, and watches.

One instance per API server. Reads and idempotent writes retry on no answer, 429 and 5xx with
exponential backoff (tenacity); creates and replaces are not retried blindly, callers treat a
409 as "already there" (or "someone wrote first") instead. What is asked is built in
_requests, shared with the sync client; only sending is here.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying

from fleet.kube._connection import Connection
from fleet.kube._discovery import Discovery, Resource
from fleet.kube._errors import KubeError
from fleet.kube._ratelimit import RateLimit
from fleet.kube._requests import (
    Call,
    Done,
    Obj,
    Op,
    Requests,
    decode,
    resource_of,
    resume,
    retry_policy,
    unreachable,
    watch_event,
)

T = TypeVar("T")

__all__ = ["KubeClient"]


class KubeClient:
    """Talks to one API server, asynchronously.

    `transport` replaces the network (tests pass an httpx.MockTransport), `sleep` the waits
    between retries (tests pass one that returns at once).
    """

    def __init__(
        self,
        connection: Connection,
        *,
        name: str = "",
        timeout: float = 15.0,
        retries: int = 4,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.name = name or connection.server
        self.server = connection.server
        self.connection = connection
        self._retries = retries
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=5.0),
            limits=httpx.Limits(max_connections=50, max_keepalive_connections=20),
            **connection.client_options(transport),
        )
        self._requests = Requests(self.name, Discovery())
        #: Requests sent, by (verb, resource): what a dispatch costs (see /metrics).
        self.requests: Counter[tuple[str, str]] = Counter()
        #: Seconds spent waiting for answers, summed over requests (concurrent ones overlap).
        self.busy_seconds = 0.0
        #: Client-side QPS/burst limit (None: none), taken before every request but watches.
        self.rate_limit: RateLimit | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- sending --------------------------------------------------------------------------------

    async def _send(self, call: Call, auth: httpx.Auth | None = None) -> Any:
        self.requests[(call.verb, resource_of(call.path))] += 1
        if self.rate_limit is not None:
            await self.rate_limit.acquire()
        started = time.monotonic()
        try:
            response = await self._http.send(
                call.build(self._http), auth=auth if auth is not None else httpx.USE_CLIENT_DEFAULT
            )
        except httpx.TransportError as e:
            raise unreachable(call, e, self.name) from e
        finally:
            self.busy_seconds += time.monotonic() - started
        return decode(call, response, self.name)

    async def _execute(self, call: Call, auth: httpx.Auth | None = None) -> Any:
        if not call.retry:
            return await self._send(call, auth)
        async for attempt in AsyncRetrying(sleep=self._sleep, **retry_policy(self._retries)):
            with attempt:
                return await self._send(call, auth)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _run(self, op: Op[T], auth: httpx.Auth | None = None) -> T:
        """Send `op`'s requests; with `auth`, every one of them (its discovery too) as that
        identity instead of the connection's."""
        step = resume(op)
        while not isinstance(step, Done):
            try:
                answer = await self._execute(step, auth)
            except KubeError as e:
                step = resume(op, error=e)
            else:
                step = resume(op, answer)
        return step.value

    # -- discovery ------------------------------------------------------------------------------

    async def resource(self, api_version: str, kind: str) -> Resource:
        """Where a kind lives (cached); NotFound if the server does not serve it."""
        return await self._run(self._requests.resource(api_version, kind))

    async def lookup(self, word: str) -> Resource:
        """The resource a user means by `word` (`pytorchjob`, `po`, ...), across all groups."""
        return await self._run(self._requests.lookup(word))

    def forget_discovery(self) -> None:
        self._requests.discovery.forget()

    # -- verbs ----------------------------------------------------------------------------------

    async def version(self) -> Obj:
        return await self._run(self._requests.version())

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        """The object, or None if it does not exist (403 and the rest raise)."""
        return await self._run(self._requests.get(api_version, kind, name, namespace))

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Obj:
        """The list object (items plus metadata.resourceVersion, for a following watch). With
        `limit`, one page: `metadata.continue` then names the next one (`continue_token`)."""
        return await self._run(
            self._requests.list(
                api_version,
                kind,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_token=continue_token,
            )
        )

    async def table(
        self,
        res: Resource,
        namespace: str | None = None,
        name: str | None = None,
        *,
        label_selector: str | None = None,
    ) -> Obj | None:
        """What `kubectl get` prints (a meta.k8s.io Table); None if the named object is
        missing."""
        return await self._run(
            self._requests.table(res, namespace, name, label_selector=label_selector)
        )

    async def create(
        self, obj: Mapping[str, Any], namespace: str | None = None, *, dry_run: bool = False
    ) -> Obj:
        """POST, not retried: a Conflict (409) means it is already there. `dry_run`: the object
        as the server's admission would make it, nothing stored."""
        return await self._run(self._requests.create(obj, namespace, dry_run=dry_run))

    async def create_subresource(
        self,
        api_version: str,
        kind: str,
        name: str,
        subresource: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        auth: httpx.Auth | None = None,
    ) -> Obj:
        """POST to an object's subresource; with `auth`, as that identity (a token renewer)
        rather than the connection's."""
        request = self._requests.create_subresource
        return await self._run(request(api_version, kind, name, subresource, body, namespace), auth)

    async def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> Obj:
        """Server-side apply: idempotent, so it is retried."""
        return await self._run(
            self._requests.apply(
                obj,
                field_manager=field_manager,
                force=force,
                dry_run=dry_run,
                field_validation=field_validation,
            )
        )

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
        return await self._run(
            self._requests.patch(
                api_version,
                kind,
                name,
                patch,
                namespace,
                subresource=subresource,
                patch_type=patch_type,
            )
        )

    async def replace(self, obj: Mapping[str, Any], *, subresource: str | None = None) -> Obj:
        """PUT with the object's resourceVersion: Conflict (409) if someone else wrote first."""
        return await self._run(self._requests.replace(obj, subresource=subresource))

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
        return await self._run(
            self._requests.delete(
                api_version, kind, name, namespace, propagation=propagation, uid=uid
            )
        )

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
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[Obj]:
        """Yield watch events (type, object) until the server closes the stream.

        A 410 Gone (as an HTTP status or an ERROR event) raises Gone: the caller lists again
        and resumes from the new resourceVersion. A broken stream raises Unreachable.
        `on_open` is called once the server accepted the watch (before any event arrives).
        """
        res = await self.resource(api_version, kind)
        call = self._requests.watch_call(
            res,
            resource_version=resource_version,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
        )
        try:
            response = await self._http.send(call.build(self._http), stream=True)
        except httpx.TransportError as e:
            raise unreachable(call, e, self.name) from e
        try:
            if response.status_code >= 400:
                await response.aread()
                decode(call, response, self.name)
            if on_open is not None:
                on_open()
            async for line in response.aiter_lines():
                event = watch_event(line, call, self.name)
                if event is not None:
                    yield event
        except httpx.TransportError as e:
            raise unreachable(call, e, self.name) from e
        finally:
            await response.aclose()
