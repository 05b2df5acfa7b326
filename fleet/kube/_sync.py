"""The sync Kubernetes client: the same requests as the async one, sent on an httpx.Client.

For command lines (`kubectl amc`, `fleet install`, `fleet join`, `fleet demo`), the sandbox
bootstrap and tests, where an event loop only gets in the way. Discovery, error mapping and
retries are the async client's (see _requests); only sending differs.
"""

from __future__ import annotations

import builtins
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import httpx
from tenacity import Retrying

from fleet.kube._connection import Connection
from fleet.kube._discovery import Discovery, Resource
from fleet.kube._errors import KubeError
from fleet.kube._requests import (
    Call,
    Done,
    Obj,
    Op,
    Requests,
    decode,
    error_from_response,
    resource_of,
    resume,
    retry_policy,
    unreachable,
)

T = TypeVar("T")

__all__ = ["SyncKubeClient"]


class SyncKubeClient:
    """Talks to one API server, blocking.

    `transport` replaces the network (tests pass an httpx.MockTransport), `sleep` the waits
    between retries.
    """

    def __init__(
        self,
        connection: Connection,
        *,
        name: str = "",
        timeout: float = 15.0,
        retries: int = 4,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name or connection.server
        self.server = connection.server
        self.connection = connection
        self._retries = retries
        self._sleep = sleep
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=5.0),
            **connection.client_options(transport),
        )
        self._requests = Requests(self.name, Discovery())
        #: Requests sent, by (verb, resource): what a dispatch costs (see /metrics).
        self.requests: Counter[tuple[str, str]] = Counter()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SyncKubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending --------------------------------------------------------------------------------

    def _send(self, call: Call) -> Any:
        self.requests[(call.verb, resource_of(call.path))] += 1
        try:
            response = self._http.send(call.build(self._http))
        except httpx.TransportError as e:
            raise unreachable(call, e, self.name) from e
        return decode(call, response, self.name)

    def _execute(self, call: Call) -> Any:
        if not call.retry:
            return self._send(call)
        for attempt in Retrying(sleep=self._sleep, **retry_policy(self._retries)):
            with attempt:
                return self._send(call)
        raise AssertionError("unreachable")  # pragma: no cover

    def _run(self, op: Op[T]) -> T:
        step = resume(op)
        while not isinstance(step, Done):
            try:
                answer = self._execute(step)
            except KubeError as e:
                step = resume(op, error=e)
            else:
                step = resume(op, answer)
        return step.value

    # -- discovery ------------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> Resource:
        """Where a kind lives (cached); NotFound if the server does not serve it."""
        return self._run(self._requests.resource(api_version, kind))

    def lookup(self, word: str) -> Resource:
        """The resource a user means by `word` (`pytorchjob`, `po`, ...), across all groups."""
        return self._run(self._requests.lookup(word))

    def forget_discovery(self) -> None:
        self._requests.discovery.forget()

    # -- verbs ----------------------------------------------------------------------------------

    def version(self) -> Obj:
        return self._run(self._requests.version())

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        """The object, or None if it does not exist (403 and the rest raise)."""
        return self._run(self._requests.get(api_version, kind, name, namespace))

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Obj:
        """The whole list object (items plus metadata.resourceVersion)."""
        return self._run(
            self._requests.list(
                api_version,
                kind,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
            )
        )

    def table(
        self,
        res: Resource,
        namespace: str | None = None,
        name: str | None = None,
        *,
        label_selector: str | None = None,
    ) -> Obj | None:
        """What `kubectl get` prints (a meta.k8s.io Table); None if the named object is
        missing."""
        return self._run(self._requests.table(res, namespace, name, label_selector=label_selector))

    def create(
        self, obj: Mapping[str, Any], namespace: str | None = None, *, dry_run: bool = False
    ) -> Obj:
        """POST, not retried: a Conflict (409) means it is already there. `dry_run`: the object
        as the server's admission would make it, nothing stored."""
        return self._run(self._requests.create(obj, namespace, dry_run=dry_run))

    def create_subresource(
        self,
        api_version: str,
        kind: str,
        name: str,
        subresource: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
    ) -> Obj:
        return self._run(
            self._requests.create_subresource(api_version, kind, name, subresource, body, namespace)
        )

    def apply(
        self,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> Obj:
        """Server-side apply: idempotent, so it is retried."""
        return self._run(
            self._requests.apply(
                obj,
                field_manager=field_manager,
                force=force,
                dry_run=dry_run,
                field_validation=field_validation,
            )
        )

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
    ) -> Obj:
        return self._run(
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

    def replace(self, obj: Mapping[str, Any], *, subresource: str | None = None) -> Obj:
        """PUT with the object's resourceVersion: Conflict (409) if someone else wrote first."""
        return self._run(self._requests.replace(obj, subresource=subresource))

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        uid: str | None = None,
    ) -> bool:
        """Delete (idempotent: False if it was already gone)."""
        return self._run(
            self._requests.delete(
                api_version, kind, name, namespace, propagation=propagation, uid=uid
            )
        )

    def pod_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        follow: bool = False,
        tail_lines: int | None = None,
    ) -> Iterator[bytes]:
        """A pod's log as it arrives, in chunks, through the API server (which asks the node's
        kubelet). With `follow` it lasts until the container ends or the caller stops reading.
        An error answer raises its ApiError before anything is yielded; a stream cut short
        raises Unreachable."""
        call = self._requests.log_call(
            namespace, pod, container=container, follow=follow, tail_lines=tail_lines
        )
        try:
            response = self._http.send(call.build(self._http), stream=True)
        except httpx.TransportError as e:
            raise unreachable(call, e, self.name) from e
        try:
            if response.status_code >= 400:
                response.read()
                raise error_from_response(call, response.status_code, response.text, self.name)
            yield from response.iter_bytes()
        except httpx.TransportError as e:
            raise unreachable(call, e, self.name) from e
        finally:
            response.close()

    def get_path(self, path: str) -> httpx.Response:
        """A raw GET of a non-resource path (`/readyz`, `/livez`), once, answer unread: for
        health probes, where the status code is the answer. Unreachable if nothing answers."""
        call = Call("GET", path, verb="GET", target=path, retry=False)
        try:
            return self._http.send(call.build(self._http))
        except httpx.TransportError as e:
            raise unreachable(call, e, self.name) from e
