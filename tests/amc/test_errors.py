"""What goes wrong is one `error:` or `warning:` line that names the thing, never a traceback;
the exit code says whether nothing (1) or only part (3) could be shown."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fleet.amc.errors import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE
from fleet.kube import JOIN_HINT
from tests.amc.world import (
    POD_COLUMNS,
    World,
    member_kubeconfig,
    pod_row,
    secret_holding,
    secret_path,
    table,
)
from tests.kube.fakes import status

PODS = "/api/v1/namespaces/team-a/pods"


def _pods_everywhere(world: World) -> None:
    for name, member in world.members.items():
        member.on("GET", PODS, table(POD_COLUMNS, [pod_row(f"{name}-pod", 5)]))


def _clusters(out: str) -> list[str]:
    return [line.split()[1] for line in out.splitlines()[1:]]


def test_an_unknown_cluster_alone_is_an_error(world: World) -> None:
    result = world.amc("get", "pods", "-m", "member-9", "-n", "team-a")
    assert (result.code, result.out) == (EXIT_ERROR, "")
    assert result.err.splitlines() == [
        "error: unknown member cluster 'member-9' (members: member-1, member-2)"
    ]


def test_an_unknown_cluster_among_known_ones_is_a_warning(world: World) -> None:
    _pods_everywhere(world)
    result = world.amc("get", "pods", "-m", "member-9,member-2", "-n", "team-a")
    assert result.code == EXIT_INCOMPLETE
    assert result.err.splitlines() == [
        "warning: member-9: unknown member cluster (members: member-1, member-2)"
    ]
    assert _clusters(result.out) == ["member-2"]


def test_an_unknown_kind_is_one_error_line(world: World) -> None:
    result = world.amc("get", "widgets", "-M")
    assert (result.code, result.out) == (EXIT_ERROR, "")
    assert result.err.splitlines() == [
        "error: no member cluster serves a resource type 'widgets' (asked member-1, member-2)"
    ]


@pytest.mark.parametrize("verb", [["describe", "widgets", "w"], ["logs", "widgets/w"]])
def test_an_unknown_kind_on_the_fleet_is_one_error_line(world: World, verb: list[str]) -> None:
    result = world.amc(*verb)
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == ["error: the fleet serves no resource type 'widgets'"]


def test_a_missing_fleet_kubeconfig_is_one_error_line(world: World, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "kubeconfig"
    result = world.amc("get", "pods", "-M", "--kubeconfig", str(missing), kubeconfig=False)
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == [
        f"error: cannot use the fleet's kubeconfig: invalid kubeconfig ({missing}): (file): "
        "cannot read: No such file or directory (pass --kubeconfig or set KUBECONFIG)"
    ]


def test_no_kubeconfig_anywhere_is_one_error_line(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    result = world.amc("describe", "pytorchjob", "x", kubeconfig=False)
    assert result.code == EXIT_ERROR
    (line,) = result.err.splitlines()
    assert line.startswith(
        f"error: cannot use the fleet's kubeconfig: invalid kubeconfig ({tmp_path}"
    )


def test_a_members_secret_that_is_gone_is_a_warning_and_the_rest_is_listed(
    world: World,
) -> None:
    world.fleet.script[("GET", secret_path("member-1"))] = [
        status(404, "NotFound", 'secrets "member-1-kubeconfig" not found')
    ]
    _pods_everywhere(world)
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert result.code == EXIT_INCOMPLETE
    assert result.err.splitlines() == [
        "warning: member-1: its viewer kubeconfig Secret "
        "fleet-system/member-1-viewer-kubeconfig is not "
        "found (`fleet join member-1` makes it; join the member again)"
    ]
    assert _clusters(result.out) == ["member-2"]
    alone = world.amc("get", "pods", "-m", "member-1", "-n", "team-a")
    assert (alone.code, alone.out) == (EXIT_ERROR, "")
    assert alone.err.splitlines() == [
        "error: member-1: its viewer kubeconfig Secret "
        "fleet-system/member-1-viewer-kubeconfig is not "
        "found (`fleet join member-1` makes it; join the member again)"
    ]


def test_a_forbidden_secret_reads_as_forbidden_not_missing(world: World) -> None:
    world.fleet.script[("GET", secret_path("member-1"))] = [
        status(403, "Forbidden", "secrets is forbidden")
    ]
    _pods_everywhere(world)
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert result.code == EXIT_INCOMPLETE
    assert result.err.splitlines() == [
        "warning: member-1: GET Secret fleet-system/member-1-viewer-kubeconfig on fleet: "
        "403 Forbidden: secrets is forbidden (kubectl amc reads the member's viewer kubeconfig "
        "Secret fleet-system/member-1-viewer-kubeconfig: ask for a RoleBinding to "
        "role/fleet-viewer-kubeconfigs -n fleet-system)"
    ]


def test_a_member_kubeconfig_fleet_refuses_names_the_field(world: World) -> None:
    bad = member_kubeconfig()
    bad["users"][0]["user"]["exec"] = {"command": "aws"}
    world.fleet.script[("GET", secret_path("member-2"))] = [secret_holding("member-2", bad)]
    _pods_everywhere(world)
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert result.code == EXIT_INCOMPLETE
    (line,) = result.err.splitlines()
    assert line.startswith("warning: member-2: invalid kubeconfig (Secret fleet-system/")
    assert "users[0].user.exec: exec plugins are not allowed" in line
    assert line.endswith(f"not allowed in a kubeconfig Secret; {JOIN_HINT}")
    assert _clusters(result.out) == ["member-1"]


def test_no_member_answering_is_an_error_after_a_line_for_each(world: World) -> None:
    for member in world.members.values():
        member.on("GET", "/api/v1", httpx.ConnectError("connection refused"))
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert (result.code, result.out) == (EXIT_ERROR, "")
    assert result.err.splitlines() == [
        "warning: DISCOVER v1 on member-1: unreachable: ConnectError: connection refused",
        "warning: DISCOVER v1 on member-2: unreachable: ConnectError: connection refused",
        "error: none of the 2 member clusters asked could answer",
    ]


def test_an_unreachable_fleet_is_one_error_line(world: World) -> None:
    world.fleet.on("GET", "/apis/fleet.dev/v1alpha1", httpx.ConnectError("refused"))
    result = world.amc("get", "pods", "-M")
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == [
        "error: DISCOVER MemberCluster (fleet.dev/v1alpha1) on fleet: unreachable: "
        "ConnectError: refused"
    ]


def test_a_name_nowhere_is_not_found(world: World) -> None:
    jobs = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/nope"
    result = world.amc("get", "pytorchjob", "nope", "-M", "-n", "team-a", "-o", "yaml")
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == [
        'error: pytorchjob "nope" not found in namespace team-a (asked member-1, member-2)'
    ]
    assert len(world.members["member-1"].asked("GET", jobs)) == 1
    table_result = world.amc("get", "pytorchjob", "nope", "-M", "-n", "team-a")
    assert table_result.code == EXIT_ERROR


def test_nothing_listed_is_not_an_error(world: World) -> None:
    for member in world.members.values():
        member.on("GET", PODS, table(POD_COLUMNS, []))
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert (result.code, result.out) == (EXIT_OK, "")


def test_usage_errors_are_argparses(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        world.amc("get", "pods")  # neither -M nor -m
    assert exit_.value.code == EXIT_USAGE
    assert (
        "one of the arguments -M/--all-members -m/--member is required" in capsys.readouterr().err
    )
    result = world.amc("get", "pods", "x", "-M", "-l", "a=b")
    assert result.err.splitlines() == [
        "error: a name and a label selector (-l) cannot be given together"
    ]


def test_help_says_what_the_exit_codes_mean(capsys: pytest.CaptureFixture[str]) -> None:
    from fleet.amc import main

    with pytest.raises(SystemExit):
        main(["get", "--help"])
    out = capsys.readouterr().out
    assert f"{EXIT_INCOMPLETE}  shown what could be, but a member cluster could not be asked" in out


def test_a_member_cluster_that_does_not_parse_is_a_warning_not_a_silence(world: World) -> None:
    broken = World.member_cluster("member-3")
    del broken["spec"]["kubeconfigSecretRef"]
    members = [World.member_cluster("member-1"), World.member_cluster("member-2"), broken]
    world.fleet.script[("GET", "/apis/fleet.dev/v1alpha1/memberclusters")] = [{"items": members}]
    _pods_everywhere(world)
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert result.code == EXIT_INCOMPLETE
    assert result.err.splitlines() == [
        "warning: member-3: MemberCluster member-3 cannot be read: spec.kubeconfigSecretRef: "
        "Field required"
    ]
    assert _clusters(result.out) == ["member-1", "member-2"]
