"""`kubectl amc logs`: the pod is found from the job's GangBinding and read through the member's
pods/log API."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from fleet.amc import logs
from fleet.amc.errors import EXIT_ERROR, EXIT_OK, AmcError
from fleet.amc.logs import LogsRequest, default_container, replica_pod
from fleet.amc.members import Fleet
from fleet.api import GangComponent
from fleet.core.kinds import KindAdapter
from fleet.core.kinds.kubeflow import PYTORCHJOB, TFJOB
from fleet.core.kinds.mpijob import MPIJOB
from tests.amc.samples import BINDING, FAILED_OVER, JOB, NS, binding, job
from tests.amc.world import World
from tests.kube.fakes import status

PODS = f"/api/v1/namespaces/{NS}/pods"
LOG = "2026-03-01T11:59:00Z stdout F Train Epoch: 1 [0/60000]\nloss=2.30\n"

PYTORCH = [GangComponent(name="Master", replicas=1), GangComponent(name="Worker", replicas=2)]
TF = [GangComponent(name="PS", replicas=1), GangComponent(name="Worker", replicas=4)]
MPI = [GangComponent(name="Launcher", replicas=1), GangComponent(name="Worker", replicas=2)]


@pytest.mark.parametrize(
    ("adapter", "components", "replica", "pod"),
    [
        (PYTORCHJOB, PYTORCH, None, "job-master-0"),
        (PYTORCHJOB, PYTORCH, "worker-1", "job-worker-1"),
        (PYTORCHJOB, PYTORCH, "Worker-1", "job-worker-1"),
        (PYTORCHJOB, PYTORCH, "worker", "job-worker-0"),
        (TFJOB, TF, None, "job-worker-0"),  # no master or chief: worker-0, not the parameter server
        (TFJOB, TF, "ps-0", "job-ps-0"),
        (TFJOB, [GangComponent(name="Chief", replicas=1), *TF], None, "job-chief-0"),
        (TFJOB, [GangComponent(name="Evaluator", replicas=1)], None, "job-evaluator-0"),
        # The training operator's MPIJob launcher is one pod, named without an index.
        (MPIJOB, MPI, None, "job-launcher"),
        (MPIJOB, MPI, "launcher", "job-launcher"),
        (MPIJOB, MPI, "worker-1", "job-worker-1"),
    ],
)
def test_pods_are_named_as_the_training_operator_names_them(
    adapter: KindAdapter, components: list[GangComponent], replica: str | None, pod: str
) -> None:
    assert replica_pod(adapter, "job", components, replica) == pod


@pytest.mark.parametrize("replica", ["worker-2", "chief", "worker-x", "-1"])
def test_a_replica_the_gang_does_not_have_is_refused_with_the_ones_it_has(replica: str) -> None:
    with pytest.raises(AmcError) as error:
        replica_pod(PYTORCHJOB, "job", PYTORCH, replica)
    assert str(error.value) == (
        f"job has no replica {replica!r} (replicas: master-0, worker-0, worker-1)"
    )


def test_the_default_container_is_the_annotated_one_else_the_first() -> None:
    pod: dict[str, Any] = {"spec": {"containers": [{"name": "sidecar"}, {"name": "pytorch"}]}}
    assert default_container(pod) == ("sidecar", ["sidecar", "pytorch"])
    pod["metadata"] = {"annotations": {"kubectl.kubernetes.io/default-container": "pytorch"}}
    assert default_container(pod) == ("pytorch", ["sidecar", "pytorch"])


def _pod(name: str, *containers: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": c} for c in containers or ("pytorch",)]},
    }


def _placed(world: World) -> None:
    world.fleet.on("GET", JOB, job("fleet-uid", []))
    world.fleet.on("GET", BINDING, FAILED_OVER)  # placed in member-2


def test_the_log_comes_from_the_member_the_binding_names(world: World) -> None:
    _placed(world)
    member = world.members["member-2"]
    member.on("GET", f"{PODS}/pytorch-test-worker-1", _pod("pytorch-test-worker-1"))
    member.on(
        "GET",
        f"{PODS}/pytorch-test-worker-1/log",
        httpx.Response(200, content=LOG.encode(), headers={"Content-Type": "text/plain"}),
    )
    result = world.amc(
        "logs", "pytorchjob/pytorch-test", "--replica", "worker-1", "-f", "--tail", "20", "-n", NS
    )
    assert result.code == EXIT_OK, result.err
    assert result.out == LOG
    (asked,) = member.asked("GET", f"{PODS}/pytorch-test-worker-1/log")
    assert dict(asked.url.params) == {"container": "pytorch", "follow": "true", "tailLines": "20"}
    assert "member-1" not in world.dialed


def test_several_containers_default_as_kubectl_does(world: World) -> None:
    _placed(world)
    member = world.members["member-2"]
    member.on(
        "GET", f"{PODS}/pytorch-test-master-0", _pod("pytorch-test-master-0", "pytorch", "sidecar")
    )
    member.on("GET", f"{PODS}/pytorch-test-master-0/log", httpx.Response(200, content=b"hi\n"))
    result = world.amc("logs", "pytorchjob/pytorch-test", "-n", NS)
    assert (result.code, result.out) == (EXIT_OK, "hi\n")
    assert result.err.splitlines() == ['Defaulted container "pytorch" out of: pytorch, sidecar']
    chosen = world.amc("logs", "pytorchjob/pytorch-test", "-c", "sidecar", "-n", NS)
    assert chosen.err == ""
    assert (
        member.asked("GET", f"{PODS}/pytorch-test-master-0/log")[-1].url.params["container"]
        == "sidecar"
    )


def test_a_batch_job_reads_its_own_pod_found_by_owner(world: World) -> None:
    path = f"/apis/batch/v1/namespaces/{NS}/jobs/train"
    world.fleet.discovery["/apis/batch/v1"] = {
        "resources": [{"name": "jobs", "singularName": "job", "kind": "Job", "namespaced": True}]
    }
    groups = world.fleet.discovery["/apis"]["groups"]
    groups.append(
        {
            "name": "batch",
            "versions": [{"groupVersion": "batch/v1"}],
            "preferredVersion": {"groupVersion": "batch/v1"},
        }
    )
    world.fleet.on("GET", path, {"metadata": {"name": "train", "namespace": NS, "uid": "f"}})
    the_binding = binding(spec={"clusters": [{"name": "member-1", "replicas": 1}]}, phase="Running")
    the_binding["spec"]["gang"] = {"minMember": 1, "components": [{"name": "pod", "replicas": 1}]}
    the_binding["metadata"]["name"] = "job-train"
    world.fleet.on(
        "GET", f"/apis/fleet.dev/v1alpha1/namespaces/{NS}/gangbindings/job-train", the_binding
    )
    member = world.members["member-1"]
    member.discovery["/apis/batch/v1"] = world.fleet.discovery["/apis/batch/v1"]
    member.on("GET", path, {"metadata": {"name": "train", "namespace": NS, "uid": "copy"}})
    owned = _pod("train-x7k2p")
    owned["metadata"]["ownerReferences"] = [{"uid": "copy", "kind": "Job", "name": "train"}]
    member.on("GET", PODS, {"items": [_pod("other-abcde"), owned]})
    member.on("GET", f"{PODS}/train-x7k2p/log", httpx.Response(200, content=b"done\n"))
    result = world.amc("logs", "job.batch/train", "-n", NS)
    assert (result.code, result.out) == (EXIT_OK, "done\n"), result.err


def _jobset_world(world: World) -> Any:
    """A JobSet `train` placed in member-1, its copy's pods labelled by the JobSet controller."""
    api = "/apis/jobset.x-k8s.io/v1alpha2"
    path = f"{api}/namespaces/{NS}/jobsets/train"
    resources = {"resources": [{"name": "jobsets", "kind": "JobSet", "namespaced": True}]}
    world.fleet.discovery[api] = resources
    world.fleet.discovery["/apis"]["groups"].append(
        {
            "name": "jobset.x-k8s.io",
            "versions": [{"groupVersion": "jobset.x-k8s.io/v1alpha2"}],
            "preferredVersion": {"groupVersion": "jobset.x-k8s.io/v1alpha2"},
        }
    )
    world.fleet.on("GET", path, {"metadata": {"name": "train", "namespace": NS, "uid": "f"}})
    the_binding = binding(spec={"clusters": [{"name": "member-1", "replicas": 3}]}, phase="Running")
    the_binding["spec"]["gang"] = {
        "minMember": 3,
        "components": [{"name": "leader", "replicas": 1}, {"name": "worker", "replicas": 2}],
    }
    the_binding["metadata"]["name"] = "jobset-train"
    world.fleet.on(
        "GET", f"/apis/fleet.dev/v1alpha1/namespaces/{NS}/gangbindings/jobset-train", the_binding
    )
    member = world.members["member-1"]
    member.discovery[api] = resources
    member.on("GET", path, {"metadata": {"name": "train", "namespace": NS, "uid": "copy"}})
    pods = []
    for name, role in (
        ("train-worker-0-0-aaaaa", "worker"),
        ("train-worker-0-1-bbbbb", "worker"),
        ("train-leader-0-0-ccccc", "leader"),
    ):
        pod = _pod(name)
        pod["metadata"]["labels"] = {"jobset.sigs.k8s.io/replicatedjob-name": role}
        pods.append(pod)
        member.on("GET", f"{PODS}/{name}/log", httpx.Response(200, content=f"{name}\n".encode()))
    member.on("GET", PODS, {"items": pods})
    return member


@pytest.mark.parametrize(
    ("replica", "pod"),
    [
        (None, "train-leader-0-0-ccccc"),  # the first role's first pod
        ("worker-1", "train-worker-0-1-bbbbb"),
        ("train-worker-0-0-aaaaa", "train-worker-0-0-aaaaa"),
    ],
)
def test_a_jobsets_pods_are_found_by_the_labels_its_controller_gives(
    world: World, replica: str | None, pod: str
) -> None:
    member = _jobset_world(world)
    argv = ["logs", "jobset/train", "-n", NS, *(["--replica", replica] if replica else [])]
    result = world.amc(*argv)
    assert (result.code, result.out) == (EXIT_OK, f"{pod}\n"), result.err
    selector = member.asked("GET", PODS)[-1].url.params["labelSelector"]
    assert selector == "jobset.sigs.k8s.io/jobset-name=train"


def test_a_jobset_replica_it_does_not_have_names_the_ones_it_has(world: World) -> None:
    _jobset_world(world)
    result = world.amc("logs", "jobset/train", "-n", NS, "--replica", "worker-5")
    assert result.code == EXIT_ERROR
    assert "has no replica 'worker-5' in member-1 (replicas: leader-0..0, worker-0..1" in result.err


def test_a_job_no_policy_claimed_runs_nowhere(world: World) -> None:
    world.fleet.on("GET", JOB, job("fleet-uid", []))
    result = world.amc("logs", "pytorchjob/pytorch-test", "-n", NS)
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == [
        "error: PyTorchJob team-a/pytorch-test has no GangBinding: fleet has not claimed it, so "
        "it runs in no member (does a Gang PropagationPolicy select it?)"
    ]


def test_a_held_gang_says_why_it_is_not_placed(world: World) -> None:
    world.fleet.on("GET", JOB, job("fleet-uid", []))
    pending = binding(
        phase="Pending",
        pendingReasons=[
            {"cluster": "member-1", "code": "Insufficient", "reason": "2 of 3 pods fit"},
            {"cluster": "member-2", "code": "NotReady", "reason": "member is not Ready"},
        ],
    )
    world.fleet.on("GET", BINDING, pending)
    result = world.amc("logs", "pytorchjob/pytorch-test", "-n", NS)
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == [
        "error: PyTorchJob team-a/pytorch-test runs in no member yet (phase Pending): "
        "member-1: 2 of 3 pods fit; member-2: member is not Ready"
    ]


def test_a_held_gang_counts_the_members_its_binding_does_not_name(world: World) -> None:
    world.fleet.on("GET", JOB, job("fleet-uid", []))
    pending = binding(
        phase="Pending",
        pendingReasons=[
            {"cluster": f"member-{i}", "code": "Insufficient", "reason": "2 of 3 pods fit"}
            for i in range(1, 11)
        ],
        pendingReasonCounts={"Insufficient": 990, "NotReady": 10},
    )
    world.fleet.on("GET", BINDING, pending)
    result = world.amc("logs", "pytorchjob/pytorch-test", "-n", NS)
    assert result.code == EXIT_ERROR
    assert result.err.splitlines()[0].endswith("member-3: 2 of 3 pods fit (and 997 more)")


def test_a_pod_not_made_yet(world: World) -> None:
    _placed(world)
    result = world.amc("logs", "pytorchjob/pytorch-test", "--replica", "worker-0", "-n", NS)
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == [
        "error: pod pytorch-test-worker-0 not found in namespace team-a of member-2 (its "
        "training operator has not made it yet, or the job was cleaned up)"
    ]


def test_the_members_refusal_is_one_line(world: World) -> None:
    _placed(world)
    member = world.members["member-2"]
    member.on("GET", f"{PODS}/pytorch-test-master-0", _pod("pytorch-test-master-0"))
    refusal = (
        'container "pytorch" in pod "pytorch-test-master-0" is waiting to start: ContainerCreating'
    )
    member.on("GET", f"{PODS}/pytorch-test-master-0/log", status(400, "BadRequest", refusal))
    result = world.amc("logs", "pytorchjob/pytorch-test", "-n", NS)
    assert (result.code, result.out) == (EXIT_ERROR, "")
    assert result.err.splitlines() == [
        "error: GET Pod team-a/pytorch-test-master-0 log (container pytorch) on member-2: "
        f"400 Bad Request: {refusal}"
    ]


def test_a_member_whose_secret_is_gone_is_an_error(world: World) -> None:
    from tests.amc.world import secret_path

    _placed(world)
    world.fleet.script[("GET", secret_path("member-2"))] = [status(404, "NotFound", "gone")]
    result = world.amc("logs", "pytorchjob/pytorch-test", "-n", NS)
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == [
        "error: member-2: its viewer kubeconfig Secret "
        "fleet-system/member-2-viewer-kubeconfig is not "
        "found (`fleet join member-2` makes it; join the member again)"
    ]


@pytest.mark.parametrize("job_arg", ["pytorch-test", "pytorchjob/", "/x", "a/b/c"])
def test_kind_slash_name_is_required(world: World, job_arg: str) -> None:
    result = world.amc("logs", job_arg)
    assert result.code == EXIT_ERROR
    assert result.err.splitlines() == [
        f"error: expected KIND/NAME, like pytorchjob/pytorch-test, not {job_arg!r}"
    ]


class _Chunks(httpx.SyncByteStream):
    """A log the server sends in two parts; the second only once the first was printed."""

    def __init__(self, printed: threading.Event) -> None:
        self.printed = printed

    def __iter__(self) -> Iterator[bytes]:
        yield b"first\n"
        yield b"second\n" if self.printed.wait(timeout=10) else b"only after the first\n"


class _Terminal(io.BytesIO):
    def __init__(self, printed: threading.Event) -> None:
        super().__init__()
        self.printed = printed

    def write(self, data: Any) -> int:
        written = super().write(data)
        self.printed.set()
        return written


def test_a_followed_log_is_printed_as_it_arrives(world: World) -> None:
    _placed(world)
    member = world.members["member-2"]
    member.on("GET", f"{PODS}/pytorch-test-master-0", _pod("pytorch-test-master-0"))
    printed = threading.Event()
    member.on(
        "GET",
        f"{PODS}/pytorch-test-master-0/log",
        lambda _request: httpx.Response(200, stream=_Chunks(printed)),
    )
    terminal = _Terminal(printed)
    with ExitStack() as stack:
        fleet = Fleet.open(str(world.kubeconfig), None, stack, world.connect)
        request = LogsRequest.parse("pytorchjob/pytorch-test", NS, follow=True)
        assert logs.run(fleet, request, out=terminal) == EXIT_OK
    assert terminal.getvalue() == b"first\nsecond\n"
