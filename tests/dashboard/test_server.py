"""The dashboard's server without a browser: its watches fed by in-memory API servers (the
fleet, a reachable member, a member that cannot be reached) and its JSON endpoints asked over
HTTP, malformed objects included."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import pytest
from aiohttp.test_utils import TestClient, TestServer

from fleet.amc.errors import MemberProblem, MemberUnavailable
from fleet.dashboard.hosts import AllowedHosts
from fleet.dashboard.server import make_app
from fleet.dashboard.state import State
from fleet.dashboard.watch import Watches
from fleet.kube import KubeClient
from tests.controller.apiserver import MEMBER_KINDS, MemoryApi, status
from tests.dashboard.objects import (
    NOW,
    NS,
    RUNNING,
    WAITING,
    binding,
    member_cluster,
    node,
    placed,
    pod,
    reservation,
)

#: The fixture's loop is the session's (asyncio_default_fixture_loop_scope); so are the tests'.
pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _until(what: str, check: Callable[[], bool]) -> None:
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never: {what}")


@dataclass
class Dashboard:
    fleet: MemoryApi
    member: MemoryApi
    state: State
    http: TestClient  # type: ignore[type-arg]
    logs: list[tuple[str, str, str, str | None]]

    async def get(self, path: str) -> dict:  # type: ignore[type-arg]
        response = await self.http.get(path)
        body: dict = await response.json()  # type: ignore[type-arg]
        body["_status"] = response.status
        return body


@pytest.fixture
async def dashboard() -> AsyncIterator[Dashboard]:
    fleet = MemoryApi()
    fleet.put(member_cluster("member-1"))
    fleet.put(member_cluster("member-2", ready=False))
    fleet.put(member_cluster("member-k", scheduler="Koordinator"))
    fleet.put(binding("held", **WAITING))
    fleet.put(placed(RUNNING))
    # Malformed: no spec at all.
    fleet.put(
        {
            "apiVersion": "fleet.dev/v1alpha1",
            "kind": "GangBinding",
            "metadata": {"name": "pytorchjob-broken", "namespace": NS},
        }
    )
    member = MemoryApi(MEMBER_KINDS, server="https://member-1.test", namespaces=(NS,))
    member.put(node("gpu-a", 8))
    member.put(node("gpu-b", 8))
    member.put(pod("train-worker-0", "gpu-a", 6))
    koord = MemoryApi(MEMBER_KINDS, server="https://member-k.test")
    koord.put(reservation("fleet-uid-worker-0", "Available", "node-1"))

    async def connect(name: str) -> KubeClient:
        if name == "member-2":
            raise MemberUnavailable(MemberProblem(name, f"{name}: dial tcp: connection refused"))
        return (member if name == "member-1" else koord).client(name)

    logs: list[tuple[str, str, str, str | None]] = []

    async def read_log(ns: str, kind: str, name: str, replica: str | None) -> str:
        logs.append((ns, kind, name, replica))
        return "epoch 1 loss 0.5\n"

    state = State()
    watches = Watches(state, fleet.client("fleet"), connect, retry_seconds=3600)
    watches.start()
    app = make_app(state, read_log=read_log, clock=lambda: NOW)
    async with TestClient(TestServer(app)) as http:
        await _until(
            "every member seen",
            lambda: (
                len(state.members) == 3
                and state.members["member-1"].reachable is True
                and state.members["member-2"].reachable is False
                and bool(state.members["member-k"].reservations)
            ),
        )
        yield Dashboard(fleet, member, state, http, logs)
    await watches.stop()


async def test_fleet_view_over_http_with_an_unreachable_member(dashboard: Dashboard) -> None:
    view = await dashboard.get("/api/fleet")

    rows = {m["name"]: m for m in view["members"]}
    assert rows["member-1"]["status"] == "Ready"
    assert rows["member-1"]["gpus"] == {
        "total": 16,
        "free": 10,
        "largestFree": 8,
        "source": "watch",
    }
    assert rows["member-2"]["status"] == "Unreachable"
    assert rows["member-2"]["problem"] == "member-2: dial tcp: connection refused"
    assert view["version"] == dashboard.state.version


async def test_jobs_and_a_job_page_with_a_malformed_binding(dashboard: Dashboard) -> None:
    jobs = {j["name"]: j for j in (await dashboard.get("/api/jobs"))["jobs"]}
    assert jobs["held"]["phase"] == "Pending" and jobs["train"]["member"] == "member-1"
    assert "cannot be read" in jobs["pytorchjob-broken"]["error"]

    page = await dashboard.get(f"/api/jobs/{NS}/train")
    assert [p["name"] for p in page["pods"]] == ["train-worker-0"]
    assert page["pods"][0]["member"] == "member-1" and page["pods"][0]["node"] == "gpu-a"

    held = await dashboard.get(f"/api/jobs/{NS}/held")
    assert [(r["cluster"], r["code"]) for r in held["pendingReasons"]] == [
        ("member-1", "Insufficient"),
        ("member-2", "NotReady"),
    ]

    broken = await dashboard.get(f"/api/jobs/{NS}/pytorchjob-broken")
    assert broken["_status"] == 200 and "cannot be read" in broken["error"]
    missing = await dashboard.get(f"/api/jobs/{NS}/nope")
    assert missing["_status"] == 404 and "no gang job" in missing["error"]


async def test_a_jobs_log_is_read_as_amc_logs_reads_it(dashboard: Dashboard) -> None:
    answer = await dashboard.get(f"/api/jobs/{NS}/train/log?kind=PyTorchJob&replica=worker-1")
    assert answer["log"] == "epoch 1 loss 0.5\n" and answer["error"] == ""
    assert dashboard.logs == [(NS, "PyTorchJob", "train", "worker-1")]


async def test_quotas_and_reservations(dashboard: Dashboard) -> None:
    quotas = await dashboard.get("/api/quotas")
    assert quotas["_status"] == 200 and quotas["tree"] is None

    view = await dashboard.get("/api/reservations")
    rows = {m["name"]: m for m in view["members"]}
    assert rows["member-k"]["watched"] and not rows["member-1"]["watched"]
    assert [r["phase"] for r in rows["member-k"]["reservations"]] == ["Available"]
    assert rows["member-2"]["status"] == "Unreachable"


async def test_events_stream_says_when_something_changed(dashboard: Dashboard) -> None:
    response = await dashboard.http.get("/api/events")
    assert response.headers["Content-Type"] == "text/event-stream"
    first = await response.content.readuntil(b"\n\n")
    assert first.startswith(b"event: change\ndata: ")
    seen = int(first.split(b"data: ")[1])
    dashboard.state.node_event("member-1", "ADDED", node("gpu-c", 8))
    second = await response.content.readuntil(b"\n\n")
    assert int(second.split(b"data: ")[1]) > seen
    response.close()


async def test_the_page_and_its_assets_are_served_from_the_package(dashboard: Dashboard) -> None:
    page = await dashboard.http.get("/")
    html = await page.text()
    assert (
        page.status == 200
        and "/assets/app.js" in html
        and "http" not in html.split("<body>")[1].replace("http-equiv", "")
    )
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        asset = await dashboard.http.get(f"/assets/{name}")
        assert asset.status == 200 and asset.content_type == kind
    assert (await dashboard.http.get("/assets/../state.py")).status == 404


async def test_a_foreign_host_is_refused_the_dashboards_own_answered(dashboard: Dashboard) -> None:
    """DNS rebinding: the attacker's name resolves to the dashboard, its Host header stays."""
    port = dashboard.http.port
    normal = await dashboard.http.get("/api/fleet")
    assert normal.status == 200
    for host in (f"localhost:{port}", f"[::1]:{port}"):
        assert (await dashboard.http.get("/api/fleet", headers={"Host": host})).status == 200
    for path in ("/api/fleet", f"/api/jobs/{NS}/train/log?kind=PyTorchJob", "/api/events", "/"):
        refused = await dashboard.http.get(path, headers={"Host": "evil.example"})
        assert refused.status == 403, path
        assert "Host 'evil.example' is not a name this dashboard serves" in await refused.text()
    assert dashboard.logs == []  # the refused log request never reached a member
    foreign = await dashboard.http.get("/api/fleet", headers={"Origin": "http://evil.example"})
    assert foreign.status == 403
    assert "Origin 'http://evil.example' is cross-origin" in await foreign.text()
    same = await dashboard.http.get(
        "/api/fleet", headers={"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}
    )
    assert same.status == 200


async def test_a_name_given_with_allow_host_is_answered(dashboard: Dashboard) -> None:
    hosts = AllowedHosts.serving("0.0.0.0", ["fleet-dashboard.fleet-system.svc"])
    app = make_app(dashboard.state, clock=lambda: NOW, hosts=hosts)
    async with TestClient(TestServer(app)) as http:
        allowed = await http.get("/api/fleet", headers={"Host": "fleet-dashboard.fleet-system.svc"})
        assert allowed.status == 200
        assert [m["name"] for m in (await allowed.json())["members"]] == [
            "member-1",
            "member-2",
            "member-k",
        ]
        by_address = await http.get("/healthz", headers={"Host": "10.244.0.7:8765"})
        assert by_address.status == 200  # the kubelet's probe, by the pod's address
        assert (await http.get("/api/fleet", headers={"Host": "evil.example"})).status == 403


async def test_a_refused_reservation_watch_is_shown_and_retried_with_growing_waits() -> None:
    """fleet's member role granted list but not watch on Reservations: the dashboard's informer
    listed, was refused the watch and started over, 48 times a minute, while the page showed
    "no Reservations". Now the refusal is on the page and each try waits longer."""
    fleet = MemoryApi()
    fleet.put(member_cluster("member-k", scheduler="Koordinator"))
    koord = MemoryApi(MEMBER_KINDS, server="https://member-k.test")
    koord.put(node("gpu-a", 8))
    koord.put(reservation("fleet-uid-worker-0", "Available", "node-1"))
    denied = (
        'reservations.scheduling.koordinator.sh is forbidden: User "system:serviceaccount:'
        'fleet-member:fleet" cannot watch resource "reservations" in API group '
        '"scheduling.koordinator.sh" at the cluster scope'
    )

    def refuse_watch(request: httpx.Request) -> httpx.Response | None:
        watching = request.url.params.get("watch") == "true"
        return (
            status(403, "Forbidden", denied)
            if watching and "reservations" in request.url.path
            else None
        )

    koord.interceptors.append(refuse_watch)
    waits: list[float] = []
    enough = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) >= 6:
            enough.set()
            await asyncio.Event().wait()  # no further tries in this test
        await asyncio.sleep(0)

    async def connect(name: str) -> KubeClient:
        return koord.client(name)

    state = State()
    watches = Watches(state, fleet.client("fleet"), connect, refused_backoff=4.0, sleep=sleep)
    watches.start()
    app = make_app(state, clock=lambda: NOW)
    try:
        async with TestClient(TestServer(app)) as http:
            await asyncio.wait_for(enough.wait(), timeout=10)
            # Doubling from half a second up to the cap, each spread by at most 20 %.
            for wait, backoff in zip(waits, (0.5, 1.0, 2.0, 4.0, 4.0, 4.0), strict=True):
                assert 0.8 * backoff <= wait <= 1.2 * backoff, waits
            refused = [r for r in koord.asked("GET", "/reservations") if "watch=true" in str(r.url)]
            assert len(refused) == len(waits)  # one try per wait: nothing retried blind

            view = await (await http.get("/api/reservations")).json()
            (row,) = view["members"]
            assert row["watched"] and row["status"] != "Unreachable"
            assert row["watchProblem"].startswith("Reservation refused: ")
            assert "403 Forbidden" in row["watchProblem"] and "cannot watch" in row["watchProblem"]
            # What the list gave is still shown.
            assert [r["name"] for r in row["reservations"]] == ["fleet-uid-worker-0"]

            fleet_view = await (await http.get("/api/fleet")).json()
            (member,) = fleet_view["members"]
            assert member["reachable"] is True and member["problem"] == ""
            assert member["watchProblems"] == {"Reservation": row["watchProblem"]}
    finally:
        await watches.stop()


async def test_a_refused_node_watch_makes_the_member_unreachable_saying_so() -> None:
    state = State()
    state.watch_health("m", "Node", False, "Node refused: 403 Forbidden")
    state.watch_health("m", "Pod", True, "")
    assert state.members["m"].reachable is False
    assert state.members["m"].problem == "m: Node refused: 403 Forbidden"
    state.watch_health("m", "Node", True, "")
    assert state.members["m"].reachable is True and state.members["m"].problem == ""


# -- per-user authorization behind an authenticating proxy --------------------------------------


def _policy(allowed: set[tuple[str, str, str, str, str]]) -> Callable[..., object]:
    """A fleet that allows exactly (user, verb, resource, namespace, name) ("" name: any), and
    records the reviews it was sent."""
    sent: list[dict] = []  # type: ignore[type-arg]

    async def send(body: dict) -> dict:  # type: ignore[type-arg]
        sent.append(body)
        spec = body["spec"]
        attrs = spec["resourceAttributes"]
        asked = (spec["user"], attrs["verb"], attrs["resource"], attrs["namespace"])
        ok = any(
            asked == rule[:4] and rule[4] in ("", attrs.get("name", "")) for rule in allowed
        ) or any(
            (group, *asked[1:]) == rule[:4]
            for group in spec["groups"]
            for rule in allowed
            if rule[4] == ""
        )
        return {"status": {"allowed": ok}}

    send.sent = sent  # type: ignore[attr-defined]
    return send


async def test_behind_a_proxy_a_job_is_served_only_to_whom_the_fleet_lets_get_it(
    dashboard: Dashboard,
) -> None:
    from fleet.dashboard.authz import Authorizer

    send = _policy(
        {
            ("alice", "get", "pytorchjobs", NS, "train"),
            ("alice", "list", "pytorchjobs", NS, ""),
            ("team-ml", "list", "gangbindings", NS, ""),
        }
    )
    authorizer = Authorizer(send, clock=lambda: 0.0)  # type: ignore[arg-type]
    app = make_app(dashboard.state, read_log=None, clock=lambda: NOW, authorizer=authorizer)
    async with TestClient(TestServer(app)) as http:
        # No user header: refused, the kubelet's probe aside.
        assert (await http.get("/api/jobs")).status == 401
        assert (await http.get("/")).status == 401
        assert (await http.get("/healthz")).status == 200

        bob = {"X-Remote-User": "bob"}
        page = await http.get(f"/api/jobs/{NS}/train", headers=bob)
        assert page.status == 403
        assert "bob may not get pytorchjobs.kubeflow.org 'train'" in (await page.json())["error"]
        log = await http.get(f"/api/jobs/{NS}/train/log?kind=PyTorchJob", headers=bob)
        assert log.status == 403 and (await log.json())["log"] == ""
        assert (await (await http.get("/api/jobs", headers=bob)).json())["jobs"] == []
        # Whether a job exists is not told either.
        assert (await http.get(f"/api/jobs/{NS}/nope", headers=bob)).status == 403

        alice = {"X-Remote-User": "alice"}
        page = await http.get(f"/api/jobs/{NS}/train", headers=alice)
        assert page.status == 200
        assert [p["name"] for p in (await page.json())["pods"]] == ["train-worker-0"]
        jobs = (await (await http.get("/api/jobs", headers=alice)).json())["jobs"]
        assert {j["name"] for j in jobs} == {"held", "train"}  # the malformed one: no kind
        # A group the proxy names counts (comma-separated or repeated headers).
        carol = {"X-Remote-User": "carol", "X-Remote-Group": "team-x, team-ml"}
        assert (await http.get(f"/api/jobs/{NS}/nope", headers=carol)).status == 404

        reviews = authorizer.reviews
        await http.get(f"/api/jobs/{NS}/train", headers=alice)
        assert authorizer.reviews == reviews  # cached


async def test_a_log_is_served_to_whom_may_get_the_job_through_the_headers_chosen(
    dashboard: Dashboard,
) -> None:
    from fleet.dashboard.authz import Authorizer

    send = _policy({("alice", "get", "pytorchjobs", NS, "train")})
    authorizer = Authorizer(
        send,  # type: ignore[arg-type]
        user_header="X-Forwarded-User",
        group_header="X-Forwarded-Groups",
    )

    async def read_log(ns: str, kind: str, name: str, replica: str | None) -> str:
        return "epoch 1\n"

    app = make_app(dashboard.state, read_log=read_log, clock=lambda: NOW, authorizer=authorizer)
    async with TestClient(TestServer(app)) as http:
        path = f"/api/jobs/{NS}/train/log?kind=PyTorchJob"
        # The default header means nothing here.
        assert (await http.get(path, headers={"X-Remote-User": "alice"})).status == 401
        answer = await http.get(path, headers={"X-Forwarded-User": "alice"})
        assert answer.status == 200 and (await answer.json())["log"] == "epoch 1\n"
        other = await http.get(
            f"/api/jobs/{NS}/other/log?kind=PyTorchJob", headers={"X-Forwarded-User": "alice"}
        )
        assert other.status == 403
    (review,) = [b for b in send.sent if b["spec"]["resourceAttributes"].get("name") == "train"]  # type: ignore[attr-defined]
    assert review["spec"]["resourceAttributes"] == {
        "verb": "get",
        "group": "kubeflow.org",
        "resource": "pytorchjobs",
        "namespace": NS,
        "name": "train",
    }
