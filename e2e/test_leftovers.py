"""Nothing of fleet's is left behind, on real API servers: after a job leaves a member by any
path, that member holds no copy of it, no pod of it, no PodGroup of it, none of the
dependencies fleet propagated for it (its ConfigMap and Secret, a TrainJob's runtime) and no
Reservation of it (docs/controller.md, "Dependencies on every path").

The paths: the job deleted on the fleet; an application failover with purgeMode Immediately and
with Gracefully (the old member is emptied, the new one holds exactly its copy and its
dependencies); `fleet unjoin --move` (the spare cluster of e2e/test_join.py, joined under a name
of the test's own); and a TrainJob deleted on the fleet (its runtime goes with the last TrainJob
of fleet's in that member that names it).

What a member holds is asked of every sandbox member that answers when the test starts, whether
the fleet holds a MemberCluster for it or not; a kind a member does not serve (a Koordinator
Reservation outside the Koordinator member, each gang scheduler's own PodGroup, Trainer's
runtimes) is one it holds none of. The jobs are tiny CPU-only gangs on the members' base nodes.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

import pytest

from fleet import cli
from fleet.api import constants as c
from fleet.kube import KubeError, NotFound
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.workloads import gang_policy, pytorchjob, training_runtime, trainjob

from .conftest import FLEET_ID, PYTORCHJOB, Fleet
from .test_failover import _fail_and_move
from .test_join import SPARE
from .test_never_twice import Spare, _placeable, spare  # noqa: F401

CONFIGMAP = ("v1", "ConfigMap")
SECRET = ("v1", "Secret")
TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
TRAINING_RUNTIME = ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")
RESERVATION = ("scheduling.koordinator.sh/v1alpha1", "Reservation")
#: Every PodGroup a member of the sandbox may hold: scheduler-plugins' (coscheduling members:
#: the training operator's and Trainer's, and fleet's for kinds whose operator makes none),
#: Koordinator's own (its member) and Kubernetes' Workload API one (the native-gang member,
#: written by fleet beside every copy). Each member serves one or none of them.
POD_GROUPS = (
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"),
    ("scheduling.k8s.io/v1beta1", "PodGroup"),
)
#: The dependencies the PyTorchJobs' pods mount (created on the fleet by each test).
TRAIN_CONFIG = "train-config"
TRAIN_CREDS = "train-creds"
#: How long fleet may take to empty a member once a job has left it.
CLEAN_SECONDS = 60


@dataclasses.dataclass(frozen=True)
class Tracked:
    """A fleet job whose objects in the members are looked for."""

    namespace: str
    name: str
    uid: str
    kind: tuple[str, str] = PYTORCHJOB
    #: (apiVersion, kind, name) of each namespaced dependency fleet propagates for it.
    deps: tuple[tuple[str, str, str], ...] = ()


# -- what the members hold ---------------------------------------------------------------------


def _get(client: ClusterClient, api: tuple[str, str], name: str, namespace: str) -> Any:
    """The object, or None; a kind the member does not serve is one it holds none of."""
    try:
        return client.get(*api, name, namespace)
    except NotFound:
        return None


def _items(
    client: ClusterClient, api: tuple[str, str], namespace: str | None, selector: str | None = None
) -> list[dict[str, Any]]:
    """The objects of `api` (in `namespace`, matching `selector`); none where the member does
    not serve the kind."""
    try:
        return client.items(*api, namespace, selector)
    except NotFound:
        return []


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _of_job(pod_group: dict[str, Any], job: Tracked) -> bool:
    """Whether a PodGroup in the job's namespace is the job's: named after it, owned by its
    copy, or carrying its fleet-uid label."""
    meta = pod_group.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    return (
        meta.get("name") == job.name
        or any(o.get("kind") == job.kind[1] and o.get("name") == job.name for o in owners)
        or _labels(pod_group).get(c.FLEET_UID_LABEL) == job.uid
    )


def _held_in(client: ClusterClient, job: Tracked) -> list[str]:
    """What one member holds of the job: `PyTorchJob job`, `Pod job-master-0`,
    `PodGroup job (<apiVersion>)`, `ConfigMap train-config`, `Reservation ...`; a copy whose
    fleet-uid label is not the job's, or a dependency without fleet's managed-by label, says so
    (the tests' namespaces hold no member's own object of those names)."""
    ns, held = job.namespace, []
    copy_ = _get(client, job.kind, job.name, ns)
    if copy_ is not None:
        uid = _labels(copy_).get(c.FLEET_UID_LABEL)
        held.append(f"{job.kind[1]} {job.name}" + ("" if uid == job.uid else f" (fleet-uid {uid})"))
    selector = f"{c.FLEET_UID_LABEL}={job.uid}"
    held += [f"Pod {p['metadata']['name']}" for p in client.pods(ns, selector)]
    for api in POD_GROUPS:
        held += [
            f"PodGroup {g['metadata']['name']} ({api[0]})"
            for g in _items(client, api, ns)
            if _of_job(g, job)
        ]
    for api_version, kind, name in job.deps:
        dep = _get(client, (api_version, kind), name, ns)
        if dep is not None:
            mark = _labels(dep).get(c.MANAGED_BY_LABEL)
            held.append(f"{kind} {name}" + ("" if mark == FLEET_ID else f" (managed-by {mark})"))
    held += [
        f"Reservation {r['metadata']['name']}" for r in _items(client, RESERVATION, None, selector)
    ]
    return held


def _held(live: Fleet, job: Tracked, members: list[str]) -> dict[str, list[str]]:
    """The members among `members` holding anything of the job's, and what."""
    found = {m: _held_in(live.clusters[m], job) for m in members}
    return {m: things for m, things in found.items() if things}


def _answering(live: Fleet) -> list[str]:
    """The sandbox's members whose API server answers now (every one, unless a test before
    left one down)."""
    up = []
    for member in live.sandbox.members():
        try:
            live.clusters[member].api.version()
        except KubeError:
            continue
        up.append(member)
    return up


def _wait_none_left(live: Fleet, job: Tracked, members: list[str], what: str) -> None:
    """Wait until none of `members` holds anything of the job's; fail saying what is left."""
    left: dict[str, list[str]] = {}

    def clean() -> bool:
        left.clear()
        left.update(_held(live, job, members))
        return left == {}

    try:
        wait_until(clean, timeout=CLEAN_SECONDS, what=what)
    except AssertionError as e:
        raise AssertionError(f"{e}; still held: {left}") from None


def _copy_and_deps(job: Tracked) -> set[str]:
    """What a member running the job holds of it besides pods and PodGroups (those are the
    member's operators' doing): its copy and each dependency, all fleet's."""
    return {f"{job.kind[1]} {job.name}"} | {f"{kind} {name}" for _a, kind, name in job.deps}


def _without_pods(held: list[str]) -> set[str]:
    return {h for h in held if not h.startswith(("Pod ", "PodGroup "))}


# -- the jobs -------------------------------------------------------------------------------


def _deps_on_fleet(live: Fleet, namespace: str) -> None:
    live.api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": TRAIN_CONFIG, "namespace": namespace},
            "data": {"epochs": "1"},
        }
    )
    live.api.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": TRAIN_CREDS, "namespace": namespace},
            "type": "Opaque",
            "stringData": {"token": "s3cret"},
        }
    )


def _submit(live: Fleet, namespace: str, name: str = "job") -> Tracked:
    """The ConfigMap and Secret on the fleet, and a PyTorchJob (a master and one worker, 100m
    CPU each, restartPolicy Never) whose pods mount both; the job as tracked."""
    _deps_on_fleet(live, namespace)
    job = pytorchjob(
        name, namespace=namespace, workers=1, gpus=0, cpu="100m", restart_policy="Never"
    )
    volumes = [
        {"name": "config", "configMap": {"name": TRAIN_CONFIG}},
        {"name": "creds", "secret": {"secretName": TRAIN_CREDS}},
    ]
    mounts = [{"name": v["name"], "mountPath": f"/deps/{v['name']}"} for v in volumes]
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        spec = replica["template"]["spec"]
        spec["volumes"] = copy.deepcopy(volumes)
        spec["containers"][0]["volumeMounts"] = copy.deepcopy(mounts)
    created = live.api.create(job)
    return Tracked(
        namespace,
        name,
        str(created["metadata"]["uid"]),
        deps=((*CONFIGMAP, TRAIN_CONFIG), (*SECRET, TRAIN_CREDS)),
    )


def _placed_in(live: Fleet, job: Tracked, member: str) -> bool:
    return live.target(job.namespace, job.name, job.kind) == member


def _running_with_deps(live: Fleet, job: Tracked, member: str, members: list[str]) -> None:
    """Wait until the job runs in `member`, which then holds its copy and dependencies (fleet's),
    and no other member holds anything of it: what the test then takes away is there."""
    live.wait_running(job.namespace, job.name, member, kind=job.kind)
    held = _held(live, job, members)
    assert _without_pods(held.get(member, [])) == _copy_and_deps(job), held
    assert list(held) == [member], held


# -- 1. deleted on the fleet ----------------------------------------------------------------


def test_a_deleted_job_leaves_nothing_in_any_member(live: Fleet, namespace: str) -> None:
    members = _answering(live)
    live.api.create(gang_policy("gang", namespace, propagate_deps=True))
    job = _submit(live, namespace)
    first = wait_until(lambda: live.target(namespace, "job"), what="the job placed")
    _running_with_deps(live, job, first, members)

    live.api.delete(*PYTORCHJOB, "job", namespace)
    _wait_none_left(live, job, members, what=f"nothing of the deleted job left (was in {first})")
    wait_until(lambda: live.job(namespace, "job") is None, what="the fleet job gone")


# -- 2, 3. an application failover ----------------------------------------------------------


@pytest.mark.parametrize("purge_mode", ["Immediately", "Gracefully"])
def test_a_failover_empties_the_old_member_and_the_new_one_holds_its_copy_and_deps(
    live: Fleet, namespace: str, purge_mode: str
) -> None:
    """The copy fails in its member (restartPolicy Never, its pods exit 1): it moves to the
    other member of the policy's two; the old member is emptied (Immediately: before the gang
    is placed again; Gracefully: once the new copy runs, well within its 600 s grace), and the
    new one holds its copy and its dependencies, nothing else of fleet's."""
    members = _answering(live)
    live.api.create(
        gang_policy(
            "gang",
            namespace,
            toleration_seconds=2,
            purge_mode=purge_mode,
            grace_period_seconds=600 if purge_mode == "Gracefully" else None,
            propagate_deps=True,
            cluster_names=["member-1", "member-2"],
        )
    )
    job = _submit(live, namespace)
    first = wait_until(lambda: live.target(namespace, "job"), what="the job placed")
    _running_with_deps(live, job, first, members)

    second = _fail_and_move(live, namespace, first)  # running in `second` on return
    others = [m for m in members if m != second]
    _wait_none_left(
        live, job, others, what=f"nothing of the job left outside {second} ({purge_mode})"
    )
    held = _held(live, job, members)
    assert _without_pods(held.get(second, [])) == _copy_and_deps(job), held


# -- 4. fleet unjoin --move -----------------------------------------------------------------


def test_unjoin_move_leaves_nothing_of_the_job_in_the_unjoined_cluster(
    live: Fleet,
    namespace: str,
    spare: Spare,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The spare cluster (the Koordinator member) joined under a name of the test's own, the
    job running there; `fleet unjoin <name> --move` moves it to member-1, and the spare holds
    nothing of it afterwards."""
    members = _answering(live)
    name = spare.join("leaving")
    _placeable(live, namespace, name)
    policy = gang_policy("gang", namespace, propagate_deps=True)
    policy["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "leaving", "clusterNames": [name]},
        {"affinityName": "staying", "clusterNames": ["member-1"]},
    ]
    live.api.create(policy)
    job = _submit(live, namespace)
    wait_until(lambda: live.target(namespace, "job") == name, what=f"the job placed in {name}")
    _running_with_deps(live, job, SPARE, members)

    kubeconfig = str(live.sandbox.kubeconfig)
    argv = ["unjoin", name, "--kubeconfig", kubeconfig, "--context", "fleet"]
    argv += ["--member-kubeconfig", kubeconfig, "--member-context", SPARE]
    argv += ["--fleet-id", FLEET_ID, "--move", "--timeout", "120"]
    capsys.readouterr()
    assert cli.main(argv) == 0, capsys.readouterr().err
    wait_until(lambda: live.target(namespace, "job") == "member-1", what="placed in member-1")
    live.wait_running(namespace, "job", "member-1")
    others = [m for m in members if m != "member-1"]
    _wait_none_left(live, job, others, what=f"nothing of the job left in {SPARE} ({name})")
    held = _held(live, job, members)
    assert _without_pods(held.get("member-1", [])) == _copy_and_deps(job), held


# -- 5. a TrainJob deleted on the fleet: its runtime goes with the last one ---------------------


def test_a_trainjobs_runtime_leaves_the_member_with_the_last_trainjob_using_it(
    live: Fleet, namespace: str
) -> None:
    """Two TrainJobs (one 100m-CPU trainer node each) on member-2 (Trainer runs on the
    operator members), both naming the runtime `torch` defined on the fleet: deleting the first
    leaves the runtime (the second uses it) and nothing else of the first; deleting the second
    leaves nothing, the runtime included."""
    members = _answering(live)
    live.api.create(
        gang_policy(
            "gang", namespace, kinds=("TrainJob",), propagate_deps=True, cluster_names=["member-2"]
        )
    )
    live.api.create(training_runtime("torch", namespace=namespace, gpus=0, cpu="100m"))
    runtime = (*TRAINING_RUNTIME, "torch")
    jobs = {}
    for name in ("tj-a", "tj-b"):
        created = live.api.create(trainjob(name, "torch", namespace=namespace, nodes=1))
        jobs[name] = Tracked(
            namespace, name, str(created["metadata"]["uid"]), kind=TRAINJOB, deps=(runtime,)
        )
    for job in jobs.values():
        wait_until(
            functools.partial(_placed_in, live, job, "member-2"),
            what=f"{job.name} placed in member-2",
        )
        _running_with_deps(live, job, "member-2", members)

    # The first leaves: nothing of it stays; the runtime does, for the second.
    first = dataclasses.replace(jobs["tj-a"], deps=())
    live.api.delete(*TRAINJOB, "tj-a", namespace)
    wait_until(
        lambda: live.job(namespace, "tj-a", TRAINJOB) is None, what="the first TrainJob gone"
    )
    _wait_none_left(live, first, members, what="nothing of the first TrainJob left")
    shared = _get(live.clusters["member-2"], TRAINING_RUNTIME, "torch", namespace)
    assert shared is not None, "the runtime deleted while the second TrainJob uses it"
    assert _labels(shared).get(c.MANAGED_BY_LABEL) == FLEET_ID

    live.api.delete(*TRAINJOB, "tj-b", namespace)
    _wait_none_left(
        live, jobs["tj-b"], members, what="nothing of the last TrainJob left, its runtime included"
    )
