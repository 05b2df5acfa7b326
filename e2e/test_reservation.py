"""Reservation-backed dispatch to a Koordinator member, on real API servers and koord-scheduler.

The sandbox's Koordinator member (member-4) is joined for this module only, tainted so that no
other test's gang goes there, with `spec.reservation` on. Every policy here tolerates the taint
and prefers member-4, then member-1. Capacity that fleet cannot see (a member-local
Reservation, which is not a pod) stands in for a workload that lands in the member after fleet's
decision.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from fleet.sandbox.process import log_tail
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import KOORDINATOR_MEMBER
from fleet.testing.workloads import JOBSET_NAME_LABEL, gang_policy, jobset, pytorchjob

from .conftest import PYTORCHJOB, Fleet, joined_apart
from .test_topology import RACK, _rack_job, _racks_of_pods

RESERVATION = ("scheduling.koordinator.sh/v1alpha1", "Reservation")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
MEMBER_CLUSTER = ("fleet.dev/v1alpha1", "MemberCluster")
TAINT = {"key": "fleet.dev/koordinator", "value": "e2e", "effect": "NoSchedule"}
UID_LABEL = "fleet.dev/fleet-uid"


def _member_settings(api: ClusterClient, ttl: int = 600, wait: int = 15) -> None:
    """member-4's taint and reservation settings (one field manager owns both)."""
    api.apply(
        {
            "apiVersion": MEMBER_CLUSTER[0],
            "kind": MEMBER_CLUSTER[1],
            "metadata": {"name": KOORDINATOR_MEMBER},
            "spec": {
                "taints": [TAINT],
                "reservation": {"enabled": True, "ttlSeconds": ttl, "waitSeconds": wait},
            },
        }
    )


@pytest.fixture(scope="module")
def koordinator(fleet: Fleet) -> Iterator[ClusterClient]:
    """member-4 joined (taint, reservations on; its gang scheduler detected), then removed."""
    with joined_apart(fleet, KOORDINATOR_MEMBER, TAINT, "Koordinator") as member:
        _member_settings(fleet.api)
        yield member


@pytest.fixture(autouse=True)
def koord_scheduler_log_on_failure(fleet: Fleet, request: pytest.FixtureRequest) -> Iterator[None]:
    """Whether a Reservation went Available is koord-scheduler's doing: a failed test shows
    the end of its log."""
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        path = fleet.sandbox.cluster(KOORDINATOR_MEMBER).log("kube-scheduler")
        print(f"\n{KOORDINATOR_MEMBER} koord-scheduler log:\n{log_tail(path, 80)}")


def _policy(namespace: str, kinds: tuple[str, ...] = ("PyTorchJob",)) -> dict[str, Any]:
    policy = gang_policy("gang", namespace, kinds=kinds)
    placement = policy["spec"]["placement"]
    placement["clusterTolerations"] = [
        {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
    ]
    placement["clusterAffinities"] = [
        {"affinityName": "koordinator", "clusterNames": [KOORDINATOR_MEMBER]},
        {"affinityName": "fallback", "clusterNames": ["member-1"]},
    ]
    return policy


def _job(namespace: str, name: str = "job") -> dict[str, Any]:
    return pytorchjob(name, namespace=namespace, node_selector={"test": namespace}, workers=2)


def _ours(member: ClusterClient, uid: str) -> list[dict[str, Any]]:
    return member.items(*RESERVATION, None, f"{UID_LABEL}={uid}")


def _uid(live: Fleet, namespace: str, name: str = "job") -> str:
    job = wait_until(lambda: live.job(namespace, name), what="the fleet job")
    return str(job["metadata"]["uid"])


def _reasons(live: Fleet, namespace: str, name: str = "job") -> list[str]:
    return [reason for reason, _m, _c in live.events(namespace, name)]


def _stamp(live: Fleet, namespace: str, reason: str, name: str = "job") -> str:
    """When the first Event of `reason` on `name` was posted (RFC 3339, to the second: two
    Events of one second are in no order, so tests compare these, not positions)."""
    stamps = [
        e.get("firstTimestamp") or e.get("lastTimestamp") or ""
        for e in live.api.events(namespace, name)
        if e.get("reason") == reason
    ]
    assert stamps, f"no {reason} Event on {name}"
    return min(stamps)


def foreign_reservation(member: ClusterClient, namespace: str, gpus: int) -> str:
    """A member-local Reservation holding `gpus` GPUs of the test's nodes: capacity fleet's
    snapshot (pods and nodes) cannot see. Deleted by the caller (cluster-scoped)."""
    name = f"local-{namespace}"
    member.create(
        {
            "apiVersion": RESERVATION[0],
            "kind": RESERVATION[1],
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "metadata": {"namespace": namespace},
                    "spec": {
                        "nodeSelector": {"test": namespace},
                        "containers": [
                            {
                                "name": "hold",
                                "resources": {
                                    "requests": {"nvidia.com/gpu": gpus},
                                    "limits": {"nvidia.com/gpu": gpus},
                                },
                            }
                        ],
                    },
                },
                "owners": [{"labelSelector": {"matchLabels": {"nobody": namespace}}}],
                "ttl": "600s",
            },
        }
    )
    wait_until(
        lambda: (
            ((member.get(*RESERVATION, name) or {}).get("status") or {}).get("phase") == "Available"
        ),
        timeout=60,
        what="the member-local Reservation Available",
    )
    return name


def _bound_through_reservations(
    koordinator: ClusterClient, namespace: str, uid: str, count: int
) -> None:
    """The gang's `count` pods were each bound through one of fleet's Reservations
    (koord-scheduler says which, in an annotation)."""
    pods = koordinator.pods(namespace, f"{UID_LABEL}={uid}")
    assert len(pods) == count
    allocated = {
        p["metadata"]["annotations"].get("scheduling.koordinator.sh/reservation-allocated", "")
        for p in pods
    }
    assert all(f"fleet-{uid}-" in a for a in allocated), allocated


def test_reserves_then_dispatches_and_cleans_up_after_use(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes
):
    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace))
    live.api.create(_job(namespace))
    uid = _uid(live, namespace)

    live.wait_running(namespace, "job", KOORDINATOR_MEMBER, timeout=120)
    _bound_through_reservations(koordinator, namespace, uid, 3)
    assert _stamp(live, namespace, "Reserving") <= _stamp(live, namespace, "Reserved")
    # Used: fleet deletes them.
    wait_until(lambda: _ours(koordinator, uid) == [], timeout=60, what="Reservations deleted")
    released = wait_until(
        lambda: next(
            (
                x
                for x in (live.binding(namespace, "job") or {}).get("status", {}).get("conditions")
                or []
                if x["type"] == "Reserved" and x["reason"] == "Released"
            ),
            None,
        ),
        what="the binding's Reserved condition Released",
    )
    assert released["status"] == "False"
    leader = live.replica(live.leader() or "")
    text = (
        urllib.request.urlopen(f"http://127.0.0.1:{leader.metrics_port}/metrics", timeout=5)
        .read()
        .decode()
    )
    assert f'fleet_reservation_attempts_total{{cluster="{KOORDINATOR_MEMBER}"}}' in text
    assert "fleet_reservation_available_seconds_count" in text


def test_a_jobset_reserves_then_dispatches_and_its_pods_use_the_reservations(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes
):
    """Reservations for a kind beside the Kubeflow jobs: the JobSet controller in member-4
    makes the pods from the templates fleet labelled, and koord-scheduler binds each one through
    one of fleet's Reservations."""
    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace, kinds=("JobSet",)))
    live.api.create(
        jobset(
            "js",
            namespace=namespace,
            leaders=1,
            workers=1,
            worker_pods=2,
            node_selector={"test": namespace},
        )
    )
    uid = str(
        wait_until(lambda: live.api.get(*JOBSET, "js", namespace), what="the JobSet")["metadata"][
            "uid"
        ]
    )
    pods = live.wait_running(namespace, "js", KOORDINATOR_MEMBER, timeout=120, kind=JOBSET, pods=3)
    assert {p["metadata"]["labels"][JOBSET_NAME_LABEL] for p in pods} == {"js"}
    allocated = {
        p["metadata"]["annotations"].get("scheduling.koordinator.sh/reservation-allocated", "")
        for p in pods
    }
    assert all(f"fleet-{uid}-" in a for a in allocated), allocated
    assert _stamp(live, namespace, "Reserving", "js") <= _stamp(live, namespace, "Reserved", "js")
    wait_until(lambda: _ours(koordinator, uid) == [], timeout=60, what="Reservations deleted")


def test_capacity_taken_after_the_decision_makes_fleet_fall_back_to_the_next_member(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes
):
    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels={"test": namespace})
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    local = foreign_reservation(koordinator, namespace, gpus=4)
    try:
        live.api.create(_policy(namespace))
        live.api.create(_job(namespace))
        uid = _uid(live, namespace)

        live.wait_running(namespace, "job", "member-1", timeout=150)
        binding = live.binding(namespace, "job")
        excluded = binding["status"]["excludedClusters"]
        assert [e["name"] for e in excluded] == [KOORDINATOR_MEMBER]
        assert excluded[0]["reason"].startswith("ReservationFailed")
        assert "ReservationFailed" in _reasons(live, namespace)
        assert _ours(koordinator, uid) == []
        assert live.copies(namespace, "job") == ["member-1"]
        assert koordinator.get(*PYTORCHJOB, "job", namespace) is None
    finally:
        koordinator.delete(*RESERVATION, local)


def test_reservations_that_expire_while_no_controller_runs_are_replaced_after_a_restart(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes
):
    """SIGKILL between reserve and dispatch, the TTL runs out meanwhile: after the restart
    fleet falls back, leaves nothing behind and runs the job exactly once."""
    _member_settings(live.api, ttl=5, wait=300)
    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels={"test": namespace})
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    local = foreign_reservation(koordinator, namespace, gpus=4)
    try:
        live.api.create(_policy(namespace))
        live.api.create(_job(namespace))
        uid = _uid(live, namespace)
        wait_until(lambda: len(_ours(koordinator, uid)) == 3, what="3 Reservations made")
        for replica in live.replicas:
            replica.kill()
        koordinator.delete(*RESERVATION, local)  # room now: they are reserved, then expire

        wait_until(
            lambda: (
                (mine := _ours(koordinator, uid))
                and all((r.get("status") or {}).get("phase") == "Failed" for r in mine)
            ),
            timeout=90,
            what="fleet's Reservations Available, then expired (TTL 5s)",
        )
        live.ensure_running()

        live.wait_running(namespace, "job", "member-1", timeout=150)
        assert _ours(koordinator, uid) == []
        assert live.copies(namespace, "job") == ["member-1"]
        excluded = live.binding(namespace, "job")["status"]["excludedClusters"]
        assert "is Failed" in excluded[0]["reason"]
    finally:
        koordinator.delete(*RESERVATION, local)
        _member_settings(live.api)


def test_deleting_a_job_while_it_reserves_deletes_its_reservations(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes
):
    _member_settings(live.api, wait=300)
    add_nodes(KOORDINATOR_MEMBER, count=1, gpu=4, labels={"test": namespace})
    local = foreign_reservation(koordinator, namespace, gpus=4)
    try:
        live.api.create(_policy(namespace))
        live.api.create(_job(namespace))
        uid = _uid(live, namespace)
        wait_until(lambda: len(_ours(koordinator, uid)) == 3, what="3 Reservations made")
        assert (live.binding(namespace, "job") or {})["status"]["phase"] == "Reserving"

        live.api.delete(*PYTORCHJOB, "job", namespace)

        wait_until(lambda: live.job(namespace, "job") is None, timeout=60, what="job deleted")
        assert _ours(koordinator, uid) == []
    finally:
        koordinator.delete(*RESERVATION, local)
        _member_settings(live.api)


def test_a_rack_bound_gangs_reservations_are_made_in_its_rack_and_its_pods_use_them(
    live: Fleet, koordinator: ClusterClient, namespace, add_nodes
):
    """Its Reservations are pinned to the rack placement chose, as its pods are: each pod is
    bound through one of them, every one on a node of that rack (an unpinned Reservation
    could be made in the other rack, where the pinned pods could not use it)."""
    for rack, count, gpu in (("a", 2, 1), ("c", 1, 4)):  # master + 2 workers fit only in c
        labels = {"test": namespace, RACK: f"{namespace}-{rack}"}
        add_nodes(KOORDINATOR_MEMBER, count=count, gpu=gpu, labels=labels)
    live.api.create(_policy(namespace))
    live.api.create(_rack_job(namespace, "job", workers=2, gpus=1))
    uid = _uid(live, namespace)

    live.wait_running(namespace, "job", KOORDINATOR_MEMBER, timeout=120)
    (target,) = live.binding(namespace, "job")["spec"]["clusters"]
    assert [(d["level"], d["value"]) for d in target["domains"]] == [(RACK, f"{namespace}-c")]
    _bound_through_reservations(koordinator, namespace, uid, 3)
    assert _racks_of_pods(live, KOORDINATOR_MEMBER, namespace) == {f"{namespace}-c"}
