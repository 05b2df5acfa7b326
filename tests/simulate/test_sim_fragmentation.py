"""Issue 21's comparison, run small: every rule on every built-in dataset, in seconds."""

from __future__ import annotations

from pathlib import Path

from fleet.core.resources import GPU, PODS, Resources
from fleet.simulate import SimConfig, make_policy, simulate, summarize
from fleet.simulate.comparison import DATASETS, compare, losses, main, markdown
from fleet.simulate.policies import FRAGMENTATION_POLICIES
from fleet.simulate.scenarios import Options

from .helpers import fleet_of, job


def test_fgd_learns_the_mix_from_arrivals_and_never_mis_dispatches() -> None:
    fleet = fleet_of({"a": [8, 8], "b": [4, 4]})
    trace = [job(f"j{i}", i * 10.0, 600.0, 1 + i % 2, (1, 2, 4, 8)[i % 4]) for i in range(60)]
    policy = make_policy("fgd", ["a", "b"])
    result = simulate(fleet, trace, policy, SimConfig())
    mix = policy.member_mix()
    assert mix is not None
    assert {r.get(GPU, 0) for r, _ in mix.shapes} == {1, 2, 4, 8}
    assert all(r.get(PODS) == 1 for r, _ in mix.shapes)
    summary = summarize(result)
    assert summary["mis_dispatches"] == 0
    assert summary["started"] == len(trace)
    assert Resources({GPU: 8, PODS: 1}) in dict(mix.shapes)


def test_the_comparison_runs_every_rule_on_every_dataset(tmp_path: Path) -> None:
    runs = compare(DATASETS, FRAGMENTATION_POLICIES, Options(limit=250))
    assert [r.dataset for r in runs] == list(DATASETS)
    for run in runs:
        by = {s["policy"]: s for s in run.summaries}
        assert set(by) == set(FRAGMENTATION_POLICIES)
        assert by["nodes"]["mis_dispatches"] == 0
        assert by["fgd"]["mis_dispatches"] == 0
        for policy in ("nodes", "fgd"):
            for cls, q, mine, base in losses(run, policy):
                assert mine > base and q in ("p50", "p90", "p99") and cls
    text = markdown(runs)
    assert text.count("####") == len(DATASETS)
    assert "GPUs allocated at 130% demand" in text
    assert "p50 / p90 / p99" in text


def test_the_comparison_command_writes_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    code = main(["--out", str(out), "--limit", "120", "--datasets", "alibaba", "--no-plots"])
    assert code == 0
    table = (out / "comparison.md").read_text()
    assert "| mis-dispatches |" in table
    assert (out / "comparison.json").exists()
