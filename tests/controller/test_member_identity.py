"""One cluster, one registration: two MemberClusters that are the same cluster (the same spec.id,
or a kubeconfig reaching a kube-system UID another member already is) are never both connected.
The one created first (then first by name) holds the cluster; the other is NotReady,
DuplicateCluster, naming it, and connects once the holder leaves."""

from __future__ import annotations

from fleet.api import constants as c
from fleet.controller.members import Member
from fleet.core.identity import Claim, holder
from tests.controller.registry_harness import Members

URL = "https://10.0.0.7:6443"
OTHER = "https://10.0.0.8:6443"


def _uid(members: Members, url: str) -> str:
    """The cluster id of the member server at `url`: its kube-system namespace's UID."""
    namespace = members.servers[url].get("v1", "Namespace", "kube-system")
    assert namespace is not None
    return str(namespace["metadata"]["uid"])


def _refused(member: Member | None, holder_name: str) -> bool:
    return (
        member is not None
        and member.connection is None
        and not member.ready
        and member.health.reason == c.REASON_DUPLICATE_CLUSTER
        and f"MemberCluster {holder_name}" in member.health.message
    )


def test_the_holder_is_the_one_created_first_then_the_first_by_name():
    assert holder([Claim("b", 10.0), Claim("a", 20.0)]) == "b"
    assert holder([Claim("b", 10.0), Claim("a", 10.0)]) == "a"
    assert holder([Claim("a", None), Claim("b", 10.0)]) == "b"
    assert holder([]) is None


async def test_a_second_member_cluster_with_the_same_spec_id_is_refused_until_the_first_leaves():
    members = Members()
    members.server(URL)
    try:
        uid = _uid(members, URL)
        for name in ("first", "second"):
            members.secret(name, URL)
        await members.registry.sync(members.member_cluster("first", cluster_id=uid))
        await members.registry.sync(members.member_cluster("second", cluster_id=uid))

        first, second = members.registry.get("first"), members.registry.get("second")
        assert first is not None and first.connection is not None
        assert _refused(second, "first")
        assert second is not None and second.cluster_id == uid
        assert members.registry.by_identity(uid) is first
        await members.until(lambda: first.ready)
        assert len(members.connected) == 1  # the second never connected

        await members.registry.remove("first")
        await members.until(lambda: second.ready)
        assert members.registry.by_identity(uid) is second
    finally:
        await members.stop()


async def test_a_member_without_spec_id_reaching_a_cluster_another_member_is_is_refused():
    members = Members()
    members.server(URL)
    members.server(OTHER)
    try:
        uid = _uid(members, URL)
        members.secret("recorded", URL)
        members.secret("unrecorded", URL)
        members.secret("elsewhere", OTHER)
        await members.registry.sync(members.member_cluster("recorded", cluster_id=uid))
        # Named so that it would hold the cluster by name alone: created later, it does not.
        await members.registry.sync(
            members.member_cluster("unrecorded", created="2025-01-01T00:00:05Z")
        )
        await members.registry.sync(members.member_cluster("elsewhere"))

        unrecorded, elsewhere = (
            members.registry.get("unrecorded"),
            members.registry.get("elsewhere"),
        )
        assert _refused(unrecorded, "recorded")
        assert (
            unrecorded is not None and unrecorded.cluster_id == uid
        )  # what its kubeconfig reached
        # A member of another cluster is no duplicate: it connects, its cluster read the same way.
        assert elsewhere is not None and elsewhere.connection is not None
        assert elsewhere.cluster_id == _uid(members, OTHER)
        assert members.registry.by_identity(_uid(members, OTHER)) is elsewhere
        recorded = members.registry.get("recorded")
        assert members.registry.by_identity(uid) is recorded

        await members.registry.remove("recorded")
        await members.until(lambda: unrecorded.ready)
    finally:
        await members.stop()


async def test_the_older_member_cluster_holds_the_cluster_whichever_was_connected_first():
    members = Members()
    members.server(URL)
    try:
        uid = _uid(members, URL)
        members.secret("a-newer", URL)
        members.secret("b-older", URL)
        await members.registry.sync(
            members.member_cluster("a-newer", cluster_id=uid, created="2025-01-02T00:00:00Z")
        )
        newer = members.registry.get("a-newer")
        assert newer is not None
        await members.until(lambda: newer.ready)

        await members.registry.sync(
            members.member_cluster("b-older", cluster_id=uid, created="2025-01-01T00:00:00Z")
        )
        older = members.registry.get("b-older")
        assert older is not None and older.connection is not None
        await members.until(lambda: _refused(newer, "b-older"))
        assert ("a-newer", False) in members.listener.health
        assert members.registry.by_identity(uid) is older
    finally:
        await members.stop()


async def test_a_restarted_controller_connects_the_holder_whatever_order_it_lists_them_in():
    members = Members()
    members.server(URL)
    try:
        uid = _uid(members, URL)
        members.secret("a-newer", URL)
        members.secret("b-older", URL)
        # Listed by name: the newer comes first.
        members.member_cluster("a-newer", cluster_id=uid, created="2025-01-02T00:00:00Z")
        members.member_cluster("b-older", cluster_id=uid, created="2025-01-01T00:00:00Z")
        await members.registry.warm()

        assert _refused(members.registry.get("a-newer"), "b-older")
        # The newer one was never connected, not even for a moment.
        assert len(members.connected) == 1
    finally:
        await members.stop()
