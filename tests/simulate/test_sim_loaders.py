"""Readers: formats parse as documented and malformed rows are rejected with file and line."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

from fleet.core.resources import CPU, GPU, MEMORY, PODS
from fleet.simulate import (
    DataError,
    alibaba_fleet,
    fill_workload,
    load_alibaba_pods,
    load_fleet,
    load_philly,
    load_trace,
    philly_fleet,
    philly_shape,
)
from fleet.simulate.csvio import locate
from fleet.simulate.faults import parse_duration, parse_outages
from fleet.simulate.trace import prepare

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,12,35412.0,6214e9
2017-10-09 06:13:36,10,16,160,b436b2
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_philly_gang_convention_and_relative_times(tmp_path):
    jobs = load_philly(write(tmp_path, "p.csv", PHILLY))
    assert [j.submit for j in jobs] == [0.0, 33.0, 2932.0]  # sorted by arrival
    assert [j.team for j in jobs] == ["6214e9", "b436b2", "11cb48"]
    assert (jobs[0].shape.workers, jobs[0].shape.per_worker[GPU]) == (2, 8)  # 12 GPUs -> 2 x 8
    assert (jobs[1].shape.workers, jobs[1].shape.per_worker[GPU]) == (2, 8)
    assert (jobs[2].shape.workers, jobs[2].shape.per_worker[GPU]) == (1, 1)
    assert philly_shape(4).workers == 1 and philly_shape(4).per_worker[GPU] == 4
    assert philly_shape(128).workers == 16 and philly_shape(1).per_worker[PODS] == 1


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("2017-10-09 07:01:55,66.0,zero,66.0,x", "num_gpus: expected an integer"),
        ("2017-10-09 07:01:55,66.0,0,66.0,x", "num_gpus: must be at least 1"),
        ("yesterday,66.0,1,66.0,x", "timestamp"),
        ("2017-10-09 07:01:55,-5,1,66.0,x", "duration: must not be negative"),
        ("2017-10-09 07:01:55,nan,1,66.0,x", "duration: expected a finite number"),
        ("2017-10-09 07:01:55,66.0,1", "expected 5 fields, got 3"),
    ],
)
def test_philly_rejects_a_bad_row_with_its_line(tmp_path, row, needle):
    path = write(tmp_path, "p.csv", PHILLY + row + "\n")
    with pytest.raises(DataError) as err:
        load_philly(path)
    assert str(err.value).startswith(f"{path}:5: ") and needle in str(err.value)
    assert err.value.line == 5


def test_header_problems_point_at_line_1(tmp_path):
    with pytest.raises(DataError, match=r"p\.csv:1: missing column\(s\) num_gpus"):
        load_philly(write(tmp_path, "p.csv", "timestamp,duration\n"))
    with pytest.raises(DataError, match=r"t\.csv:1: unknown column\(s\) colour"):
        load_trace(write(tmp_path, "t.csv", "submit,duration,workers,gpu,colour\n"))
    with pytest.raises(DataError, match=r"e\.csv:1: empty file"):
        load_trace(write(tmp_path, "e.csv", ""))
    with pytest.raises(DataError, match="cannot read"):
        load_trace(tmp_path / "missing.csv")


def test_a_gzip_file_reads_as_its_csv_and_a_plain_copy_is_preferred(tmp_path):
    packed = tmp_path / "p.csv.gz"
    packed.write_bytes(gzip.compress(PHILLY.encode()))
    assert locate(tmp_path, "p.csv") == packed  # only the compressed copy exists
    assert load_philly(packed) == load_philly(write(tmp_path, "plain.csv", PHILLY))
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(gzip.compress((PHILLY + "2017-10-09 07:01:55,66.0,0,66.0,x\n").encode()))
    with pytest.raises(DataError, match=r"bad\.csv\.gz:5: num_gpus: must be at least 1"):
        load_philly(bad)
    truncated = tmp_path / "cut.csv.gz"
    truncated.write_bytes(gzip.compress(PHILLY.encode())[:-12])
    with pytest.raises(DataError, match=r"cut\.csv\.gz: cannot read"):
        load_philly(truncated)
    not_gzip = write(tmp_path, "fake.csv.gz", PHILLY)
    with pytest.raises(DataError, match=r"fake\.csv\.gz: cannot read"):
        load_philly(not_gzip)
    assert locate(tmp_path, "p.csv") == packed
    write(tmp_path, "p.csv", PHILLY)
    assert locate(tmp_path, "p.csv") == tmp_path / "p.csv"  # an uncompressed copy wins
    assert locate(tmp_path, "none.csv") == tmp_path / "none.csv"  # the error names what was asked


def test_custom_trace_format(tmp_path):
    path = write(
        tmp_path,
        "t.csv",
        "job,team,submit,duration,workers,gpu,cpu,memory,gpus\n"
        "a,ml,0,3600,4,2,8,64Gi,\n"
        "b,,10,inf,,,500m,,12\n"
        ",cv,5,60,1,,2,4Gi,\n",
    )
    a, c, b = load_trace(path)
    assert (a.id, a.team, a.shape.workers) == ("a", "ml", 4)
    assert a.shape.per_worker == {GPU: 2, CPU: 8000, MEMORY: 64 << 30, PODS: 1}
    assert math.isinf(b.duration) and (b.shape.workers, b.shape.per_worker[GPU]) == (2, 8)
    assert b.shape.per_worker[CPU] == 500 and b.team == "default"
    assert c.id == "job-4" and c.shape.per_worker.get(GPU, 0) == 0


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("x,0,10,2,abc,,,", "gpu: expected an integer, got 'abc'"),
        ("x,0,10,0,1,,,", "workers: must be at least 1"),
        ("x,0,10,,,,,", "workers: required (or give gpus)"),
        ("x,0,10,2,1,,,8", "give either gpus or workers and gpu"),
        ("x,0,10,1,1,lots,,", "cpu: unparsable quantity"),
        ("x,0,10,1,0,,,", "a worker must ask for something"),
        ("a,0,10,1,1,,,", "job: 'a' appears twice"),
    ],
)
def test_custom_trace_rejects_bad_rows(tmp_path, row, needle):
    head = "job,submit,duration,workers,gpu,cpu,memory,gpus\na,0,10,1,1,,,\n"
    path = write(tmp_path, "t.csv", head + row + "\n")
    with pytest.raises(DataError) as err:
        load_trace(path)
    assert str(err.value).startswith(f"{path}:3: ") and needle in str(err.value)


def test_fleet_csv_and_yaml(tmp_path):
    csv_path = write(
        tmp_path,
        "f.csv",
        "member,nodes,gpu,cpu,memory,labels\n"
        "east,2,8,96,768Gi,zone=a;pool=gpu\n"
        "east,1,0,32,,\n"
        "west,3,4,,,\n",
    )
    fleet = load_fleet(csv_path)
    assert [m.name for m in fleet.members] == ["east", "west"]
    assert [len(m.nodes) for m in fleet.members] == [3, 3] and fleet.total(GPU) == 28
    first = fleet.members[0].nodes[0]
    assert first.labels == {"zone": "a", "pool": "gpu"} and first.allocatable[PODS] == 110
    assert first.allocatable[CPU] == 96000 and len({n.name for n in fleet.members[0].nodes}) == 3

    yaml_path = write(
        tmp_path,
        "f.yaml",
        "members:\n"
        "  - name: east\n"
        "    labels: {region: cn-hangzhou}\n"
        "    nodes:\n"
        "      - {count: 2, gpu: 8, cpu: 96, memory: 768Gi, labels: {zone: a}}\n"
        "  - name: west\n"
        "    nodes:\n"
        "      - {nodes: 1, gpu: 4, pods: 32}\n",
    )
    fleet = load_fleet(yaml_path)
    assert fleet.total(GPU) == 20 and fleet.members[0].labels == {"region": "cn-hangzhou"}
    assert fleet.members[1].nodes[0].allocatable[PODS] == 32


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("member,nodes,gpu\nm,2,eight\n", 2, "gpu: expected an integer"),
        ("member,nodes,gpu\nm,0,8\n", 2, "nodes: must be at least 1"),
        ("member,nodes,gpu,labels\nm,1,8,zone\n", 2, "labels: expected key=value"),
        ("member,gpu\n,8\n", 2, "member: empty"),
    ],
)
def test_fleet_csv_rejects_bad_rows(tmp_path, text, line, needle):
    path = write(tmp_path, "f.csv", text)
    with pytest.raises(DataError) as err:
        load_fleet(path)
    assert str(err.value).startswith(f"{path}:{line}: ") and needle in str(err.value)


def test_fleet_yaml_errors_name_the_line(tmp_path):
    path = write(
        tmp_path,
        "f.yaml",
        "members:\n  - name: east\n    nodes:\n      - {count: 2, gpu: 8}\n"
        "      - {count: two, gpu: 8}\n",
    )
    with pytest.raises(DataError, match=r"f\.yaml:5: nodes: expected an integer"):
        load_fleet(path)
    path = write(tmp_path, "g.yaml", "members:\n  - name: a\n    nodes: []\n    colour: red\n")
    with pytest.raises(DataError, match=r"g\.yaml:2: unknown field\(s\) colour"):
        load_fleet(path)
    path = write(tmp_path, "h.yaml", "members: [\n")
    with pytest.raises(DataError, match=r"h\.yaml:\d+: not YAML"):
        load_fleet(path)


def test_public_formats_parse(tmp_path):
    vcs = write(tmp_path, "vcs.csv", "vc,node num\nab,2\ncd,1\n")
    fleet = philly_fleet(vcs)
    assert fleet.describe() == "2 members, 3 nodes, 24 GPUs"
    nodes = write(
        tmp_path,
        "nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,96000,393216,8,G2\n"
        "n2,96000,393216,8,G2\n",
    )
    fleet = alibaba_fleet(nodes)
    assert [m.name for m in fleet.members] == ["g2", "p100"]  # largest first
    pods = write(
        tmp_path,
        "pods.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n"
        "p0,12000,16384,1,460,,LS,Running,0,100,0\n"
        "p1,6000,12288,0,0,,BE,Pending,10,50,\n",
    )
    records = load_alibaba_pods(pods)
    assert records[0].requests[GPU] == 1 and records[0].gpu_milli == 460  # a share = 1 GPU
    jobs = fill_workload(records, 18, target=1.0, seed=1)
    assert sum(j.shape.gpus for j in jobs) >= 18 and all(math.isinf(j.duration) for j in jobs)
    assert [j.submit for j in jobs] == [float(i) for i in range(len(jobs))]
    bad = write(tmp_path, "bad.csv", "vc,node num\nab,-1\n")
    with pytest.raises(DataError, match=r"bad\.csv:2: node num: must be at least 1"):
        philly_fleet(bad)
    bad = write(
        tmp_path,
        "badpods.csv",
        "name,cpu_milli,memory_mib,num_gpu,creation_time,deletion_time\np,1,1,1,50,10\n",
    )
    with pytest.raises(DataError, match=r"badpods\.csv:2: deletion_time is before"):
        load_alibaba_pods(bad)


def test_prepare_limits_and_compresses(tmp_path):
    jobs = load_philly(write(tmp_path, "p.csv", PHILLY))
    fast = prepare(jobs, time_scale=2.0, limit=2)
    assert [j.submit for j in fast] == [0.0, 16.5] and fast[0].duration == jobs[0].duration


def test_fault_options_parse():
    assert parse_duration("90") == 90 and parse_duration("15m") == 900
    assert parse_duration("2d") == 172800
    outages = parse_outages("a@1h+30m,b@0+2h", ["a", "b"], span=10)
    assert [(o.member, o.start, o.duration) for o in outages] == [("b", 0, 7200), ("a", 3600, 1800)]
    random_ones = parse_outages("random:3", ["a", "b"], span=1000, seed=4, duration=60)
    assert len(random_ones) == 3 and random_ones == parse_outages(
        "random:3", ["a", "b"], span=1000, seed=4, duration=60
    )
    with pytest.raises(ValueError, match="unknown member"):
        parse_outages("zz@1h+1h", ["a"], span=10)
    with pytest.raises(ValueError, match="MEMBER@START"):
        parse_outages("a@1h", ["a"], span=10)
