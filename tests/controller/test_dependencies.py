"""propagateDeps as a Karmada user expects it, on in-memory API servers: a member's own object is
never changed under `conflictResolution: Abort` (the job goes elsewhere, or waits, and says
why), taken over only under `Overwrite`; dependencies follow the fleet within one resync; and
a dependency fleet created goes when no job of fleet's in that member uses it any more.

The members answer as the lead's admission policy makes them answer (`admission_policy`): fleet
may update or delete only what carries its mark, or take a member's object over in a namespace
labelled `fleet.dev/allow-overwrite=true`. fleet never reads a dependency in a member:
every test checks it sent no GET there.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from fleet.api import constants as c
from fleet.controller.resync import resync_once
from fleet.core.gangmarks import COSCHEDULING
from fleet.core.placement import DEPENDENCY_CONFLICT
from fleet.core.taints import Taint
from fleet.testing.workloads import gang_policy, pytorchjob, training_runtime, trainjob
from tests.controller.apiserver import MemoryApi, status
from tests.controller.harness import FLEET_ID, NAMESPACE, FakeMember, World, conditions

CONFIGMAP = ("v1", "ConfigMap")
SECRET = ("v1", "Secret")
DEPENDENCY_PLURALS = ("configmaps", "secrets", "serviceaccounts", "persistentvolumeclaims")


def admission_policy(api: MemoryApi) -> Callable[[httpx.Request], httpx.Response | None]:
    """The member's ValidatingAdmissionPolicy for fleet's identity: an UPDATE (patch) or DELETE
    of a dependency whose stored object lacks fleet's mark is refused (403), unless it is a
    takeover in a namespace labelled to allow it."""

    def judge(request: httpx.Request) -> httpx.Response | None:
        parts = request.url.path.strip("/").split("/")
        if request.method not in ("PATCH", "DELETE") or len(parts) != 6:
            return None
        _api, _v1, _ns, namespace, plural, name = parts
        if plural not in DEPENDENCY_PLURALS:
            return None
        kind = {"configmaps": "ConfigMap", "secrets": "Secret"}.get(plural, plural)
        old = api.get("v1", kind, name, namespace)
        if old is None:
            return None
        labels = old["metadata"].get("labels") or {}
        if labels.get(c.MANAGED_BY_LABEL) == FLEET_ID:
            return None
        body = json.loads(request.content or b"{}")
        preconditions = (body.get("preconditions") if isinstance(body, dict) else None) or {}
        if preconditions.get("uid") not in (None, old["metadata"]["uid"]):
            return None  # the API server checks a delete's preconditions before admission

        ns_labels = (api.get("v1", "Namespace", namespace) or {})["metadata"].get("labels") or {}
        allowed = ns_labels.get(c.ALLOW_OVERWRITE_LABEL) == "true"
        if request.method == "PATCH" and allowed:
            return None
        return status(
            403,
            "Forbidden",
            f'{plural} "{name}" is forbidden: ValidatingAdmissionPolicy denied request: '
            "fleet may change only what it created",
        )

    return judge


def member(
    world: World, name: str, *, gpus: int = 4, overwrite_allowed: bool = False
) -> FakeMember:
    """A member with the job's namespace (labelled to allow takeovers, if asked) and the
    admission policy."""
    fake = world.add_member(name, gpus=gpus)
    labels = {c.ALLOW_OVERWRITE_LABEL: "true"} if overwrite_allowed else {}
    fake.api.put(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": labels}}
    )
    fake.member.namespaces.add(NAMESPACE)
    fake.api.interceptors.append(admission_policy(fake.api))
    return fake


def config_map(name: str, value: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(labels)},
        "data": {"v": value},
    }


def secret(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "type": "Opaque",
        "data": {"token": value},
    }


def job_using(
    name: str, *, config_maps: tuple[str, ...] = (), secrets: tuple[str, ...] = ()
) -> Any:
    """A PyTorchJob whose pods mount these ConfigMaps and Secrets."""
    job = pytorchjob(name)
    volumes = [{"name": f"cm-{n}", "configMap": {"name": n}} for n in config_maps] + [
        {"name": f"s-{n}", "secret": {"secretName": n}} for n in secrets
    ]
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["volumes"] = copy.deepcopy(volumes)
    return job


def policy(resolution: str) -> dict[str, Any]:
    gang = gang_policy("gang", NAMESPACE, propagate_deps=True)
    gang["spec"]["conflictResolution"] = resolution
    return gang


def binding_status(world: World, key: Any) -> dict[str, Any]:
    return (world.binding(key) or {}).get("status") or {}


def placed_on(world: World, key: Any) -> str | None:
    clusters = ((world.binding(key) or {}).get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


def dependency_reads(fake: FakeMember) -> list[str]:
    """GETs (and lists) of dependency kinds fleet sent to the member: there must be none."""
    return [
        str(r.url)
        for r in fake.api.requests
        if r.method == "GET" and any(f"/{p}" in r.url.path for p in DEPENDENCY_PLURALS)
    ]


# -- conflictResolution: Abort ------------------------------------------------------------------


async def test_abort_leaves_a_members_own_config_map_alone_and_the_job_goes_elsewhere():
    world = World()
    first = member(world, "member-1", gpus=4)  # the tighter fit: placement's first choice
    first.api.put(config_map("train-config", "member-own", owner="the-member"))
    before = copy.deepcopy(first.api.get(*CONFIGMAP, "train-config", NAMESPACE))
    world.fleet_api.put(config_map("train-config", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("train-config",)))

    # Alone, member-1 refuses the job: it waits, and says which object is in the way.
    await world.reconcile(key)
    assert first.api.get(*CONFIGMAP, "train-config", NAMESPACE) == before  # byte for byte
    assert first.copy("job") is None
    fully_applied = conditions(world.binding(key))[c.CONDITION_FULLY_APPLIED]
    assert (fully_applied["status"], fully_applied["reason"]) == ("False", DEPENDENCY_CONFLICT)
    assert f"ConfigMap {NAMESPACE}/train-config in member-1" in fully_applied["message"]
    (event,) = world.events(c.REASON_DEPENDENCY_CONFLICT, key)
    assert event["type"] == "Warning"
    assert f"ConfigMap {NAMESPACE}/train-config in member-1" in event["message"]
    assert key in world.queue.added  # placed again at once

    await world.reconcile(key)
    assert placed_on(world, key) is None
    (reason,) = binding_status(world, key)["pendingReasons"]
    assert (reason["cluster"], reason["code"]) == ("member-1", DEPENDENCY_CONFLICT)
    assert "train-config" in reason["reason"]
    assert first.api.get(*CONFIGMAP, "train-config", NAMESPACE) == before

    # Another member arrives: the job goes there, with the fleet's ConfigMap.
    second = member(world, "member-2", gpus=8)
    await world.reconcile(key)
    assert placed_on(world, key) == "member-2"
    assert second.copy("job") is not None
    made = second.api.get(*CONFIGMAP, "train-config", NAMESPACE)
    assert made["data"] == {"v": "fleet"}
    assert made["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID
    (record,) = binding_status(world, key)["dependencies"]
    assert record["cluster"] == "member-2" and record["uid"] == made["metadata"]["uid"]
    assert first.api.get(*CONFIGMAP, "train-config", NAMESPACE) == before
    assert dependency_reads(first) == [] and dependency_reads(second) == []


async def test_abort_deletes_what_it_created_for_a_job_whose_own_copy_is_not_fleets():
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(config_map("fresh", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("fresh",)))
    # The member has a PyTorchJob of that name that is not fleet's copy, created a moment ago:
    # fleet's watch has not delivered it yet, so the copy is created outright (and 409s).
    theirs = pytorchjob("job")
    theirs["metadata"]["namespace"] = NAMESPACE
    only.api.put(theirs)
    only.jobs.store.clear()

    await world.reconcile(key)

    # The ConfigMap was created before the job's own 409, then deleted again by its UID.
    creates = [r for r in only.api.requests if r.method == "POST" and "/configmaps" in r.url.path]
    assert len(creates) == 1
    assert only.api.get(*CONFIGMAP, "fresh", NAMESPACE) is None
    assert not copy_is_fleets(only.copy("job"))
    applied = conditions(world.binding(key))[c.CONDITION_FULLY_APPLIED]
    assert applied["status"] == "False" and "PyTorchJob" in applied["message"]


async def test_a_job_whose_own_copy_is_known_not_fleets_writes_nothing_in_the_member():
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(config_map("fresh", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("fresh",)))
    theirs = pytorchjob("job")
    theirs["metadata"]["namespace"] = NAMESPACE
    only.api.put(theirs)  # fleet's watch of the member has seen it

    await world.reconcile(key)

    assert [r.method for r in only.api.requests if r.method != "GET"] == []
    assert only.api.get(*CONFIGMAP, "fresh", NAMESPACE) is None


def copy_is_fleets(obj: Any) -> bool:
    return bool(obj) and c.FLEET_UID_LABEL in (obj["metadata"].get("labels") or {})


# -- conflictResolution: Overwrite --------------------------------------------------------------


async def test_overwrite_takes_a_members_config_map_over_where_the_namespace_allows_it():
    world = World()
    only = member(world, "member-1", overwrite_allowed=True)
    only.api.put(config_map("train-config", "member-own", owner="the-member"))
    world.fleet_api.put(config_map("train-config", "fleet"))
    world.apply_policy(policy("Overwrite"))
    key = world.submit(job_using("job", config_maps=("train-config",)))

    await world.reconcile(key)

    taken = only.api.get(*CONFIGMAP, "train-config", NAMESPACE)
    assert taken["data"] == {"v": "fleet"}
    assert taken["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID
    assert taken["metadata"]["annotations"][c.DEPENDENCY_ADOPTED_ANNOTATION] == "true"
    assert copy_is_fleets(only.copy("job"))
    assert world.events("AdoptedExistingDependency", key)
    # Taken over, not created: fleet records no UID, so it never deletes it.
    (record,) = binding_status(world, key)["dependencies"]
    assert "uid" not in record

    await world.delete(key)
    await world.reconcile(key)
    assert only.copy("job") is None
    assert only.api.get(*CONFIGMAP, "train-config", NAMESPACE)["data"] == {"v": "fleet"}


async def test_overwrite_the_member_refuses_is_a_conflict_and_changes_nothing():
    world = World()
    only = member(world, "member-1", overwrite_allowed=False)
    only.api.put(config_map("train-config", "member-own"))
    before = copy.deepcopy(only.api.get(*CONFIGMAP, "train-config", NAMESPACE))
    world.fleet_api.put(config_map("train-config", "fleet"))
    world.apply_policy(policy("Overwrite"))
    key = world.submit(job_using("job", config_maps=("train-config",)))

    await world.reconcile(key)

    assert only.api.get(*CONFIGMAP, "train-config", NAMESPACE) == before
    assert only.copy("job") is None
    (event,) = world.events(c.REASON_DEPENDENCY_CONFLICT, key)
    assert c.ALLOW_OVERWRITE_LABEL in event["message"]
    assert "ValidatingAdmissionPolicy denied" in event["message"]  # the member's own words


# -- kept in step -------------------------------------------------------------------------------


async def test_a_rotated_secret_reaches_the_member_at_the_next_resync():
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(secret("creds", "b2xk"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", secrets=("creds",)))
    await world.reconcile(key)
    assert only.api.get(*SECRET, "creds", NAMESPACE)["data"] == {"token": "b2xk"}

    # A steady job's reconcile writes nothing to the member.
    writes = len([r for r in only.api.requests if r.method != "GET"])
    await world.reconcile(key)
    assert len([r for r in only.api.requests if r.method != "GET"]) == writes

    world.fleet_api.merge(*SECRET, "creds", NAMESPACE, {"data": {"token": "bmV3"}})
    added = len(world.queue.added)
    assert resync_once(world.shell) == 1
    assert key in world.queue.added[added:]
    await world.reconcile(key)

    rotated = only.api.get(*SECRET, "creds", NAMESPACE)
    assert rotated["data"] == {"token": "bmV3"}
    patch = [r for r in only.api.requests if r.method == "PATCH" and "/secrets/" in r.url.path]
    (sent,) = patch
    assert json.loads(sent.content)[0] == {
        "op": "test",
        "path": "/metadata/labels/fleet.dev~1managed-by",
        "value": FLEET_ID,
    }
    digests = {r["name"]: r["digest"] for r in binding_status(world, key)["dependencies"]}
    assert digests["creds"] == rotated["metadata"]["annotations"][c.APPLIED_DIGEST_ANNOTATION]
    assert dependency_reads(only) == []


async def test_a_dependency_the_member_replaced_with_its_own_is_not_written_over():
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(config_map("cfg", "one"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("cfg",)))
    await world.reconcile(key)
    # The member's admins replace fleet's ConfigMap with their own; the fleet's changes.
    only.api.remove(*CONFIGMAP, "cfg", NAMESPACE)
    only.api.put(config_map("cfg", "theirs"))
    world.fleet_api.merge(*CONFIGMAP, "cfg", NAMESPACE, {"data": {"v": "two"}})

    await world.reconcile(key)

    assert only.api.get(*CONFIGMAP, "cfg", NAMESPACE)["data"] == {"v": "theirs"}
    assert copy_is_fleets(only.copy("job"))  # the running job is not taken away for it
    assert world.events(c.REASON_DEPENDENCY_CONFLICT, key)

    # Deleted with the job? No: the UID fleet recorded is not the member's object's.
    await world.delete(key)
    await world.reconcile(key)
    assert only.api.get(*CONFIGMAP, "cfg", NAMESPACE)["data"] == {"v": "theirs"}


# -- cleanup ------------------------------------------------------------------------------------


async def test_deleting_the_job_deletes_what_fleet_created_and_nothing_of_the_members():
    world = World()
    only = member(world, "member-1")
    only.api.put(config_map("unrelated", "member-own"))
    world.fleet_api.put(config_map("cfg", "fleet"))
    world.fleet_api.put(secret("creds", "c2VjcmV0"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("cfg",), secrets=("creds",)))
    await world.reconcile(key)
    assert only.api.get(*CONFIGMAP, "cfg", NAMESPACE) is not None

    await world.delete(key)
    await world.reconcile(key)

    assert world.workload(key) is None
    assert only.api.get(*CONFIGMAP, "cfg", NAMESPACE) is None
    assert only.api.get(*SECRET, "creds", NAMESPACE) is None
    assert only.api.get(*CONFIGMAP, "unrelated", NAMESPACE) is not None
    deletes = [r for r in only.api.requests if r.method == "DELETE"]
    (sent,) = [r for r in deletes if "/configmaps/" in r.url.path]
    assert json.loads(sent.content)["preconditions"]["uid"]  # by UID, never by name alone
    assert dependency_reads(only) == []


async def test_a_dependency_two_jobs_use_survives_the_deletion_of_one():
    world = World()
    only = member(world, "member-1", gpus=8)
    world.fleet_api.put(config_map("shared", "fleet"))
    world.apply_policy(policy("Abort"))
    first = world.submit(job_using("first", config_maps=("shared",)))
    second = world.submit(job_using("second", config_maps=("shared",)))
    await world.reconcile(first)
    await world.reconcile(second)
    assert placed_on(world, first) == placed_on(world, second) == "member-1"

    await world.delete(first)
    await world.reconcile(first)
    assert world.workload(first) is None
    assert only.api.get(*CONFIGMAP, "shared", NAMESPACE) is not None  # the second uses it

    await world.delete(second)
    await world.reconcile(second)
    assert only.api.get(*CONFIGMAP, "shared", NAMESPACE) is None  # nobody does any more


async def test_a_dependency_the_job_stops_using_is_deleted_and_the_rest_kept():
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(config_map("old", "fleet"))
    world.fleet_api.put(config_map("new", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("old",)))
    await world.reconcile(key)
    assert only.api.get(*CONFIGMAP, "old", NAMESPACE) is not None

    changed = job_using("job", config_maps=("new",))
    world.fleet_api.merge(*key_parts(key), {"spec": changed["spec"]})
    await world.reconcile(key)

    assert only.api.get(*CONFIGMAP, "old", NAMESPACE) is None
    assert only.api.get(*CONFIGMAP, "new", NAMESPACE) is not None
    names = [r["name"] for r in binding_status(world, key)["dependencies"]]
    assert names == ["new"]


def key_parts(key: Any) -> tuple[str, str, str, str]:
    return (key.api_version, key.kind, key.name, key.namespace)


@pytest.mark.parametrize("purge_mode", ["Immediately", "Gracefully"])
async def test_a_failover_takes_the_dependencies_fleet_created_along_with_the_old_copy(
    purge_mode: str,
):
    world = World()
    first = member(world, "member-1", gpus=4)  # the first choice
    second = member(world, "member-2", gpus=8)
    world.fleet_api.put(config_map("cfg", "fleet"))
    gang = policy("Abort")
    gang["spec"]["failover"]["application"]["purgeMode"] = purge_mode
    world.apply_policy(gang)
    key = world.submit(job_using("job", config_maps=("cfg",)))
    await world.reconcile(key)
    assert placed_on(world, key) == "member-1"
    first.set_job_state("job", "Failed")
    await world.reconcile(key)
    world.clock.advance(31)  # past tolerationSeconds
    await world.reconcile(key)
    assert placed_on(world, key) == "member-2"
    if purge_mode == "Gracefully":
        second.set_job_state("job", "Running")
        await world.reconcile(key)

    assert first.copy("job") is None
    assert first.api.get(*CONFIGMAP, "cfg", NAMESPACE) is None
    assert second.api.get(*CONFIGMAP, "cfg", NAMESPACE) is not None
    clusters = [r["cluster"] for r in binding_status(world, key)["dependencies"]]
    assert clusters == ["member-2"]


async def test_a_copy_the_member_refuses_takes_back_the_dependencies_created_for_it():
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(config_map("cfg", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("cfg",)))

    def refuse_jobs(request: httpx.Request) -> httpx.Response | None:
        if request.method in ("POST", "PATCH") and "/pytorchjobs" in request.url.path:
            return status(422, "Invalid", "PyTorchJob.kubeflow.org is invalid: spec: Required")
        return None

    only.api.interceptors.append(refuse_jobs)
    await world.reconcile(key)

    assert only.copy("job") is None
    assert only.api.get(*CONFIGMAP, "cfg", NAMESPACE) is None
    applied = conditions(world.binding(key))[c.CONDITION_FULLY_APPLIED]
    assert applied["status"] == "False" and "spec: Required" in applied["message"]


# -- a TrainJob's runtime: one more dependency ----------------------------------------------------

TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
RUNTIME = ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")
CLUSTER_RUNTIME = ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")


def trainer_member(world: World, name: str) -> FakeMember:
    """A coscheduling member that runs TrainJobs, with the job's namespace."""
    fake = world.add_member(name, gpus=8, kinds=(TRAINJOB,))
    fake.member.declared_gang_scheduler = COSCHEDULING
    fake.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    fake.member.namespaces.add(NAMESPACE)
    return fake


def trainer_policy(namespace: str = NAMESPACE) -> dict[str, Any]:
    return gang_policy("gang", namespace, kinds=("TrainJob",), propagate_deps=True)


def runtime_writes(fake: FakeMember) -> list[str]:
    """The writes fleet sent to the member's runtimes."""
    return [
        f"{r.method} {r.url.path}"
        for r in fake.api.requests
        if r.method != "GET" and "trainingruntimes" in r.url.path
    ]


async def test_a_runtime_changed_on_the_fleet_is_written_again_in_the_member():
    world = World()
    only = trainer_member(world, "member-1")
    world.fleet_api.put(training_runtime("torch", namespace=NAMESPACE, cpu="1"))
    world.apply_policy(trainer_policy())
    key = world.submit(trainjob("tj", "torch"))
    await world.reconcile(key)
    made = only.api.get(*RUNTIME, "torch", NAMESPACE)
    assert made is not None and made["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID
    (record,) = binding_status(world, key)["dependencies"]
    assert (record["kind"], record["uid"]) == ("TrainingRuntime", made["metadata"]["uid"])

    # A steady job writes nothing.
    writes = len(runtime_writes(only))
    await world.reconcile(key)
    assert len(runtime_writes(only)) == writes

    changed = training_runtime("torch", namespace=NAMESPACE, cpu="3")
    world.fleet_api.merge(*RUNTIME, "torch", NAMESPACE, {"spec": changed["spec"]})
    await world.reconcile(key)

    now = only.api.get(*RUNTIME, "torch", NAMESPACE)
    assert now is not None and now["spec"] == changed["spec"]
    assert now["metadata"]["uid"] == made["metadata"]["uid"]  # patched, not made again


async def test_a_runtime_goes_with_the_last_trainjob_that_names_it():
    world = World()
    only = trainer_member(world, "member-1")
    world.fleet_api.put(training_runtime("torch", namespace=NAMESPACE))
    world.apply_policy(trainer_policy())
    first = world.submit(trainjob("first", "torch"))
    second = world.submit(trainjob("second", "torch"))
    await world.reconcile(first)
    await world.reconcile(second)
    assert only.object(TRAINJOB, "first") is not None
    assert only.object(TRAINJOB, "second") is not None

    await world.delete(first)
    await world.reconcile(first)
    assert world.workload(first) is None
    assert only.api.get(*RUNTIME, "torch", NAMESPACE) is not None  # the second names it

    await world.delete(second)
    await world.reconcile(second)
    assert world.workload(second) is None
    assert only.api.get(*RUNTIME, "torch", NAMESPACE) is None


async def test_a_cluster_runtime_shared_across_namespaces_goes_with_the_last_trainjob():
    world = World()
    only = trainer_member(world, "member-1")
    world.fleet_api.put(training_runtime("torch", cluster=True))
    world.fleet_api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    world.apply_policy(trainer_policy())
    world.apply_policy(trainer_policy("other"))
    first = world.submit(trainjob("tj", "torch", cluster_runtime=True))
    second = world.submit(trainjob("tj", "torch", namespace="other", cluster_runtime=True))
    await world.reconcile(first)
    await world.reconcile(second)
    assert only.object(TRAINJOB, "tj", "other") is not None
    assert only.api.get(*CLUSTER_RUNTIME, "torch") is not None

    await world.delete(first)
    await world.reconcile(first)
    assert world.workload(first) is None
    assert only.api.get(*CLUSTER_RUNTIME, "torch") is not None  # the other namespace's names it

    await world.delete(second)
    await world.reconcile(second)
    assert only.api.get(*CLUSTER_RUNTIME, "torch") is None


async def test_a_runtime_the_member_has_of_its_own_is_used_and_never_touched():
    world = World()
    only = trainer_member(world, "member-1")
    theirs = training_runtime("torch", namespace=NAMESPACE, cpu="2")
    theirs["metadata"]["labels"] = {"owner": "the-member"}
    only.api.put(theirs)
    before = copy.deepcopy(only.api.get(*RUNTIME, "torch", NAMESPACE))
    world.fleet_api.put(training_runtime("torch", namespace=NAMESPACE, cpu="1"))
    world.apply_policy(gang_policy("gang", NAMESPACE, kinds=("TrainJob",)))
    key = world.submit(trainjob("tj", "torch"))

    await world.reconcile(key)
    assert only.object(TRAINJOB, "tj") is not None  # not a conflict: the job went there
    assert only.api.get(*RUNTIME, "torch", NAMESPACE) == before
    (record,) = binding_status(world, key)["dependencies"]
    assert "uid" not in record  # never fleet's to delete

    # Steady: not tried again; the fleet's changed: tried, refused, left as it is.
    writes = len(runtime_writes(only))
    await world.reconcile(key)
    assert len(runtime_writes(only)) == writes
    changed = training_runtime("torch", namespace=NAMESPACE, cpu="3")
    world.fleet_api.merge(*RUNTIME, "torch", NAMESPACE, {"spec": changed["spec"]})
    await world.reconcile(key)
    assert only.api.get(*RUNTIME, "torch", NAMESPACE) == before

    await world.delete(key)
    await world.reconcile(key)
    assert world.workload(key) is None
    assert only.api.get(*RUNTIME, "torch", NAMESPACE) == before
    assert not any(w.startswith("DELETE") for w in runtime_writes(only))


# -- fleet unjoin --leave -----------------------------------------------------------------------


async def test_leave_lets_the_dependencies_go_with_the_job_left_running():
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(config_map("cfg", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("cfg",)))
    await world.reconcile(key)
    made = only.api.get(*CONFIGMAP, "cfg", NAMESPACE)
    assert made is not None and made["metadata"]["labels"][c.MANAGED_BY_LABEL] == FLEET_ID
    only.set_job_state("job", "Running")

    only.member.taints = (Taint(c.UNJOINING_TAINT_KEY, "NoExecute", c.UNJOINING_LEAVE),)
    await world.reconcile(key)

    assert binding_status(world, key)["phase"] == "Released"
    left = only.api.get(*CONFIGMAP, "cfg", NAMESPACE)
    assert left is not None and left["metadata"]["uid"] == made["metadata"]["uid"]
    assert c.MANAGED_BY_LABEL not in (left["metadata"].get("labels") or {})
    assert left["data"] == {"v": "fleet"}
    assert not binding_status(world, key).get("dependencies")

    # Deleting the released job on the fleet leaves it with the job there.
    await world.delete(key)
    await world.reconcile(key)
    assert world.workload(key) is None
    assert only.api.get(*CONFIGMAP, "cfg", NAMESPACE) is not None
    assert only.copy("job") is not None
    assert dependency_reads(only) == []


async def test_a_cluster_back_under_another_name_loses_the_old_copys_dependencies_too():
    """Lost, failed over, its MemberCluster deleted, then the same cluster joins as `west`: the
    old copy is found by the cluster's identity and purged, and the ConfigMap fleet created for
    it there goes with it (its record was written under the old name)."""
    world = World()
    first = member(world, "member-1", gpus=4)  # the first choice
    member(world, "member-2", gpus=8)
    world.fleet_api.put(config_map("cfg", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("cfg",)))
    await world.reconcile(key)
    assert placed_on(world, key) == "member-1"
    first.set_ready(False)
    await world.reconcile(key)
    world.clock.advance(31)  # past tolerationSeconds
    await world.reconcile(key)
    assert placed_on(world, key) == "member-2"
    del world.registry.members["member-1"]  # its MemberCluster deleted while unreachable
    await world.reconcile(key)
    assert first.api.get(*CONFIGMAP, "cfg", NAMESPACE) is not None

    first.set_ready(True)
    world.rejoin(first, "west")
    await world.reconcile(key)

    assert first.copy("job") is None
    assert first.api.get(*CONFIGMAP, "cfg", NAMESPACE) is None
    clusters = [r["cluster"] for r in binding_status(world, key)["dependencies"]]
    assert clusters == ["member-2"]


async def test_a_dependency_created_just_before_a_crash_is_on_record_and_goes_with_the_job():
    """The ledger names everything fleet may have written in a member: a dependency is recorded
    (`creating`) before it is created, so a controller that dies right after the create leaves
    no object of fleet's that no record names (fleet cannot list ConfigMaps in a member to find
    one). The job deleted next: the dependency goes with it."""
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(config_map("cfg", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("cfg",)))

    def crash(request: httpx.Request) -> httpx.Response | None:
        if request.method == "POST" and "pytorchjobs" in request.url.path:
            raise httpx.ConnectError("the controller died here", request=request)
        return None

    only.api.interceptors.append(crash)
    with pytest.raises(Exception):  # noqa: B017 (whatever the crash looks like)
        await world.reconcile(key)
    only.api.interceptors.remove(crash)  # "restarted"
    assert only.api.get(*CONFIGMAP, "cfg", NAMESPACE) is not None  # created before the crash
    (record,) = binding_status(world, key)["dependencies"]
    assert (record["name"], record.get("creating")) == ("cfg", True)

    await world.delete(key)
    await world.reconcile(key)

    assert world.workload(key) is None
    assert only.api.get(*CONFIGMAP, "cfg", NAMESPACE) is None


async def test_a_dependency_recorded_before_a_crash_is_recorded_with_its_uid_on_the_next_write():
    world = World()
    only = member(world, "member-1")
    world.fleet_api.put(config_map("cfg", "fleet"))
    world.apply_policy(policy("Abort"))
    key = world.submit(job_using("job", config_maps=("cfg",)))

    def crash(request: httpx.Request) -> httpx.Response | None:
        if request.method == "POST" and "pytorchjobs" in request.url.path:
            raise httpx.ConnectError("the controller died here", request=request)
        return None

    only.api.interceptors.append(crash)
    with pytest.raises(Exception):  # noqa: B017
        await world.reconcile(key)
    only.api.interceptors.remove(crash)

    await world.reconcile(key)

    assert only.copy("job") is not None
    (record,) = binding_status(world, key)["dependencies"]
    made = only.api.get(*CONFIGMAP, "cfg", NAMESPACE)
    assert made is not None and record["uid"] == made["metadata"]["uid"]
    assert not record.get("creating")
