"""The dashboard's web server: the page, its JSON, the change stream and a job's log.

Every JSON endpoint builds its view from the watch-fed `State` with the pure functions in
`views/`; a view that fails answers with its error as JSON (the page shows it and keeps the
others). `/api/events` is a server-sent event stream that says "changed" (with the state's
version) whenever a watch delivered something, at most every `DEBOUNCE_SECONDS`; the page then
fetches the view it shows. Nothing polls the API servers.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import ExitStack
from importlib import resources
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from fleet.amc.errors import AmcError
from fleet.amc.logs import LogsRequest
from fleet.amc.logs import run as amc_logs
from fleet.amc.members import Fleet
from fleet.dashboard.authz import Authorizer, Question, User, job_resource
from fleet.dashboard.hosts import AllowedHosts, guard
from fleet.dashboard.state import (
    GANG_BINDING,
    MEMBER_CLUSTER,
    QUEUE,
    QUEUE_UNIT,
    QUOTA_TREE,
    State,
)
from fleet.dashboard.views.fleet import fleet_view
from fleet.dashboard.views.jobs import find_binding, job_view, jobs_view
from fleet.dashboard.views.quotas import quotas_view
from fleet.dashboard.views.reservations import reservations_view
from fleet.kube import KubeError, SyncKubeClient

log = logging.getLogger(__name__)

#: A job's log on its page: the last lines, as `kubectl amc logs --tail` reads them.
LOG_TAIL_LINES = 300
#: Changes closer together than this reach the page as one.
DEBOUNCE_SECONDS = 0.25
#: A comment line keeps idle event streams (and proxies) open.
KEEPALIVE_SECONDS = 15.0

ASSETS = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "style.css": "text/css",
}

#: The user an authenticating proxy named (fleet.dashboard.authz), on each request.
USER: web.RequestKey[User] = web.RequestKey("user", User)
#: (namespace, kind, name, replica) -> the log text; raises AmcError with one line.
ReadLog = Callable[[str, str, str, str | None], Awaitable[str]]


def amc_log_reader(fleet: SyncKubeClient) -> ReadLog:
    """A job's log as `kubectl amc logs KIND/NAME --replica R --tail N` reads it."""

    async def read(namespace: str, kind: str, name: str, replica: str | None) -> str:
        def fetch() -> str:
            out = io.BytesIO()
            with ExitStack() as stack:
                request = LogsRequest.parse(
                    f"{kind.lower()}/{name}", namespace, replica=replica, tail=LOG_TAIL_LINES
                )
                amc_logs(Fleet(fleet, stack), request, out=out)
            return out.getvalue().decode(errors="replace")

        return await asyncio.to_thread(fetch)

    return read


def _asset(name: str) -> bytes:
    return (resources.files("fleet.dashboard") / "assets" / name).read_bytes()


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(data, sort_keys=True), status=status, content_type="application/json"
    )


def _who(authorizer: Authorizer) -> Middleware:
    """aiohttp middleware: 401 for a request without the proxy's user header (`/healthz`, the
    kubelet's probe, aside); the user goes with the request to the handlers."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == "/healthz":
            return await handler(request)
        user = authorizer.user(request)
        if user is None:
            log.info(
                "refused %s %s: no %s header", request.method, request.path, authorizer.user_header
            )
            return web.Response(
                status=401,
                text=f"401 Unauthorized: no {authorizer.user_header} header; this dashboard "
                "answers only through its authenticating proxy (docs/dashboard.md)\n",
            )
        request[USER] = user
        return await handler(request)

    return middleware


def _forbidden(user: User, question: Question) -> web.Response:
    what = f"{question.resource}.{question.group}" if question.group else question.resource
    named = f" {question.name!r}" if question.name else ""
    return _json(
        {
            "error": f"{user.name} may not {question.verb} {what}{named} in namespace "
            f"{question.namespace} on the fleet",
            "log": "",
        },
        403,
    )


def _binding_question(raw: Mapping[str, Any], verb: str) -> Question | None:
    """The question that guards a binding's job: `verb` on its kind in its namespace."""
    spec = raw.get("spec") or {}
    resource = spec.get("resource") if isinstance(spec, Mapping) else None
    meta = raw.get("metadata") or {}
    if not isinstance(resource, Mapping):
        return None
    found = job_resource(str(resource.get("kind") or ""))
    if found is None:
        return None
    group, plural = found
    name = str(resource.get("name") or "") if verb == "get" else ""
    return Question(verb, group, plural, str(meta.get("namespace") or ""), name)


def make_app(
    state: State,
    *,
    read_log: ReadLog | None = None,
    clock: Callable[[], float] = time.time,
    hosts: AllowedHosts | None = None,
    authorizer: Authorizer | None = None,
) -> web.Application:
    """The app; `read_log` None serves no logs (tests), `clock` gives ages their now, `hosts`
    the Host and Origin headers answered (by default a dashboard on 127.0.0.1's: loopback
    names only; fleet.dashboard.hosts). With an `authorizer` (`--auth-headers`), every request
    names its user (the proxy's header), a job's page and log are served only to a user the
    fleet lets `get` that job, and the job list holds only the jobs of the namespaces where the
    user may `list` their kind (fleet.dashboard.authz)."""

    async def allowed(request: web.Request, question: Question | None) -> Question | None:
        """None when the request's user may (or no one is asked); else the question refused."""
        if authorizer is None:
            return None
        if question is None:
            return Question("get", "", "unknown kind", "")
        return None if await authorizer.allows(request[USER], question) else question

    async def readable(request: web.Request) -> dict[str, Any]:
        bindings = fleet[GANG_BINDING]
        if authorizer is None:
            return bindings
        kept = {}
        for key, raw in bindings.items():
            question = _binding_question(raw, "list")
            if question is not None and await authorizer.allows(request[USER], question):
                kept[key] = raw
        return kept

    def view(build: Callable[[float], Any]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            try:
                return _json({"version": state.version, **build(clock())})
            except Exception as e:  # one broken view must not take the others down
                log.exception("view failed")
                return _json({"version": state.version, "error": f"{type(e).__name__}: {e}"}, 500)

        return handler

    def problems() -> dict[str, str]:
        return {kind: why for (_, kind), why in state.fleet_problems.items()}

    async def index(_: web.Request) -> web.Response:
        return web.Response(body=_asset("index.html"), content_type="text/html")

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound()
        return web.Response(body=_asset(name), content_type=ASSETS[name])

    async def job(request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        raw = find_binding(state.fleet[GANG_BINDING], ns, name)
        if raw is None:
            # Whether a job is there is told only to whom may list the bindings there.
            refused = await allowed(request, Question("list", "fleet.dev", "gangbindings", ns))
            if refused is not None:
                return _forbidden(request[USER], refused)
            return _json({"error": f"no gang job {ns}/{name} (no GangBinding)"}, 404)
        refused = await allowed(request, _binding_question(raw, "get"))
        if refused is not None:
            return _forbidden(request[USER], refused)
        pods = [
            (member, pod) for member, live in state.members.items() for pod in live.pods.values()
        ]
        try:
            body = job_view(raw, state.fleet[QUEUE_UNIT], pods, clock())
        except Exception as e:
            log.exception("job view failed")
            return _json({"error": f"{type(e).__name__}: {e}"}, 500)
        return _json({"version": state.version, **body})

    async def job_log(request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        kind = request.query.get("kind") or ""
        replica = request.query.get("replica") or None
        if not kind:
            return _json({"log": "", "error": "which kind? (?kind=PyTorchJob)"}, 400)
        if authorizer is not None:
            found = job_resource(kind)
            if found is None:
                return _json({"log": "", "error": f"fleet dispatches no kind {kind!r}"}, 400)
            refused = await allowed(request, Question("get", found[0], found[1], ns, name))
            if refused is not None:
                return _forbidden(request[USER], refused)
        if read_log is None:
            return _json({"log": "", "error": "this dashboard serves no logs"})
        try:
            text = await read_log(ns, kind, name, replica)
        except (AmcError, KubeError) as e:
            return _json({"log": "", "error": str(e)})
        return _json({"log": text, "error": ""})

    async def events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        version = -1
        try:
            while True:
                current = await state.wait_past(version, KEEPALIVE_SECONDS)
                if current == version:
                    await response.write(b": keepalive\n\n")
                    continue
                version = current
                await response.write(f"event: change\ndata: {version}\n\n".encode())
                await asyncio.sleep(DEBOUNCE_SECONDS)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def jobs(request: web.Request) -> web.Response:
        try:
            bindings = await readable(request)
            return _json(
                {"version": state.version, **jobs_view(bindings, fleet[QUEUE_UNIT], clock())}
            )
        except Exception as e:  # one broken view must not take the others down
            log.exception("view failed")
            return _json({"version": state.version, "error": f"{type(e).__name__}: {e}"}, 500)

    fleet = state.fleet
    middlewares = [guard(hosts or AllowedHosts.serving("127.0.0.1"))]
    if authorizer is not None:
        middlewares.append(_who(authorizer))
    app = web.Application(middlewares=middlewares)
    app.router.add_get("/", index)
    app.router.add_get("/assets/{name}", asset)
    app.router.add_get(
        "/api/fleet",
        view(lambda now: fleet_view(fleet[MEMBER_CLUSTER], state.members, now, problems())),
    )
    app.router.add_get("/api/jobs", jobs)
    app.router.add_get("/api/jobs/{namespace}/{name}", job)
    app.router.add_get("/api/jobs/{namespace}/{name}/log", job_log)
    app.router.add_get(
        "/api/quotas",
        view(lambda now: quotas_view(fleet[QUOTA_TREE], fleet[QUEUE], fleet[QUEUE_UNIT], now)),
    )
    app.router.add_get(
        "/api/reservations",
        view(lambda now: reservations_view(fleet[MEMBER_CLUSTER], state.members, now)),
    )
    app.router.add_get("/api/events", events)
    app.router.add_get("/healthz", healthz)
    return app
