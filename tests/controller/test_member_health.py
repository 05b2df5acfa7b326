"""Member health: the pure verdict, the registry driven by its connection's real reports (probe,
node and pod watches) against in-memory member servers with a fake clock, and the
MemberCluster status writer.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from fleet.api import constants as c
from fleet.api import format_time
from fleet.controller.members import Member
from fleet.controller.members.connection import MemberConnection
from fleet.controller.members.feed import apply_node_event
from fleet.controller.members.health import (
    Health,
    Probe,
    SourceState,
    credentials_refused,
    next_health,
    verdict,
)
from fleet.controller.members.status import MemberStatusWriter
from tests.controller.apiserver import MEMBER_KINDS, MemoryApi, status
from tests.controller.harness import FakeClock, node
from tests.controller.registry_harness import GRACE, Members, is_probe

M1 = "https://m1.test"


def in_sync() -> dict[str, SourceState]:
    return {
        "Node": SourceState(ok=True, why="", synced_once=True),
        "Pod": SourceState(ok=True, why="", synced_once=True),
    }


# -- the verdict (pure) -----------------------------------------------------------------------


def test_verdict_waits_for_the_probe_then_for_both_watches_to_sync():
    assert verdict(None, in_sync(), 0.0, grace=GRACE)[:2] == (False, "Connecting")
    syncing = {"Node": SourceState(ok=True, why="", synced_once=True), "Pod": SourceState()}
    ready, reason, message = verdict(Probe(True), syncing, 0.0, grace=GRACE)
    assert (ready, reason, message) == (False, c.REASON_CLUSTER_NOT_READY, "Pods syncing")
    assert verdict(Probe(True), in_sync(), 0.0, grace=GRACE)[:2] == (True, c.REASON_CLUSTER_READY)


def test_verdict_a_failed_probe_is_unreachable_whatever_the_watches_say():
    ready, reason, message = verdict(
        Probe(False, "connection refused"), in_sync(), 0.0, grace=GRACE
    )
    assert (ready, reason, message) == (False, c.REASON_CLUSTER_NOT_REACHABLE, "connection refused")


@given(
    broke_at=st.floats(min_value=0, max_value=1e6),
    after=st.floats(min_value=0, max_value=3 * GRACE),
)
def test_verdict_a_broken_watch_counts_only_once_it_stays_broken_past_the_grace(
    broke_at: float, after: float
):
    sources = in_sync()
    sources["Node"].report(False, "watch closed", broke_at)
    now = broke_at + after
    ready, reason, message = verdict(Probe(True), sources, now, grace=GRACE)
    if now - broke_at <= GRACE:  # what the verdict sees (1.1 + 15.0 - 1.1 > 15.0 in floats)
        assert ready and reason == c.REASON_CLUSTER_READY
    else:
        assert not ready and reason == c.REASON_CLUSTER_NOT_READY
        assert message.startswith("Nodes not in sync") and "watch closed" in message


def test_verdict_a_refused_probe_is_credentials_refused_not_unreachable():
    """The member answered, with a 401/403: it is up, and refuses fleet's credentials."""
    refused = Probe(False, "GET /version on m1: 401 Unauthorized", refused=True)
    ready, reason, message = verdict(refused, in_sync(), 0.0, grace=GRACE)
    assert (ready, reason) == (False, c.REASON_CREDENTIALS_REFUSED)
    assert "401" in message


def test_verdict_a_refused_watch_is_credentials_refused_past_its_grace_or_before_any_sync():
    sources = in_sync()
    sources["Pod"].report(False, "Pod refused: 403 Forbidden", 100.0, refused=True)
    assert verdict(Probe(True), sources, 100.0 + GRACE, grace=GRACE)[0]  # within the grace
    ready, reason, message = verdict(Probe(True), sources, 101.0 + GRACE, grace=GRACE)
    assert (ready, reason) == (False, c.REASON_CREDENTIALS_REFUSED)
    assert "403" in message
    # A watch refused from its first list never syncs: refused at once, not "syncing".
    never = {"Node": SourceState(ok=True, why="", synced_once=True), "Pod": SourceState()}
    never["Pod"].report(False, "Pod refused: 401 Unauthorized", 0.0, refused=True)
    assert verdict(Probe(True), never, 0.0, grace=GRACE)[1] == c.REASON_CREDENTIALS_REFUSED
    # A later failure that is no refusal is not one.
    sources["Pod"].report(False, "connection reset", 120.0)
    assert verdict(Probe(True), sources, 200.0, grace=GRACE)[1] == c.REASON_CLUSTER_NOT_READY


def test_only_refusals_and_unusable_credentials_are_credentials_refused():
    refused = {
        c.REASON_CREDENTIALS_REFUSED,
        c.REASON_CLUSTER_ID_MISMATCH,
        c.REASON_KUBECONFIG_SECRET_MISSING,
        c.REASON_KUBECONFIG_SECRET_UNREADABLE,
        c.REASON_KUBECONFIG_SECRET_NOT_WATCHED,
        c.REASON_KUBECONFIG_INVALID,
        c.REASON_DUPLICATE_CLUSTER,
    }
    lost = {c.REASON_CLUSTER_NOT_REACHABLE, c.REASON_CLUSTER_NOT_READY, "Connecting"}
    assert all(credentials_refused(r) for r in refused)
    assert not any(credentials_refused(r) for r in lost | {c.REASON_CLUSTER_READY})


def test_a_watch_failing_again_does_not_restart_its_grace():
    source = SourceState(ok=True, why="", synced_once=True)
    source.report(False, "first", 100.0)
    source.report(False, "second", 110.0)
    assert source.failing_since == 100.0 and source.why == "second"
    source.report(True, "", 112.0)
    source.report(False, "third", 200.0)
    assert source.failing_since == 200.0


def test_health_since_moves_only_when_readiness_or_reason_change():
    ready = next_health(Health(), True, c.REASON_CLUSTER_READY, "ok", 10.0)
    assert (ready.ready, ready.since) == (True, 10.0)
    again = next_health(ready, True, c.REASON_CLUSTER_READY, "still ok", 20.0)
    assert (again.since, again.message) == (10.0, "still ok")
    lost = next_health(again, False, c.REASON_CLUSTER_NOT_REACHABLE, "refused", 30.0)
    assert (lost.ready, lost.reason, lost.since) == (False, c.REASON_CLUSTER_NOT_REACHABLE, 30.0)


# -- the registry, through its connection's reports ----------------------------------------------


async def connected(members: Members, name: str = "m1", url: str = M1) -> Member:
    members.server(url)
    members.secret(name, url)
    await members.registry.sync(members.member_cluster(name))
    member = members.registry.get(name)
    assert member is not None
    return member


async def test_a_new_member_is_connecting_until_it_answers_then_ready():
    members = Members()
    try:
        member = await connected(members)
        assert member.health.reason == "Connecting" and not member.ready
        assert members.listener.health == []

        await members.until(lambda: member.ready)

        assert member.health.reason == c.REASON_CLUSTER_READY
        assert members.listener.health == [("m1", True)]
        assert member.version == "v1.34.4"
        # The node watch fed the snapshot, and capacity news went out.
        assert [n.name for n in member.snapshot.nodes()] == ["n0"]
        assert "m1" in members.listener.capacity
    finally:
        await members.stop()


async def test_a_failed_probe_makes_the_member_not_reachable_and_an_answer_makes_it_ready():
    members = Members()
    try:
        member = await connected(members)
        await members.until(lambda: member.ready)
        server = members.servers[M1]

        server.interceptors.append(
            lambda r: status(503, "ServiceUnavailable", "down") if is_probe(r) else None
        )
        await members.until(lambda: not member.ready)

        assert member.health.reason == c.REASON_CLUSTER_NOT_REACHABLE
        assert "503" in member.health.message or "down" in member.health.message
        assert members.listener.health == [("m1", True), ("m1", False)]

        server.interceptors.clear()
        await members.until(lambda: member.ready)
        assert members.listener.health == [("m1", True), ("m1", False), ("m1", True)]
    finally:
        await members.stop()


async def test_a_member_refusing_fleets_token_is_credentials_refused_and_says_how_to_recover():
    """A 401 on the probe (an expired or revoked token): CredentialsRefused, whose message names
    the command that re-issues the token; the rest of the controller hears of it, and of every
    change between a refusal and a loss, for only a loss fails gangs over."""
    members = Members()
    try:
        member = await connected(members)
        await members.until(lambda: member.ready)
        server = members.servers[M1]

        server.interceptors.append(lambda r: status(503, "ServiceUnavailable", "down"))
        await members.until(lambda: not member.ready)
        assert member.health.reason == c.REASON_CLUSTER_NOT_REACHABLE

        server.interceptors[:] = [lambda r: status(401, "Unauthorized", "Unauthorized")]
        await members.until(lambda: member.health.reason == c.REASON_CREDENTIALS_REFUSED)

        assert "401" in member.health.message
        assert "fleet join m1 --kubeconfig" in member.health.message
        assert members.listener.health == [("m1", True), ("m1", False), ("m1", False)]

        server.interceptors.clear()
        await members.until(lambda: member.ready)
        assert members.listener.health[-1] == ("m1", True)
    finally:
        await members.stop()


def node_watch(request: httpx.Request) -> bool:
    return request.url.path == "/api/v1/nodes" and request.url.params.get("watch") == "true"


def node_list(request: httpx.Request) -> bool:
    return request.url.path == "/api/v1/nodes" and request.url.params.get("watch") != "true"


async def test_a_watch_that_breaks_and_recovers_within_the_grace_keeps_the_member_ready():
    members = Members()
    try:
        member = await connected(members)
        await members.until(lambda: member.ready)
        server = members.servers[M1]
        await members.until(lambda: bool(server.waiting(node_watch)))
        lists = len([r for r in server.requests if node_list(r)])

        # The node watch drops; the informer relists (after its own backoff) and resumes.
        server.release_parked(status(500, "InternalError", "etcd leader changed"), node_watch)
        await members.until(lambda: not member.sources["Node"].ok)
        broke_at = member.sources["Node"].failing_since
        members.clock.advance(GRACE - 1)
        await members.until(lambda: len([r for r in server.requests if node_list(r)]) > lists)
        await members.until(lambda: member.sources["Node"].ok)

        assert broke_at == members.clock.monotonic() - (GRACE - 1)
        assert member.ready and members.listener.health == [("m1", True)]
    finally:
        await members.stop()


async def test_a_watch_broken_past_the_grace_makes_the_member_not_ready():
    members = Members()
    try:
        member = await connected(members)
        await members.until(lambda: member.ready)
        server = members.servers[M1]
        await members.until(lambda: bool(server.waiting(node_watch)))

        # The node watch drops and the relists fail; the probe still answers.
        server.interceptors.append(
            lambda r: status(500, "InternalError", "etcd down") if node_list(r) else None
        )
        server.release_parked(status(500, "InternalError", "etcd leader changed"), node_watch)
        await members.until(lambda: not member.sources["Node"].ok)
        assert member.ready  # within the grace
        members.clock.advance(GRACE + 1)

        await members.until(lambda: not member.ready)  # judged again on the next probe

        assert member.health.reason == c.REASON_CLUSTER_NOT_READY
        assert member.health.message.startswith("Nodes not in sync for 16s")
        assert members.listener.health == [("m1", True), ("m1", False)]
    finally:
        await members.stop()


async def test_a_watch_refused_past_the_grace_is_credentials_refused():
    """fleet's RBAC in the member removed: the probe still answers (/version is public), the
    node watch is refused (403), and past its grace the member refuses fleet's credentials."""
    members = Members()
    try:
        member = await connected(members)
        await members.until(lambda: member.ready)
        server = members.servers[M1]
        await members.until(lambda: bool(server.waiting(node_watch)))

        forbidden = status(403, "Forbidden", 'nodes is forbidden: User "fleet" cannot list')
        server.interceptors.append(lambda r: forbidden if r.url.path == "/api/v1/nodes" else None)
        server.release_parked(forbidden, node_watch)
        await members.until(lambda: not member.sources["Node"].ok)
        assert member.ready and member.sources["Node"].refused  # within the grace
        members.clock.advance(GRACE + 1)

        await members.until(lambda: not member.ready)

        assert member.health.reason == c.REASON_CREDENTIALS_REFUSED
        assert "403" in member.health.message
    finally:
        await members.stop()


async def test_an_unreadable_secret_is_not_reported_as_a_missing_one():
    members = Members()
    try:
        members.server(M1)
        forbidden = status(403, "Forbidden", 'secrets "m1-kubeconfig" is forbidden')
        members.fleet_api.interceptors.append(
            lambda r: forbidden if "/secrets/" in r.url.path else None
        )
        await members.registry.sync(members.member_cluster("m1"))
        member = members.registry.get("m1")
        assert member is not None
        assert member.health.reason == c.REASON_KUBECONFIG_SECRET_UNREADABLE
        assert member.connection is None

        members.fleet_api.interceptors.clear()
        await members.registry.sync(members.member_cluster("m1"))
        assert member.health.reason == c.REASON_KUBECONFIG_SECRET_MISSING
        assert member.connection is None
    finally:
        await members.stop()


async def test_an_invalid_kubeconfig_is_said_with_its_field():
    members = Members()
    try:
        members.server("http://m1.test")
        members.secret("m1", "http://m1.test")  # not https
        await members.registry.sync(members.member_cluster("m1"))
        member = members.registry.get("m1")
        assert member is not None
        assert member.health.reason == c.REASON_KUBECONFIG_INVALID
        assert "server" in member.health.message and "https" in member.health.message
        assert member.connection is None and members.connected == []
    finally:
        await members.stop()


# -- the MemberCluster status --------------------------------------------------------------------


async def test_member_status_is_written_when_it_changes_and_only_then():
    api, clock = MemoryApi(), FakeClock()
    api.put(
        {
            "apiVersion": "fleet.dev/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": "m1"},
            "spec": {},
        }
    )
    writer = MemberStatusWriter(api.client("fleet"), clock)
    member = Member("m1", {}, {})
    apply_node_event(member.snapshot, "ADDED", node("n0", gpus=8))
    member.health = Health(True, c.REASON_CLUSTER_READY, "connected", 0.0)
    member.version = "v1.34.4"

    await writer.write(member)

    written = api.get("fleet.dev/v1alpha1", "MemberCluster", "m1")["status"]
    (ready,) = written["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == (
        "Ready",
        "True",
        c.REASON_CLUSTER_READY,
    )
    assert ready["lastTransitionTime"] == format_time(clock.now())
    assert written["kubernetesVersion"] == "v1.34.4" and written["nodeCount"] == 1
    assert written["resources"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert written["lastProbeTime"] == format_time(clock.now())
    patches = len(api.asked("PATCH", "/status"))
    assert patches == 1

    clock.advance(60)
    await writer.write(member)  # nothing changed: no write, the probe time included
    assert len(api.asked("PATCH", "/status")) == patches

    member.health = Health(False, c.REASON_CLUSTER_NOT_REACHABLE, "connection refused", 0.0)
    await writer.write(member)

    written = api.get("fleet.dev/v1alpha1", "MemberCluster", "m1")["status"]
    (ready,) = written["conditions"]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        c.REASON_CLUSTER_NOT_REACHABLE,
        "connection refused",
    )
    assert ready["lastTransitionTime"] == format_time(clock.now())
    assert len(api.asked("PATCH", "/status")) == patches + 1


async def test_member_status_of_a_member_cluster_gone_is_not_written():
    api, clock = MemoryApi(), FakeClock()
    writer = MemberStatusWriter(api.client("fleet"), clock)
    await writer.write(Member("gone", {}, {}))
    assert not api.asked("PATCH")


async def test_ready_says_which_generation_of_the_member_cluster_it_was_computed_from():
    """observedGeneration is the spec the controller took in (taints, labels, Secret), not the
    one the API server holds when the status is written."""
    api, clock = MemoryApi(), FakeClock()
    api.put(
        {
            "apiVersion": "fleet.dev/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": "m1", "generation": 4},
            "spec": {},
        }
    )
    writer = MemberStatusWriter(api.client("fleet"), clock)
    member = Member("m1", {}, {})
    member.health = Health(True, c.REASON_CLUSTER_READY, "connected", 0.0)
    member.generation = 3  # the taint added in generation 4 is not taken in yet

    await writer.write(member)
    (ready,) = api.get("fleet.dev/v1alpha1", "MemberCluster", "m1")["status"]["conditions"]
    assert ready["observedGeneration"] == 3

    member.generation = 4
    await writer.write(member)
    (ready,) = api.get("fleet.dev/v1alpha1", "MemberCluster", "m1")["status"]["conditions"]
    assert ready["observedGeneration"] == 4
    assert ready["lastTransitionTime"] == format_time(clock.now())


async def test_a_synced_member_cluster_records_its_generation_taints_included():
    members = Members()
    try:
        member = await connected(members)
        obj = members.fleet_api.get("fleet.dev/v1alpha1", "MemberCluster", "m1")
        assert member.generation == obj["metadata"]["generation"]

        obj["spec"]["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
        tainted = members.fleet_api.put(obj)
        assert tainted["metadata"]["generation"] == obj["metadata"]["generation"] + 1
        await members.registry.sync(tainted)

        assert member.generation == tainted["metadata"]["generation"]
        assert [t.key for t in member.taints] == ["maintenance"]
    finally:
        await members.stop()


async def test_warm_hears_of_every_member_cluster_before_any_is_said_to_have_left():
    members = Members()
    members.server(M1)
    members.secret("m1", M1)
    members.member_cluster("m1")
    registry = members.registry
    try:
        assert not registry.left("m1")  # not listed yet: nobody has left
        await registry.warm()
        assert registry.listed
        assert registry.get("m1") is not None and not registry.left("m1")
        assert registry.left("gone")
        await members.until(lambda: (m := registry.get("m1")) is not None and m.ready)
    finally:
        await members.stop()


class _Reports:
    def node_event(self, event: str, obj: Any) -> None: ...

    def pod_event(self, event: str, obj: Any) -> None: ...

    def job_event(self, event: str, obj: Any) -> None: ...

    def source_health(self, source: str, ok: bool, why: str, refused: bool) -> None: ...

    def detected(self, gang_scheduler: str | None) -> None: ...

    def kinds_found(self) -> None: ...

    def probed(self, ok: bool, why: str, version: str | None, refused: bool) -> None: ...


async def test_a_member_whose_watches_speak_is_not_probed_a_quiet_one_is():
    """The probe is for members that say nothing: events on a watch are answers too."""
    busy_api = MemoryApi(MEMBER_KINDS, server="https://busy.test")
    quiet_api = MemoryApi(MEMBER_KINDS, server="https://quiet.test")
    busy, quiet = (
        MemberConnection(name, api.client(name), _Reports(), fleet_id="f", probe_interval=0.05)
        for name, api in (("busy", busy_api), ("quiet", quiet_api))
    )

    # What the busy member's watches deliver (the in-memory server's watches park, so the
    # events go in where the node watch puts its own).
    node_event = busy._heard(_Reports().node_event)

    async def churn() -> None:
        for i in itertools.count():
            node_event("ADDED", node(f"n{i}"))
            await asyncio.sleep(0.005)

    busy.start()
    quiet.start()
    talking = asyncio.create_task(churn())
    try:
        async with asyncio.timeout(10):
            while quiet.probes < 8:
                await asyncio.sleep(0.01)
        assert busy.probes <= 3  # the first one, and at most a late event's gap or two
    finally:
        talking.cancel()
        await busy.close()
        await quiet.close()


async def test_a_member_cluster_deleted_while_warm_lists_them_is_not_brought_back():
    """kopf's DELETED event arrives while the leader's list is on its way: the list, older,
    must not add the member again (it would stay for good: no event would remove it)."""
    members = Members()
    members.server(M1)
    members.secret("m1", M1)
    members.member_cluster("m1")
    registry = members.registry

    def lists_members(request: Any) -> bool:
        return bool(request.method == "GET" and request.url.path.endswith("/memberclusters"))

    members.fleet_api.holds.append(lists_members)
    try:
        warming = asyncio.create_task(registry.warm())
        await members.until(lambda: bool(members.fleet_api.waiting(lists_members)))
        await registry.remove("m1")  # what kopf does on the DELETED event
        members.fleet_api.release_parked(where=lists_members)
        await warming
        assert registry.listed
        assert registry.get("m1") is None
        assert registry.left("m1")
    finally:
        await members.stop()


async def test_the_gang_scheduler_join_recorded_is_known_before_the_connection_detects_it():
    # `fleet join` writes status.gangScheduler; until this connection's own probe answers (here
    # never: no server for the member), placement must already know the member takes
    # Reservations, as its GANG column says.
    members = Members()
    try:
        await members.registry.sync(members.member_cluster("m1"))  # created, then recorded
        recorded = members.member_cluster("m1")
        recorded["status"] = {"gangScheduler": "Koordinator"}
        await members.registry.sync(recorded)
        member = members.registry.get("m1")
        assert member is not None and member.connection is None
        assert member.gang_scheduler == "Koordinator"
    finally:
        await members.stop()
