"""Topology: a required gang goes only where one domain holds it, a preferred one ranks such
members first, the reasons say it in numbers, and the copy can be pinned to the domain."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.constraints import PodConstraints
from fleet.core.errors import FieldError
from fleet.core.kinds import gang_from_workload
from fleet.core.placement import INSUFFICIENT, OUTRANKED, place
from fleet.core.resources import Resources
from fleet.core.selectors import NodeSelector
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.topology import (
    GROUP_ANNOTATION,
    PREFERRED,
    PREFERRED_ANNOTATION,
    REQUIRED_ANNOTATION,
    TopologyRule,
    pin_pod_spec,
    pin_templates,
    prefer_pod_spec,
)
from fleet.core.workload import Component, Gang

from .builders import GiB, cluster, node, pod
from .exhaustive import assert_valid
from .seeds import pytorchjob

RACK = "topology.kubernetes.io/rack"
GPU8 = Resources({"cpu": 8000, "memory": 32 * GiB, "nvidia.com/gpu": 8, "pods": 1})


def rack_node(name: str, rack: str | None, gpu: int = 8):
    return node(name, gpu=gpu, labels={RACK: rack} if rack else {})


def workers(n: int, rule: TopologyRule | None = None) -> Gang:
    gang = Gang.of(Component("worker", n, GPU8))
    return gang.with_topology(rule) if rule else gang


def test_required_chooses_the_member_whose_one_rack_holds_the_gang():
    # member-a: 4 free 8-GPU nodes in one rack (32 GPUs). member-b: 8 free 8-GPU nodes, one per
    # rack (64 GPUs): more free GPUs, but spread. Without topology best fit takes member-a
    # anyway on share, so make member-b the plain choice: it is named first and fuller.
    a = cluster("member-a", *(rack_node(f"a{i}", "r1") for i in range(4)))
    b = cluster("member-b", *(rack_node(f"b{i}", f"r{i}") for i in range(8)))
    plain = place(workers(4), [a, b], explain_all=True)
    assert plain.placement is not None
    required = place(workers(4, TopologyRule(RACK)), [a, b], explain_all=True)
    assert required.placement is not None
    assert required.placement.cluster == "member-a"
    assert [(d.level, d.value) for d in required.placement.assignment.domains] == [(RACK, "r1")]
    rejected = {r.cluster: r for r in required.rejections}
    assert rejected["member-b"].category == INSUFFICIENT
    assert "rack r1 holds the gang" in required.placement.why


def test_required_rejects_more_free_gpus_spread_across_racks_even_when_ranked_first():
    # member-b ranks first by best fit (its holes fit exactly) but no rack of it holds 2.
    a = cluster("member-a", *(rack_node(f"a{i}", "r1") for i in range(3)))
    b = cluster("member-b", *(rack_node(f"b{i}", f"r{i}") for i in range(6)))
    b.upsert_pod(pod("busy", "b0", gpu=0))
    decision = place(workers(2, TopologyRule(RACK)), [b, a])
    assert decision.placement is not None and decision.placement.cluster == "member-a"


def test_explanation_names_the_largest_domain_in_numbers():
    nodes = [rack_node("n0", "r0"), rack_node("n1", "r0"), rack_node("n2", "r0")]
    nodes += [rack_node("n3", "r1"), rack_node("n4", "r2")]
    member = cluster("member-1", *nodes)
    decision = place(workers(4, TopologyRule(RACK)), [member])
    assert decision.placement is None
    (rejection,) = decision.rejections
    assert rejection.category == INSUFFICIENT
    assert rejection.facts["largestDomain"] == "r0"
    assert rejection.facts["podsThatFit"] == 3
    assert rejection.facts["pods"] == 4
    assert rejection.facts["topologyLevel"] == RACK
    assert "largest rack (r0) holds 3 of 4 workers" in rejection.reason


def test_nodes_without_the_level_label_are_in_no_domain():
    member = cluster("member-1", rack_node("n0", None), rack_node("n1", None))
    decision = place(workers(2, TopologyRule(RACK)), [member])
    assert decision.placement is None
    assert f"no node has the label {RACK}" in decision.rejections[0].reason


def test_a_domain_with_room_by_totals_but_not_node_by_node_is_not_taken():
    # Rack r0 has room for the worker (n0) and for the master (n0) each alone, and CPU enough in
    # total, but after the worker takes n0 the master fits nowhere (n1 has 4 cores).
    nodes = [
        node("n0", cpu=32, gpu=8, labels={RACK: "r0"}),
        node("n1", cpu=4, gpu=0, labels={RACK: "r0"}),
        node("far", cpu=32, gpu=0, labels={RACK: "r1"}),
    ]
    master = Component("master", 1, Resources({"cpu": 6000, "pods": 1}))
    worker = Component("worker", 1, Resources({"cpu": 30_000, "nvidia.com/gpu": 8, "pods": 1}))
    gang = Gang.of(master, worker).with_topology(TopologyRule(RACK))
    decision = place(gang, [cluster("member-1", *nodes)])
    assert decision.placement is None
    assert "none holds them node by node" in decision.rejections[0].reason
    # Without topology the master goes to the other rack.
    assert place(gang.with_topology(), [cluster("member-1", *nodes)]).placement is not None


def test_preferred_ranks_a_member_with_one_domain_first_and_falls_back_to_spread():
    spread = cluster("member-a", *(rack_node(f"a{i}", f"r{i}") for i in range(2)))
    whole = cluster("member-b", *(rack_node(f"b{i}", "r9") for i in range(4)))
    rule = TopologyRule(RACK, PREFERRED)
    decision = place(workers(2, rule), [spread, whole])
    assert decision.placement is not None and decision.placement.cluster == "member-b"
    by = {r.cluster: r for r in decision.rejections}
    assert by["member-a"].category == OUTRANKED
    assert "preferred" in by["member-a"].reason
    # Only spread capacity anywhere: placed spread, without a domain.
    decision = place(workers(2, rule), [spread])
    assert decision.placement is not None
    assert decision.placement.assignment.domains == ()


CPU_POOL = PodConstraints.of({"pool": "cpu"})


def test_each_pod_set_gets_its_own_domain_as_in_kueue():
    # Master (CPU pool only) and workers each required in one rack: different racks is fine.
    master = Component("master", 1, Resources({"cpu": 4000, "pods": 1}), CPU_POOL)
    gang = Gang.of(master, Component("worker", 2, GPU8)).with_topology(
        TopologyRule(RACK, components=("master",)), TopologyRule(RACK, components=("worker",))
    )
    member = cluster(
        "member-1",
        node("cpu", labels={RACK: "r0", "pool": "cpu"}),
        rack_node("g0", "r1"),
        rack_node("g1", "r1"),
    )
    decision = place(gang, [member])
    assert decision.placement is not None
    domains = {d.components: d.value for d in decision.placement.assignment.domains}
    assert domains == {("worker",): "r1", ("master",): "r0"}
    # One group for both: no rack has the CPU pool and the GPUs together.
    grouped = gang.with_topology(TopologyRule(RACK, components=("master", "worker")))
    assert place(grouped, [member]).placement is None


def test_components_without_a_rule_go_anywhere():
    master = Component("master", 1, Resources({"cpu": 4000, "pods": 1}), CPU_POOL)
    gang = Gang.of(master, Component("worker", 2, GPU8)).with_topology(
        TopologyRule(RACK, components=("worker",))
    )
    member = cluster("member-1", node("cpu", labels={"pool": "cpu"}), rack_node("g0", "r1", 16))
    decision = place(gang, [member])
    assert decision.placement is not None
    assert decision.placement.assignment.per_component() == {"master": 1, "worker": 2}


def test_the_policy_default_does_not_override_the_templates():
    annotated = workers(2, TopologyRule(RACK, PREFERRED, ("worker",)))
    default = TopologyRule("block", source="policy")
    assert annotated.with_default_topology(default).topology == annotated.topology
    assert workers(2).with_default_topology(default).topology == (default,)


# -- property: a placed required gang always fits inside one domain of its member ----------------

node_spec = st.tuples(st.sampled_from(["r0", "r1", "r2", None]), st.sampled_from([0, 2, 4, 8]))


@settings(max_examples=150, deadline=None)
@given(
    members=st.lists(st.lists(node_spec, min_size=1, max_size=8), min_size=1, max_size=3),
    used=st.lists(st.integers(0, 8), max_size=8),
    worker_gpus=st.sampled_from([1, 2, 4, 8]),
    n_workers=st.integers(1, 5),
    with_master=st.booleans(),
)
def test_placed_required_gang_fits_inside_one_domain(
    members, used, worker_gpus, n_workers, with_master
):
    snaps = []
    for m, nodes in enumerate(members):
        snap = cluster(
            f"member-{m}",
            *(rack_node(f"m{m}-n{i}", rack, gpu) for i, (rack, gpu) in enumerate(nodes)),
        )
        for i, gpus in enumerate(used[: len(nodes)]):
            if gpus:
                snap.upsert_pod(pod(f"m{m}-u{i}", f"m{m}-n{i}", gpu=gpus))
        snaps.append(snap)
    comps = [
        Component(
            "worker", n_workers, Resources({"cpu": 1000, "nvidia.com/gpu": worker_gpus, "pods": 1})
        )
    ]
    if with_master:
        comps.insert(0, Component("master", 1, Resources({"cpu": 1000, "pods": 1})))
    gang = Gang.of(*comps).with_topology(TopologyRule(RACK))
    decision = place(gang, snaps, explain_all=True)
    if decision.placement is None:
        # Never wrongly rejected: the gang without topology does not fit in any one rack's
        # nodes taken alone (the same packer, on a member made of that rack only).
        for snap in snaps:
            for value in snap.domain_nodes(RACK):
                rack = cluster(
                    "rack",
                    *(n for n in snap.nodes() if n.labels.get(RACK) == value),
                )
                for p in snap.pods():
                    if rack.node(p.node_name or "") is not None:
                        rack.upsert_pod(p)
                alone = place(gang.with_topology(), [rack])
                assert alone.placement is None, (snap.name, value)
        return
    chosen = next(s for s in snaps if s.name == decision.placement.cluster)
    assignment = decision.placement.assignment
    assert_valid(chosen, gang, assignment)
    (domain,) = assignment.domains
    racks = set()
    for slot in assignment:
        assert slot.node is not None
        info = chosen.node(slot.node)
        assert info is not None
        racks.add(info.labels.get(RACK))
    assert racks == {domain.value}


# -- reading the annotations -------------------------------------------------------------------


def annotate(job: dict, role: str, annotations: dict[str, str]) -> dict:
    job = copy.deepcopy(job)
    template = job["spec"]["pytorchReplicaSpecs"][role]["template"]
    template.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
    return job


def test_the_adapter_reads_kueue_annotations_per_pod_set():
    job = annotate(pytorchjob(), "Worker", {REQUIRED_ANNOTATION: RACK})
    gang = gang_from_workload(job)
    (rule,) = gang.topology
    assert (rule.level, rule.mode, rule.components) == (RACK, "Required", ("worker",))
    assert rule.source.endswith(f"Worker.template.metadata.annotations[{REQUIRED_ANNOTATION}]")


def test_a_group_name_puts_pod_sets_in_one_domain():
    job = annotate(pytorchjob(), "Worker", {PREFERRED_ANNOTATION: RACK, GROUP_ANNOTATION: "g"})
    job = annotate(job, "Master", {PREFERRED_ANNOTATION: RACK, GROUP_ANNOTATION: "g"})
    (rule,) = gang_from_workload(job).topology
    assert rule.mode == PREFERRED
    assert set(rule.components) == {"master", "worker"}


def test_bad_annotations_name_the_field():
    job = annotate(pytorchjob(), "Worker", {REQUIRED_ANNOTATION: RACK, PREFERRED_ANNOTATION: RACK})
    with pytest.raises(FieldError, match="not both"):
        gang_from_workload(job)
    job = annotate(pytorchjob(), "Worker", {REQUIRED_ANNOTATION: RACK, GROUP_ANNOTATION: "g"})
    job = annotate(job, "Master", {REQUIRED_ANNOTATION: "block", GROUP_ANNOTATION: "g"})
    with pytest.raises(FieldError, match="same topology"):
        gang_from_workload(job)
    job = annotate(pytorchjob(), "Worker", {REQUIRED_ANNOTATION: " "})
    with pytest.raises(FieldError, match="node label key"):
        gang_from_workload(job)


# -- pinning the copy ------------------------------------------------------------------------


def test_pin_adds_the_domain_to_every_required_term_and_keeps_the_users_affinity():
    spec = {
        "containers": [],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a"]}]},
                        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["b"]}]},
                    ]
                }
            }
        },
    }
    pinned = pin_pod_spec(spec, RACK, "r7")
    terms = pinned["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    pin = {"key": RACK, "operator": "In", "values": ["r7"]}
    assert [t["matchExpressions"][-1] for t in terms] == [pin, pin]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["a"], ["b"]]
    assert pin_pod_spec(pinned, RACK, "r7") == pinned  # idempotent
    assert "affinity" not in spec["containers"]  # the input is not changed
    bare = pin_pod_spec({"containers": []}, RACK, "r7")
    assert bare["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [pin]}]
    }


def test_pin_templates_pins_only_the_components_of_each_domain():
    master = {"spec": {"containers": []}}
    worker = {"spec": {"containers": []}}
    count = pin_templates([("master", master), ("worker", worker)], [(RACK, "r1", ("worker",))])
    assert count == 1
    assert "affinity" not in master["spec"]
    assert "affinity" in worker["spec"]


def test_prefer_adds_a_preferred_term_for_the_domain_once():
    pinned = prefer_pod_spec({"containers": []}, RACK, "r7")
    (term,) = pinned["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term == {
        "weight": 100,
        "preference": {"matchExpressions": [{"key": RACK, "operator": "In", "values": ["r7"]}]},
    }
    assert prefer_pod_spec(pinned, RACK, "r7") == pinned
    master, worker = {"spec": {"containers": []}}, {"spec": {"containers": []}}
    assert (
        pin_templates([("master", master), ("worker", worker)], [(RACK, "r1", ())], required=False)
        == 2
    )
    assert (
        "requiredDuringSchedulingIgnoredDuringExecution"
        not in worker["spec"]["affinity"]["nodeAffinity"]
    )


# -- rack labels out of node signatures ----------------------------------------------------------


def test_a_node_selector_on_a_rack_label_still_selects_that_racks_nodes():
    """Rack labels are not in node signatures (indexed per level instead): a pod that names a
    rack in its nodeSelector or required affinity must still land only there."""
    member = cluster("m", *(rack_node(f"n{i}", f"r{i % 3}") for i in range(9)))
    assert len(list(member.signatures())) == 1  # nodes differing only in rack share one

    def placed_racks(constraints: PodConstraints, n: int) -> set[str] | None:
        gang = Gang.of(Component("worker", n, GPU8, constraints))
        decision = place(gang, [member])
        if decision.placement is None:
            return None
        return {member.node(s.node).labels[RACK] for s in decision.placement.assignment}  # type: ignore[union-attr,arg-type]

    assert placed_racks(PodConstraints.of({RACK: "r1"}), 3) == {"r1"}
    assert placed_racks(PodConstraints.of({RACK: "r1"}), 4) is None  # r1 has 3 nodes
    assert placed_racks(PodConstraints.of({RACK: "r9"}), 1) is None
    in_r2 = NodeSelector.parse(
        {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": RACK, "operator": "In", "values": ["r2"]}]}
            ]
        },
        "affinity",
    )
    assert placed_racks(PodConstraints.of(affinity=in_r2), 3) == {"r2"}
    not_r0 = NodeSelector.parse(
        {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": RACK, "operator": "NotIn", "values": ["r0"]}]}
            ]
        },
        "affinity",
    )
    assert placed_racks(PodConstraints.of(affinity=not_r0), 6) == {"r1", "r2"}
    assert placed_racks(PodConstraints.of(affinity=not_r0), 7) is None


def test_a_level_that_is_not_indexed_still_places_in_one_domain():
    """A level outside `topology_label_keys` stays in the signatures; its domains are read
    from them."""
    block = "example.com/block"
    nodes = [node(f"n{i}", gpu=8, labels={block: f"b{i // 2}"}) for i in range(6)]
    member = ClusterSnapshot.build("m", nodes)
    assert not member.indexed(block)
    decision = place(workers(2, TopologyRule(block)), [member])
    assert decision.placement is not None
    (domain,) = decision.placement.assignment.domains
    assert {member.node(s.node).labels[block] for s in decision.placement.assignment} == {
        domain.value
    }  # type: ignore[union-attr,arg-type]
    assert place(workers(3, TopologyRule(block)), [member]).placement is None


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.lists(node_spec, min_size=1, max_size=10),
    used=st.lists(st.integers(0, 8), max_size=10),
    worker_gpus=st.sampled_from([1, 2, 4, 8]),
    n_workers=st.integers(1, 5),
    rack=st.sampled_from(["r0", "r1", "r2"]),
    required=st.booleans(),
)
def test_indexed_racks_decide_as_racks_in_signatures(
    nodes, used, worker_gpus, n_workers, rack, required
):
    """The same member with the rack label indexed per level and with it in the signatures
    (the engine before): a gang selecting one rack by nodeSelector, or asking for one rack,
    fits in one exactly when it fits in the other, and only on nodes it may use."""
    infos = [rack_node(f"n{i}", r, gpu) for i, (r, gpu) in enumerate(nodes)]
    indexed = ClusterSnapshot.build("m", infos)
    plain = ClusterSnapshot.build("m", infos, topology_label_keys=frozenset())
    for snap in (indexed, plain):
        for i, gpus in enumerate(used[: len(nodes)]):
            if gpus:
                snap.upsert_pod(pod(f"u{i}", f"n{i}", gpu=gpus))
    resources = Resources({"cpu": 1000, "nvidia.com/gpu": worker_gpus, "pods": 1})
    if required:
        gang = Gang.of(Component("worker", n_workers, resources)).with_topology(TopologyRule(RACK))
    else:
        gang = Gang.of(Component("worker", n_workers, resources, PodConstraints.of({RACK: rack})))
    a, b = place(gang, [indexed]), place(gang, [plain])
    assert (a.placement is None) == (b.placement is None)
    if a.placement is not None:
        assert_valid(indexed, gang, a.placement.assignment)
        used_racks = {indexed.node(s.node).labels.get(RACK) for s in a.placement.assignment}  # type: ignore[union-attr,arg-type]
        assert len(used_racks) == 1
        if not required:
            assert used_racks == {rack}


def test_preferred_takes_the_member_with_the_tightest_rack_that_holds_it():
    """Best fit across members for a preferred rack: the member whose rack leaves the fewest
    GPUs unused wins, so a whole big rack elsewhere stays whole for a bigger gang."""
    roomy = cluster("member-a", *(rack_node(f"a{i}", "ra") for i in range(4)))
    tight = cluster("member-b", *(rack_node(f"b{i}", "rb") for i in range(2)))
    for i in range(4):  # more free GPUs in all, so member-a ranks first by share
        tight.upsert_node(rack_node(f"b-spread{i}", f"rs{i}"))
    plain = place(workers(2), [roomy, tight])
    assert plain.placement is not None and plain.placement.cluster == "member-a"
    for order in ([roomy, tight], [tight, roomy]):
        decision = place(workers(2, TopologyRule(RACK, PREFERRED)), order)
        assert decision.placement is not None
        assert decision.placement.cluster == "member-b"
        assert [d.value for d in decision.placement.assignment.domains] == ["rb"]
