"""The dashboard's view models, built from objects alone: no server, no browser."""

from __future__ import annotations

from fleet.dashboard.state import GANG_BINDING, MEMBER_CLUSTER, State
from fleet.dashboard.views.fleet import fleet_view
from fleet.dashboard.views.jobs import find_binding, job_view, jobs_view
from fleet.dashboard.views.quotas import quotas_view
from fleet.dashboard.views.reservations import reservations_view
from tests.dashboard.objects import (
    NOW,
    RUNNING,
    UID,
    WAITING,
    binding,
    member_cluster,
    node,
    placed,
    pod,
    queue,
    quota_tree,
    reservation,
    unit,
)


def _state() -> State:
    state = State()
    for name in ("member-1", "member-2"):
        state.fleet_event(MEMBER_CLUSTER, "ADDED", member_cluster(name))
    state.node_event("member-1", "ADDED", node("gpu-a", 8))
    state.node_event("member-1", "ADDED", node("gpu-b", 8))
    state.pod_event("member-1", "ADDED", pod("train-worker-0", "gpu-a", 6))
    state.member_health("member-1", True, "")
    return state


def test_fleet_gpus_come_from_the_members_nodes_and_pods() -> None:
    state = _state()
    state.member_health("member-2", False, "member-2: connection refused")

    view = fleet_view(state.fleet[MEMBER_CLUSTER], state.members, NOW)

    one, two = view["members"]
    assert one["status"] == "Ready" and one["gangScheduler"] == "Coscheduling"
    assert one["gpus"] == {"total": 16, "free": 10, "largestFree": 8, "source": "watch"}
    assert [(n["name"], n["free"]) for n in one["nodes"]] == [("gpu-a", 2), ("gpu-b", 8)]
    # Unreachable from here: said so, with why; its figures are the controller's last probe.
    assert two["status"] == "Unreachable" and "connection refused" in two["problem"]
    assert two["gpus"] == {"total": 16, "free": 10, "largestFree": None, "source": "probe"}
    assert view["summary"] == {"members": 2, "ready": 1, "gpus": 32, "free": 20}


def test_fleet_a_not_ready_member_and_malformed_objects() -> None:
    state = _state()
    state.fleet_event(MEMBER_CLUSTER, "MODIFIED", member_cluster("member-2", ready=False))
    state.fleet_event(
        MEMBER_CLUSTER, "ADDED", {"metadata": {"name": "member-3"}, "spec": {"taints": "x"}}
    )
    state.node_event(
        "member-1",
        "ADDED",
        {"metadata": {"name": "bad"}, "status": {"allocatable": {"nvidia.com/gpu": "lots"}}},
    )

    rows = {
        m["name"]: m for m in fleet_view(state.fleet[MEMBER_CLUSTER], state.members, NOW)["members"]
    }

    assert rows["member-2"]["status"] == "NotReady"
    assert rows["member-2"]["readyMessage"] == "connection refused"
    assert rows["member-3"]["error"].startswith("MemberCluster member-3 cannot be read: spec.")
    bad = [n for n in rows["member-1"]["nodes"] if n["name"] == "bad"]
    assert bad and "lots" in bad[0]["error"]
    assert rows["member-1"]["gpus"]["total"] == 16  # the unreadable node counts for nothing


def test_jobs_list_states_members_queues_and_why_a_job_waits() -> None:
    bindings = {
        "team-a/pytorchjob-train": placed(RUNNING),
        "team-a/pytorchjob-held": binding("held", **WAITING),
        "team-a/broken": {"metadata": {"name": "broken", "namespace": "team-a"}, "spec": {}},
    }
    units = {"team-a/pytorchjob-held": unit("held", "Enqueued", message="quota root/child-1: ...")}

    view = jobs_view(bindings, units, NOW)

    rows = {r["name"]: r for r in view["jobs"]}
    assert rows["train"]["phase"] == "Running" and rows["train"]["member"] == "member-1"
    assert rows["train"]["memberState"] == "Running" and rows["train"]["age"] == "10m"
    assert rows["held"]["phase"] == "Pending" and rows["held"]["member"] is None
    assert rows["held"]["why"] == "0/2 clusters can hold the gang"
    assert rows["held"]["queue"] == "root-child-1-x1" and rows["held"]["queuePhase"] == "Enqueued"
    assert rows["broken"]["error"].startswith("GangBinding team-a/broken cannot be read: spec.")
    assert view["phases"] == {"Pending": 1, "Running": 1, "Unreadable": 1}


def test_a_jobs_page_has_reasons_per_member_history_and_its_pods() -> None:
    waiting = binding("held", **WAITING)
    page = job_view(waiting, {}, [], NOW)
    assert [r["cluster"] for r in page["pendingReasons"]] == ["member-1", "member-2"]
    assert page["pendingReasons"][0]["facts"] == {
        "resource": "nvidia.com/gpu",
        "perPod": 4,
        "largestFree": 2,
    }
    assert page["factColumns"] == ["largestFree", "perPod", "resource"]
    assert page["pendingReasonCounts"] == {"NotReady": 1, "Insufficient": 1}
    assert page["replicas"] == ["master-0", "worker-0", "worker-1"]

    pods = [
        ("member-1", pod("train-worker-0", "gpu-a", 4)),
        ("member-1", pod("other-worker-0", "gpu-a", 4, uid_label="uid-other")),
    ]
    page = job_view(placed(RUNNING), {}, pods, NOW)
    assert [p["name"] for p in page["pods"]] == ["train-worker-0"]
    assert (page["pods"][0]["ready"], page["pods"][0]["restarts"]) == ("1/1", 1)
    assert [p["cluster"] for p in page["placements"]] == ["member-2", "member-1"]
    assert page["failoverHistory"][0]["reason"] == "ClusterLost" and page["failovers"] == 1
    assert page["uid"] == UID and page["pendingReasons"] == []
    assert page["pendingReasonCounts"] == {}


def test_find_binding_by_job_name_or_the_bindings_own() -> None:
    bindings = {
        "a": binding("held", **WAITING),
        "b": {"metadata": {"name": "odd", "namespace": "team-a"}},
    }
    assert find_binding(bindings, "team-a", "held") is bindings["a"]
    assert find_binding(bindings, "team-a", "odd") is bindings["b"]
    assert find_binding(bindings, "team-b", "held") is None
    state = State()
    state.fleet_event(GANG_BINDING, "ADDED", bindings["b"])
    assert jobs_view(state.fleet[GANG_BINDING], {}, NOW)["jobs"][0]["error"]


def test_quotas_tree_bars_borrowing_and_units_in_queue_order() -> None:
    trees = {"kube-system/elasticquotatree": quota_tree()}
    queues = {
        "q1": queue("root/child-1", {"nvidia.com/gpu": "4", "kube-queue/max-jobs": "1"}, 2, 1),
        "q2": queue("root/child-2"),
        "q0": queue("root", {"nvidia.com/gpu": "4", "kube-queue/max-jobs": "1"}),
    }
    why = "quota root/child-1: 1 of max 1 jobs already dequeued (kube-queue/max-jobs)"
    units = {
        "late": unit("late", "Enqueued", created="2025-12-31T23:58:00Z", message=why),
        "urgent": unit(
            "urgent", "Enqueued", created="2025-12-31T23:59:00Z", priority=10, message=why
        ),
        "first": unit("first", "Running"),
        "done": unit("done", "Succeed"),
    }

    view = quotas_view(trees, queues, units, NOW)

    assert view["state"] == "Active" and view["problems"] == []
    nodes = {n["path"]: n for n in view["nodes"]}
    assert [n["path"] for n in view["nodes"]] == ["root", "root/child-1", "root/child-2"]
    assert nodes["root/child-1"]["depth"] == 1
    gpu = next(b for b in nodes["root/child-1"]["bars"] if b["resource"] == "nvidia.com/gpu")
    assert (gpu["used"], gpu["min"], gpu["max"], gpu["borrowed"]) == (4, 2, 8, 2)
    assert gpu["text"]["borrowed"] == "2 GPUs"
    jobs = next(b for b in nodes["root/child-1"]["bars"] if b["resource"] == "kube-queue/max-jobs")
    assert jobs["text"]["max"] == "1 job" and jobs["borrowed"] == 0
    # Holding first; then waiting in the queue's order (priority before submission time).
    ordered = [(u["job"], u["position"]) for u in nodes["root/child-1"]["units"]]
    assert ordered == [("first", None), ("urgent", 1), ("late", 2)]
    assert nodes["root/child-1"]["units"][1]["message"] == why


def test_quotas_an_invalid_tree_shows_its_problems_and_malformed_units() -> None:
    bad = quota_tree(
        {"root": {"name": "root", "min": {"nvidia.com/gpu": "4"}, "max": {"nvidia.com/gpu": "2"}}}
    )
    view = quotas_view({"t": bad}, {}, {}, NOW)
    assert view["nodes"] == [] and view["problems"][0]["rule"] == "MinWithinMax"

    broken = {
        "metadata": {"name": "odd", "namespace": "team-a"},
        "spec": {"resource": "x"},
        "status": {"quota": "root/child-1"},
    }
    view = quotas_view({"t": quota_tree()}, {}, {"odd": broken}, NOW)
    (row,) = next(n for n in view["nodes"] if n["path"] == "root/child-1")["units"]
    assert row["error"].startswith("QueueUnit team-a/odd cannot be read")
    assert quotas_view({}, {}, {}, NOW)["tree"] is None


def test_reservations_per_member_with_their_state() -> None:
    state = _state()
    state.fleet_event(
        MEMBER_CLUSTER, "MODIFIED", member_cluster("member-2", scheduler="Koordinator")
    )
    state.reservation_event(
        "member-2", "ADDED", reservation("fleet-uid-worker-0", "Available", "node-1")
    )
    state.reservation_event(
        "member-2",
        "ADDED",
        reservation(
            "fleet-uid-worker-1",
            "Pending",
            conditions=[
                {
                    "type": "Scheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/2 nodes are available",
                }
            ],
        ),
    )
    state.reservation_event("member-2", "ADDED", {"metadata": {"name": "odd"}, "status": "x"})

    view = reservations_view(state.fleet[MEMBER_CLUSTER], state.members, NOW)

    one, two = view["members"]
    assert not one["watched"] and one["reservations"] == []
    assert two["watched"] and two["gangScheduler"] == "Koordinator"
    rows = {r["name"]: r for r in two["reservations"]}
    assert rows["fleet-uid-worker-0"]["phase"] == "Available"
    assert rows["fleet-uid-worker-0"]["node"] == "node-1"
    assert rows["fleet-uid-worker-0"]["binding"] == "team-a/pytorchjob-train"
    assert "0/2 nodes are available" in rows["fleet-uid-worker-1"]["message"]
    assert rows["odd"]["error"]
