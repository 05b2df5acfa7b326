from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.assignment import Assignment
from fleet.core.constraints import PodConstraints
from fleet.core.estimate import NODES, SUM
from fleet.core.kinds import gang_from_workload
from fleet.core.placement import (
    AFFINITY,
    FAILED_OVER,
    INSUFFICIENT,
    NOT_READY,
    OUTRANKED,
    ClusterAffinity,
    place,
)
from fleet.core.resources import Resources
from fleet.core.selectors import LabelSelector, Requirement
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import Taint, Toleration
from fleet.core.workload import Component, Gang

from .builders import GiB, cluster, node, pod
from .exhaustive import assert_valid, exists_assignment
from .seeds import pytorchjob, tfjob

GPU = "nvidia.com/gpu"


def test_seed_pytorchjob_prints_like_ack() -> None:
    gang = gang_from_workload(pytorchjob())
    decision = place(gang, [cluster("member-1", node("n1", cpu=8))])
    assert decision.placement is not None
    assert str(decision.placement) == "{member-1:0,[{master 1} {worker 2}]}"
    assert decision.summary() == "Result: {member-1:0,[{master 1} {worker 2}]}"
    assert decision.placement.assignment.per_component() == {"master": 1, "worker": 2}


def test_single_template_kinds_print_replicas() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"parallelism": 3, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    decision = place(gang_from_workload(job), [cluster("member-1", node("n1"))])
    assert str(decision.placement) == "{member-1:3}"


def test_seed_tfjob_goes_where_eight_gpus_are_free() -> None:
    gang = gang_from_workload(tfjob())
    four = cluster("member-1", node("n1", gpu=4))
    eight = cluster("member-2", node("n1", gpu=4), node("n2", gpu=4))
    for estimator in (SUM, NODES):
        decision = place(gang, [four, eight], estimator=estimator)
        assert str(decision.placement) == "{member-2:0,[{ps 1} {worker 4}]}"
        assert decision.sentences() == [
            "member-1: needs 8 GPUs in total (1 ps + 4 workers); only 4 GPUs free"
        ]


def test_every_rejected_cluster_gets_one_sentence() -> None:
    gang = Gang.of(Component("worker", 4, Resources({GPU: 2, "pods": 1})))
    clusters = [
        cluster("member-1", node("a", gpu=8), labels={"env": "prod"}),
        cluster("member-2", *[node(f"n{i}", gpu=1) for i in range(6)], labels={"env": "prod"}),
        cluster("member-3", node("a", gpu=8), labels={"env": "dev"}),
        cluster("member-4", node("a", gpu=8), labels={"env": "prod"}),
        cluster("member-5", node("a", gpu=8), labels={"env": "prod"}),
        cluster("member-6", node("a", gpu=8), node("b", gpu=8), labels={"env": "prod"}),
    ]
    decision = place(
        gang,
        clusters,
        affinity=ClusterAffinity(label_selector=LabelSelector.of({"env": "prod"})),
        not_ready={"member-4"},
        failed_over={"member-5": "pods failed: OOMKilled"},
    )
    assert str(decision.placement) == "{member-1:0,[{worker 4}]}"
    assert decision.sentences() == [
        "member-2: needs 4 workers x 2 GPUs; 6 GPUs free but the largest free block on one node "
        "is 1",
        "member-3: excluded by clusterAffinity (labelSelector needs env=prod)",
        "member-4: not ready",
        "member-5: the job failed over from it (pods failed: OOMKilled)",
        "member-6: not checked: ranks below member-1 (share of free capacity 50% vs 100%)",
    ]
    assert [r.category for r in decision.rejections] == [
        INSUFFICIENT,
        AFFINITY,
        NOT_READY,
        FAILED_OVER,
        OUTRANKED,
    ]
    assert all(len(s) <= 200 for s in decision.sentences())
    # The numbers in member-2's sentence, for machines; filters carry only their code.
    assert dict(decision.rejections[0].facts) == {
        "resource": "nvidia.com/gpu",
        "perPod": 2,
        "pods": 4,
        "free": 6,
        "largestFree": 1,
    }
    assert all(not r.facts for r in decision.rejections[1:])
    # The closest first (the furthest along the order of work), and every code counted.
    assert [r.cluster for r in decision.closest(3)] == ["member-6", "member-2", "member-3"]
    assert decision.counts() == {
        NOT_READY: 1,
        FAILED_OVER: 1,
        AFFINITY: 1,
        INSUFFICIENT: 1,
        OUTRANKED: 1,
    }


def test_affinity_rules_follow_karmada() -> None:
    snap = ClusterSnapshot("m1", {"env": "prod"}, fields={"region": "cn-hangzhou"})
    assert ClusterAffinity(exclude=("m1",)).rejection(snap) == (
        "excluded by clusterAffinity (listed in exclude)"
    )
    assert ClusterAffinity(cluster_names=("m2",)).rejection(snap) == (
        "excluded by clusterAffinity (not in clusterNames)"
    )
    assert ClusterAffinity(cluster_names=("m1",)).rejection(snap) is None
    region = Requirement("region", "In", ("cn-beijing",))
    assert ClusterAffinity(field_selector=(region,)).rejection(snap) == (
        "excluded by clusterAffinity (fieldSelector needs region In [cn-beijing])"
    )
    both = ClusterAffinity(cluster_names=("m1",), label_selector=LabelSelector.of({"env": "dev"}))
    assert both.rejection(snap) == "excluded by clusterAffinity (labelSelector needs env=dev)"


def test_not_ready_with_reasons() -> None:
    gang = Gang.of(Component("worker", 1, Resources(pods=1)))
    decision = place(gang, [cluster("m", node("a"))], not_ready={"m": "heartbeat lost 3m ago"})
    assert decision.sentences() == ["m: not ready (heartbeat lost 3m ago)"]
    assert not decision.fits
    assert (
        decision.summary() == "0/1 clusters can take the gang; m: not ready (heartbeat lost 3m ago)"
    )


def test_a_member_without_the_jobs_kind_is_refused_with_why() -> None:
    gang = Gang.of(Component("worker", 1, Resources(pods=1)))
    why = "does not run JobSet: no jobsets.jobset.x-k8s.io CRD in the member"
    decision = place(gang, [cluster("m", node("a")), cluster("n", node("a"))], lacking={"m": why})
    assert decision.placement is not None and decision.placement.cluster == "n"
    decision = place(gang, [cluster("m", node("a"))], lacking={"m": why})
    assert decision.sentences() == [f"m: {why}"]
    assert [r.category for r in decision.rejections] == ["KindNotServed"]


def test_a_member_that_refused_the_gang_is_reported_under_its_code() -> None:
    gang = Gang.of(Component("worker", 1, Resources(pods=1)))
    why = "ConfigMap team-a/cfg in m already exists and was not created by fleet"
    refused = {"m": ("DependencyConflict", why)}
    decision = place(gang, [cluster("m", node("a")), cluster("n", node("a"))], refused=refused)
    assert decision.placement is not None and decision.placement.cluster == "n"
    decision = place(gang, [cluster("m", node("a"))], refused=refused)
    assert decision.sentences() == [f"m: {why}"]
    assert [r.category for r in decision.rejections] == ["DependencyConflict"]


def test_best_fit_prefers_snug_holes_for_small_gangs() -> None:
    one = Gang.of(Component("worker", 1, Resources({GPU: 1, "pods": 1})))
    empty = cluster("a-empty", node("n", gpu=8))
    snug = ClusterSnapshot.build("z-snug", [node("n", gpu=8)], [pod("p", "n", gpu=7)])
    decision = place(one, [empty, snug])
    assert decision.placement is not None and decision.placement.cluster == "z-snug"
    assert decision.sentences() == [
        "a-empty: not checked: ranks below z-snug (hole fit 12% vs 100%)"
    ]


def test_ties_break_by_name() -> None:
    gang = Gang.of(Component("worker", 1, Resources({GPU: 8, "pods": 1})))
    clusters = [cluster(name, node("n", gpu=8)) for name in ("m-b", "m-c", "m-a")]
    decision = place(gang, clusters)
    assert decision.placement is not None and decision.placement.cluster == "m-a"


def test_full_check_moves_on_when_the_best_ranked_cluster_does_not_really_fit() -> None:
    # m-a has GPUs but its GPU nodes are tainted: screens pass, the full check fails.
    from fleet.core.taints import Taint

    gang = Gang.of(Component("worker", 1, Resources({GPU: 8, "pods": 1})))
    tainted = cluster("m-a", node("n", gpu=8, taints=[Taint(GPU, "NoSchedule")]))
    plain = cluster("m-b", node("n", gpu=8), node("o", gpu=8))
    decision = place(gang, [tainted, plain])
    assert decision.placement is not None and decision.placement.cluster == "m-b"
    assert decision.sentences() == [
        "m-a: no node admits the worker: 1 have untolerated taint nvidia.com/gpu:NoSchedule"
    ]


def test_explain_all_checks_every_cluster() -> None:
    gang = Gang.of(Component("worker", 1, Resources({GPU: 8, "pods": 1})))
    decision = place(
        gang, [cluster("m-a", node("n", gpu=8)), cluster("m-b", node("n", gpu=8))], explain_all=True
    )
    assert decision.sentences() == [
        "m-b: fits too, but m-a fits better (same score; names break ties)"
    ]


def test_sum_placement_reserves_against_totals() -> None:
    gang = Gang.of(Component("worker", 2, Resources({GPU: 4, "pods": 1})))
    snap = cluster("m", node("n", gpu=8))
    decision = place(gang, [snap], estimator=SUM)
    assert decision.placement is not None
    assignment = decision.placement.assignment
    assert isinstance(assignment, Assignment) and not assignment.placed_on_nodes
    snap.reserve("k", assignment, 10.0)
    assert not place(gang, [snap], estimator=SUM).fits


def test_placement_is_pure() -> None:
    gang = Gang.of(Component("worker", 2, Resources({GPU: 4, "pods": 1})))
    snap = cluster("m", node("n", gpu=8))
    version = snap.version
    place(gang, [snap])
    assert snap.version == version and snap.free("n") == Resources(
        {"cpu": 32000, "memory": 128 << 30, GPU: 8, "pods": 110}
    )


def test_no_clusters() -> None:
    gang = Gang.of(Component("worker", 1, Resources(pods=1)))
    assert place(gang, []).summary() == "0/0 clusters can take the gang"


# Grouped vs ungrouped ---------------------------------------------------------------------------
# A snapshot folds look-alike nodes into shape groups and keeps almost nothing per node. The
# same nodes, each given a label of its own that no rule reads, share no group at all. For gangs
# whose minimum set is one item (equal requests and constraints), whether a cluster fits cannot
# depend on the order nodes are tried, so every decision must come out the same; and every
# assignment must be a real one in its own snapshot.
_shape_st = st.tuples(
    st.sampled_from([4, 16, 64]),  # cpu
    st.sampled_from([0, 1, 4, 8]),  # gpus
    st.sampled_from([{}, {"pool": "a"}, {"pool": "b"}]),
    st.booleans(),  # gpu taint
    st.booleans(),  # cordoned
    st.sampled_from([0, 1, 2]),  # gpus in use by a pod
)
_cluster_st = st.lists(_shape_st, min_size=1, max_size=12)


def _twin_clusters(
    index: int, shapes: list[tuple[int, int, dict[str, str], bool, bool, int]]
) -> tuple[ClusterSnapshot, ClusterSnapshot]:
    name = f"member-{index}"
    grouped, ungrouped = ClusterSnapshot(name), ClusterSnapshot(name)
    for i, (cpu, gpu, labels, tainted, cordoned, used) in enumerate(shapes):
        taints = (Taint("nvidia.com/gpu", "NoSchedule"),) if tainted else ()
        node_name = f"{name}-n{i}"
        own = {**labels, "kubernetes.io/hostname": node_name}
        grouped.upsert_node(
            node(node_name, cpu=cpu, gpu=gpu, labels=own, taints=taints, unschedulable=cordoned)
        )
        ungrouped.upsert_node(
            node(
                node_name,
                cpu=cpu,
                gpu=gpu,
                labels={**own, "node-id": node_name},
                taints=taints,
                unschedulable=cordoned,
            )
        )
        if used and used <= gpu:
            for snap in (grouped, ungrouped):
                snap.upsert_pod(pod(f"{node_name}-p", node_name, cpu_m=1000, gpu=used))
    return grouped, ungrouped


@settings(max_examples=120, deadline=None)
@given(
    st.lists(_cluster_st, min_size=1, max_size=4),
    st.sampled_from([1, 2, 4, 8]),  # gpus per pod
    st.integers(1, 6),  # pods
    st.sampled_from([{}, {"pool": "a"}]),
    st.booleans(),  # tolerates the gpu taint
)
def test_grouped_and_ungrouped_nodes_give_the_same_decisions(
    fleet: list[list[tuple[int, int, dict[str, str], bool, bool, int]]],
    gpus: int,
    pods: int,
    selector: dict[str, str],
    tolerant: bool,
) -> None:
    twins = [_twin_clusters(i, shapes) for i, shapes in enumerate(fleet)]
    grouped = [g for g, _ in twins]
    ungrouped = [u for _, u in twins]
    assert sum(1 for s in ungrouped for _ in s.groups()) == sum(len(s) for s in ungrouped)
    constraints = PodConstraints.of(
        selector, tolerations=(Toleration("nvidia.com/gpu", "Exists"),) if tolerant else ()
    )
    requests = Resources({"cpu": 1000, "memory": GiB, "nvidia.com/gpu": gpus, "pods": 1})
    gang = Gang.of(
        Component("master", 1, requests, constraints),
        Component("worker", pods, requests, constraints),
    )
    a = place(gang, grouped, explain_all=True)
    b = place(gang, ungrouped, explain_all=True)
    assert (a.placement and a.placement.cluster) == (b.placement and b.placement.cluster)
    assert [(r.cluster, r.category, r.reason) for r in a.rejections] == [
        (r.cluster, r.category, r.reason) for r in b.rejections
    ]
    for decision, snaps in ((a, grouped), (b, ungrouped)):
        if decision.placement is not None:
            chosen = next(s for s in snaps if s.name == decision.placement.cluster)
            assert_valid(chosen, gang, decision.placement.assignment)
            assert exists_assignment(chosen, gang)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 120), min_size=0, max_size=40),
    st.integers(20, 400),
)
def test_a_summary_puts_into_words_only_what_shows_before_its_cut(lengths, limit):
    from fleet.core.decision import INSUFFICIENT, Decision, Rejection
    from fleet.core.explain import Sentence, clip

    rendered: list[int] = []

    def words(i: int, n: int) -> str:
        rendered.append(i)
        return "x" * n

    rejections = tuple(
        Rejection(f"member-{i:03d}", Sentence(words, i, n), INSUFFICIENT)
        for i, n in enumerate(lengths)
    )
    decision = Decision(None, rejections)
    summary = decision.summary(limit)
    head = f"0/{len(lengths)} clusters can take the gang"
    assert summary == clip("; ".join([head, *(str(r) for r in rejections)]), limit)
    rendered.clear()
    Decision(
        None,
        tuple(
            Rejection(r.cluster, Sentence(words, i, n), r.category)
            for i, (r, n) in enumerate(zip(rejections, lengths, strict=True))
        ),
    ).summary(limit)
    # Nothing after the first sentence that starts past the cut is put into words.
    shown = len(head)
    for i, n in enumerate(lengths):
        if shown > limit:
            assert i not in rendered
        shown += 2 + len(f"member-{i:03d}: ") + n
