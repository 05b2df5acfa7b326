"""A member that gang-schedules with Kubernetes' own Workload API, on real API servers (issue 27).

member-5 runs Kubernetes v1.37.2 built from its Go modules: the API server serves the
Workload API's PodGroup (`GenericWorkload`), and the upstream kube-scheduler gang-schedules it
(`GangScheduling`) and places a PodGroup with a topology constraint inside one domain
(`TopologyAwareWorkloadScheduling`). It is joined for this module only, the way users join
theirs, and tainted so that no other test's gang goes there. Each test confines its jobs to the
fake nodes it adds (labelled with its namespace, and with racks where it is about racks).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from fleet.core.gangmarks import KUBERNETES_POD_GROUP_LABEL
from fleet.demo import seeds
from fleet.kube import ApiError
from fleet.sandbox.process import log_tail
from fleet.testing.kube import ClusterClient, wait_until
from fleet.testing.pytest_plugin import NATIVE_MEMBER
from fleet.testing.workloads import batch_job, gang_policy, jobset, pytorchjob, with_node_selector

from .conftest import FLEET_ID, Fleet, joined_apart
from .test_trust import _stored_token_client

MEMBER_CLUSTER = ("fleet.dev/v1alpha1", "MemberCluster")
POD_GROUP = ("scheduling.k8s.io/v1beta1", "PodGroup")
MUTATING_POLICY = ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy")
TFJOB = ("kubeflow.org/v1", "TFJob")
JOB = ("batch/v1", "Job")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
TAINT = {"key": "fleet.dev/native", "value": "e2e", "effect": "NoSchedule"}
RACK = "topology.kubernetes.io/rack"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


@pytest.fixture(scope="module")
def native(fleet: Fleet) -> Iterator[ClusterClient]:
    """member-5 joined with fleet join and tainted for this module."""
    with joined_apart(fleet, NATIVE_MEMBER, TAINT) as member:
        yield member


@pytest.fixture(autouse=True)
def scheduler_log_on_failure(fleet: Fleet, request: pytest.FixtureRequest) -> Iterator[None]:
    """Whether a gang bound is kube-scheduler's doing: a failed test shows its log's end."""
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        path = fleet.sandbox.cluster(NATIVE_MEMBER).log("kube-scheduler")
        print(f"\n{NATIVE_MEMBER} kube-scheduler log:\n{log_tail(path, 80)}")


def _policy(namespace: str, kinds: tuple[str, ...] = ("PyTorchJob",)) -> dict[str, Any]:
    """Gangs of these kinds go to member-5 only (its taint tolerated)."""
    policy = gang_policy("gang", namespace, kinds=kinds, cluster_names=[NATIVE_MEMBER])
    policy["spec"]["placement"]["clusterTolerations"] = [
        {"key": TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}
    ]
    return policy


def _racks_of(member: ClusterClient, pods: list[dict[str, Any]]) -> set[str | None]:
    racks = set()
    for pod in pods:
        node = member.get("v1", "Node", pod["spec"]["nodeName"]) or {}
        racks.add((node.get("metadata") or {}).get("labels", {}).get(RACK))
    return racks


def _in_group(pods: list[dict[str, Any]], group: str) -> bool:
    return all((p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group for p in pods)


def test_join_names_kubernetes_in_the_gang_column_and_installs_the_scheduling_group_policy(
    live: Fleet, native: ClusterClient
):
    # join wrote it: right from the first `kubectl get membercluster`, not after a probe
    member = live.api.get(*MEMBER_CLUSTER, NATIVE_MEMBER) or {}
    assert (member.get("status") or {}).get("gangScheduler") == "Kubernetes"
    policy = native.get(*MUTATING_POLICY, "scheduling-group.fleet-member.fleet.dev")
    assert policy is not None
    assert policy["metadata"]["labels"]["fleet.dev/fleet-id"] == FLEET_ID


def test_the_member_holds_a_native_gang_whole_until_every_pod_fits(
    native: ClusterClient, namespace: str, add_nodes
):
    """The member's own guarantee, without fleet: a PodGroup of 3 with room for 2 binds none;
    with a third node all three run. The pods join it only by the label, as fleet's do."""
    add_nodes(NATIVE_MEMBER, count=2, gpu=1, labels={"test": namespace})
    native.create(
        {
            "apiVersion": POD_GROUP[0],
            "kind": POD_GROUP[1],
            "metadata": {"name": "gang", "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        }
    )
    for i in range(3):
        native.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{i}",
                    "namespace": namespace,
                    "labels": {KUBERNETES_POD_GROUP_LABEL: "gang"},
                },
                "spec": {
                    "nodeSelector": {"test": namespace},
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "resources": {
                                "requests": {"nvidia.com/gpu": "1"},
                                "limits": {"nvidia.com/gpu": "1"},
                            },
                        }
                    ],
                },
            }
        )
    pods = native.pods(namespace)
    assert len(pods) == 3 and _in_group(pods, "gang")  # the admission policy joined them

    def judged() -> dict[str, Any] | None:
        group = native.get(*POD_GROUP, "gang", namespace) or {}
        conditions = (group.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodGroupInitiallyScheduled"), None)

    # The member's scheduler tried the whole group and said it does not fit: no pod is bound.
    verdict = wait_until(judged, timeout=90, what="the scheduler's verdict on the PodGroup")
    assert (verdict["status"], verdict["reason"]) == ("False", "Unschedulable")
    assert not any(p["spec"].get("nodeName") for p in native.pods(namespace))

    add_nodes(NATIVE_MEMBER, count=1, gpu=1, labels={"test": namespace})
    wait_until(
        lambda: all(p["status"].get("phase") == "Running" for p in native.pods(namespace)),
        timeout=90,
        what="the whole gang running",
    )
    assert len({p["spec"]["nodeName"] for p in native.pods(namespace)}) == 3


def test_a_required_rack_lands_whole_in_one_rack_with_its_pod_group(
    live: Fleet, native: ClusterClient, namespace: str, add_nodes
):
    # Two racks of two 1-GPU nodes and one of four: master + 2 workers (3 GPUs) fit only in c.
    for rack, count in (("a", 2), ("b", 2), ("c", 4)):
        add_nodes(
            NATIVE_MEMBER,
            count=count,
            gpu=1,
            labels={"test": namespace, RACK: f"{namespace}-{rack}"},
        )
    live.api.create(_policy(namespace))
    job = pytorchjob("racked", namespace=namespace, node_selector={"test": namespace}, workers=2)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"].setdefault("metadata", {})["annotations"] = {
            REQUIRED: RACK,
            "kueue.x-k8s.io/podset-group-name": "all",  # master and workers share the rack
        }
    live.api.create(job)

    pods = live.wait_running(namespace, "racked", NATIVE_MEMBER, pods=3, timeout=120)
    assert _racks_of(native, pods) == {f"{namespace}-c"}
    assert _in_group(pods, "racked")
    group = native.get(*POD_GROUP, "racked", namespace)
    assert group is not None
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    binding = live.binding(namespace, "racked")
    (target,) = binding["spec"]["clusters"]
    assert [(d["level"], d["value"]) for d in target["domains"]] == [(RACK, f"{namespace}-c")]


def test_with_too_few_gpus_in_any_rack_it_waits_on_the_fleet_and_no_pod_is_made(
    live: Fleet, native: ClusterClient, namespace: str, add_nodes
):
    for rack in ("a", "b"):
        add_nodes(
            NATIVE_MEMBER, count=2, gpu=1, labels={"test": namespace, RACK: f"{namespace}-{rack}"}
        )
    live.api.create(_policy(namespace))
    job = pytorchjob("no-rack", namespace=namespace, node_selector={"test": namespace}, workers=2)
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"].setdefault("metadata", {})["annotations"] = {
            REQUIRED: RACK,
            "kueue.x-k8s.io/podset-group-name": "all",
        }
    live.api.create(job)

    def reason() -> dict[str, Any] | None:
        b = live.binding(namespace, "no-rack")
        found = ((b or {}).get("status") or {}).get("pendingReasons") or []
        return next((r for r in found if r["cluster"] == NATIVE_MEMBER), None)

    why = wait_until(reason, what="member-5's pending reason")
    assert "largest rack" in why["reason"]
    assert (why.get("facts") or {}).get("podsThatFit") == 2
    assert live.target(namespace, "no-rack") is None
    assert native.pods(namespace) == []
    assert native.get(*POD_GROUP, "no-rack", namespace) is None


def test_the_seeds_tfjob_runs_whole_there(live: Fleet, native: ClusterClient, namespace, add_nodes):
    """The seeds' TFJob (1 PS + 4 workers x 2 GPUs, min-available 5) through the fleet."""
    add_nodes(NATIVE_MEMBER, count=2, gpu=4, labels={"test": namespace})
    live.api.create(_policy(namespace, kinds=("TFJob",)))
    job = with_node_selector(seeds.manifest("tf-smoke-gpu.yaml"), {"test": namespace})
    job["metadata"]["namespace"] = namespace
    live.api.create(job)
    pods = live.wait_running(
        namespace, job["metadata"]["name"], NATIVE_MEMBER, kind=TFJOB, pods=5, timeout=120
    )
    assert _in_group(pods, job["metadata"]["name"])
    group = native.get(*POD_GROUP, job["metadata"]["name"], namespace)
    assert group is not None and group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 5


@pytest.mark.parametrize("kind", [JOB, JOBSET], ids=lambda k: k[1])
def test_a_batch_job_and_a_jobset_run_as_one_native_gang(
    live: Fleet, native: ClusterClient, namespace, add_nodes, kind
):
    add_nodes(NATIVE_MEMBER, count=1, gpu=8, labels={"test": namespace})
    live.api.create(_policy(namespace, kinds=(kind[1],)))
    if kind == JOB:
        job, pods = batch_job("b", namespace=namespace, node_selector={"test": namespace}), 2
    else:
        job = jobset("b", namespace=namespace, node_selector={"test": namespace})
        pods = 1 + 2 * 2  # a leader and 2 workers x 2 pods
    live.api.create(job)
    found = live.wait_running(namespace, "b", NATIVE_MEMBER, kind=kind, pods=pods, timeout=120)
    assert _in_group(found, "b")
    group = native.get(*POD_GROUP, "b", namespace)
    assert group is not None and group["spec"]["schedulingPolicy"]["gang"]["minCount"] == pods
    # The PodGroup is the copy's: gone with it.
    live.api.delete(*kind, "b", namespace)
    wait_until(
        lambda: native.get(*POD_GROUP, "b", namespace) is None,
        timeout=60,
        what="the PodGroup deleted with the copy",
    )


def test_the_token_fleet_stores_writes_only_its_own_pod_groups_and_no_admission_policy(
    live: Fleet, native: ClusterClient, namespace: str
):
    """As an attacker holding the token fleet stores for member-5, by raw requests: the
    PodGroup rule fleet gained there is guarded like every kind it writes, and the
    scheduling-group policy join installed is out of its reach."""
    marker = "probe-" + secrets.token_hex(4)
    theirs = {
        "apiVersion": POD_GROUP[0],
        "kind": POD_GROUP[1],
        "metadata": {"name": "theirs", "namespace": namespace, "labels": {"probe": marker}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    native.create(theirs)
    policy_name = "scheduling-group.fleet-member.fleet.dev"
    with _stored_token_client(live, NATIVE_MEMBER) as attacker:

        def refused(call: Any) -> None:
            with pytest.raises(ApiError) as caught:
                call()
            assert caught.value.status == 403, caught.value
            assert marker not in caught.value.body, "the object's data in the answer"

        # A PodGroup fleet did not write: not read through a patch, not changed, not deleted.
        refused(lambda: attacker.patch(*POD_GROUP, "theirs", {}, namespace))
        refused(lambda: attacker.patch(*POD_GROUP, "theirs", [], namespace, patch_type="json"))
        refused(lambda: attacker.apply(theirs, field_manager="attacker"))
        refused(lambda: attacker.delete(*POD_GROUP, "theirs", namespace))
        # None without fleet's mark, none in a system namespace even with it.
        unmarked = {**theirs, "metadata": {"name": "unmarked", "namespace": namespace}}
        refused(lambda: attacker.create(unmarked))
        marked = {"labels": {"fleet.dev/managed-by": FLEET_ID}}
        in_system = {**theirs, "metadata": {"name": "sys", "namespace": "kube-system", **marked}}
        refused(lambda: attacker.create(in_system))
        # The admission policy that joins pods to their PodGroup: not changed, not deleted, and
        # no policy of the token's own.
        refused(lambda: attacker.patch(*MUTATING_POLICY, policy_name, {}))
        refused(lambda: attacker.delete(*MUTATING_POLICY, policy_name))
        own = {
            "apiVersion": MUTATING_POLICY[0],
            "kind": MUTATING_POLICY[1],
            "metadata": {"name": "attacker", **marked},
            "spec": {"failurePolicy": "Ignore", "reinvocationPolicy": "Never"},
        }
        refused(lambda: attacker.create(own))
        # What fleet needs is still allowed: a PodGroup of its own, marked, in a tenant namespace.
        ours = {**theirs, "metadata": {"name": "ours", "namespace": namespace, **marked}}
        attacker.create(ours)  # (fleet never deletes one: the member's GC does, with the copy)
    after = native.get(*POD_GROUP, "theirs", namespace)
    assert after is not None and after["metadata"]["labels"] == {"probe": marker}
    assert native.get(*MUTATING_POLICY, policy_name) is not None
