"""Kube Queue in the simulator: the admission core in front of placement, on tiny fleets and
traces whose answers can be worked out by hand, then the command end to end."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.admission import AdmissionSettings
from fleet.core.quota import MAX_JOBS
from fleet.core.resources import GPU, PODS, Resources
from fleet.simulate import JobSpec, Shape, SimConfig, make_policy
from fleet.simulate.cli import main
from fleet.simulate.jobs import SimJob
from fleet.simulate.kubequeue import (
    NO_QUEUE,
    QuotaQueue,
    load_tree,
    parse_queue_modes,
    philly_teams_tree,
    quota_tree,
    replay_queued,
)

from .helpers import by_id, fleet_of


def job(name: str, team: str, submit: float, duration: float, workers: int, gpu: int) -> JobSpec:
    return JobSpec(name, submit, duration, team, Shape(workers, Resources({GPU: gpu, PODS: 1})))


def tree(**teams: Any) -> dict[str, Any]:
    """tree(a=(min, max), b=(min, max, max_jobs)); root min = max = sum of the mins."""
    children = []
    for name, limits in teams.items():
        node: dict[str, Any] = {"name": name, "namespaces": [name], "min": {GPU: limits[0]}}
        node["max"] = {GPU: limits[1]}
        if len(limits) > 2:
            node["max"][MAX_JOBS] = limits[2]
        children.append(node)
    total = sum(limits[0] for limits in teams.values())
    return {
        "root": {"name": "root", "min": {GPU: total}, "max": {GPU: total}, "children": children}
    }


def run(fleet: Any, trace: list[JobSpec], spec: dict[str, Any], mode: str, **settings: Any) -> Any:
    policy = make_policy("nodes", [m.name for m in fleet.members])
    return replay_queued(
        fleet,
        trace,
        policy,
        SimConfig(),
        tree=quota_tree(spec, "test"),
        mode=mode,
        settings=AdmissionSettings(**settings) if settings else None,
    )


def test_max_jobs_one_runs_the_second_job_when_the_first_ends():
    fleet = fleet_of({"m": [8, 8]})
    trace = [job("first", "a", 0, 100, 1, 2), job("second", "a", 1, 100, 1, 2)]
    spec = tree(a=(16, 16, 1))
    queued = by_id(run(fleet, trace, spec, "Priority"))
    assert queued["first"].first_start == 0
    assert queued["second"].first_start == 100
    free = by_id(run(fleet, trace, spec, NO_QUEUE))
    assert free["second"].first_start == 1


def test_gpu_quota_holds_a_job_a_member_could_run():
    fleet = fleet_of({"m": [8, 8]})
    trace = [job("a1", "a", 0, 50, 1, 4), job("a2", "a", 0, 50, 1, 4), job("b1", "b", 0, 50, 1, 4)]
    result = run(fleet, trace, tree(a=(4, 4), b=(12, 12)), "Priority")
    jobs = by_id(result)
    assert [jobs["a1"].first_start, jobs["a2"].first_start] == [0, 50]
    assert jobs["b1"].first_start == 0
    assert result.policy == "Priority"


def test_priority_passes_a_large_head_and_block_does_not():
    fleet = fleet_of({"m": [8]})
    trace = [
        job("running", "a", 0, 100, 1, 6),
        job("large", "a", 1, 10, 1, 4),
        job("small", "a", 2, 10, 1, 2),
    ]
    spec = tree(a=(8, 8))
    priority = by_id(run(fleet, trace, spec, "Priority"))
    assert priority["small"].first_start == 2 and priority["large"].first_start == 100
    block = by_id(run(fleet, trace, spec, "Block"))
    assert block["large"].first_start == 100 and block["small"].first_start == 100


def test_a_dequeued_job_no_member_can_hold_times_out_and_frees_its_quota():
    fleet = fleet_of({"m": [4, 4]})
    trace = [
        job("unplaceable", "a", 0, 10, 1, 8),  # within a's quota, but no node has 8 GPUs
        job("next", "a", 1, 10, 1, 4),
        job("clock", "b", 0, 1000, 1, 1),  # its end is the next event after the timeout
    ]
    result = run(fleet, trace, tree(a=(8, 8), b=(1, 1)), "Priority", placement_timeout=300)
    jobs = by_id(result)
    assert jobs["unplaceable"].first_start is None
    assert jobs["next"].first_start == 1000
    assert result.counters["queue_timeouts"] >= 1


def test_jobs_with_no_quota_wait_or_bypass():
    fleet = fleet_of({"m": [8]})
    trace = [job("lost", "nowhere", 0, 10, 1, 1)]
    waited = run(fleet, trace, tree(a=(8, 8)), "Priority")
    assert by_id(waited)["lost"].first_start is None and waited.counters["queue_no_quota"] == 1
    bypassed = run(fleet, trace, tree(a=(8, 8)), "Priority", no_quota="bypass")
    assert by_id(bypassed)["lost"].first_start == 0 and bypassed.counters["queue_bypassed"] == 1


def test_a_failed_over_job_keeps_its_quota_and_goes_before_newer_jobs():
    queue = QuotaQueue(quota_tree(tree(a=(4, 4)), "t"))
    old = SimJob(job("old", "a", 0, 10, 1, 4), 0)
    new = SimJob(job("new", "a", 5, 10, 1, 4), 1)
    placed: list[str] = []

    def attempt(j: SimJob) -> bool:
        placed.append(j.spec.id)
        return True

    queue.push(old, 0)
    queue.drain(attempt, 0)
    queue.push(new, 5)
    queue.drain(attempt, 5)
    assert placed == ["old"] and queue.holding() == ["old"]
    queue.push(old, 20)  # failed over: back to placement, quota kept
    assert queue.holding() == ["old"]
    queue.drain(attempt, 20)
    assert placed == ["old", "old"] and queue.running() == ["old"]
    queue.finished(old, 30)
    queue.capacity_freed()
    queue.drain(attempt, 30)
    assert placed[-1] == "new"


@settings(max_examples=40, deadline=None)
@given(
    specs=st.lists(
        st.tuples(
            st.sampled_from(("a", "b", "c")),
            st.integers(0, 50),
            st.integers(1, 40),
            st.integers(1, 2),
            st.integers(1, 4),
        ),
        max_size=25,
    ),
    mode=st.sampled_from(("Priority", "Block")),
)
def test_simulated_teams_never_run_more_than_their_max(specs, mode):
    fleet = fleet_of({"m1": [4, 4], "m2": [8]})
    trace = [
        job(f"j{i}", team, submit, duration, workers, gpu)
        for i, (team, submit, duration, workers, gpu) in enumerate(specs)
    ]
    limits = {"a": (4, 6, 2), "b": (4, 8), "c": (4, 4)}
    result = run(fleet, trace, tree(**limits), mode)
    for team, caps in limits.items():
        intervals = [
            (j.first_start, j.end if j.end is not None else math.inf, j.gpus)
            for j in result.jobs
            if j.spec.team == team and j.first_start is not None
        ]
        for start, _, _ in intervals:
            live = [(s, e, g) for s, e, g in intervals if s <= start < e]
            assert sum(g for _, _, g in live) <= caps[1]
            if len(caps) > 2:
                assert len(live) <= caps[2]


def test_philly_teams_tree_gives_each_vc_its_share_and_room_to_borrow():
    spec = philly_teams_tree([("vc1", 64), ("vc2", 192)], {"vc1", "vc2", "stray"}, 256)
    t = quota_tree(spec, "philly")
    assert t.node("root/vc1").min[GPU] == 64 and t.node("root/vc1").max[GPU] == 128
    assert t.node("root/vc2").max[GPU] == 256  # capped at the fleet
    assert t.quota_for("stray") == "root/other" and t.node("root/other").min.get(GPU, 0) == 0


def test_queue_modes_parse():
    assert parse_queue_modes("none,Priority,Block") == [NO_QUEUE, "Priority", "Block"]
    assert parse_queue_modes("Block, Block") == ["Block"]


def _custom(tmp_path: Path) -> tuple[Path, Path]:
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("member,nodes,gpu\nm,2,8\n", encoding="utf-8")
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "job,team,submit,duration,workers,gpu\nj1,a,0,100,1,4\nj2,a,1,100,1,4\nj3,b,2,50,1,8\n",
        encoding="utf-8",
    )
    return fleet, trace


def test_command_with_a_quota_tree_compares_queue_modes_per_team(tmp_path):
    fleet, trace = _custom(tmp_path)
    tree_file = tmp_path / "tree.yaml"
    tree_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
                "kind": "ElasticQuotaTree",
                "metadata": {"name": "t", "namespace": "kube-system"},
                "spec": tree(a=(8, 8, 1), b=(8, 8)),
            }
        ),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    argv = ["--dataset", "custom", "--fleet", str(fleet), "--trace", str(trace)]
    assert main([*argv, "--queue", str(tree_file), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())["scenarios"]["custom"]
    assert list(metrics["policies"]) == ["no queue", "Priority", "Block"]
    teams = metrics["teams"]["Priority"]
    assert teams["a"]["jobs"] == 2 and teams["a"]["wait_s"]["max"] == 99  # max-jobs 1
    assert metrics["teams"]["no queue"]["a"]["wait_s"]["max"] == 0
    assert teams["a"]["peak_gpus"] == 4  # one job of a at a time
    assert metrics["teams"]["no queue"]["a"]["peak_gpus"] == 8
    assert teams["b"]["borrowed_share"] == 0 and teams["a"]["borrowed_share"] == 0
    report = (out / "report.md").read_text()
    assert "### Per team" in report and "custom/teams-wait.png" in report
    for png in ("teams-wait.png", "teams-use.png", "teams-borrowed.png"):
        assert (out / "custom" / png).stat().st_size > 0


def test_command_refuses_an_invalid_tree_naming_file_and_rule(tmp_path, capsys):
    fleet, trace = _custom(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"root": {"name": "root", "min": {GPU: 2}, "max": {GPU: 1}}}))
    argv = ["--dataset", "custom", "--fleet", str(fleet), "--trace", str(trace)]
    assert main([*argv, "--queue", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "MinWithinMax" in err


def test_load_tree_takes_the_object_its_spec_or_a_root(tmp_path):
    root = {"name": "root", "children": [{"name": "a", "namespaces": ["a"]}]}
    for doc in (
        {"kind": "ElasticQuotaTree", "spec": {"root": root}},
        {"root": root},
        root,
    ):
        path = tmp_path / "t.yaml"
        path.write_text(yaml.safe_dump(doc))
        assert load_tree(path) == {"root": root}


def test_reclaim_gives_a_team_its_min_back_and_counts_what_it_cost():
    """Team a borrows the whole member (two 8-GPU gangs); team b's 8-GPU gang arrives within
    b's min: with reclaim, a's gang that started last is evicted whole and reruns later; without,
    b waits for a's gangs to end, and that wait is the min-guarantee violation."""
    fleet = fleet_of({"m": [8, 8]})
    trace = [
        job("a1", "a", 0, 10_000, 1, 8),
        job("a2", "a", 10, 10_000, 1, 8),
        job("b1", "b", 3_600, 1_000, 1, 8),
    ]
    spec = tree(a=(8, 16), b=(8, 16))
    plain = run(fleet, trace, spec, "Priority", reclaim=False)
    reclaimed = run(fleet, trace, spec, "Priority+reclaim")
    by_plain, by_reclaim = by_id(plain), by_id(reclaimed)
    assert by_plain["b1"].first_start == 10_000
    assert by_reclaim["b1"].first_start < 3_600 + 120  # the reclaim delay, then the grace
    assert by_reclaim["a2"].end is not None and by_reclaim["a2"].end > by_plain["a2"].end
    b_plain, b_reclaim = plain.teams["root/b"], reclaimed.teams["root/b"]
    assert b_plain["violation_gpu_hours"] > 8 * 1.5  # 8 GPUs short for ~1.77 h
    assert b_reclaim["violation_gpu_hours"] < b_plain["violation_gpu_hours"] / 10
    assert reclaimed.teams["root/a"]["evicted"] == 1 and plain.teams["root/a"]["evicted"] == 0
    assert 8 * 0.9 < reclaimed.teams["root/a"]["lost_gpu_hours"] < 8 * 1.1  # a2 ran ~1 h
    assert reclaimed.counters["queue_reclaims"] == 1
    assert by_reclaim["a1"].first_start == 0 and by_reclaim["a1"].end == 10_000  # never touched


def _hold_case() -> tuple[Any, list[JobSpec], dict[str, Any]]:
    """a borrows the whole member; c's gang is dequeued (the root's max exceeds the fleet) and
    waits for nodes; b's gang, within b's min, reclaims a's younger gang."""
    fleet = fleet_of({"m": [8, 8]})
    trace = [
        job("a1", "a", 0, 10_000, 1, 8),
        job("a2", "a", 10, 10_000, 1, 8),
        job("c1", "c", 3_500, 1_000, 1, 8),
        job("b1", "b", 3_600, 1_000, 1, 8),
    ]
    spec = tree(a=(8, 16), b=(8, 16), c=(0, 8))
    spec["root"]["max"] = {GPU: 24}
    return fleet, trace, spec


def test_the_room_a_reclaim_frees_is_held_for_the_claimant():
    """With the hold, b1 gets the room its eviction freed although c1, older and dequeued, fits
    it too; without it, c1 takes it and b1 waits on."""
    fleet, trace, spec = _hold_case()
    held = by_id(run(fleet, trace, spec, "Priority+reclaim"))
    assert held["b1"].first_start is not None and held["b1"].first_start < 3_600 + 120
    assert held["c1"].first_start is None or held["c1"].first_start > held["b1"].first_start
    loose = by_id(run(fleet, trace, spec, "Priority+reclaim", hold=False))
    assert loose["c1"].first_start is not None and loose["c1"].first_start < 3_600 + 120
    assert loose["b1"].first_start is None or loose["b1"].first_start > loose["c1"].first_start


def test_no_eviction_of_gangs_about_to_finish_by_their_declared_limit():
    """The worth rule: a2 declares it ends within 1 h 2 min of its start (activeDeadlineSeconds),
    so when b1 claims, a2 ends within 5 min by its limit: waiting is cheaper than evicting. The
    same a2 with no declared limit is evicted (the test above), and so is one that declares a
    limit far away."""
    fleet = fleet_of({"m": [8, 8]})
    spec = tree(a=(8, 16), b=(8, 16))

    def case(limit: float | None) -> Any:
        trace = [
            job("a1", "a", 0, 10_000, 1, 8),
            replace(job("a2", "a", 10, 3_700, 1, 8), limit=limit),
            job("b1", "b", 3_600, 1_000, 1, 8),
        ]
        return run(fleet, trace, spec, "Priority+reclaim", reclaim_worth=True)

    soon = case(3_720.0)
    assert soon.counters["queue_reclaims"] == 0
    assert by_id(soon)["b1"].first_start == 3_710  # when a2 ended
    later = case(20_000.0)
    assert later.counters["queue_reclaims"] == 1
    assert by_id(later)["b1"].first_start < 3_600 + 120


def test_checkpoints_with_state_preserved_cut_the_work_an_eviction_loses():
    """a2 checkpoints every 10 min and its state is carried over: its eviction after ~1 h loses
    only the minutes since its last checkpoint, and its next copy resumes from there."""
    fleet, trace, spec = fleet_of({"m": [8, 8]}), [], tree(a=(8, 16), b=(8, 16))
    trace = [
        job("a1", "a", 0, 10_000, 1, 8),
        job("a2", "a", 10, 10_000, 1, 8),
        job("b1", "b", 3_600, 1_000, 1, 8),
    ]
    policy = make_policy("nodes", [m.name for m in fleet.members])
    results = {
        interval: replay_queued(
            fleet,
            trace,
            policy,
            SimConfig(checkpoint_interval=interval),
            tree=quota_tree(spec, "test"),
            mode="Priority+reclaim",
        )
        for interval in (0.0, 600.0)
    }
    plain, kept = results[0.0], results[600.0]
    assert plain.counters["queue_reclaims"] == kept.counters["queue_reclaims"] == 1
    lost_plain = plain.teams["root/a"]["lost_gpu_hours"]
    lost_kept = kept.teams["root/a"]["lost_gpu_hours"]
    assert lost_plain > 8 * 0.9 and lost_kept <= 8 * 600 / 3600 + 0.01
    a2_plain, a2_kept = by_id(plain)["a2"], by_id(kept)["a2"]
    assert a2_kept.end is not None and a2_plain.end is not None
    assert a2_kept.end < a2_plain.end - 3_000  # it resumed from its checkpoint at 1 h
    assert a2_kept.lost_gpu_seconds == lost_kept * 3600
