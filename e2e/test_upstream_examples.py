"""The upstream projects' own examples, submitted verbatim (issue 34, item 6).

Each manifest under `e2e/upstream/` is an upstream project's example at the release the sandbox
builds, byte for byte (`e2e/upstream/SOURCES.md` says where each came from; the first test
checks that none was edited). For each, the test applies a Gang policy for its kind, submits
the manifest to the fleet with only `metadata.namespace` set (its other documents, a ConfigMap
the job mounts, first), and checks:

- its gang runs whole in ONE member, the one on the binding: a copy there and nowhere else,
  every pod of the gang Running there (the member's operator made them from the copy), no pod
  of it in any other member, and the member's PodGroup of the job asking for the gang's
  minimum; the fleet object says Running;
- where it cannot fit (an example asking for GPUs, which the members' base nodes lack), it is
  held whole: every member says `Insufficient` naming the resource and holds no copy; once a
  member has the GPUs, it runs whole there as above;
- deleted on the fleet, it leaves nothing in any member: no copy, no pod, no PodGroup, no
  Service, Job or HPA its operator made, no ConfigMap, Secret or runtime fleet propagated.

The examples run one after another in the module's sandbox; pods are kwok's fakes (images are
never pulled, containers "run"), so a gang that is bound is Running.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.api import constants as c
from fleet.core.kinds import adapter_for
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.workloads import gang_policy

from .conftest import FLEET_ID, MEMBERS, Fleet
from .test_leftovers import POD_GROUPS, _answering, _get, _items

UPSTREAM = Path(__file__).parent / "upstream"
SOURCES = UPSTREAM / "SOURCES.md"
CLUSTER_RUNTIME = ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")
#: What a member's operators make for a job in its namespace (owned by the copy): none may
#: outlive it.
OPERATOR_MADE = (
    ("v1", "Pod"),
    ("v1", "Service"),
    ("batch/v1", "Job"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
)
#: How long fleet (and the member's garbage collector) may take to empty the members.
CLEAN_SECONDS = 90
#: How long a gang may take to run once placed (operators start in turn: a RayJob's
#: submitter comes once its cluster is ready).
RUN_SECONDS = 120
#: Why JobSet's depends-on example is not run verbatim here.
NEVER_COMPLETES = (
    "its launcher waits for the initializer to Complete, and the sandbox's kwok pods complete "
    "only when labelled (sandbox.fleet.dev/outcome), which the verbatim manifest is not; "
    "e2e/test_staged.py runs its shape, labelled, to Completed"
)


@dataclasses.dataclass(frozen=True)
class Example:
    #: The manifest, relative to e2e/upstream/.
    path: str
    #: The pods of the gang, all Running in the member (with a RayJob, its submitter too).
    pods: int
    #: The gang's minimum: what the member's PodGroup asks for.
    min_member: int
    #: The members that may run it (the operator members for the kinds member-1 lacks).
    members: tuple[str, ...] = MEMBERS
    #: A resource the members' base nodes lack: the job is held whole, every member saying
    #: Insufficient for it, until a node with 4 of it joins member-1.
    lacks: str | None = None
    #: The member's operator makes an HPA for it (an elastic PyTorchJob with `metrics`).
    hpa: bool = False
    #: The minimums of the member's PodGroups, one per stage of a staged job (none: one
    #: PodGroup, of `min_member`).
    stages: tuple[int, ...] = ()


OPERATORS = ("member-2", "member-3")

EXAMPLES = {
    # The training operator v1.9.3 (kubeflow.org/v1): every member runs it.
    "pytorch-simple": Example("training-operator/pytorch-simple.yaml", 2, 2),
    # elasticPolicy minReplicas 1 of 2 workers: the minimum is 1, both run (there is room).
    "pytorch-elastic-echo": Example("training-operator/pytorch-elastic-echo.yaml", 2, 1),
    # the same with elasticPolicy.metrics: the operator makes an HPA for it in the member
    "pytorch-elastic-imagenet": Example(
        "training-operator/pytorch-elastic-imagenet.yaml", 2, 1, hpa=True
    ),
    "tfjob-simple": Example("training-operator/tfjob-simple.yaml", 2, 2),
    "xgboostjob": Example("training-operator/xgboostjob.yaml", 3, 3),
    "paddle-simple-cpu": Example("training-operator/paddle-simple-cpu.yaml", 2, 2),
    # 2 workers x 2 GPUs: no member has a GPU until the test adds a node of 4 to member-1
    "paddle-simple-gpu": Example(
        "training-operator/paddle-simple-gpu.yaml", 2, 2, lacks="nvidia.com/gpu"
    ),
    # the training operator's v1 MPIJob (docs/kinds.md: mpi-operator's v2beta1 is not dispatched)
    "mpijob-tensorflow-mnist": Example("training-operator/mpijob-tensorflow-mnist.yaml", 3, 3),
    "jaxjob-cpu-demo": Example("training-operator/jaxjob-cpu-demo.yaml", 2, 2),
    # JobSet v0.10.1: its controller runs on the operator members only
    "jobset-paralleljobs": Example("jobset/paralleljobs.yaml", 5, 5, OPERATORS),
    "jobset-success-policy": Example("jobset/success-policy.yaml", 3, 3, OPERATORS),
    "jobset-failure-policy": Example("jobset/failure-policy.yaml", 4, 4, OPERATORS),
    # startupPolicyOrder InOrder: the driver, then (once it is ready) the 4 workers; placed
    # whole, the member's gang written per stage (docs/kinds.md, "Staged JobSets")
    "jobset-startup-driver-ready": Example(
        "jobset/startup-driver-ready.yaml", 5, 5, OPERATORS, stages=(1, 4)
    ),
    # KubeRay v1.5.1: the head and one worker (minReplicas 1); a RayJob's submitter pod too,
    # and its ConfigMap (the second document) goes along with propagateDeps
    "kuberay-ray-cluster-sample": Example("kuberay/ray-cluster.sample.yaml", 2, 2, OPERATORS),
    "kuberay-ray-job-sample": Example("kuberay/ray-job.sample.yaml", 3, 2, OPERATORS),
    # Trainer v2.1.0's own torch-distributed ClusterTrainingRuntime, with a TrainJob of two
    # nodes on it (Trainer ships no TrainJob manifest: SOURCES.md); the runtime goes along
    "trainer-torch-distributed": Example("trainer/torch_distributed.yaml", 2, 2, OPERATORS),
}

SKIPPED = {
    "jobset-depends-on": ("jobset/depends-on.yaml", NEVER_COMPLETES),
}


def _params() -> list[Any]:
    run = [pytest.param(name, id=name) for name in sorted(EXAMPLES)]
    skipped = [
        pytest.param(name, id=name, marks=pytest.mark.skip(reason=reason))
        for name, (_path, reason) in sorted(SKIPPED.items())
    ]
    return run + skipped


# -- the files are upstream's, unedited ---------------------------------------------------------


def _sources() -> dict[str, str]:
    """SOURCES.md's table: file -> git blob id."""
    rows = re.findall(r"^\| ([\w./-]+\.yaml) \|.*\| ([0-9a-f]{40}) \|$", SOURCES.read_text(), re.M)
    return dict(rows)


def _blob_id(path: Path) -> str:
    """The file's git object id (`git hash-object`), as upstream's `git rev-parse <tag>:<path>`."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_every_shipped_example_is_upstreams_file_unedited() -> None:
    shipped = {str(p.relative_to(UPSTREAM)) for p in UPSTREAM.rglob("*.yaml")}
    sources = _sources()
    assert shipped == set(sources), "every file under e2e/upstream/ has a row in SOURCES.md"
    edited = {f: _blob_id(UPSTREAM / f) for f in shipped if _blob_id(UPSTREAM / f) != sources[f]}
    assert edited == {}, "files differing from the upstream blob SOURCES.md names"
    used = {e.path for e in EXAMPLES.values()} | {p for p, _r in SKIPPED.values()}
    assert used == shipped, "every shipped example is run or listed as skipped, and exists"


# -- submitting one -----------------------------------------------------------------------------


def _documents(example: Example, namespace: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The job and the other documents of the manifest (created first), namespaced objects put
    in `namespace` and nothing else changed. Trainer's runtime file holds no job: the job is a
    TrainJob naming it (SOURCES.md)."""
    docs = [d for d in yaml.safe_load_all((UPSTREAM / example.path).read_text()) if d]
    for doc in docs:
        if doc["kind"] != CLUSTER_RUNTIME[1]:
            doc["metadata"]["namespace"] = namespace
    jobs = [d for d in docs if adapter_for(d["apiVersion"], d["kind"]) is not None]
    if not jobs:
        (runtime,) = docs
        return _trainjob(runtime["metadata"]["name"], namespace), docs
    (job,) = jobs
    return job, [d for d in docs if d is not job]


def _trainjob(runtime: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": f"{runtime}-job", "namespace": namespace},
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": runtime,
            },
            "trainer": {"numNodes": 2},
        },
    }


def _api(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["apiVersion"], obj["kind"]


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _create_dependency(live: Fleet, doc: dict[str, Any]) -> bool:
    """Create one of the manifest's other documents on the fleet; whether it was created here
    (a cluster-scoped runtime an earlier example created is used as it is)."""
    if doc["kind"] == CLUSTER_RUNTIME[1] and live.api.get(*CLUSTER_RUNTIME, _name(doc)):
        return False
    live.api.create(copy.deepcopy(doc))
    return True


# -- what the members hold ----------------------------------------------------------------------


def _pods(client: ClusterClient, namespace: str) -> list[dict[str, Any]]:
    return _items(client, ("v1", "Pod"), namespace)


def _pod_groups(client: ClusterClient, namespace: str) -> list[dict[str, Any]]:
    return [g for api in POD_GROUPS for g in _items(client, api, namespace)]


def _held_in(client: ClusterClient, job: dict[str, Any], deps: list[dict[str, Any]]) -> list[str]:
    """What one member holds of the job, in its namespace (a fresh one, holding nothing else
    but what the member makes for every namespace): the copy, whatever an operator made,
    PodGroups, and every dependency fleet propagated (its mark on it)."""
    namespace, held = job["metadata"]["namespace"], []
    if _get(client, _api(job), _name(job), namespace) is not None:
        held.append(f"{job['kind']} {_name(job)}")
    for api in OPERATOR_MADE:
        held += [f"{api[1]} {_name(o)}" for o in _items(client, api, namespace)]
    held += [f"PodGroup {_name(g)}" for g in _pod_groups(client, namespace)]
    fleets = f"{c.MANAGED_BY_LABEL}={FLEET_ID}"
    for api in (("v1", "ConfigMap"), ("v1", "Secret")):
        held += [f"{api[1]} {_name(o)}" for o in _items(client, api, namespace, fleets)]
    for dep in deps:
        if dep["kind"] == CLUSTER_RUNTIME[1]:
            found = _get(client, CLUSTER_RUNTIME, _name(dep), None)
            labels = ((found or {}).get("metadata") or {}).get("labels") or {}
            if labels.get(c.MANAGED_BY_LABEL) == FLEET_ID:
                held.append(f"ClusterTrainingRuntime {_name(dep)}")
    return held


def _held(
    live: Fleet, members: list[str], job: dict[str, Any], deps: list[dict[str, Any]]
) -> dict[str, list[str]]:
    found = {m: _held_in(live.clusters[m], job, deps) for m in members}
    return {m: things for m, things in found.items() if things}


def _copies(live: Fleet, members: list[str], job: dict[str, Any]) -> list[str]:
    namespace = job["metadata"]["namespace"]
    return [m for m in members if _get(live.clusters[m], _api(job), _name(job), namespace)]


def _pending(live: Fleet, job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    binding = live.binding(job["metadata"]["namespace"], _name(job), _api(job)) or {}
    return {r["cluster"]: r for r in (binding.get("status") or {}).get("pendingReasons") or []}


def _held_whole_for(live: Fleet, members: list[str], job: dict[str, Any], resource: str) -> None:
    """Every member says it lacks `resource` for the gang, and none holds a copy."""
    try:
        reasons = wait_until(
            lambda: (p := _pending(live, job)) and set(p) == set(MEMBERS) and p,
            what="a pending reason from every member",
        )
    except AssertionError as e:
        status = (live.binding(job["metadata"]["namespace"], _name(job), _api(job)) or {}).get(
            "status"
        )
        raise AssertionError(f"{e}\nthe binding's status: {status}") from None
    said = {m: (r.get("code"), (r.get("facts") or {}).get("resource")) for m, r in reasons.items()}
    assert said == dict.fromkeys(MEMBERS, ("Insufficient", resource)), reasons
    assert _copies(live, members, job) == []


def _runs_whole_in(
    live: Fleet, members: list[str], job: dict[str, Any], example: Example, target: str
) -> None:
    """Wait until every pod of the gang runs in `target` and nowhere else; then the copy is
    there alone, the member's PodGroup asks for the gang's minimum, the fleet says Running."""
    namespace = job["metadata"]["namespace"]
    seen: dict[str, list[tuple[str, str | None]]] = {}

    def whole() -> bool:
        seen.clear()
        for m in members:
            pods = _pods(live.clusters[m], namespace)
            if pods:
                seen[m] = [(_name(p), p["status"].get("phase")) for p in pods]
        there = seen.get(target, [])
        return (
            list(seen) == [target]
            and len(there) == example.pods
            and all(phase == "Running" for _n, phase in there)
        )

    try:
        wait_until(whole, timeout=RUN_SECONDS, what=f"{example.pods} pods Running in {target}")
    except AssertionError as e:
        raise AssertionError(f"{e}: the members' pods: {seen}") from None
    assert _copies(live, members, job) == [target]
    groups = {
        _name(g): g["spec"].get("minMember") for g in _pod_groups(live.clusters[target], namespace)
    }
    wanted = sorted(example.stages or (example.min_member,))
    assert sorted(groups.values()) == wanted, f"PodGroups in {target}: {groups}"
    kind = _api(job)
    wait_until(
        lambda: live.fleet_state(namespace, _name(job), kind) == "Running",
        what=f"{_name(job)} Running on the fleet",
    )


@pytest.mark.parametrize("name", _params())
def test_upstream_example_runs_whole_in_one_member_and_leaves_nothing(
    live: Fleet, namespace: str, add_nodes: Any, name: str
) -> None:
    example = EXAMPLES[name]
    members = _answering(live)
    job, deps = _documents(example, namespace)
    kind = _api(job)
    live.api.create(gang_policy("gang", namespace, kinds=(kind[1],)))
    created = [d for d in deps if _create_dependency(live, d)]
    try:
        live.api.create(copy.deepcopy(job))
        if example.lacks:
            _held_whole_for(live, members, job, example.lacks)
            add_nodes("member-1", count=1, gpu=4)
        target = wait_until(
            lambda: live.target(namespace, _name(job), kind), what=f"{_name(job)} placed"
        )
        assert target in example.members, f"placed in {target}, not one of {example.members}"
        _runs_whole_in(live, members, job, example, target)
        # What the deletion must take away is there: the manifest's other documents went along
        # (fleet's mark on them), and the operator made its HPA.
        held = _held_in(live.clusters[target], job, deps)
        assert {f"{d['kind']} {_name(d)}" for d in deps} <= set(held), held
        hpas = [h for h in held if h.startswith("HorizontalPodAutoscaler ")]
        assert len(hpas) == example.hpa, held

        live.api.delete(*kind, _name(job), namespace)
        left: dict[str, list[str]] = {}

        def clean() -> bool:
            left.clear()
            left.update(_held(live, members, job, deps))
            return left == {}

        try:
            wait_until(clean, timeout=CLEAN_SECONDS, what=f"nothing of {_name(job)} left")
        except AssertionError as e:
            raise AssertionError(f"{e}; still held: {left}") from None
        wait_until(lambda: live.job(namespace, _name(job), kind) is None, what="the fleet job gone")
    finally:
        for doc in created:
            if doc["kind"] == CLUSTER_RUNTIME[1]:
                live.api.delete(*CLUSTER_RUNTIME, _name(doc))
