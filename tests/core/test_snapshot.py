from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.assignment import Assignment, Slot
from fleet.core.errors import ObjectError
from fleet.core.inventory import NodeInfo, PodInfo, node_from_k8s, pod_from_k8s
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint

from .builders import GiB, node, pod

GPU = "nvidia.com/gpu"
RACK = "topology.kubernetes.io/rack"


def state(snap: ClusterSnapshot) -> dict[str, Any]:
    """Everything a decision can read, in a comparable form."""
    groups = sorted(
        (
            sorted(g.signature.labels.items()),
            g.signature.taints,
            g.signature.unschedulable,
            sorted(g.free.items()),
            sorted(g.nodes),
        )
        for g in snap.groups()
    )
    hists = {}
    for name in ("cpu", "memory", GPU, "pods"):
        h = snap.histogram(name)
        hists[name] = {k: v for k, v in (h.as_dict() if h else {}).items()}
        assert snap.max_free(name) == max(hists[name], default=0)
    return {
        "free": {n.name: snap.free(n.name) for n in snap.nodes()},
        "groups": groups,
        "total_all": {r: snap.total_free(r) for r in ("cpu", "memory", GPU, "pods")},
        "total": {r: snap.total_free(r, cordoned=False) for r in ("cpu", "memory", GPU, "pods")},
        "hists": hists,
        "signatures": sorted(
            (sorted(s.labels.items()), s.taints, s.unschedulable, s.nodes)
            for s in snap.signatures()
        ),
        "racks": {v: sorted(names) for v, names in snap.domain_nodes(RACK).items()},
        "rack_gpus": dict(snap.domain_accelerators(RACK)),
        "rack_slots": {v: dict(s) for v, s in snap.domain_slots(RACK).items()},
        "labels": {n.name: n.labels for n in snap.nodes()},
    }


def rebuilt(snap: ClusterSnapshot) -> ClusterSnapshot:
    return ClusterSnapshot.build(snap.name, list(snap.nodes()), list(snap.pods()))


NODE_NAMES = ["n0", "n1", "n2", "n3"]
nodes_st = st.builds(
    node,
    st.sampled_from(NODE_NAMES),
    cpu=st.sampled_from([4, 8, 16]),
    memory=st.sampled_from([16, 32]),
    gpu=st.sampled_from([0, 4, 8]),
    pods=st.sampled_from([3, 110]),
    labels=st.sampled_from(
        [
            {},
            {"pool": "a"},
            {"pool": "b"},
            {"kubernetes.io/hostname": "x"},
            {RACK: "r1"},
            {RACK: "r2", "pool": "a"},
        ]
    ),
    taints=st.sampled_from([(), (Taint("nvidia.com/gpu", "NoSchedule"),)]),
    unschedulable=st.booleans(),
)
pods_st = st.builds(
    pod,
    st.sampled_from([f"p{i}" for i in range(8)]),
    st.sampled_from([None, *NODE_NAMES]),
    cpu_m=st.sampled_from([0, 500, 4000]),
    memory=st.sampled_from([0, 2]),
    gpu=st.sampled_from([0, 1, 4]),
    terminal=st.booleans(),
)
events_st = st.lists(
    st.one_of(
        st.tuples(st.just("upsert_node"), nodes_st),
        st.tuples(st.just("remove_node"), st.sampled_from(NODE_NAMES)),
        st.tuples(st.just("upsert_pod"), pods_st),
        st.tuples(st.just("remove_pod"), st.sampled_from([f"p{i}" for i in range(8)])),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(events_st)
def test_incremental_updates_equal_a_rebuild(events: list[tuple[str, Any]]) -> None:
    snap = ClusterSnapshot("c")
    for op, arg in events:
        getattr(snap, op)(arg)
    assert state(snap) == state(rebuilt(snap))


@settings(max_examples=60, deadline=None)
@given(events_st, st.lists(st.tuples(st.sampled_from(NODE_NAMES), st.integers(1, 3)), max_size=4))
def test_reservations_fully_consumed_leave_no_trace(
    events: list[tuple[str, Any]], plan: list[tuple[str, int]]
) -> None:
    snap = ClusterSnapshot("c")
    for op, arg in events:
        getattr(snap, op)(arg)
    before = state(snap)
    one = Resources({GPU: 1, "pods": 1})
    snap.reserve("job", Assignment(tuple(Slot("worker", n, k, one) for n, k in plan)), 100.0)
    snap.release("job")
    assert state(snap) == before
    snap.reserve("job", Assignment(tuple(Slot("worker", n, k, one) for n, k in plan)), 100.0)
    assert snap.expire(99.0) == []
    assert snap.expire(100.0) == ["job"]
    assert state(snap) == before


def test_pods_may_arrive_before_their_node() -> None:
    snap = ClusterSnapshot("c")
    snap.upsert_pod(pod("p1", "n1", cpu_m=1000, gpu=2))
    assert snap.free("n1") is None
    snap.upsert_node(node("n1", cpu=8, gpu=8))
    assert snap.free("n1") == Resources({"cpu": 7000, "memory": 128 * GiB, GPU: 6, "pods": 109})


def test_terminal_and_unbound_pods_hold_nothing() -> None:
    snap = ClusterSnapshot.build("c", [node("n1", gpu=8)])
    full = snap.free("n1")
    snap.upsert_pod(pod("p1", None, gpu=2))
    assert snap.free("n1") == full
    snap.upsert_pod(pod("p1", "n1", gpu=2))  # bound
    assert snap.free("n1")[GPU] == 6  # type: ignore[index]
    snap.upsert_pod(pod("p1", "n1", gpu=2, terminal=True))  # Succeeded
    assert snap.free("n1") == full
    snap.remove_pod("p1")
    assert snap.free("n1") == full


def test_over_committed_node_counts_as_empty_not_negative() -> None:
    snap = ClusterSnapshot.build("c", [node("n1", cpu=1)], [pod("p", "n1", cpu_m=3000)])
    assert "cpu" not in snap.free("n1")  # type: ignore[operator]
    assert snap.total_free("cpu") == 0


def test_cordoned_nodes_are_left_out_of_the_schedulable_totals() -> None:
    snap = ClusterSnapshot.build("c", [node("a", gpu=8), node("b", gpu=8, unschedulable=True)])
    assert snap.total_free(GPU) == 16
    assert snap.total_free(GPU, cordoned=False) == 8


def test_identity_labels_do_not_split_groups() -> None:
    snap = ClusterSnapshot.build(
        "c", [node(f"n{i}", gpu=8, labels={"kubernetes.io/hostname": f"n{i}"}) for i in range(50)]
    )
    assert len(list(snap.groups())) == 1
    assert len(next(iter(snap.groups()))) == 50


def test_reservation_is_consumed_pod_by_pod_by_owner_key() -> None:
    snap = ClusterSnapshot.build("c", [node("n1", gpu=8), node("n2", gpu=8)])
    worker = Resources({GPU: 4, "pods": 1})
    plan = Assignment((Slot("worker", "n1", 2, worker), Slot("worker", "n2", 1, worker)))
    snap.reserve("uid-1", plan, expires_at=60.0)
    assert snap.free("n1") == Resources({"cpu": 32000, "memory": 128 * GiB, "pods": 108})
    assert snap.total_free(GPU) == 4
    # The member's scheduler put the first pod on n2 (not where we planned): n2's slot goes.
    snap.upsert_pod(pod("w0", "n2", gpu=4, owner="uid-1"))
    assert snap.total_free(GPU) == 4
    assert snap.reservations()["uid-1"].pods == [("n1", worker), ("n1", worker)]
    snap.upsert_pod(pod("w1", "n1", gpu=4, owner="uid-1"))
    snap.upsert_pod(pod("w2", "n1", gpu=4, owner="uid-1"))
    assert "uid-1" not in snap.reservations()
    assert snap.total_free(GPU) == 4  # 16 - 3 pods x 4, nothing counted twice
    assert snap.expire(1000.0) == []


def test_reservation_without_nodes_holds_cluster_totals() -> None:
    snap = ClusterSnapshot.build("c", [node("n1", gpu=8)])
    snap.reserve("k", Assignment((Slot("worker", None, 2, Resources({GPU: 2})),)), 10.0)
    assert snap.total_free(GPU) == 4
    assert snap.free("n1")[GPU] == 8  # type: ignore[index]
    snap.upsert_pod(pod("w0", "n1", gpu=2, owner="k"))
    assert snap.total_free(GPU) == 4  # 8 - 2 bound - 2 still reserved
    assert snap.expire(10.0) == ["k"]
    assert snap.total_free(GPU) == 6


def test_re_reserving_a_key_replaces_it_and_old_deadline_is_ignored() -> None:
    snap = ClusterSnapshot.build("c", [node("n1", gpu=8)])
    one = Resources({GPU: 1})
    snap.reserve("k", Assignment((Slot("w", "n1", 1, one),)), 5.0)
    snap.reserve("k", Assignment((Slot("w", "n1", 2, one),)), 50.0)
    assert snap.expire(10.0) == []
    assert snap.free("n1")[GPU] == 6  # type: ignore[index]


def k8s_node(**over: Any) -> Any:
    obj: dict[str, Any] = {
        "metadata": {"name": "gpu-1", "labels": {"pool": "a100"}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "allocatable": {
                "cpu": "95500m",
                "memory": "760Gi",
                "nvidia.com/gpu": "8",
                "pods": "110",
            },
        },
    }
    obj.update(over)
    return obj


def test_node_from_k8s() -> None:
    info = node_from_k8s(k8s_node())
    assert info == NodeInfo(
        "gpu-1",
        Resources({"cpu": 95500, "memory": 760 * GiB, GPU: 8, "pods": 110}),
        {"pool": "a100"},
        (Taint("nvidia.com/gpu", "NoSchedule", "present"),),
        False,
    )
    bad = k8s_node()
    bad["status"]["allocatable"]["cpu"] = "lots"
    with pytest.raises(ObjectError, match=r"^Node gpu-1: status.allocatable.cpu: unparsable"):
        node_from_k8s(bad)


def test_pod_from_k8s() -> None:
    obj: dict[str, Any] = {
        "metadata": {
            "name": "w-0",
            "namespace": "ns",
            "uid": "u1",
            "labels": {"fleet.dev/binding-uid": "b-1"},
        },
        "spec": {"nodeName": "gpu-1", "containers": [{"resources": {"limits": {GPU: 2}}}]},
        "status": {"phase": "Running"},
    }
    info = pod_from_k8s(obj, owner_label="fleet.dev/binding-uid")
    assert info == PodInfo("u1", "ns", "w-0", "gpu-1", Resources({GPU: 2, "pods": 1}), False, "b-1")
    assert info.holds_resources
    obj["status"]["phase"] = "Succeeded"
    assert not pod_from_k8s(obj).holds_resources
    assert pod_from_k8s(obj).owner_key is None
    obj["spec"]["nodeName"] = None
    obj["status"]["phase"] = "Pending"
    assert pod_from_k8s(obj).node_name is None


def test_pods_on_a_node_are_that_nodes_pods_as_pods_gives_them():
    snap = ClusterSnapshot.build(
        "c",
        [node("n1", gpu=8), node("n2", gpu=8)],
        [pod("a", "n1", gpu=2, owner="j1"), pod("b", "n2", gpu=1), pod("c", "n1", gpu=1)],
    )
    on_n1 = sorted(snap.pods_on("n1"), key=lambda p: p.uid)
    assert on_n1 == sorted((p for p in snap.pods() if p.node_name == "n1"), key=lambda p: p.uid)
    assert [p.uid for p in on_n1] == ["a", "c"]
    assert list(snap.pods_on("n3")) == []


def test_rack_labels_do_not_split_groups_and_are_indexed_per_level() -> None:
    """A rack label would make every rack's nodes a signature of their own; it is kept out of
    signatures and indexed per level instead, and nodes keep it as their label."""
    snap = ClusterSnapshot.build(
        "c", [node(f"n{i}", gpu=8, labels={RACK: f"r{i // 2}", "pool": "a"}) for i in range(6)]
    )
    assert len(list(snap.signatures())) == 1
    assert len(list(snap.groups())) == 1
    assert {v: sorted(n) for v, n in snap.domain_nodes(RACK).items()} == {
        "r0": ["n0", "n1"],
        "r1": ["n2", "n3"],
        "r2": ["n4", "n5"],
    }
    assert snap.domain_accelerators(RACK) == {"r0": 16, "r1": 16, "r2": 16}
    snap.upsert_pod(pod("p", "n2", gpu=3))
    assert snap.domain_accelerators(RACK)["r1"] == 13
    assert snap.domain_slots(RACK)["r1"] == {8: 1, 5: 1}
    info = snap.node("n3")
    assert info is not None and info.labels[RACK] == "r1"
    snap.upsert_node(node("n3", gpu=8, labels={RACK: "r9", "pool": "a"}))
    assert sorted(snap.domain_nodes(RACK)["r9"]) == ["n3"]
    assert snap.domain_accelerators(RACK)["r1"] == 5
    snap.remove_node("n4")
    snap.remove_node("n5")
    assert "r2" not in snap.domain_nodes(RACK) and "r2" not in snap.domain_accelerators(RACK)
