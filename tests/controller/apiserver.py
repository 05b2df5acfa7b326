"""An in-memory Kubernetes API server for shell tests, behind an httpx MockTransport.

Unlike `tests.kube.fakes.FakeApi`, which answers from per-test scripts, this one keeps objects:
create (with generateName, and only in a namespace that exists), get, list (with equality label
selectors), merge patch (with the resourceVersion precondition), JSON patch (add, replace,
remove and test: a failed op fails it all with 422), server-side apply, replace
(409 on a stale resourceVersion), status subresources, delete (with a UID precondition, and
finalizers that turn a delete into a deletionTimestamp). Watches park until the test ends them
or the client gives up. Every change is told to `watchers` the way a watch (or kopf) would
deliver it, so the controller's caches follow the server as they do for real. Nothing here reads
the clock or sleeps.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from fleet.core.kinds import ADAPTERS
from fleet.kube import Connection, KubeClient, SyncKubeClient

Obj = dict[str, Any]
Watcher = Callable[[str, Obj], None]


@dataclasses.dataclass(frozen=True)
class Kind:
    """A resource the server serves."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True
    #: Writes to the main resource leave `status` alone; `/status` writes only `status`.
    status_subresource: bool = True


def _job_kinds() -> list[Kind]:
    return [Kind(k.api_version, k.kind, k.kind.lower() + "s") for k in ADAPTERS]


def _needed_kinds() -> list[Kind]:
    """What the kinds read besides the job (a TrainJob's runtimes), cluster-scoped by name."""
    found = {n for k in ADAPTERS for n in k.needs_kinds}
    return [
        Kind(
            v, k, k.lower() + "s", namespaced=not k.startswith("Cluster"), status_subresource=False
        )
        for v, k in sorted(found)
    ]


CORE_KINDS = [
    Kind("v1", "Namespace", "namespaces", namespaced=False),
    Kind("v1", "Secret", "secrets", status_subresource=False),
    Kind("v1", "ConfigMap", "configmaps", status_subresource=False),
    Kind("v1", "ServiceAccount", "serviceaccounts", status_subresource=False),
    Kind("v1", "Event", "events", status_subresource=False),
    Kind("v1", "Node", "nodes", namespaced=False),
    Kind("v1", "Pod", "pods"),
]
FLEET_KINDS = [
    *CORE_KINDS,
    Kind("coordination.k8s.io/v1", "Lease", "leases", status_subresource=False),
    Kind("fleet.dev/v1alpha1", "GangBinding", "gangbindings"),
    Kind("fleet.dev/v1alpha1", "MemberCluster", "memberclusters", namespaced=False),
    Kind("policy.one.alibabacloud.com/v1alpha1", "PropagationPolicy", "propagationpolicies"),
    Kind(
        "policy.one.alibabacloud.com/v1alpha1",
        "ClusterPropagationPolicy",
        "clusterpropagationpolicies",
        namespaced=False,
    ),
    *_job_kinds(),
    *_needed_kinds(),
    # Kube Queue's kinds, and the PriorityClasses a queued job may name.
    Kind("scheduling.sigs.k8s.io/v1beta1", "ElasticQuotaTree", "elasticquotatrees"),
    Kind("scheduling.x-k8s.io/v1alpha1", "Queue", "queues"),
    Kind("scheduling.x-k8s.io/v1alpha1", "QueueUnit", "queueunits"),
    Kind(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        "priorityclasses",
        namespaced=False,
        status_subresource=False,
    ),
    # The Role `fleet join` keeps beside member kubeconfigs (who may read the viewer Secrets).
    Kind("rbac.authorization.k8s.io/v1", "Role", "roles", status_subresource=False),
]
RBAC = "rbac.authorization.k8s.io/v1"
ADMISSION = "admissionregistration.k8s.io/v1"
#: What `fleet join` makes in a member: fleet's ServiceAccount and its roles.
IDENTITY_KINDS = [
    Kind("v1", "ServiceAccount", "serviceaccounts", status_subresource=False),
    Kind(RBAC, "ClusterRole", "clusterroles", namespaced=False, status_subresource=False),
    Kind(
        RBAC,
        "ClusterRoleBinding",
        "clusterrolebindings",
        namespaced=False,
        status_subresource=False,
    ),
    Kind(RBAC, "Role", "roles", status_subresource=False),
    Kind(RBAC, "RoleBinding", "rolebindings", status_subresource=False),
    # The admission policy that narrows fleet's identity (fleet.api.guard).
    Kind(
        ADMISSION,
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        namespaced=False,
        status_subresource=False,
    ),
    Kind(
        ADMISSION,
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        namespaced=False,
        status_subresource=False,
    ),
]
MEMBER_KINDS = [
    *CORE_KINDS,
    *IDENTITY_KINDS,
    *_job_kinds(),
    *_needed_kinds(),
    Kind("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups"),
    # A Koordinator member's Reservations (cluster-scoped); served by every member here.
    Kind("scheduling.koordinator.sh/v1alpha1", "Reservation", "reservations", namespaced=False),
]
#: What a member with Kubernetes' own gang scheduling serves besides (Kubernetes 1.37 with
#: GenericWorkload on): the native PodGroup, and MutatingAdmissionPolicy (GA since 1.36).
NATIVE_GANG_KINDS = [
    Kind("scheduling.k8s.io/v1beta1", "PodGroup", "podgroups"),
    Kind(
        ADMISSION,
        "MutatingAdmissionPolicy",
        "mutatingadmissionpolicies",
        namespaced=False,
        status_subresource=False,
    ),
    Kind(
        ADMISSION,
        "MutatingAdmissionPolicyBinding",
        "mutatingadmissionpolicybindings",
        namespaced=False,
        status_subresource=False,
    ),
]

DELETION_TIMESTAMP = "2025-01-01T00:00:00Z"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what `application/merge-patch+json` means)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _tokens(path: str) -> list[str]:
    """A JSON pointer's tokens (RFC 6901: `~1` is `/`, `~0` is `~`)."""
    return [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]


def json_patch_op(target: Obj, op: Obj) -> str | None:
    """Apply one JSON-patch op to `target` in place; why it failed, or None. As evanphx's
    json-patch (the API server's): `test` compares values, and fails on a missing path."""
    tokens = _tokens(op["path"])
    if not tokens:
        return f"op {op['op']} on the whole document is not supported here"
    parent: Any = target
    for token in tokens[:-1]:
        parent = parent.get(token) if isinstance(parent, dict) else None
        if parent is None:
            return f"{op['op']} operation does not apply: doc is missing path: {op['path']}"
    last = tokens[-1]
    if not isinstance(parent, dict):
        return f"{op['op']} operation does not apply: doc is missing path: {op['path']}"
    kind = op["op"]
    if kind == "test":
        if last not in parent or parent[last] != op.get("value"):
            return f"testing value {op['path']} failed: test failed"
    elif kind == "add":
        parent[last] = copy.deepcopy(op.get("value"))
    elif kind == "replace":
        if last not in parent:
            return f"replace operation does not apply: doc is missing key: {op['path']}"
        parent[last] = copy.deepcopy(op.get("value"))
    elif kind == "remove":
        if last not in parent:
            return f"remove operation does not apply: doc is missing key: {op['path']}"
        del parent[last]
    else:
        return f"op {kind} is not supported here"
    return None


def selects(selector: str | None, labels: dict[str, str]) -> bool:
    """An equality-based label selector (`a=b,c!=d,e`), as list requests send them."""
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value:
                return False
        elif term not in labels:
            return False
    return True


def status(code: int, reason: str, message: str) -> httpx.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    return httpx.Response(code, json=body | {"reason": reason, "message": message})


@dataclasses.dataclass
class Parked:
    """A request the server holds without answering: a watch, or a request a test holds (whose
    answer, as the server would have given it when it was asked, waits in `snapshot`)."""

    request: httpx.Request
    answer: asyncio.Future[httpx.Response]
    snapshot: httpx.Response | None = None
    #: The client gave up on it (its task was cancelled) before it was answered.
    cancelled: bool = False

    @property
    def waiting(self) -> bool:
        return not self.answer.done() and not self.cancelled

    def release(self, response: httpx.Response | None = None) -> None:
        if not self.answer.done():
            answer = response or self.snapshot
            assert answer is not None, "a watch needs an explicit answer"
            self.answer.set_result(answer)


class ClosingTransport(httpx.MockTransport):
    """A MockTransport that remembers whether the client using it was closed."""

    closed = False

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()

    def close(self) -> None:
        self.closed = True
        super().close()


@dataclasses.dataclass(frozen=True)
class _Route:
    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None


class MemoryApi:
    """One API server: its objects, its discovery, and the requests it was sent."""

    def __init__(
        self,
        kinds: Iterable[Kind] = FLEET_KINDS,
        *,
        server: str = "https://api.test",
        namespaces: Iterable[str] = ("default", "kube-system"),
    ) -> None:
        self.server = server
        self.kinds = list(kinds)
        self.objects: dict[tuple[str, str, str, str], Obj] = {}
        self.requests: list[httpx.Request] = []
        self.watchers: list[Watcher] = []
        #: Requests the server holds (watches always; others when `hold` says so).
        self.parked: list[Parked] = []
        #: Predicates of non-watch requests to hold: the answer is decided when the request
        #: arrives, and sent when the test releases it (a slow network, or a slow server).
        self.holds: list[Callable[[httpx.Request], bool]] = []
        #: Called before a request is served; an answer it returns is sent instead.
        self.interceptors: list[Callable[[httpx.Request], httpx.Response | None]] = []
        #: Mutating admission: each may change an object being created (dry run or not), as
        #: its creator sent it, before it is stored and answered.
        self.admission: list[Callable[[Obj], None]] = []
        #: False: every request fails as a refused connection.
        self.reachable = True
        self.version = {"major": "1", "minor": "34", "gitVersion": "v1.34.4"}
        self._rv = itertools.count(100)
        self.transports: list[ClosingTransport] = []
        for namespace in namespaces:
            self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    # -- clients --------------------------------------------------------------------------------

    def transport(self) -> ClosingTransport:
        transport = ClosingTransport(self.handle)
        self.transports.append(transport)
        return transport

    def client(self, name: str = "", *, retries: int = 2) -> KubeClient:
        """A client of this server that never waits between retries."""

        async def no_wait(_seconds: float) -> None:
            await asyncio.sleep(0)

        return KubeClient(
            Connection(self.server),
            name=name or self.server,
            transport=self.transport(),
            sleep=no_wait,
            retries=retries,
        )

    def sync_transport(self) -> ClosingTransport:
        """This server as a blocking client's network: for a client the code under test builds
        itself (from a kubeconfig, with its own credentials), which it then sends here."""

        def serve(request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            if not self.reachable:
                raise httpx.ConnectError("connection refused", request=request)
            for intercept in list(self.interceptors):
                answer = intercept(request)
                if answer is not None:
                    return answer
            return self._serve(request)

        return ClosingTransport(serve)

    def sync_client(self, name: str = "") -> SyncKubeClient:
        """A blocking client of this server (command-line code: `fleet join`), no retries."""
        return SyncKubeClient(
            Connection(self.server),
            name=name or self.server,
            transport=self.sync_transport(),
            sleep=lambda _seconds: None,
            retries=1,
        )

    # -- what a test reads and seeds ------------------------------------------------------------

    def _kind(self, api_version: str, kind: str) -> Kind:
        for k in self.kinds:
            if (k.api_version, k.kind) == (api_version, kind):
                return k
        raise KeyError(f"{self.server} does not serve {kind} ({api_version})")

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        found = self.objects.get((api_version, kind, namespace or "", name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, api_version: str, kind: str, namespace: str | None = None) -> list[Obj]:
        return [
            copy.deepcopy(o)
            for (av, k, ns, _), o in sorted(self.objects.items())
            if (av, k) == (api_version, kind) and (namespace is None or ns == namespace)
        ]

    def events(self, reason: str | None = None, *, about: str | None = None) -> list[Obj]:
        """The Events posted (with `reason`, about the object named `about`), oldest first."""
        return [
            e
            for e in self.list("v1", "Event")
            if (reason is None or e.get("reason") == reason)
            and (about is None or (e.get("involvedObject") or {}).get("name") == about)
        ]

    def asked(self, method: str, path_part: str = "") -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and path_part in r.url.path]

    def put(self, obj: Obj) -> Obj:
        """Create or overwrite an object as if someone else wrote it (watchers are told)."""
        kind = self._kind(obj["apiVersion"], obj["kind"])
        meta = obj.setdefault("metadata", {})
        key = self._key(kind, meta.get("namespace"), meta["name"])
        old = self.objects.get(key)
        stored = copy.deepcopy(obj)
        self._stamp(stored, old)
        self.objects[key] = stored
        self._tell("MODIFIED" if old else "ADDED", stored)
        return copy.deepcopy(stored)

    def merge(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: Obj
    ) -> Obj:
        """Merge-patch an object as someone else would (status included)."""
        current = self.get(api_version, kind, name, namespace)
        if current is None:
            raise KeyError(f"{kind} {namespace}/{name} not found")
        return self.put(merge_patch(current, patch))

    def remove(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete an object outright, finalizers or not (watchers are told)."""
        obj = self.objects.pop((api_version, kind, namespace or "", name), None)
        if obj is not None:
            self._tell("DELETED", obj)

    # -- serving ------------------------------------------------------------------------------

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.reachable:
            raise httpx.ConnectError("connection refused", request=request)
        for intercept in list(self.interceptors):
            answer = intercept(request)
            if answer is not None:
                return answer
        if request.url.params.get("watch") == "true":
            return await self._park(request, None)
        if any(hold(request) for hold in self.holds):
            return await self._park(request, self._serve(request))
        return self._serve(request)

    async def _park(
        self, request: httpx.Request, snapshot: httpx.Response | None
    ) -> httpx.Response:
        parked = Parked(request, asyncio.get_running_loop().create_future(), snapshot)
        self.parked.append(parked)
        try:
            return await parked.answer
        except asyncio.CancelledError:
            parked.cancelled = True
            raise

    def waiting(self, where: Callable[[httpx.Request], bool] = lambda _: True) -> list[Parked]:
        """The parked requests still waiting for an answer (`where` selects)."""
        return [p for p in self.parked if p.waiting and where(p.request)]

    def release_parked(
        self,
        response: httpx.Response | None = None,
        where: Callable[[httpx.Request], bool] = lambda _: True,
    ) -> int:
        """Answer the parked requests `where` selects (held ones, by default, with what the
        server would have said when they were asked); how many there were."""
        waiting = self.waiting(where)
        for p in waiting:
            p.release(response)
        return len(waiting)

    def _serve(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path == "/version":
            return httpx.Response(200, json=self.version)
        if request.method == "GET" and (discovery := self._discovery(path)) is not None:
            return httpx.Response(200, json=discovery)
        route = self._route(path)
        if route is None:
            return status(404, "NotFound", f"the server could not find {path}")
        body = json.loads(request.content) if request.content else None
        dry_run = request.url.params.get("dryRun") == "All"
        if route.name is None:
            if request.method == "GET":
                return self._list(route, request)
            if request.method == "POST":
                return self._create(route, body, dry_run=dry_run)
            return status(405, "MethodNotAllowed", f"{request.method} {path}")
        key = self._key(route.kind, route.namespace, route.name)
        if request.method == "GET":
            found = self.objects.get(key)
            if found is None:
                return self._not_found(route)
            return httpx.Response(200, json=found)
        if request.method == "PATCH":
            content_type = request.headers.get("content-type", "")
            if content_type.startswith("application/apply-patch"):
                return self._apply(route, key, body, dry_run=dry_run)
            if content_type.startswith("application/json-patch"):
                return self._json_patch(route, key, body)
            return self._patch(route, key, body)
        if request.method == "PUT":
            return self._replace(route, key, body)
        if request.method == "DELETE":
            return self._delete(route, key, body or {})
        return status(405, "MethodNotAllowed", f"{request.method} {path}")

    # -- verbs --------------------------------------------------------------------------------

    def _list(self, route: _Route, request: httpx.Request) -> httpx.Response:
        selector = request.url.params.get("labelSelector")
        items = [
            o
            for (av, k, ns, _), o in sorted(self.objects.items())
            if (av, k) == (route.kind.api_version, route.kind.kind)
            and (route.namespace is None or ns == route.namespace)
            and selects(selector, (o.get("metadata") or {}).get("labels") or {})
        ]
        body = {
            "kind": f"{route.kind.kind}List",
            "apiVersion": route.kind.api_version,
            "metadata": {"resourceVersion": str(next(self._rv))},
            "items": items,
        }
        return httpx.Response(200, json=body)

    def _create(self, route: _Route, body: Obj, *, dry_run: bool = False) -> httpx.Response:
        """POST; with `dry_run` (dryRun=All) admitted and answered, but neither stored nor
        watched."""
        meta = body.setdefault("metadata", {})
        if route.kind.namespaced:
            meta["namespace"] = route.namespace or meta.get("namespace")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self._rv)}"
        namespace = meta.get("namespace") if route.kind.namespaced else None
        if namespace and ("v1", "Namespace", "", namespace) not in self.objects:
            # The NamespaceLifecycle admission plugin: no objects in a missing namespace.
            return status(404, "NotFound", f'namespaces "{namespace}" not found')
        key = self._key(route.kind, namespace, meta["name"])
        if key in self.objects:
            return status(409, "AlreadyExists", f"{route.kind.kind} {meta['name']} already exists")
        for admit in self.admission:
            admit(body)
        self._stamp(body, None)
        if dry_run:
            return httpx.Response(201, json=body)
        self.objects[key] = body
        self._tell("ADDED", body)
        return httpx.Response(201, json=body)

    def _apply(
        self, route: _Route, key: tuple[str, str, str, str], body: Obj, *, dry_run: bool = False
    ) -> httpx.Response:
        """Server-side apply, approximated: the applied fields are merged over the object."""
        old = self.objects.get(key)
        if old is None:
            return self._create(route, body, dry_run=dry_run)
        applied = {k: v for k, v in body.items() if k != "status"}
        if dry_run:
            return httpx.Response(200, json=merge_patch(copy.deepcopy(old), applied))
        return self._write(route, key, merge_patch(old, applied), old)

    def _patch(self, route: _Route, key: tuple[str, str, str, str], patch: Obj) -> httpx.Response:
        old = self.objects.get(key)
        if old is None:
            return self._not_found(route)
        wanted = ((patch.get("metadata") or {}) if isinstance(patch, dict) else {}).get(
            "resourceVersion"
        )
        if wanted is not None and wanted != old["metadata"]["resourceVersion"]:
            return self._conflict(route, old)
        patched = merge_patch(old, patch)
        if route.kind.status_subresource:
            if route.subresource == "status":
                patched = {**old, "status": patched.get("status")}
            else:
                patched["status"] = old.get("status")
        return self._write(route, key, patched, old)

    def _json_patch(
        self, route: _Route, key: tuple[str, str, str, str], ops: list[Obj]
    ) -> httpx.Response:
        """RFC 6902 JSON patch (add, replace, remove, test), all or nothing: any op that fails
        (a `test` whose value differs, a path whose parent is missing) fails the whole patch
        with 422, as the API server answers (its patch handler's applyJSPatch)."""
        old = self.objects.get(key)
        if old is None:
            return self._not_found(route)
        patched = copy.deepcopy(old)
        for op in ops:
            problem = json_patch_op(patched, op)
            if problem is not None:
                return status(422, "Invalid", problem)
        if route.kind.status_subresource:
            patched["status"] = old.get("status")
        return self._write(route, key, patched, old)

    def _replace(self, route: _Route, key: tuple[str, str, str, str], body: Obj) -> httpx.Response:
        old = self.objects.get(key)
        if old is None:
            return self._not_found(route)
        if body["metadata"].get("resourceVersion") != old["metadata"]["resourceVersion"]:
            return self._conflict(route, old)
        return self._write(route, key, body, old)

    def _delete(
        self, route: _Route, key: tuple[str, str, str, str], options: Obj
    ) -> httpx.Response:
        old = self.objects.get(key)
        if old is None:
            return self._not_found(route)
        wanted = (options.get("preconditions") or {}).get("uid")
        if wanted and wanted != old["metadata"]["uid"]:
            return status(409, "Conflict", f"Precondition failed: UID in precondition: {wanted}")
        if old["metadata"].get("finalizers"):
            marked = copy.deepcopy(old)
            marked["metadata"].setdefault("deletionTimestamp", DELETION_TIMESTAMP)
            return self._write(route, key, marked, old)
        del self.objects[key]
        self._tell("DELETED", old)
        return httpx.Response(200, json=old)

    def _write(
        self, route: _Route, key: tuple[str, str, str, str], new: Obj, old: Obj
    ) -> httpx.Response:
        self._stamp(new, old)
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.objects.pop(key, None)
            self._tell("DELETED", new)
            return httpx.Response(200, json=new)
        self.objects[key] = new
        self._tell("MODIFIED", new)
        return httpx.Response(200, json=new)

    # -- plumbing ------------------------------------------------------------------------------

    def _stamp(self, obj: Obj, old: Obj | None) -> None:
        """uid, resourceVersion and generation, as the server owns them."""
        meta = obj.setdefault("metadata", {})
        old_meta = (old or {}).get("metadata") or {}
        meta["uid"] = old_meta.get("uid") or meta.get("uid") or str(uuid.uuid4())
        meta["resourceVersion"] = str(next(self._rv))
        meta.setdefault(
            "creationTimestamp", old_meta.get("creationTimestamp") or "2025-01-01T00:00:00Z"
        )
        generation = int(old_meta.get("generation") or meta.get("generation") or 1)
        if old is not None and obj.get("spec") != old.get("spec"):
            generation += 1
        meta["generation"] = generation

    def _tell(self, event: str, obj: Obj) -> None:
        for watcher in list(self.watchers):
            watcher(event, copy.deepcopy(obj))

    def _key(self, kind: Kind, namespace: str | None, name: str) -> tuple[str, str, str, str]:
        return (kind.api_version, kind.kind, (namespace or "") if kind.namespaced else "", name)

    def _not_found(self, route: _Route) -> httpx.Response:
        return status(404, "NotFound", f'{route.kind.plural} "{route.name}" not found')

    def _conflict(self, route: _Route, old: Obj) -> httpx.Response:
        return status(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {route.kind.plural} "{route.name}": the object '
            "has been modified; please apply your changes to the latest version and try again",
        )

    def _discovery(self, path: str) -> Obj | None:
        """The discovery documents of the kinds served (`/apis`, `/api/v1`, `/apis/<g>/<v>`)."""
        if path == "/apis":
            versions = sorted({k.api_version for k in self.kinds if k.api_version != "v1"})
            groups = [
                {
                    "name": v.partition("/")[0],
                    "versions": [{"groupVersion": v, "version": v.partition("/")[2]}],
                    "preferredVersion": {"groupVersion": v, "version": v.partition("/")[2]},
                }
                for v in versions
            ]
            return {"kind": "APIGroupList", "groups": groups}
        api_version = "v1" if path == "/api/v1" else path.removeprefix("/apis/")
        served = [k for k in self.kinds if k.api_version == api_version]
        if not served or path not in ("/api/v1", f"/apis/{api_version}"):
            return None
        resources: list[Obj] = []
        for k in served:
            resources.append(
                {
                    "name": k.plural,
                    "singularName": k.kind.lower(),
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                }
            )
            if k.status_subresource:
                resources.append(
                    {"name": f"{k.plural}/status", "namespaced": k.namespaced, "kind": k.kind}
                )
        return {"kind": "APIResourceList", "groupVersion": api_version, "resources": resources}

    def _route(self, path: str) -> _Route | None:
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "v1"]:
            api_version, rest = "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return None
        for kind in self.kinds:
            if kind.api_version == api_version and kind.plural == rest[0]:
                name = rest[1] if len(rest) > 1 else None
                sub = rest[2] if len(rest) > 2 else None
                return _Route(kind, namespace, name, sub)
        return None
