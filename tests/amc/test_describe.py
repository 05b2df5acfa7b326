"""`kubectl amc describe`: the fleet job, its GangBinding and its member copy, in one view."""

from __future__ import annotations

from typing import Any

import httpx

from fleet.amc.errors import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_OK
from tests.amc.samples import (
    BINDING,
    EVENTS,
    FAILED_OVER,
    JOB,
    NS,
    PODS,
    binding,
    condition,
    event,
    job,
)
from tests.amc.world import POD_COLUMNS, World, ago, pod_row, secret_path, table
from tests.kube.fakes import status


def _fleet_side(world: World, the_binding: dict[str, Any]) -> None:
    world.fleet.on(
        "GET",
        JOB,
        job(
            "fleet-uid",
            [condition("Scheduled", "Success", 100), condition("Running", "Running", 60)],
            annotations={"fleet.dev/policy": "PropagationPolicy/team-a/gang"},
        ),
    )
    world.fleet.on("GET", BINDING, the_binding)
    scheduled = (
        "Binding has been scheduled successfully. Result: {member-2:0,[{master 1} {worker 2}]}"
    )
    world.fleet.on(
        "GET",
        EVENTS,
        {
            "items": [
                event(
                    "ScheduleBindingSucceed",
                    99,
                    scheduled,
                    "pytorch-test",
                    "fleet-uid",
                    source="default-scheduler",
                )
            ]
        },
    )


def _member_side(world: World) -> None:
    member = world.members["member-2"]
    managed = {"fleet.dev/managed-by": "fleet-1"}
    member.on("GET", JOB, job("copy-uid", [condition("Running", "Running", 60)], labels=managed))
    owner = [{"uid": "copy-uid", "kind": "PyTorchJob", "name": "pytorch-test"}]
    pods = [
        pod_row(name, 80, uid=f"{name}-uid", ownerReferences=owner)
        for name in ("pytorch-test-master-0", "pytorch-test-worker-0")
    ]
    pods.append(pod_row("someone-else-0", 80, uid="other"))
    member.on("GET", PODS, table(POD_COLUMNS, pods))

    def events(request: httpx.Request) -> dict[str, Any]:
        selector = request.url.params["fieldSelector"]
        if selector == "involvedObject.uid=copy-uid":
            return {
                "items": [
                    event(
                        "SuccessfulCreatePod",
                        85,
                        "Created pod: pytorch-test-master-0",
                        "pytorch-test",
                        "copy-uid",
                        source="pytorchjob-controller",
                    )
                ]
            }
        assert selector == "involvedObject.kind=Pod"
        return {
            "items": [
                event(
                    "Scheduled",
                    84,
                    "Successfully assigned team-a/pytorch-test-worker-0 to n1",
                    "pytorch-test-worker-0",
                    "pytorch-test-worker-0-uid",
                    source="default-scheduler",
                ),
                event("Scheduled", 84, "assigned elsewhere", "someone-else-0", "other"),
            ]
        }

    member.on("GET", EVENTS, events)


def _section(out: str, title: str) -> list[str]:
    """The lines of a section, from its title to the next line indented no deeper."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{title}:"))
    depth = len(lines[start]) - len(lines[start].lstrip())
    body = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.strip() or len(line) - len(line.lstrip()) <= depth:
            break
        body.append(line)
    return body


def test_one_view_of_the_job_its_binding_and_its_copy(world: World) -> None:
    _fleet_side(world, FAILED_OVER)
    _member_side(world)
    result = world.amc("describe", "pytorchjob", "pytorch-test", "-n", NS)
    assert result.code == EXIT_OK, result.err
    out = result.out
    head = out.splitlines()[:6]
    assert [line.split(":", 1)[0] for line in head] == [
        "Name", "Namespace", "Kind", "Created", "Claimed by", "State (fleet)",
    ]  # fmt: skip
    assert head[2].split() == ["Kind:", "PyTorchJob", "(kubeflow.org/v1)"]
    assert head[5].split() == ["State", "(fleet):", "Running"]
    assert [line.split()[:2] for line in _section(out, "Conditions")[2:]] == [
        ["Scheduled", "True"],
        ["Running", "True"],
    ]
    (fleet_event,) = _section(out, "Events (fleet)")[2:]
    assert fleet_event.split()[:4] == [
        "Normal",
        "ScheduleBindingSucceed",
        "99s",
        "default-scheduler",
    ]

    binding_lines = _section(out, "GangBinding")
    assert binding_lines[0] == "GangBinding:  pytorchjob-pytorch-test"
    facts = dict(line.strip().split(":", 1) for line in binding_lines[1:7])
    assert {k: v.strip() for k, v in facts.items()} == {
        "Cluster": "member-2",
        "Phase": "Running",
        "Policy": "PropagationPolicy team-a/gang",
        "Affinity group": "primary",
        "Failovers": "1",
        "Failover": "after 30s, purge Directly, at most 3",
    }
    assert binding_lines[7] == "  Gang (minMember 3):"  # no failover clock is running
    assert [line.split() for line in _section(out, "Gang (minMember 3)")[1:]] == [
        ["ROLE", "PODS", "REQUESTS", "EACH"],
        ["Master", "1", "cpu=1,", "nvidia.com/gpu=1"],
        ["Worker", "2", "cpu=1,", "nvidia.com/gpu=1"],
    ]
    assert [line.split() for line in _section(out, "Placement history")[2:]] == [
        ["member-1", "10m", "ago", "100s", "ago", "ApplicationFailure"],
        ["member-2", "100s", "ago", "-"],
    ]
    assert [line.split() for line in _section(out, "Failover history")[2:]] == [
        ["member-1", "ApplicationFailure", "100s", "ago"]
    ]
    assert [line.split() for line in _section(out, "Excluded clusters")[2:]] == [
        ["member-1", "for", "good", "failed", "over", "from", "it"]
    ]
    (eviction,) = _section(out, "Evictions pending")[2:]
    assert eviction.split(None, 6) == [
        "member-1", "ApplicationFailure", "Gracefully", "100s", "ago", "600s", "the copy Failed",
    ]  # fmt: skip
    assert _section(out, "Pending reasons") == ["  Pending reasons:  <none>"]
    assert [line.split() for line in _section(out, "Member status")[2:]] == [
        ["member-2", "True", "Healthy", "Running"]
    ]

    copy = _section(out, "Member copy")
    assert copy[0] == "Member copy:  member-2"
    assert copy[1].split() == ["Managed", "by:", "fleet-1"]
    assert copy[2].split() == ["State:", "Running"]
    assert copy[3].split() == ["Replicas:", "Master:", "active", "1;", "Worker:", "active", "2"]
    assert [line.split()[0] for line in _section(out, "Pods")[2:]] == [
        "pytorch-test-master-0",
        "pytorch-test-worker-0",
    ]  # someone-else-0 belongs to another owner
    (copy_event,) = _section(out, "Events")[2:]
    assert copy_event.split()[:4] == [
        "Normal",
        "SuccessfulCreatePod",
        "85s",
        "pytorchjob-controller",
    ]
    (pod_event,) = _section(out, "Pod events")[2:]
    assert pod_event.split()[:5] == [
        "Normal", "Scheduled", "84s", "pytorch-test-worker-0", "default-scheduler",
    ]  # fmt: skip


def test_a_held_gang_says_why_each_cluster_was_rejected(world: World) -> None:
    pending = binding(
        phase="Pending",
        pendingReasons=[
            {
                "cluster": "member-1",
                "code": "Insufficient",
                "reason": "needs 3 pods of 1 GPU; 2 fit",
            },
            {"cluster": "member-2", "code": "NotReady", "reason": "member is not Ready"},
        ],
    )
    _fleet_side(world, pending)
    result = world.amc("describe", "pytorchjob", "pytorch-test", "-n", NS)
    assert result.code == EXIT_OK
    assert [line.split(None, 2) for line in _section(result.out, "Pending reasons")[2:]] == [
        ["member-1", "Insufficient", "needs 3 pods of 1 GPU; 2 fit"],
        ["member-2", "NotReady", "member is not Ready"],
    ]
    assert result.out.splitlines()[-1] == "Member copy:  <none> (not placed yet; phase Pending)"
    assert world.dialed == ["fleet"]  # no member was asked


def test_a_held_gang_in_a_large_fleet_says_how_many_members_gave_each_code(world: World) -> None:
    """The binding names only the closest members (pendingReasons) and counts every member's
    code (pendingReasonCounts): the section's title says so."""
    pending = binding(
        phase="Pending",
        pendingReasons=[
            {"cluster": "member-1", "code": "Insufficient", "reason": "2 of 3 pods fit"},
            {"cluster": "member-2", "code": "Insufficient", "reason": "1 of 3 pods fit"},
        ],
        pendingReasonCounts={"NotReady": 10, "TaintUntolerated": 290, "Insufficient": 700},
    )
    _fleet_side(world, pending)
    result = world.amc("describe", "pytorchjob", "pytorch-test", "-n", NS)
    assert result.code == EXIT_OK
    title = (
        "Pending reasons (2 closest of 1000: NotReady 10, TaintUntolerated 290, Insufficient 700)"
    )
    _, _, *rows = _section(result.out, title)
    assert [line.split(None, 1)[0] for line in rows] == ["member-1", "member-2"]


def test_repeated_events_say_how_often(world: World) -> None:
    _fleet_side(world, FAILED_OVER)
    world.fleet.script[("GET", EVENTS)] = [
        {
            "items": [
                event(
                    "ScheduleBindingFailed",
                    30,
                    "no cluster fits",
                    "pytorch-test",
                    "fleet-uid",
                    type="Warning",
                    count=4,
                    first=400,
                )
            ]
        }
    ]
    _member_side(world)
    result = world.amc("describe", "pytorchjob", "pytorch-test", "-n", NS)
    (line,) = _section(result.out, "Events (fleet)")[2:]
    assert line.split()[:6] == ["Warning", "ScheduleBindingFailed", "30s", "(x4", "over", "6m40s)"]


def test_a_job_no_policy_claimed_has_no_binding(world: World) -> None:
    world.fleet.on("GET", JOB, job("fleet-uid", []))
    world.fleet.on("GET", EVENTS, {"items": []})
    result = world.amc("describe", "pytorchjob", "pytorch-test", "-n", NS)
    assert result.code == EXIT_OK
    assert result.out.splitlines()[-1] == (
        "GangBinding:  pytorchjob-pytorch-test "
        "(none: no Gang PropagationPolicy has claimed the job yet)"
    )


def test_an_unreachable_member_still_shows_the_fleet_side(world: World) -> None:
    _fleet_side(world, FAILED_OVER)
    world.members["member-2"].on("GET", "/apis/kubeflow.org/v1", httpx.ConnectError("refused"))
    result = world.amc("describe", "pytorchjob", "pytorch-test", "-n", NS)
    assert result.code == EXIT_INCOMPLETE
    problem = (
        "DISCOVER PyTorchJob (kubeflow.org/v1) on member-2: unreachable: ConnectError: refused"
    )
    assert result.out.splitlines()[-1] == f"Member copy:  member-2 (cannot be read: {problem})"
    assert _section(result.out, "GangBinding")[1].split() == ["Cluster:", "member-2"]
    assert result.err.splitlines() == [f"warning: {problem}"]


def test_a_member_whose_secret_is_gone(world: World) -> None:
    _fleet_side(world, FAILED_OVER)
    world.fleet.script[("GET", secret_path("member-2"))] = [status(404, "NotFound", "gone")]
    result = world.amc("describe", "pytorchjob", "pytorch-test", "-n", NS)
    assert result.code == EXIT_INCOMPLETE
    assert result.err.splitlines() == [
        "warning: member-2: its viewer kubeconfig Secret "
        "fleet-system/member-2-viewer-kubeconfig is not "
        "found (`fleet join member-2` makes it; join the member again)"
    ]


def test_a_missing_fleet_object(world: World) -> None:
    result = world.amc("describe", "pytorchjob", "nope", "-n", NS)
    assert (result.code, result.out) == (EXIT_ERROR, "")
    assert result.err.splitlines() == [
        'error: PyTorchJob "nope" in namespace team-a not found on the fleet'
    ]


def test_running_failover_clocks_are_shown(world: World) -> None:
    failing = binding(
        spec={"clusters": [{"name": "member-2", "replicas": 3}]},
        phase="Running",
        unhealthySince=ago(20),
    )
    _fleet_side(world, failing)
    _member_side(world)
    result = world.amc("describe", "pytorchjob", "pytorch-test", "-n", NS)
    facts = [line.split(":", 1) for line in _section(result.out, "GangBinding")[1:8]]
    assert ["Unhealthy since", "20s ago"] in [[k.strip(), v.strip()] for k, v in facts]
