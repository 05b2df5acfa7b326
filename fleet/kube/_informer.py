"""Keep a local view of one kind in sync with an API server: list, then watch.

The watch resumes from the list's resourceVersion (and from bookmarks); a 410 Gone relists and
tells the consumer which objects vanished meanwhile; an unreachable server is retried with
capped exponential backoff while the consumer is told the source is unhealthy.

A refusal (401 Unauthorized, 403 Forbidden) is told as such ("Reservation refused: ...", with
when the next try is) and backs off up to `max_refused_backoff`: permissions do not come back by
retrying. A list that is allowed does not end the backoff of a watch that was refused (RBAC
grants `list` and `watch` apart): only a watch the server accepts does. Before, such an
informer listed, was refused the watch, and started over every half second.

Memory. The list is read in pages (`page_size`), so a member with 20,000 pods is never one
response of 20,000 parsed objects. A consumer that folds events into its own state (a member's
nodes and pods into its snapshot) passes `keep=identity`: the store then holds only each object's
name, namespace, uid and resourceVersion, which is all a relist and a DELETED event need.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from fleet.kube._client import KubeClient
from fleet.kube._errors import ApiError, Unreachable
from fleet.kube._requests import Obj

log = logging.getLogger(__name__)

EventHandler = Callable[[str, Obj], None]
HealthHandler = Callable[[bool, str], None]


#: The HTTP codes of a refusal: not a failure that retrying cures.
REFUSED = frozenset({401, 403})

#: What `identity` keeps of an object's metadata.
IDENTITY_FIELDS = ("name", "namespace", "uid", "resourceVersion")


def identity(obj: Obj) -> Obj:
    """Only what identifies an object and its version (for `Informer(keep=identity)`)."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in IDENTITY_FIELDS if k in meta}}


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class Informer:
    """Delivers ADDED/MODIFIED/DELETED for one kind to `on_event`, in order, forever."""

    def __init__(
        self,
        client: KubeClient,
        api_version: str,
        kind: str,
        on_event: EventHandler,
        *,
        on_health: HealthHandler | None = None,
        on_synced: Callable[[], None] | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        max_backoff: float = 30.0,
        max_refused_backoff: float | None = None,
        page_size: int = 500,
        keep: Callable[[Obj], Obj] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        """`sleep` waits between retries and `jitter` spreads them (a float in [0, 1)); tests
        replace both so that nothing waits for real time. `keep` is what the store holds of
        each object (all of it by default); the events always carry the whole object."""
        self.client = client
        self.api_version = api_version
        self.kind = kind
        self.on_event = on_event
        self.on_health = on_health or (lambda _ok, _why: None)
        self.on_synced = on_synced or (lambda: None)
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.max_backoff = max_backoff
        #: The longest wait after a 401/403 (max_backoff when None).
        self.max_refused_backoff = (
            max_backoff if max_refused_backoff is None else max_refused_backoff
        )
        #: How many requests were refused (401/403) in a row; 0 once the server accepts again.
        self.refusals = 0
        #: Whether the failure `on_health` was last told of is a refusal (401/403): the server
        #: answered, but refuses these credentials.
        self.refused = False
        self.page_size = page_size
        self._keep = keep or (lambda obj: obj)
        self._sleep = sleep
        self._jitter = jitter
        self.store: dict[str, Obj] = {}
        self.synced = asyncio.Event()
        self.relists = 0

    def _deliver(self, kind: str, obj: Obj) -> None:
        try:
            self.on_event(kind, obj)
        except Exception:  # a consumer bug must not stop the stream
            log.exception("handler failed for %s %s on %s", kind, object_key(obj), self.client.name)

    async def _relist(self) -> str:
        """List (page by page), deliver what is new or changed, then what vanished."""
        listed: set[str] = set()
        token: str | None = None
        while True:
            listing = await self.client.list(
                self.api_version,
                self.kind,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                limit=self.page_size,
                continue_token=token,
            )
            for item in listing["items"]:
                obj = _with_kind(item, self.api_version, self.kind)
                key = object_key(obj)
                listed.add(key)
                known = self.store.get(key)
                if known is not None and _uid(known) != _uid(obj):
                    # Deleted and made again under the same name while we were not watching.
                    del self.store[key]
                    self._deliver("DELETED", known)
                    known = None
                if known is None or _version(known) != _version(obj):
                    self.store[key] = self._keep(obj)
                    self._deliver("ADDED" if known is None else "MODIFIED", obj)
            # Every page is read from the first page's snapshot; an expired token is a 410
            # Gone, which lists again from the start.
            token = (listing.get("metadata") or {}).get("continue") or None
            if token is None:
                break
        for key, old in list(self.store.items()):
            if key not in listed:
                del self.store[key]
                self._deliver("DELETED", old)
        self.relists += 1
        rv: str = listing["metadata"]["resourceVersion"]
        return rv

    async def run(self) -> None:
        backoff = 0.5
        #: The last failure was a refused watch: a list that works does not undo it.
        watch_refused = False

        def accepted() -> None:
            nonlocal backoff, watch_refused
            if watch_refused:
                watch_refused, backoff, self.refusals = False, 0.5, 0
                self.on_health(True, "")

        while True:
            watching = False
            try:
                rv = await self._relist()
                if not watch_refused:
                    self.refusals = 0
                    self.on_health(True, "")
                    backoff = 0.5
                if not self.synced.is_set():
                    self.synced.set()
                    self.on_synced()
                watching = True
                while True:
                    async for event in self.client.watch(
                        self.api_version,
                        self.kind,
                        resource_version=rv,
                        namespace=self.namespace,
                        label_selector=self.label_selector,
                        field_selector=self.field_selector,
                        on_open=accepted,
                    ):
                        obj = event["object"]
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        if event["type"] == "BOOKMARK":
                            continue
                        obj = _with_kind(obj, self.api_version, self.kind)
                        key = object_key(obj)
                        if event["type"] == "DELETED":
                            self.store.pop(key, None)
                        else:
                            self.store[key] = self._keep(obj)
                        self._deliver(event["type"], obj)
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                if e.gone:
                    continue  # our resourceVersion is too old: list again
                if e.status in REFUSED:
                    self.refusals += 1
                    self.refused = True
                    watch_refused = watching
                    delay = self._delay(min(backoff, self.max_refused_backoff))
                    why = (
                        f"{self.kind} refused: {e} "
                        f"(refusal {self.refusals}; next try in {delay:.1f}s)"
                    )
                    self.on_health(False, why)
                    log.warning("%s: %s", self.client.name, why)
                    await self._sleep(delay)
                    backoff = min(backoff * 2, self.max_refused_backoff)
                    continue
                why = f"{self.kind} list/watch failed: {e}"
                self.refused = False
                self.on_health(False, why)
                log.warning("%s: %s", self.client.name, why)
            except (Unreachable, OSError) as e:
                self.refused = False
                self.on_health(False, str(e))
                log.info(
                    "%s: %s unreachable, retrying in %.1fs", self.client.name, self.kind, backoff
                )
            except Exception as e:
                self.refused = False
                self.on_health(False, f"{self.kind} watch error: {e!r}")
                log.exception("%s: unexpected error watching %s", self.client.name, self.kind)
            backoff = min(backoff, self.max_backoff)
            await self._sleep(self._delay(backoff))
            backoff = min(backoff * 2, self.max_backoff)

    def _delay(self, backoff: float) -> float:
        """The backoff, spread by jitter (0.8 to 1.2 times it)."""
        return backoff * (0.8 + 0.4 * self._jitter())


def _uid(obj: Obj) -> object:
    return (obj.get("metadata") or {}).get("uid")


def _version(obj: Obj) -> object:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _with_kind(obj: Obj, api_version: str, kind: str) -> Obj:
    """List items carry no apiVersion/kind; consumers may want them."""
    if "kind" not in obj:
        obj = {"apiVersion": api_version, "kind": kind, **obj}
    return obj
