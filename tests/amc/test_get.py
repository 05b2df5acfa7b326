"""`kubectl amc get`: the members' own tables under one header, as the seeds print them."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
import yaml

from fleet.amc.errors import EXIT_INCOMPLETE, EXIT_OK
from tests.amc.world import (
    MANAGED,
    POD_COLUMNS,
    World,
    ago,
    job_table,
    pod_row,
    row,
    table,
)

JOBS = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs"
PODS = "/api/v1/namespaces/team-a/pods"


def test_the_seeds_table_with_cluster_after_name_and_adoption_last(world: World) -> None:
    world.members["member-1"].on(
        "GET",
        JOBS,
        job_table(row(["pytorch-test", "Running", ago(383)], "pytorch-test", labels=MANAGED)),
    )
    world.members["member-2"].on(
        "GET", JOBS, job_table(row(["by-hand", "Created", ago(7200)], "by-hand"))
    )
    result = world.amc("get", "pytorchjob", "-M", "-n", "team-a")
    assert result.code == EXIT_OK, result.err
    assert result.out.splitlines() == [
        "NAME           CLUSTER    STATE     AGE     ADOPTION",
        "pytorch-test   member-1   Running   6m23s   Y",
        "by-hand        member-2   Created   120m    N",
    ]
    (asked,) = world.members["member-1"].asked("GET", JOBS)
    assert "as=Table" in asked.headers["Accept"]
    assert asked.url.params["includeObject"] == "Metadata"


def test_pods_have_no_adoption_column_and_wide_adds_the_extra_columns(world: World) -> None:
    world.members["member-1"].on(
        "GET", PODS, table(POD_COLUMNS, [pod_row("pytorch-test-master-0", 436)])
    )
    world.members["member-2"].on("GET", PODS, table(POD_COLUMNS, []))
    plain = world.amc("get", "pod", "-M", "-n", "team-a")
    assert plain.out.splitlines() == [
        "NAME                    CLUSTER    READY   STATUS    RESTARTS   AGE",
        "pytorch-test-master-0   member-1   1/1     Running   0          7m16s",
    ]
    wide = world.amc("get", "pod", "-M", "-n", "team-a", "-o", "wide")
    assert wide.out.splitlines()[0].split() == [
        "NAME", "CLUSTER", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
    ]  # fmt: skip
    assert wide.out.splitlines()[1].split()[-2:] == ["10.0.0.1", "node-0"]


@pytest.mark.parametrize(
    "word", ["pytorchjob", "pytorchjobs", "PyTorchJob", "pytorchjobs.kubeflow.org"]
)
def test_any_word_discovery_knows_for_the_kind(world: World, word: str) -> None:
    world.members["member-1"].on("GET", JOBS, job_table(row(["j", "Running", ago(5)], "j")))
    world.members["member-2"].on("GET", JOBS, job_table())
    result = world.amc("get", word, "-M", "-n", "team-a")
    assert result.code == EXIT_OK
    assert result.out.split()[:5] == ["NAME", "CLUSTER", "STATE", "AGE", "ADOPTION"]


def test_short_names_resolve_too(world: World) -> None:
    world.members["member-1"].on("GET", PODS, table(POD_COLUMNS, [pod_row("p-0", 5)]))
    result = world.amc("get", "po", "-m", "member-1", "-n", "team-a")
    assert result.out.splitlines()[1].split()[:2] == ["p-0", "member-1"]


def test_only_the_members_named_are_asked(world: World) -> None:
    world.members["member-2"].on("GET", PODS, table(POD_COLUMNS, [pod_row("p-0", 5)]))
    result = world.amc("get", "pods", "-m", "member-2", "-n", "team-a")
    assert result.code == EXIT_OK
    assert [line.split()[1] for line in result.out.splitlines()[1:]] == ["member-2"]
    assert world.members["member-1"].requests == []
    assert "member-1" not in world.dialed


def test_all_namespaces_puts_namespace_first_and_asks_cluster_wide(world: World) -> None:
    every = "/api/v1/pods"
    world.members["member-1"].on(
        "GET", every, table(POD_COLUMNS, [pod_row("a-0", 5, namespace="team-a")])
    )
    world.members["member-2"].on(
        "GET", every, table(POD_COLUMNS, [pod_row("b-0", 5, namespace="team-b")])
    )
    result = world.amc("get", "pods", "-M", "-A")
    lines = [line.split()[:3] for line in result.out.splitlines()]
    assert lines == [
        ["NAMESPACE", "NAME", "CLUSTER"],
        ["team-a", "a-0", "member-1"],
        ["team-b", "b-0", "member-2"],
    ]


def test_a_label_selector_goes_to_every_member(world: World) -> None:
    for member in world.members.values():
        member.on("GET", PODS, table(POD_COLUMNS, []))
    result = world.amc("get", "pods", "-M", "-n", "team-a", "-l", "app=x,tier!=db")
    assert result.code == EXIT_OK
    assert result.err.splitlines() == [
        "No resources found in namespace team-a (asked member-1, member-2)."
    ]
    for member in world.members.values():
        (asked,) = member.asked("GET", PODS)
        assert asked.url.params["labelSelector"] == "app=x,tier!=db"


def test_output_name_says_the_cluster_too(world: World) -> None:
    world.members["member-1"].on(
        "GET", JOBS, job_table(row(["pytorch-test", "Running", ago(5)], "pytorch-test"))
    )
    world.members["member-2"].on("GET", JOBS, job_table())
    world.members["member-2"].on("GET", PODS, table(POD_COLUMNS, [pod_row("p-0", 5)]))
    world.members["member-1"].on("GET", PODS, table(POD_COLUMNS, []))
    jobs = world.amc("get", "pytorchjob", "-M", "-n", "team-a", "-o", "name")
    assert jobs.out.splitlines() == ["member-1/pytorchjob.kubeflow.org/pytorch-test"]
    pods = world.amc("get", "pods", "-M", "-n", "team-a", "-o", "name")
    assert pods.out.splitlines() == ["member-2/pod/p-0"]


def _job(name: str, cluster_label: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"where": cluster_label}},
        "spec": {},
    }


def test_yaml_of_one_object_is_the_object_itself_as_kubectl_prints_it(world: World) -> None:
    stored = _job("pytorch-test", "m2")
    stored["metadata"]["managedFields"] = [{"manager": "fleet", "operation": "Apply"}]
    world.members["member-2"].on("GET", f"{JOBS}/pytorch-test", stored)
    result = world.amc(
        "get", "pytorchjob", "pytorch-test", "-m", "member-1,member-2", "-n", "team-a", "-oyaml"
    )
    assert result.code == EXIT_OK
    assert yaml.safe_load(result.out) == _job("pytorch-test", "m2")


def test_json_of_a_list_holds_every_members_items_with_their_kind(world: World) -> None:
    item = {k: v for k, v in _job("a", "m1").items() if k not in ("apiVersion", "kind")}
    world.members["member-1"].on("GET", JOBS, {"kind": "PyTorchJobList", "items": [item]})
    world.members["member-2"].on(
        "GET", JOBS, {"kind": "PyTorchJobList", "items": [_job("b", "m2")]}
    )
    result = world.amc("get", "pytorchjob", "-M", "-n", "team-a", "-o", "json")
    listing = json.loads(result.out)
    assert listing["kind"] == "List"
    assert [(i["kind"], i["metadata"]["name"]) for i in listing["items"]] == [
        ("PyTorchJob", "a"),
        ("PyTorchJob", "b"),
    ]


def test_members_are_asked_at_the_same_time(world: World) -> None:
    """Each member's answer waits until every member has been asked: asked one after the
    other, the first would wait for a second that never comes, and answer 500."""
    both = threading.Barrier(2, timeout=10)

    def answer_when_both_asked(_request: httpx.Request) -> Any:
        try:
            both.wait()
        except threading.BrokenBarrierError:
            return httpx.Response(500, json={"message": "asked alone"})
        return table(POD_COLUMNS, [pod_row("p-0", 5)])

    for member in world.members.values():
        member.on("GET", PODS, answer_when_both_asked)
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert result.code == EXIT_OK, result.err
    assert [line.split()[1] for line in result.out.splitlines()[1:]] == ["member-1", "member-2"]


def test_a_member_without_the_kind_is_noted_and_the_others_listed(world: World) -> None:
    world.members["member-2"].discovery.pop("/apis/kubeflow.org/v1")
    world.members["member-2"].discovery["/apis"] = {"kind": "APIGroupList", "groups": []}
    world.members["member-1"].on(
        "GET", JOBS, job_table(row(["pytorch-test", "Running", ago(5)], "pytorch-test"))
    )
    result = world.amc("get", "pytorchjob", "-M", "-n", "team-a")
    assert result.code == EXIT_OK  # member-2 answered: it cannot hold any
    assert result.err.splitlines() == ["warning: member-2: serves no resource type 'pytorchjob'"]
    assert [line.split()[1] for line in result.out.splitlines()[1:]] == ["member-1"]


def test_one_object_by_name_across_members(world: World) -> None:
    world.members["member-1"].on(
        "GET",
        f"{JOBS}/pytorch-test",
        job_table(row(["pytorch-test", "Running", ago(5)], "pytorch-test", labels=MANAGED)),
    )
    result = world.amc("get", "pytorchjob", "pytorch-test", "-M", "-n", "team-a")
    assert result.code == EXIT_OK
    assert result.out.splitlines()[1].split() == [
        "pytorch-test", "member-1", "Running", "5s", "Y",
    ]  # fmt: skip


def test_an_unreachable_member_is_one_warning_and_the_exit_code_says_so(world: World) -> None:
    world.members["member-1"].on("GET", "/api/v1", httpx.ConnectError("connection refused"))
    world.members["member-2"].on("GET", PODS, table(POD_COLUMNS, [pod_row("p-0", 5)]))
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert result.code == EXIT_INCOMPLETE
    assert result.err.splitlines() == [
        "warning: DISCOVER v1 on member-1: unreachable: ConnectError: connection refused"
    ]
    assert [line.split()[1] for line in result.out.splitlines()[1:]] == ["member-2"]


def test_a_row_whose_metadata_is_null_is_not_a_crash(world: World) -> None:
    nameless = {"cells": ["ghost", "1/1", "Running", 0, ago(5), "", ""], "object": None}
    no_metadata = pod_row("p-1", 5)
    no_metadata["object"]["metadata"] = None
    world.members["member-1"].on(
        "GET", PODS, table(POD_COLUMNS, [pod_row("p-0", 5), no_metadata, nameless])
    )
    world.members["member-2"].on("GET", PODS, table(POD_COLUMNS, []))
    names = world.amc("get", "pods", "-M", "-n", "team-a", "-o", "name")
    assert (names.code, names.out.splitlines()) == (EXIT_OK, ["member-1/pod/p-0"])
    shown = world.amc("get", "pods", "-M", "-n", "team-a")
    assert shown.code == EXIT_OK
    assert [line.split()[0] for line in shown.out.splitlines()[1:]] == ["p-0", "p-1", "ghost"]


def test_all_namespaces_refused_is_asked_where_fleet_dispatched(world: World) -> None:
    """The viewer reads only in the namespaces fleet dispatched to: a refused cluster-wide list
    is asked again in each namespace a GangBinding lives in; one it may not read there (fleet
    never dispatched there in that member) is passed over."""
    from tests.kube.fakes import status

    world.fleet.on(
        "GET",
        "/apis/fleet.dev/v1alpha1/gangbindings",
        {
            "items": [
                {"metadata": {"name": "pytorchjob-a", "namespace": "team-a"}},
                {"metadata": {"name": "pytorchjob-b", "namespace": "team-b"}},
            ]
        },
    )
    refused = status(403, "Forbidden", 'pods is forbidden: cannot list resource "pods"')
    for name, member in world.members.items():
        member.on("GET", "/api/v1/pods", refused)
        member.on("GET", "/api/v1/namespaces/team-b/pods", refused)
        member.on(
            "GET",
            "/api/v1/namespaces/team-a/pods",
            table(POD_COLUMNS, [pod_row(f"{name}-0", 5, namespace="team-a")]),
        )
    world.members["member-2"].script[("GET", "/api/v1/namespaces/team-b/pods")] = [
        table(POD_COLUMNS, [pod_row("b-0", 5, namespace="team-b")])
    ]

    result = world.amc("get", "pods", "-M", "-A")

    assert result.code == EXIT_OK, result.err
    lines = sorted(line.split()[:3] for line in result.out.splitlines()[1:])
    assert lines == [
        ["team-a", "member-1-0", "member-1"],
        ["team-a", "member-2-0", "member-2"],
        ["team-b", "b-0", "member-2"],
    ]


def test_a_namespace_the_viewer_may_not_read_in_a_member_holds_nothing_there(
    world: World,
) -> None:
    """Refused in one namespace, a member's viewer was never bound there: fleet never dispatched
    there, so it holds nothing of fleet's, listed as empty (no warning, the answer complete)."""
    from tests.kube.fakes import status

    world.members["member-1"].on("GET", PODS, table(POD_COLUMNS, [pod_row("p-0", 5)]))
    world.members["member-2"].on("GET", PODS, status(403, "Forbidden", "pods is forbidden"))
    result = world.amc("get", "pods", "-M", "-n", "team-a")
    assert (result.code, result.err) == (EXIT_OK, "")
    assert [line.split()[:2] for line in result.out.splitlines()[1:]] == [["p-0", "member-1"]]
