"""`kubectl amc` against the sandbox: get, describe and logs of a PyTorchJob fleet really
dispatched, and a member that cannot be asked.

The pods' logs come from kwok, the fake nodes' kubelet: every container "prints" the canned
training log in fleet/sandbox/assets/kwok-container.log, read through the member API server's
pods/log exactly as `kubectl logs` reads it.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fleet.amc import main
from fleet.amc.errors import EXIT_ERROR, EXIT_INCOMPLETE, EXIT_OK
from fleet.api.membership import viewer_binding
from fleet.install import single_context
from fleet.testing.kube import wait_until
from fleet.testing.workloads import JOB_NAME_LABEL, gang_policy, pytorchjob

from .conftest import FLEET_ID, MEMBERS, NAMESPACE, Amc, Fleet

CANNED_LOG = Path(__file__).parents[1] / "fleet" / "sandbox" / "assets" / "kwok-container.log"
#: The exec credential plugin these tests log in with (a TokenRequest, printed as kubectl's).
PLUGIN = Path(__file__).parent / "exec_credential_plugin.py"


def _log_lines() -> list[str]:
    """The canned log as a container prints it: CRI's time, stream and tag taken off."""
    return [line.split(" ", 3)[3] for line in CANNED_LOG.read_text().splitlines()]


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


def _dispatch(live: Fleet, namespace: str, add_nodes: object) -> str:
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})  # type: ignore[operator]
    live.api.create(gang_policy("gang", namespace))
    job = pytorchjob(
        "pytorch-test", namespace=namespace, node_selector={"test": namespace}, workers=2, gpus=1
    )
    live.api.create(job)
    wait_until(lambda: live.target(namespace, "pytorch-test"), what="a placement")
    member = live.target(namespace, "pytorch-test")
    assert member == "member-2"
    live.wait_running(namespace, "pytorch-test", member)
    return member


def test_get_describe_and_logs_of_a_dispatched_job(
    live: Fleet, namespace: str, add_nodes: object, amc: Amc
) -> None:
    member = _dispatch(live, namespace, add_nodes)
    pods = ["pytorch-test-master-0", "pytorch-test-worker-0", "pytorch-test-worker-1"]

    # -- get: the seeds' two tables --------------------------------------------------------
    code, out, err = amc("get", "pytorchjob", "-M", "-n", namespace)
    assert code == EXIT_OK, err
    header, *rows = _rows(out)
    assert header == ["NAME", "CLUSTER", "STATE", "AGE", "ADOPTION"]
    assert [(r[0], r[1], r[2], r[-1]) for r in rows] == [("pytorch-test", member, "Running", "Y")]

    code, out, err = amc("get", "pod", "-M", "-n", namespace)
    assert code == EXIT_OK, err
    header, *rows = _rows(out)
    assert header == ["NAME", "CLUSTER", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (pod, member, "1/1", "Running") for pod in pods
    ]

    # -m, -o name, -o wide, -l, -A, short names
    code, out, _err = amc("get", "po", "-m", f"member-1,{member}", "-n", namespace, "-o", "name")
    assert (code, out.splitlines()) == (EXIT_OK, [f"{member}/pod/{pod}" for pod in pods])
    code, out, _err = amc("get", "pods", "-m", member, "-n", namespace, "-o", "wide")
    header, *rows = _rows(out)
    assert header[:2] == ["NAME", "CLUSTER"] and "NODE" in header and "IP" in header
    node = header.index("NODE")
    ours = live.clusters[member].items("v1", "Node", None, f"test={namespace}")
    assert rows and {r[node] for r in rows} <= {n["metadata"]["name"] for n in ours}
    code, out, _err = amc(
        "get", "pod", "-M", "-n", namespace, "-l", f"{JOB_NAME_LABEL}=pytorch-test,"
        "training.kubeflow.org/replica-type=worker", "-o", "name",
    )  # fmt: skip
    assert out.splitlines() == [f"{member}/pod/{pod}" for pod in pods[1:]]
    code, out, err = amc("get", "pod", "-M", "-n", namespace, "-l", "no-such=label")
    assert (code, out) == (EXIT_OK, "")
    assert err.startswith(f"No resources found in namespace {namespace}")
    code, out, _err = amc("get", "pytorchjobs.kubeflow.org", "-M", "-A")
    header, *rows = _rows(out)
    assert header[:3] == ["NAMESPACE", "NAME", "CLUSTER"]
    assert [namespace, "pytorch-test", member] in [r[:3] for r in rows]

    # -o yaml of the one copy, -o json of all of them
    code, out, _err = amc("get", "pytorchjob", "pytorch-test", "-M", "-n", namespace, "-oyaml")
    copy = yaml.safe_load(out)
    assert copy["kind"] == "PyTorchJob" and copy["metadata"]["namespace"] == namespace
    assert copy["metadata"]["labels"]["fleet.dev/managed-by"] == FLEET_ID
    code, out, _err = amc("get", "pytorchjob", "-M", "-n", namespace, "-o", "json")
    listing = json.loads(out)
    assert [i["metadata"]["uid"] for i in listing["items"]] == [copy["metadata"]["uid"]]

    # -- describe: the fleet job, its binding and its copy ---------------------------------
    code, out, err = amc("describe", "pytorchjob", "pytorch-test", "-n", namespace)
    assert code == EXIT_OK, err
    lines = out.splitlines()
    facts = [line.split(":", 1) for line in lines if ":" in line]
    said = {(k.strip(), v.strip()) for k, v in facts}
    assert ("Name", "pytorch-test") in said
    assert ("Claimed by", f"PropagationPolicy/{namespace}/gang") in said
    assert ("State (fleet)", "Running") in said
    assert any(line.split()[:2] == ["Normal", "ScheduleBindingSucceed"] for line in lines), out
    assert ("GangBinding", "pytorchjob-pytorch-test") in said
    assert {("Cluster", member), ("Phase", "Running"), ("Managed by", FLEET_ID)} <= said, out
    history = lines.index("  Placement history:")
    assert lines[history + 2].split()[0] == member
    assert ("Member copy", member) in said
    pods_at = lines.index("  Pods:")
    assert [line.split()[0] for line in lines[pods_at + 2 : pods_at + 5]] == pods
    assert any(line.split()[1:2] == ["SuccessfulCreatePod"] for line in lines), out

    # -- logs: through the member's pods/log, served by kwok ---------------------------------
    code, out, err = amc("logs", "pytorchjob/pytorch-test", "-n", namespace)
    assert code == EXIT_OK, err
    assert out.splitlines() == _log_lines()
    code, out, err = amc(
        "logs", "pytorchjob/pytorch-test", "--replica", "worker-1", "--tail", "2", "-n", namespace
    )
    assert (code, out.splitlines()) == (EXIT_OK, _log_lines()[-2:]), err
    code, _out, err = amc(
        "logs", "pytorchjob/pytorch-test", "--replica", "worker-2", "-n", namespace
    )
    assert code == EXIT_ERROR
    assert err.splitlines() == [
        "error: pytorch-test has no replica 'worker-2' (replicas: master-0, worker-0, worker-1)"
    ]
    followed = _follow(live, namespace, "pytorchjob/pytorch-test", len(_log_lines()))
    assert followed == _log_lines()


def _follow(live: Fleet, namespace: str, job: str, lines: int) -> list[str]:
    """`kubectl amc logs -f` as a user runs it: the lines it prints while it stays attached,
    until `lines` came; then it is stopped (it would follow forever)."""
    argv = [sys.executable, "-m", "fleet", "amc", "logs", job, "-f", "-n", namespace]
    argv += ["--kubeconfig", str(live.sandbox.kubeconfig), "--context", "fleet"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got: queue.Queue[str | None] = queue.Queue()

    def read(stream: Iterator[str]) -> None:
        for line in stream:
            got.put(line.rstrip("\n"))
        got.put(None)

    assert process.stdout is not None
    threading.Thread(target=read, args=(process.stdout,), daemon=True).start()
    out: list[str] = []
    try:
        while len(out) < lines:
            line = got.get(timeout=60)
            if line is None:
                assert process.stderr is not None
                raise AssertionError(f"logs -f ended: {process.wait()} {process.stderr.read()}")
            out.append(line)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return out


def test_a_member_that_cannot_be_asked_is_one_warning(
    live: Fleet, namespace: str, amc: Amc
) -> None:
    """A MemberCluster whose kubeconfig Secret is gone: one warning line, the real members are
    still listed, and the exit code says the answer is incomplete."""
    ghost = f"gone-{namespace[-4:]}"
    ref = {"namespace": NAMESPACE, "name": f"{ghost}-kubeconfig", "key": "kubeconfig"}
    body = {
        "apiVersion": "fleet.dev/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": ghost},
        "spec": {"kubeconfigSecretRef": ref},
    }
    live.api.create(body)
    try:
        missing = (
            f"{ghost}: its viewer kubeconfig Secret {NAMESPACE}/{ghost}-viewer-kubeconfig is "
            f"not found (`fleet join {ghost}` makes it; join the member again)"
        )
        code, out, err = amc("get", "nodes", "-M")
        assert code == EXIT_INCOMPLETE
        assert err.splitlines() == [f"warning: {missing}"]
        assert {r[1] for r in _rows(out)[1:]} == set(MEMBERS)
        code, out, err = amc("get", "pods", "-m", ghost, "-n", namespace)
        assert (code, out) == (EXIT_ERROR, "")
        assert err.splitlines() == [f"error: {missing}"]
    finally:
        live.api.delete("fleet.dev/v1alpha1", "MemberCluster", ghost)
    code, _out, err = amc("get", "pods", "-m", "member-9", "-n", namespace)
    assert code == EXIT_ERROR
    assert err.splitlines() == [
        f"error: unknown member cluster 'member-9' (members: {', '.join(MEMBERS)})"
    ]


# -- the user's own kubeconfig, as kubectl reads it -------------------------------------------


def _exec_login(live: Fleet) -> dict[str, object]:
    """A kubeconfig user whose only login is an exec plugin: it prints a bound token of the
    chart's ServiceAccount (which may read what amc reads: MemberClusters, their Secrets)."""
    account = yaml.safe_load(live.kubeconfig.read_text())["users"][0]["name"]
    _, _, namespace, name = account.split(":")  # system:serviceaccount:<ns>:<name>
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(PLUGIN), str(live.sandbox.kubeconfig), "fleet", namespace, name],
            "interactiveMode": "Never",
        }
    }


def _a_pod_in_member_1(live: Fleet, namespace: str) -> None:
    """A pod in `namespace` of member-1, which the viewer may read (as if fleet dispatched there:
    the RoleBinding the controller would make)."""
    live.clusters["member-1"].create(viewer_binding("fleet-member", namespace, FLEET_ID))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    live.clusters["member-1"].create(pod)


def _get_pods(capsys: pytest.CaptureFixture[str], *argv: str) -> list[tuple[str, str]]:
    capsys.readouterr()
    code = main(["get", "pod", "-M", *argv])
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    return [(r[0], r[1]) for r in _rows(out)[1:]]


def test_amc_logs_in_to_the_fleet_with_an_exec_plugin_alone(
    fleet: Fleet, namespace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = single_context(yaml.safe_load(fleet.sandbox.kubeconfig.read_text()), "fleet")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "cloud-login", "user": _exec_login(fleet)}],
        "contexts": [
            {
                "name": "cloud",
                "context": {"cluster": admin["clusters"][0]["name"], "user": "cloud-login"},
            }
        ],
        "current-context": "cloud",
    }
    file = tmp_path / "cloud.kubeconfig"
    file.write_text(yaml.safe_dump(config))
    _a_pod_in_member_1(fleet, namespace)
    pods = _get_pods(capsys, "-n", namespace, "--kubeconfig", str(file))
    assert pods == [("probe", "member-1")]


def test_amc_reads_a_kubeconfig_list_split_over_two_files(
    fleet: Fleet,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = single_context(yaml.safe_load(fleet.sandbox.kubeconfig.read_text()), "fleet")
    (cluster,) = admin["clusters"]
    # clusters in one folder, the CA beside it under a relative name; users and contexts in
    # another: each path is read from the folder of the file that names it.
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "fleet-ca.crt").write_bytes(
        base64.b64decode(cluster["cluster"]["certificate-authority-data"])
    )
    body = {"server": cluster["cluster"]["server"], "certificate-authority": "fleet-ca.crt"}
    clusters = tmp_path / "clusters" / "config"
    clusters.write_text(yaml.safe_dump({"clusters": [{"name": "fleet-a", "cluster": body}]}))
    logins = tmp_path / "logins"
    logins.write_text(
        yaml.safe_dump(
            {
                "users": [{"name": "cloud-login", "user": _exec_login(fleet)}],
                "contexts": [
                    {"name": "work", "context": {"cluster": "fleet-a", "user": "cloud-login"}}
                ],
                "current-context": "work",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(clusters), str(logins)]))
    _a_pod_in_member_1(fleet, namespace)
    assert _get_pods(capsys, "-n", namespace) == [("probe", "member-1")]
