"""Work lost counts every resource a gang holds (module `work`): a CPU-only gang that has run
for days is no free victim, and a gang that reported a checkpoint a minute ago costs a minute."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.core.admission import Admission, AdmissionSettings, Placed, UnitSpec, WorkWeights
from fleet.core.admission.reclaim import Runner
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.quota import MAX_JOBS, check_tree
from fleet.core.resources import CPU, GPU, MEMORY, Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Component, Gang

HOUR = 3600.0
GiB = 1 << 30


def tree(root: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {
        "root": {
            "name": "root",
            **root,
            "children": [
                {"name": "a", "namespaces": ["a"], **a},
                {"name": "b", "namespaces": ["b"], **b},
            ],
        }
    }


def weights_of(spec: dict[str, Any]) -> WorkWeights:
    checked = check_tree(spec)
    assert checked.tree is not None, checked.errors
    return WorkWeights.of(checked.tree)


# -- the weights --------------------------------------------------------------------------------

FLEET = {"min": {GPU: 8, CPU: 64}, "max": {GPU: 8, CPU: 64, MEMORY: "512Gi", MAX_JOBS: 100}}
OPEN: dict[str, Any] = {"min": {GPU: 0}, "max": {GPU: 8}}


def test_a_gpu_gang_weighs_its_gpus_and_a_cpu_gang_its_share_of_the_root_in_gpus():
    weights = weights_of(tree(FLEET, OPEN, OPEN))
    # 4 GPUs with 8 CPUs: the GPUs are its largest share (half the root), so it weighs 4.
    assert weights.size(Resources({GPU: 4, CPU: 8000, MAX_JOBS: 1})) == 4.0
    # 32 CPUs alone: half the root's CPUs, i.e. 4 GPU-equivalents.
    assert weights.size(Resources({CPU: 32000, MAX_JOBS: 1})) == pytest.approx(4.0)
    # Memory is weighed by the root's max too (256Gi of 512Gi: half, 4 GPU-equivalents).
    assert weights.size(Resources({MEMORY: 256 * GiB})) == pytest.approx(4.0)
    # The job count weighs nothing.
    assert weights.size(Resources({MAX_JOBS: 1})) == 0.0


def test_the_root_min_weighs_a_resource_its_max_does_not_list():
    weights = weights_of(tree({"min": {GPU: 8, CPU: 64}, "max": {GPU: 8}}, OPEN, OPEN))
    assert weights.size(Resources({CPU: 16000})) == pytest.approx(2.0)


def test_without_gpus_in_the_root_the_unit_is_a_cpu_core():
    spec = tree({"min": {CPU: 64}, "max": {CPU: 64}}, {"max": {CPU: 64}}, {"max": {CPU: 64}})
    assert weights_of(spec).size(Resources({CPU: 3000})) == pytest.approx(3.0)


def test_without_a_tree_gpus_alone_weigh():
    assert WorkWeights.of(None).size(Resources({GPU: 2, CPU: 64000})) == 2.0


sizes = st.fixed_dictionaries(
    {GPU: st.integers(0, 16), CPU: st.integers(0, 256_000), MEMORY: st.integers(0, 1 << 40)}
)


@given(sizes, sizes, st.integers(1, 64), st.integers(1, 512))
def test_size_is_the_dominant_share_and_never_free(
    raw: dict[str, int], more: dict[str, int], gpus: int, cores: int
):
    """Properties of the weighing: a gang whose GPUs are its largest share weighs exactly its
    GPUs (every GPU-only figure is what it was); holding more never weighs less; twice the
    gang weighs twice; a gang that holds anything the root lists weighs something."""
    root = {"min": {GPU: gpus, CPU: cores}, "max": {GPU: gpus, CPU: cores, MEMORY: "1Ti"}}
    weights = weights_of(tree(root, OPEN, OPEN))
    demand = Resources(raw)
    size = weights.size(demand)
    shares = [raw[GPU] / gpus, raw[CPU] / (cores * 1000), raw[MEMORY] / (1 << 40)]
    if shares[0] >= max(shares):
        assert size == raw[GPU]
    assert size == pytest.approx(max(shares) * gpus)
    bigger = Resources({r: raw[r] + more[r] for r in raw})
    assert weights.size(bigger) >= size
    assert weights.size(Resources({r: 2 * a for r, a in raw.items()})) == pytest.approx(2 * size)
    assert (size > 0) == any(raw.values())


@given(
    st.floats(0.0, 1000.0),
    st.floats(0.0, 100 * HOUR),
    st.one_of(st.none(), st.floats(0.0, 100 * HOUR)),
)
def test_work_lost_is_the_size_times_the_time_since_the_last_checkpoint(
    size: float, ran: float, checkpoint_after: float | None
):
    now = 1000 * HOUR
    started = now - ran
    checkpoint = None if checkpoint_after is None else started + checkpoint_after
    runner = Runner(
        "k", "root/a", Resources({GPU: 1}), 0, started, "m", "k", size, checkpoint=checkpoint
    )
    since = started
    if checkpoint is not None and checkpoint > started:
        since = min(checkpoint, now)
    assert runner.lost(now) == pytest.approx(size * (now - since) / HOUR)
    assert 0.0 <= runner.lost(now) <= size * ran / HOUR + 1e-9


# -- reclaim's choice ---------------------------------------------------------------------------


def reclaim(
    spec: dict[str, Any],
    node: Resources,
    runners: list[tuple[str, Resources, Placed]],
    claimant: Resources,
    now: float,
    per_gpu: float = math.inf,
) -> list[tuple[str, float]]:
    """Team a runs `runners` on one node; team b's claimant (within b's min) arrives: the
    evictions the reclaim decides, (victim, work lost)."""
    admission = Admission(AdmissionSettings(reclaim_loss_per_gpu=per_gpu))
    checked = check_tree(spec)
    assert checked.tree is not None, checked.errors
    admission.set_tree(checked.tree)
    view = ClusterSnapshot.build("m", [NodeInfo("n1", node)])
    running: dict[str, Placed] = {}
    gangs: dict[str, Gang] = {}
    for key, demand, placed in runners:
        admission.upsert(UnitSpec(key, "a", demand, 0.0))
        admission.plan(1.0)
        assert admission.placed(key, 1.0), key
        view.upsert_pod(PodInfo(key, "", key, "n1", demand, owner_key=key))
        running[key] = placed
    gangs["b1"] = Gang.of(Component("worker", 1, claimant), name="b1")
    admission.upsert(UnitSpec("b1", "b", claimant, now - 60.0))
    admission.plan(now)
    plan = admission.reclaim(now, running, gangs.get, lambda _key: [view])
    return [(e.key, e.lost_gpu_hours) for e in plan.evict]


CPU_TREE = tree(
    {"min": {GPU: 8, CPU: 48}, "max": {GPU: 8, CPU: 48}},
    {"min": {GPU: 0, CPU: 0}, "max": {GPU: 8, CPU: 48}},
    {"min": {GPU: 0, CPU: 16}, "max": {GPU: 8, CPU: 48}},
)
NODE = Resources({GPU: 8, CPU: 48000, "pods": 110})


@pytest.mark.parametrize("per_gpu", [math.inf, 24 * HOUR])
def test_a_cpu_gang_that_ran_for_days_is_not_chosen_over_a_gpu_gang_a_minute_old(per_gpu):
    now = 100 * HOUR
    cpu_gang = Resources({CPU: 32000})  # two thirds of the root's CPUs, for three days
    gpu_gang = Resources({GPU: 4, CPU: 16000})  # half the GPUs, started a minute ago
    evicted = reclaim(
        CPU_TREE,
        NODE,
        [
            ("a-cpu", cpu_gang, Placed("m", "a-cpu", now - 72 * HOUR)),
            ("a-gpu", gpu_gang, Placed("m", "a-gpu", now - 60.0)),
        ],
        Resources({CPU: 8000}),  # the node is full of CPU: either eviction frees 8 CPUs
        now,
        per_gpu,
    )
    assert [key for key, _ in evicted] == ["a-gpu"]
    ((_, lost),) = evicted
    assert lost == pytest.approx(4 / 60)


def test_with_only_the_cpu_gang_there_its_days_are_counted():
    now = 100 * HOUR
    evicted = reclaim(
        CPU_TREE,
        NODE,
        [("a-cpu", Resources({CPU: 48000}), Placed("m", "a-cpu", now - 72 * HOUR))],
        Resources({CPU: 8000}),
        now,
    )
    # The whole root's CPUs (8 GPU-equivalents) for 72 hours.
    assert evicted == [("a-cpu", pytest.approx(8 * 72))]


def test_a_gang_with_a_checkpoint_a_minute_old_costs_a_minute():
    now = 100 * HOUR
    spec = tree({"min": {GPU: 8}, "max": {GPU: 8}}, OPEN, {"min": {GPU: 4}, "max": {GPU: 8}})
    four = Resources({GPU: 4, CPU: 1000})
    evicted = reclaim(
        spec,
        Resources({GPU: 8, CPU: 8000, "pods": 110}),
        [
            # Ran 10 hours, checkpointed a minute ago: it loses a minute of 4 GPUs.
            ("a-long", four, Placed("m", "a-long", now - 10 * HOUR, checkpoint=now - 60.0)),
            # Ran an hour, no checkpoint: it would lose 4 GPU-hours.
            ("a-short", four, Placed("m", "a-short", now - HOUR)),
        ],
        four,
        now,
    )
    assert evicted == [("a-long", pytest.approx(4 / 60))]
