"""A scripted API server for shell tests: discovery answered as a real one does, everything
else from per-test scripts, every request recorded. No network, no sandbox."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from fleet.kube import Connection, KubeClient, SyncKubeClient

SERVER = "https://api.test"

CORE = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "pods",
            "singularName": "pod",
            "namespaced": True,
            "kind": "Pod",
            "shortNames": ["po"],
        },
        {"name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod"},
        {"name": "secrets", "singularName": "secret", "namespaced": True, "kind": "Secret"},
        {
            "name": "nodes",
            "singularName": "node",
            "namespaced": False,
            "kind": "Node",
            "shortNames": ["no"],
        },
        {
            "name": "events",
            "singularName": "event",
            "namespaced": True,
            "kind": "Event",
            "shortNames": ["ev"],
        },
        {
            "name": "namespaces",
            "singularName": "namespace",
            "namespaced": False,
            "kind": "Namespace",
            "shortNames": ["ns"],
        },
        {
            "name": "serviceaccounts",
            "singularName": "serviceaccount",
            "namespaced": True,
            "kind": "ServiceAccount",
            "shortNames": ["sa"],
        },
        {
            "name": "serviceaccounts/token",
            "singularName": "",
            "namespaced": True,
            "kind": "TokenRequest",
        },
    ],
}
GROUPS = {
    "kind": "APIGroupList",
    "groups": [
        {
            "name": "events.k8s.io",
            "versions": [{"groupVersion": "events.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "events.k8s.io/v1", "version": "v1"},
        },
        {
            "name": "kubeflow.org",
            "versions": [{"groupVersion": "kubeflow.org/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "kubeflow.org/v1", "version": "v1"},
        },
        {
            "name": "metrics.k8s.io",
            "versions": [{"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}],
            "preferredVersion": {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"},
        },
    ],
}
EVENTS = {
    "kind": "APIResourceList",
    "groupVersion": "events.k8s.io/v1",
    "resources": [
        {
            "name": "events",
            "singularName": "event",
            "namespaced": True,
            "kind": "Event",
            "shortNames": ["ev"],
        }
    ],
}
KUBEFLOW = {
    "kind": "APIResourceList",
    "groupVersion": "kubeflow.org/v1",
    "resources": [
        {
            "name": "pytorchjobs",
            "singularName": "pytorchjob",
            "namespaced": True,
            "kind": "PyTorchJob",
        },
        {
            "name": "pytorchjobs/status",
            "singularName": "",
            "namespaced": True,
            "kind": "PyTorchJob",
        },
    ],
}


def status(code: int, reason: str, message: str) -> httpx.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    return httpx.Response(code, json=body)


Answer = httpx.Response | Exception | Callable[[httpx.Request], Any]


@dataclass
class FakeApi:
    """Answers `(method, path)` from `script` (one answer per request, the last one repeats);
    discovery from `discovery`; 404 otherwise."""

    discovery: dict[str, Any] = field(
        default_factory=lambda: {
            "/version": {"major": "1", "minor": "34", "gitVersion": "v1.34.4"},
            "/api/v1": CORE,
            "/apis": GROUPS,
            "/apis/events.k8s.io/v1": EVENTS,
            "/apis/kubeflow.org/v1": KUBEFLOW,
            "/apis/metrics.k8s.io/v1beta1": status(503, "ServiceUnavailable", "metrics down"),
        }
    )
    script: dict[tuple[str, str], list[Answer]] = field(default_factory=dict)
    requests: list[httpx.Request] = field(default_factory=list)

    def on(self, method: str, path: str, *answers: Answer) -> FakeApi:
        self.script.setdefault((method, path), []).extend(answers)
        return self

    def asked(self, method: str | None = None, path: str | None = None) -> list[httpx.Request]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and (path is None or r.url.path == path)
        ]

    def _answer(self, request: httpx.Request) -> Any:
        self.requests.append(request)
        key = (request.method, request.url.path)
        if key in self.script:
            answers = self.script[key]
            return answers.pop(0) if len(answers) > 1 else answers[0]
        if request.method == "GET" and request.url.path in self.discovery:
            found = self.discovery[request.url.path]
            return found if isinstance(found, httpx.Response) else httpx.Response(200, json=found)
        return status(404, "NotFound", f"the server could not find {request.url.path}")

    def _resolve(self, request: httpx.Request, answer: Any) -> httpx.Response:
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            answer = answer(request)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return httpx.Response(200, json=answer)

    def sync_transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(lambda r: self._resolve(r, self._answer(r)))

    def async_transport(self) -> httpx.MockTransport:
        async def handle(request: httpx.Request) -> httpx.Response:
            answer = self._answer(request)
            if callable(answer) and not isinstance(answer, Exception):
                answer = answer(request)
                if inspect.isawaitable(answer):
                    answer = await answer
            return self._resolve(request, answer)

        return httpx.MockTransport(handle)


class Sleeps:
    """An injected sleep: records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class AsyncSleeps(Sleeps):
    async def __call__(self, seconds: float) -> None:  # type: ignore[override]
        self.waits.append(seconds)
        await asyncio.sleep(0)


def sync_client(api: FakeApi, name: str = "fleet", **kw: Any) -> tuple[SyncKubeClient, Sleeps]:
    sleeps = Sleeps()
    client = SyncKubeClient(
        Connection(SERVER), name=name, transport=api.sync_transport(), sleep=sleeps, **kw
    )
    return client, sleeps


def async_client(api: FakeApi, name: str = "member-1", **kw: Any) -> tuple[KubeClient, AsyncSleeps]:
    sleeps = AsyncSleeps()
    client = KubeClient(
        Connection(SERVER), name=name, transport=api.async_transport(), sleep=sleeps, **kw
    )
    return client, sleeps


def stream(*events: dict[str, Any]) -> httpx.Response:
    """A watch answer: one JSON event per line, then the server closes the stream."""
    return httpx.Response(200, content="".join(json.dumps(e) + "\n" for e in events).encode())
