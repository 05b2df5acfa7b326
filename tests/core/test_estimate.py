import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.assignment import Assignment
from fleet.core.constraints import PodConstraints
from fleet.core.estimate import NODES, SUM, estimator_named
from fleet.core.kinds import gang_from_workload
from fleet.core.resources import Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration
from fleet.core.workload import Component, Gang

from .builders import cluster, node, pod
from .exhaustive import assert_valid, exists_assignment
from .random_cases import random_cluster, random_gang
from .seeds import tfjob

GPU = "nvidia.com/gpu"


def workers(n: int, gpus: int, **kw: object) -> Component:
    return Component("worker", n, Resources({GPU: gpus, "pods": 1}), **kw)  # type: ignore[arg-type]


# --- ACK's rule on the seeds' numbers -------------------------------------------------------
def test_seed_tfjob_with_4_free_gpus_does_not_fit_under_acks_rule() -> None:
    gang = gang_from_workload(tfjob())
    snap = cluster("member-1", node("n1", gpu=4))
    assert SUM.check(gang, snap) == "needs 8 GPUs in total (1 ps + 4 workers); only 4 GPUs free"
    assert NODES.screen(gang, snap) == SUM.screen(gang, snap)


def test_seed_tfjob_fits_once_4_more_gpus_are_added() -> None:
    gang = gang_from_workload(tfjob())
    snap = cluster("member-1", node("n1", gpu=4))
    snap.upsert_node(node("n2", gpu=4))  # "当集群中新增4个GPU卡的资源"
    assert isinstance(SUM.check(gang, snap), Assignment)
    result = NODES.check(gang, snap)
    assert isinstance(result, Assignment)
    assert_valid(snap, gang, result)
    assert result.per_component() == {"ps": 1, "worker": 4}


def test_fragmentation_sum_says_fit_nodes_says_no() -> None:
    gang = Gang.of(workers(4, 2))
    snap = cluster("member-2", *[node(f"n{i}", gpu=1) for i in range(8)])
    assert isinstance(SUM.check(gang, snap), Assignment)
    expected = "needs 4 workers x 2 GPUs; 8 GPUs free but the largest free block on one node is 1"
    assert NODES.screen(gang, snap) == expected
    assert not isinstance(NODES.check(gang, snap), Assignment)


def test_a_nodes_rejection_is_explained_only_when_read_and_only_if_still_true() -> None:
    gang = Gang.of(workers(2, 4))
    snap = cluster("m", node("a", gpu=2), node("b", gpu=2), node("c", gpu=8))
    snap.upsert_pod(pod("p1", "c", gpu=6))
    reason = NODES.check(gang, snap)
    assert not isinstance(reason, Assignment)
    assert "worker" in str(reason)
    stale = NODES.check(gang, snap)
    snap.upsert_node(node("d", gpu=1))
    assert "the cluster changed before this was explained" in str(stale)


def test_brief_example_sentence_with_six_free_gpus() -> None:
    gang = Gang.of(workers(4, 2))
    snap = cluster("member-2", *[node(f"n{i}", gpu=1) for i in range(6)])
    expected = "needs 4 workers x 2 GPUs; 6 GPUs free but the largest free block on one node is 1"
    assert NODES.screen(gang, snap) == expected
    assert NODES.check(gang, snap) == expected
    assert SUM.check(gang, snap) == "needs 8 GPUs in total (4 workers); only 6 GPUs free"


def test_gpu_holes_too_few_for_the_pod_size() -> None:
    gang = Gang.of(workers(4, 8))
    snap = cluster("c", node("a", gpu=8), *[node(f"n{i}", gpu=4) for i in range(6)])
    assert NODES.screen(gang, snap) == (
        "needs 4 workers x 8 GPUs; 32 GPUs free but the free blocks hold only 1 pods of 8 GPUs"
    )


def test_cpu_block_screen() -> None:
    gang = Gang.of(Component("master", 1, Resources(cpu=64000, pods=1)))
    snap = cluster("c", node("a", cpu=32), node("b", cpu=32))
    assert NODES.screen(gang, snap) == (
        "needs 1 master x 64 CPU; 64 CPU free but the largest free block on one node is 32 CPU"
    )
    assert isinstance(SUM.check(gang, snap), Assignment)


def test_taints_and_selectors_are_honoured() -> None:
    tainted = [node(f"g{i}", gpu=8, taints=[Taint(GPU, "NoSchedule")]) for i in range(2)]
    snap = cluster("c", *tainted, node("cpu", cpu=64))
    plain = Gang.of(workers(2, 8))
    assert NODES.check(plain, snap) == ("needs 2 workers x 8 GPUs; none free")
    tolerant = Gang.of(
        workers(2, 8, constraints=PodConstraints.of(tolerations=[Toleration(GPU, "Exists")]))
    )
    result = NODES.check(tolerant, snap)
    assert isinstance(result, Assignment)
    assert {s.node for s in result} == {"g0", "g1"}


def test_constraint_sentence_counts_nodes_per_reason() -> None:
    snap = cluster(
        "c",
        node("a", gpu=8, labels={"pool": "x"}),
        node("b", gpu=8, labels={"pool": "x"}),
        node("c", gpu=8, unschedulable=True, labels={"pool": "y"}),
    )
    gang = Gang.of(workers(1, 1, constraints=PodConstraints.of({"pool": "y"})))
    assert NODES.check(gang, snap) == (
        "no node admits the worker: 2 lack label pool=y, 1 are cordoned"
    )


def test_cpu_pods_prefer_nodes_without_free_gpus() -> None:
    snap = cluster("c", node("gpu", cpu=64, gpu=8), node("cpu", cpu=64))
    gang = Gang.of(Component("master", 1, Resources(cpu=4000, pods=1)))
    result = NODES.check(gang, snap)
    assert isinstance(result, Assignment) and result.slots[0].node == "cpu"


def test_small_gpu_pods_go_to_the_smallest_hole() -> None:
    snap = ClusterSnapshot.build(
        "c", [node("big", gpu=8), node("small", gpu=8)], [pod("x", "small", gpu=7)]
    )
    result = NODES.check(Gang.of(workers(1, 1)), snap)
    assert isinstance(result, Assignment) and result.slots[0].node == "small"


def test_hostname_affinity_is_judged_per_node() -> None:
    nodes = [node(f"n{i}", gpu=8, labels={"kubernetes.io/hostname": f"n{i}"}) for i in range(4)]
    snap = cluster("c", *nodes)
    assert len(list(snap.groups())) == 1
    gang = Gang.of(workers(1, 8, constraints=PodConstraints.of({"kubernetes.io/hostname": "n2"})))
    result = NODES.check(gang, snap)
    assert isinstance(result, Assignment) and result.slots[0].node == "n2"
    two = Gang.of(workers(2, 8, constraints=PodConstraints.of({"kubernetes.io/hostname": "n2"})))
    assert NODES.check(two, snap) == (
        "needs 2 workers x 8 GPUs; only 8 GPUs free on the 1 nodes they may use"
    )


def test_pod_slots_are_a_resource() -> None:
    snap = cluster("c", node("a", gpu=8, pods=2))
    result = NODES.check(Gang.of(workers(3, 1)), snap)
    assert (
        result == "needs 3 workers x 1 pod slot; only 2 pod slots free on the 1 nodes they may use"
    )


def test_reserved_capacity_is_not_counted_twice() -> None:
    snap = cluster("c", node("a", gpu=8), node("b", gpu=8))
    first = NODES.check(Gang.of(workers(2, 8)), snap)
    assert isinstance(first, Assignment)
    snap.reserve("job-1", first, expires_at=30.0)
    assert NODES.screen(Gang.of(workers(1, 8)), snap) is not None
    snap.expire(30.0)
    assert NODES.screen(Gang.of(workers(1, 8)), snap) is None


def test_unplaced_reservations_count_against_the_nodes_estimator_too() -> None:
    snap = cluster("c", node("a", gpu=8))
    held = SUM.check(Gang.of(workers(1, 8)), snap)
    assert isinstance(held, Assignment) and not held.placed_on_nodes
    snap.reserve("job-1", held, expires_at=30.0)
    assert NODES.screen(Gang.of(workers(1, 1)), snap) is not None


def test_estimator_lookup() -> None:
    assert estimator_named("sum") is SUM and estimator_named("nodes") is NODES
    with pytest.raises(ValueError, match="unknown estimator 'best'"):
        estimator_named("best")


def test_empty_minimum_fits_anywhere() -> None:
    gang = Gang.of(workers(0, 8))
    assert NODES.check(gang, cluster("c", node("a"))) == Assignment()


# --- properties against an exhaustive search ------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False))
def test_nodes_never_claims_a_false_fit_and_screens_never_reject_a_real_fit(
    rng: random.Random,
) -> None:
    snap = random_cluster(rng)
    gang = random_gang(rng)
    feasible = exists_assignment(snap, gang)
    result = NODES.check(gang, snap)
    if isinstance(result, Assignment):
        assert feasible
        assert_valid(snap, gang, result)
        assert NODES.screen(gang, snap) is None
        assert isinstance(SUM.check(gang, snap), Assignment)  # nodes fit implies sum fit
    if NODES.screen(gang, snap) is not None:
        assert not feasible


def test_false_no_fit_rate_is_measured_and_small(record_property: object) -> None:
    """How often `nodes` misses an assignment an exhaustive search finds (see docs)."""
    rng = random.Random(20240601)
    feasible = missed = 0
    for _ in range(3000):
        snap = random_cluster(rng)
        gang = random_gang(rng)
        if exists_assignment(snap, gang):
            feasible += 1
            missed += not isinstance(NODES.check(gang, snap), Assignment)
    rate = missed / feasible
    print(f"\nnodes estimator: {missed} false no-fits in {feasible} feasible cases ({rate:.2%})")
    record_property("false_no_fit_rate", rate)  # type: ignore[operator]
    assert feasible > 400
    assert rate < 0.02
