"""The loss budget (module `budget`): one eviction destroys at most `reclaim_loss_per_gpu` of
work per GPU its claimant asks; a runner that would lose more is spared, a cheaper one is not."""

from __future__ import annotations

import math
from typing import Any

import pytest

from fleet.core.admission import Admission, AdmissionSettings, Placed, UnitSpec
from fleet.core.admission.budget import LossBudget
from fleet.core.inventory import NodeInfo, PodInfo
from fleet.core.quota import check_tree
from fleet.core.resources import GPU, Resources
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.workload import Component, Gang

HOUR = 3600.0
GPU8 = Resources({GPU: 8, "cpu": 1000})
TREE: dict[str, Any] = {
    "root": {
        "name": "root",
        "min": {GPU: 16},
        "max": {GPU: 16},
        "children": [
            {"name": "a", "namespaces": ["a"], "min": {GPU: 0}, "max": {GPU: 16}},
            {"name": "b", "namespaces": ["b"], "min": {GPU: 8}, "max": {GPU: 16}},
        ],
    }
}


def gang(key: str) -> Gang:
    return Gang.of(Component("worker", 1, GPU8), name=key)


def reclaim_after(a1_ran: float, a2_ran: float, per_gpu: float) -> tuple[Admission, list[str]]:
    """Team a borrows the whole member with a1 and a2 (8 GPUs each, run for `a1_ran` and
    `a2_ran` seconds); b1 (8 GPUs, within b's min) arrives and claims: what is evicted."""
    admission = Admission(AdmissionSettings(reclaim_loss_per_gpu=per_gpu))
    tree = check_tree(TREE).tree
    assert tree is not None
    admission.set_tree(tree)
    nodes = [NodeInfo(f"n{i}", Resources({GPU: 8, "cpu": 8000, "pods": 110})) for i in (1, 2)]
    view = ClusterSnapshot.build("m", nodes)
    now = 100 * HOUR
    running: dict[str, Placed] = {}
    for n, (key, ran) in enumerate((("a1", a1_ran), ("a2", a2_ran)), start=1):
        admission.upsert(UnitSpec(key, "a", GPU8, 0.0))
        admission.plan(1.0)
        assert admission.placed(key, 1.0)
        view.upsert_pod(PodInfo(key, "", key, f"n{n}", GPU8, owner_key=key))
        running[key] = Placed("m", key, now - ran)
    admission.upsert(UnitSpec("b1", "b", GPU8, now - 60.0))
    admission.plan(now)
    plan = admission.reclaim(now, running, gang, lambda _key: [view])
    return admission, [e.key for e in plan.evict]


def test_a_runner_that_would_lose_more_than_the_budget_is_spared():
    # 8 GPUs x 30 h = 240 GPU-hours each, over b1's budget of 8 GPUs x 24 h = 192.
    admission, evicted = reclaim_after(30 * HOUR, 30 * HOUR, 24 * HOUR)
    assert evicted == []
    why = admission.over_budget["b1"]
    assert "spares 2 gang(s)" in why and "192.0 GPU-hours" in why and "240.0" in why
    # The unit's status message (what the controller writes) says it too.
    reason = admission.why("b1", 100 * HOUR)
    assert reason is not None and why in reason.message


def test_a_runner_within_the_budget_is_evicted():
    # a2 would lose 8 x 10 h = 80 GPU-hours: within 192; a1 (240) is spared.
    admission, evicted = reclaim_after(30 * HOUR, 10 * HOUR, 24 * HOUR)
    assert evicted == ["a2"]
    assert "b1" not in admission.over_budget


def test_the_budget_spares_what_no_budget_would_evict():
    _, evicted = reclaim_after(30 * HOUR, 30 * HOUR, math.inf)
    assert len(evicted) == 1


def test_the_budget_grows_with_the_claimants_gpus():
    assert LossBudget.of(4.0, 24 * HOUR).gpu_hours == pytest.approx(96.0)
    assert LossBudget.of(4.0, 24 * HOUR).allows(96.0)
    assert not LossBudget.of(4.0, 24 * HOUR).allows(96.1)
    assert math.isinf(LossBudget.of(4.0, math.inf).gpu_hours)
    # A claimant smaller than one GPU-equivalent (a few CPUs) has one's budget.
    assert LossBudget.of(0.25, 24 * HOUR).gpu_hours == pytest.approx(24.0)


def test_the_budget_must_be_positive():
    with pytest.raises(ValueError, match="reclaim_loss_per_gpu"):
        AdmissionSettings(reclaim_loss_per_gpu=0.0)
