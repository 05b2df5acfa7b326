"""The command: a custom fleet and trace end to end, a Philly slice from the real data, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fleet.simulate import (
    alibaba_fleet,
    load_alibaba_pods,
    load_philly,
    make_policy,
    philly_fleet,
    simulate,
    summarize,
)
from fleet.simulate.cli import main, parse_checkpoint_teams, parse_loss_per_gpu, parser
from fleet.simulate.csvio import locate
from fleet.simulate.scenarios import (
    ALIBABA_NODES,
    ALIBABA_PODS,
    PACKAGED_DATA_DIR,
    PHILLY_JOBS,
    PHILLY_VCS,
    Options,
    build,
    expand,
)
from fleet.simulate.trace import prepare


def custom_files(tmp_path: Path) -> tuple[Path, Path]:
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("member,nodes,gpu\na,2,8\nb,1,4\n", encoding="utf-8")
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "job,submit,duration,workers,gpu\nbg1,0,1000,1,7\nbg2,0,1000,1,7\nbg3,0,100,1,4\n"
        "J,1,10,1,2\n",
        encoding="utf-8",
    )
    return fleet, trace


def test_custom_run_writes_report_metrics_csv_and_plots(tmp_path, capsys):
    fleet, trace = custom_files(tmp_path)
    out = tmp_path / "out"
    code = main(
        ["--dataset", "custom", "--fleet", str(fleet), "--trace", str(trace), "--out", str(out)]
    )
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    policies = metrics["scenarios"]["custom"]["policies"]
    assert list(policies) == ["sum", "nodes", "random", "first"]
    assert policies["sum"]["mis_dispatches"] == 1 and policies["nodes"]["mis_dispatches"] == 0
    report = (out / "report.md").read_text()
    assert "mis-dispatches 1 -> 0" in report and "![CDF of wait time per policy]" in report
    for png in ("wait-cdf.png", "utilization.png", "misdispatch.png", "wait-by-class.png"):
        assert (out / "custom" / png).stat().st_size > 5000
    lines = (out / "custom" / "jobs.csv").read_text().splitlines()
    assert lines[0].startswith("policy,job,team") and len(lines) == 1 + 4 * 4
    assert "report:" in capsys.readouterr().out


def test_bad_input_exits_2_with_the_line(tmp_path, capsys):
    fleet, trace = custom_files(tmp_path)
    trace.write_text("submit,duration,workers,gpu\n0,ten,1,1\n", encoding="utf-8")
    code = main(
        [
            "--dataset",
            "custom",
            "--fleet",
            str(fleet),
            "--trace",
            str(trace),
            "--out",
            str(tmp_path / "o"),
            "--no-plots",
        ]
    )
    assert code == 2
    assert f"{trace}:2: duration: expected a number" in capsys.readouterr().err
    assert main(["--dataset", "custom", "--out", str(tmp_path / "o")]) == 2
    assert "--fleet FILE and --trace FILE" in capsys.readouterr().err
    assert main(["--dataset", "philly", "--policies", "best@magic"]) == 2
    assert main(["--dataset", "mars"]) == 2


def test_dataset_names_expand():
    assert expand("all") == ["philly", "philly-x5", "alibaba", "alibaba-philly-x20"]
    assert expand("philly-x2.5,philly") == ["philly-x2.5", "philly"]


def test_the_shipped_traces_are_complete():
    """The package carries all four public files, whole (the counts their README states)."""
    assert len(load_philly(locate(PACKAGED_DATA_DIR, PHILLY_JOBS))) == 82_247
    assert philly_fleet(locate(PACKAGED_DATA_DIR, PHILLY_VCS)).describe() == (
        "11 members, 352 nodes, 2816 GPUs"
    )
    nodes = alibaba_fleet(locate(PACKAGED_DATA_DIR, ALIBABA_NODES))
    assert sum(len(m.nodes) for m in nodes.members) == 1213 and nodes.total() == 6212
    assert len(load_alibaba_pods(locate(PACKAGED_DATA_DIR, ALIBABA_PODS))) == 8152
    assert (PACKAGED_DATA_DIR / "README.md").is_file()


def test_a_philly_slice_parses_and_replays():
    jobs = prepare(load_philly(locate(PACKAGED_DATA_DIR, PHILLY_JOBS)), limit=400, time_scale=20)
    fleet = philly_fleet(locate(PACKAGED_DATA_DIR, PHILLY_VCS))
    assert fleet.describe() == "11 members, 352 nodes, 2816 GPUs"
    for policy in ("sum", "nodes"):
        result = simulate(fleet, jobs, make_policy(policy, [m.name for m in fleet.members]))
        s = summarize(result)
        assert s["jobs"] == 400 and s["started"] + s["never_started"] == 400
        assert (
            s["completed"]
            + s["never_started"]
            + sum(1 for j in result.jobs if j.first_start is not None and j.end is None)
            == 400
        )
        assert 0 < s["gpu_utilization_mean"] <= 1


@pytest.mark.parametrize("dataset", ["philly", "philly-teams", "alibaba", "alibaba-philly"])
def test_every_dataset_builds_from_the_packaged_traces(dataset):
    """Each dataset finds the traces shipped in the package (gzip) on its own."""
    scenario = build(dataset, Options(data_dir=PACKAGED_DATA_DIR, limit=50))
    assert scenario.trace and scenario.fleet.members


def test_the_command_runs_a_philly_slice(tmp_path, monkeypatch):
    """No --data-dir: the copies shipped in the package are found on their own."""
    monkeypatch.delenv("FLEET_SIM_DATA", raising=False)
    out = tmp_path / "o"
    assert (
        main(
            [
                "--dataset",
                "philly",
                "--limit",
                "300",
                "--policies",
                "sum,nodes",
                "--out",
                str(out),
                "--no-plots",
                "--failures",
                "0.05",
            ]
        )
        == 0
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["scenarios"]["philly"]["policies"]["nodes"]["jobs"] == 300
    assert metrics["settings"]["job failure probability"] == 0.05


def test_data_dir_reads_uncompressed_copies(tmp_path):
    """`--data-dir` names another copy of the traces; plain CSVs are read as well as .csv.gz."""
    data = tmp_path / "data"
    data.mkdir()
    (data / PHILLY_VCS).write_text("vc,node num\nab,2\ncd,1\n", encoding="utf-8")
    (data / PHILLY_JOBS).write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1,66.0,ab\n2017-10-09 07:02:00,10,16,160,cd\n",
        encoding="utf-8",
    )
    out = tmp_path / "o"
    code = main(["--dataset", "philly", "--data-dir", str(data), "--out", str(out), "--no-plots"])
    assert code == 0
    philly = json.loads((out / "metrics.json").read_text())["scenarios"]["philly"]
    assert philly["fleet"] == "2 members, 3 nodes, 24 GPUs"
    assert philly["policies"]["sum"]["jobs"] == 2


def test_help_lists_every_policy_queue_mode_and_reclaim_knob():
    text = " ".join(parser().format_help().split())
    for word in (
        "fgd,",
        "fgd-fleet",
        "+reserve",
        "Priority+reclaim",
        "Block",
        "FIFO",
        "--queue-hold",
        "--queue-reclaim-unplaced",
        "--queue-reclaim-delay",
        "--queue-reclaim-worth",
        "--queue-reclaim-lookahead",
        "--queue-reclaim-min-saving",
        "--queue-reclaim-loss-per-gpu",
        "--checkpoint-interval",
        "--checkpoint-teams",
    ):
        assert word in text, word


def test_loss_per_gpu_parses_a_duration_or_off():
    assert parse_loss_per_gpu("24h") == 86400.0
    assert parse_loss_per_gpu("off") == math.inf
    with pytest.raises(ValueError, match="duration"):
        parse_loss_per_gpu("lots")


def test_checkpoint_teams_parse_and_name_a_bad_entry():
    assert parse_checkpoint_teams("a=30m, b=600") == {"a": 1800.0, "b": 600.0}
    assert parse_checkpoint_teams("") == {}
    with pytest.raises(ValueError, match="TEAM=INTERVAL"):
        parse_checkpoint_teams("a30m")
