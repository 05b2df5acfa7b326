"""The informer against a scripted API server: list, watch, bookmarks, 410 relists, backoff.

Nothing waits for real time: the server answers from a script and parks the last watch, and
the informer's sleep is injected.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fleet.kube import Informer, KubeClient, identity
from tests.kube.fakes import AsyncSleeps, FakeApi, async_client, status, stream

PODS = "/api/v1/pods"


def pod(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def listing(rv: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PodList", "metadata": {"resourceVersion": rv}, "items": list(items)}


def event(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


class Script:
    """List and watch answers in order; once the watches run out, the next watch parks."""

    def __init__(self, lists: list[Any], watches: list[Any]) -> None:
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str] = []
        self.parked = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> Any:
        if request.url.params.get("watch") != "true":
            return self.lists.pop(0)
        self.watched_from.append(request.url.params["resourceVersion"])
        assert request.url.params["allowWatchBookmarks"] == "true"
        if self.watches:
            return self.watches.pop(0)
        self.parked.set()
        await asyncio.Event().wait()  # a watch with nothing to say, until cancelled


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []
        self.health: list[bool] = []
        self.reasons: list[str] = []

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.append((kind, obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))

    def on_health(self, ok: bool, why: str) -> None:
        self.health.append(ok)
        self.reasons.append(why)


@contextlib.asynccontextmanager
async def running(script: Script, **kw: Any) -> AsyncIterator[tuple[Informer, Seen, AsyncSleeps]]:
    api = FakeApi().on("GET", PODS, script)
    client, _ = async_client(api, retries=1)
    seen = Seen()
    sleeps = AsyncSleeps()
    informer = Informer(
        client,
        "v1",
        "Pod",
        seen.on_event,
        on_health=seen.on_health,
        sleep=sleeps,
        jitter=lambda: 0.5,  # the middle of the jitter range: waits are exactly the backoff
        **kw,
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(script.parked.wait(), timeout=10)
        yield informer, seen, sleeps
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


async def test_list_then_watch_and_bookmarks_advance_the_resource_version() -> None:
    script = Script(
        lists=[listing("10", pod("a", "5"))],
        watches=[
            stream(event("ADDED", pod("b", "11")), event("BOOKMARK", pod("", "15"))),
            stream(event("MODIFIED", pod("a", "16")), event("DELETED", pod("b", "17"))),
        ],
    )
    async with running(script) as (informer, seen, sleeps):
        assert seen.events == [
            ("ADDED", "a", "5"),
            ("ADDED", "b", "11"),
            ("MODIFIED", "a", "16"),
            ("DELETED", "b", "17"),
        ]
        assert script.watched_from == ["10", "15", "17"]
        assert sorted(informer.store) == ["ns/a"]
        assert informer.store["ns/a"]["kind"] == "Pod"  # list items get their kind back
        assert informer.synced.is_set() and informer.relists == 1
        assert seen.health == [True] and sleeps.waits == []


gone_status = status(410, "Expired", "too old resource version: 10 (40)")
gone_event = stream(
    {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
    }
)


@pytest.mark.parametrize("gone", [gone_status, gone_event], ids=["http-410", "error-event"])
async def test_gone_relists_and_reports_what_changed_meanwhile(gone: httpx.Response) -> None:
    script = Script(
        lists=[
            listing("10", pod("a", "1"), pod("b", "1"), pod("same", "3")),
            listing("30", pod("a", "20"), pod("c", "25"), pod("same", "3")),
        ],
        watches=[gone],
    )
    async with running(script) as (informer, seen, sleeps):
        assert seen.events == [
            ("ADDED", "a", "1"),
            ("ADDED", "b", "1"),
            ("ADDED", "same", "3"),
            ("MODIFIED", "a", "20"),  # changed while we were away
            ("ADDED", "c", "25"),
            ("DELETED", "b", "1"),  # vanished while we were away (known once the list is read)
        ]
        assert script.watched_from == ["10", "30"]
        assert sorted(informer.store) == ["ns/a", "ns/c", "ns/same"]
        assert informer.relists == 2
        assert False not in seen.health  # a 410 is routine, not ill health
        assert sleeps.waits == []  # and is not waited on


def page(rv: str, token: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "PodList",
        "metadata": {"resourceVersion": rv, "continue": token},
        "items": list(items),
    }


class Paged(Script):
    """Also records the limit and continue token of every list request."""

    def __init__(self, lists: list[Any], watches: list[Any]) -> None:
        super().__init__(lists, watches)
        self.pages: list[tuple[str | None, str | None]] = []

    async def __call__(self, request: httpx.Request) -> Any:
        if request.url.params.get("watch") != "true":
            self.pages.append((request.url.params.get("limit"), request.url.params.get("continue")))
        return await super().__call__(request)


async def test_the_list_is_read_in_pages_and_the_store_keeps_what_it_is_told() -> None:
    script = Paged(
        lists=[
            page("10", "next-1", pod("a", "1"), pod("b", "1")),
            page("10", "next-2", pod("c", "2")),
            listing("10", pod("d", "3")),
        ],
        watches=[],
    )
    full = {**pod("e", "4"), "spec": {"nodeName": "n1"}}
    script.lists[0]["items"].append(full)
    async with running(script, page_size=2, keep=identity) as (informer, seen, _sleeps):
        assert script.pages == [("2", None), ("2", "next-1"), ("2", "next-2")]
        assert [name for _, name, _ in seen.events] == ["a", "b", "e", "c", "d"]
        assert script.watched_from == ["10"]
        assert informer.store["ns/e"] == {
            "metadata": {"name": "e", "namespace": "ns", "resourceVersion": "4"}
        }


async def test_an_object_made_again_under_the_same_name_is_a_deletion_then_an_addition() -> None:
    first = {"metadata": {**pod("a", "1")["metadata"], "uid": "u1"}}
    again = {"metadata": {**pod("a", "9")["metadata"], "uid": "u2"}}
    script = Script(lists=[listing("10", first), listing("30", again)], watches=[gone_status])
    async with running(script) as (informer, seen, _sleeps):
        assert seen.events == [("ADDED", "a", "1"), ("DELETED", "a", "1"), ("ADDED", "a", "9")]
        assert informer.store["ns/a"]["metadata"]["uid"] == "u2"


async def test_an_unreachable_server_backs_off_and_reports_health() -> None:
    refused = httpx.ConnectError("connection refused")
    script = Script(
        lists=[refused] * 6 + [listing("10", pod("a", "1"))],
        watches=[],
    )
    async with running(script, max_backoff=4.0) as (_informer, seen, sleeps):
        assert sleeps.waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
        assert seen.health == [False] * 6 + [True]
        assert all("member-1" in why and "unreachable" in why for why in seen.reasons[:6])
        assert seen.events == [("ADDED", "a", "1")]


async def test_backoff_starts_over_after_a_success() -> None:
    refused = httpx.ConnectError("connection refused")
    script = Script(
        lists=[refused, refused, listing("10"), refused, listing("12")],
        watches=[gone_status],
    )
    async with running(script) as (_informer, seen, sleeps):
        assert sleeps.waits == [0.5, 1.0, 0.5]
        assert seen.health == [False, False, True, False, True]


async def test_a_refusal_is_ill_health_naming_the_error() -> None:
    script = Script(
        lists=[status(403, "Forbidden", 'pods is forbidden: User "x"'), listing("10")],
        watches=[],
    )
    async with running(script) as (_informer, seen, sleeps):
        assert seen.health == [False, True]
        assert "403 Forbidden" in seen.reasons[0]
        assert sleeps.waits == [0.5]


def forbidden_watch() -> httpx.Response:
    return status(403, "Forbidden", 'pods is forbidden: User "x" cannot watch resource "pods"')


async def test_a_refused_watch_backs_off_though_the_list_works_until_a_watch_is_accepted() -> None:
    """RBAC grants list and watch apart: a listed but refused informer used to start over
    every half second (48 refusals a minute); now it waits longer each time, says it was
    refused, and is healthy again once the server accepts a watch."""
    script = Script(
        lists=[listing("10", pod("a", "1")) for _ in range(7)],
        watches=[*(forbidden_watch() for _ in range(6)), stream(event("ADDED", pod("b", "11")))],
    )
    async with running(script, max_refused_backoff=8.0) as (informer, seen, sleeps):
        assert sleeps.waits == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
        assert seen.health == [True, *[False] * 6, True]
        for n, why in enumerate(seen.reasons[1:7], start=1):
            assert why.startswith("Pod refused: ") and "403 Forbidden" in why, why
            assert f"(refusal {n}; next try in " in why
        assert informer.refusals == 0
        assert seen.events == [("ADDED", "a", "1"), ("ADDED", "b", "11")]


async def test_a_refusal_waits_up_to_its_own_cap_and_other_failures_to_theirs() -> None:
    refused = httpx.ConnectError("connection refused")
    script = Script(
        lists=[
            *(status(401, "Unauthorized", "Unauthorized") for _ in range(5)),
            refused,
            refused,
            listing("10"),
        ],
        watches=[],
    )
    async with running(script, max_backoff=2.0, max_refused_backoff=16.0) as (
        informer,
        seen,
        sleeps,
    ):
        # Refused: 0.5, 1, 2, 4, 8 (under 16); then unreachable: capped at 2 again.
        assert sleeps.waits == [0.5, 1.0, 2.0, 4.0, 8.0, 2.0, 2.0]
        assert seen.health == [*[False] * 7, True]
        assert all("refused" in why and "401" in why for why in seen.reasons[:5])
        assert "unreachable" in seen.reasons[5]
        assert informer.refusals == 0


async def test_a_consumer_bug_does_not_stop_the_stream() -> None:
    script = Script(
        lists=[listing("10", pod("a", "1"), pod("b", "1"))],
        watches=[stream(event("ADDED", pod("c", "11")))],
    )
    delivered: list[str] = []

    def flaky(kind: str, obj: dict[str, Any]) -> None:
        delivered.append(obj["metadata"]["name"])
        if obj["metadata"]["name"] == "a":
            raise RuntimeError("consumer bug")

    api = FakeApi().on("GET", PODS, script)
    client: KubeClient = async_client(api, retries=1)[0]
    informer = Informer(client, "v1", "Pod", flaky, sleep=AsyncSleeps())
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(script.parked.wait(), timeout=10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()
    assert delivered == ["a", "b", "c"]
