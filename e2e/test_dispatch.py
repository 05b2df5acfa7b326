"""Dispatch on real API servers: the fleet places each gang whole in one member that can hold it.

Each test confines its jobs to fake GPU nodes it adds (labelled with its namespace), so the
capacity a test reasons about is exactly the capacity it created.
"""

from __future__ import annotations

import pytest

from fleet.kube import ApiError
from fleet.testing.kube import job_condition, wait_until
from fleet.testing.workloads import gang_policy, pytorchjob

from .conftest import BINDING, FLEET_ID, MEMBERS, PYTORCHJOB, Fleet


def _job(namespace: str, name: str, **kw: object) -> dict:
    return pytorchjob(name, namespace=namespace, node_selector={"test": namespace}, **kw)


def test_dispatch_to_the_only_member_that_fits(live: Fleet, namespace, add_nodes):
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "pytorch-test", workers=2, gpus=1))

    wait_until(lambda: live.target(namespace, "pytorch-test"), what="a placement")
    assert live.target(namespace, "pytorch-test") == "member-2"
    live.wait_running(namespace, "pytorch-test", "member-2")
    assert live.copies(namespace, "pytorch-test") == ["member-2"]

    copy = live.clusters["member-2"].get(*PYTORCHJOB, "pytorch-test", namespace)
    fleet_uid = live.job(namespace, "pytorch-test")["metadata"]["uid"]
    assert copy["metadata"]["labels"]["fleet.dev/managed-by"] == FLEET_ID
    assert copy["metadata"]["labels"]["fleet.dev/fleet-uid"] == fleet_uid
    assert copy["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 3
    # member-2 runs coscheduling: the gang goes by minAvailable, from which the training
    # operator makes the PodGroup; ACK's pod-group labels are Koordinator's dialect, not its.
    for replica in copy["spec"]["pytorchReplicaSpecs"].values():
        labels = replica["template"]["metadata"]["labels"]
        assert "pod-group.scheduling.sigs.k8s.io/name" not in labels
        assert labels["fleet.dev/fleet-uid"] == fleet_uid
    group = live.clusters["member-2"].get(
        "scheduling.x-k8s.io/v1alpha1", "PodGroup", "pytorch-test", namespace
    )
    assert group["spec"]["minMember"] == 3

    assert (
        "ScheduleBindingSucceed",
        "Binding has been scheduled successfully. Result: {member-2:0,[{master 1} {worker 2}]}",
        "default-scheduler",
    ) in live.events(namespace, "pytorch-test")
    binding = live.binding(namespace, "pytorch-test")
    assert binding["status"]["aggregatedStatus"][0]["clusterName"] == "member-2"
    assert binding["status"]["aggregatedStatus"][0]["applied"] is True
    # Nothing on the fleet runs the job.
    assert live.api.pods(namespace) == []


def test_fragmented_member_is_not_chosen(live: Fleet, namespace, add_nodes):
    """member-1 has 8 GPUs free in sum but no node with 4; member-2 has one whole 8-GPU node."""
    add_nodes("member-1", count=4, gpu=2, labels={"test": namespace})
    add_nodes("member-2", count=1, gpu=8, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "by-nodes", workers=2, gpus=4, master_gpus=0))
    wait_until(lambda: live.target(namespace, "by-nodes"), what="a placement")
    assert live.target(namespace, "by-nodes") == "member-2"
    live.wait_running(namespace, "by-nodes", "member-2")

    # ACK One's rule, asked for explicitly, is fooled by the same numbers: the gang lands in
    # member-1 (8 GPUs free in sum) and waits there, whole, because no node has 4 free.
    sum_policy = gang_policy("gang-sum", namespace, kinds=("TFJob",), estimator="sum")
    live.api.create(sum_policy)
    tfjob = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "by-sum", "namespace": namespace},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "spec": {
                            "nodeSelector": {"test": namespace},
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "tf",
                                    "resources": {"limits": {"nvidia.com/gpu": 4}},
                                }
                            ],
                        }
                    },
                }
            }
        },
    }
    live.api.create(tfjob)
    wait_until(lambda: _target(live, namespace, "tfjob-by-sum"), what="the sum job's placement")
    assert _target(live, namespace, "tfjob-by-sum") == "member-1"
    # The member's scheduler has looked at both workers and found no node for either.
    pods = wait_until(
        lambda: _all_unschedulable(live, "member-1", namespace, "by-sum", 2),
        timeout=90,
        what="member-1's scheduler to find no node for the sum job's pods",
    )
    assert all(not p["spec"].get("nodeName") for p in pods)


def _unschedulable(pod: dict) -> bool:
    return any(
        (c["type"], c["status"], c.get("reason")) == ("PodScheduled", "False", "Unschedulable")
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _all_unschedulable(
    live: Fleet, member: str, namespace: str, job: str, count: int
) -> list[dict] | None:
    """The job's `count` pods once the member's scheduler marked each Unschedulable."""
    pods = live.clusters[member].pods(namespace, f"training.kubeflow.org/job-name={job}")
    unschedulable = [
        p
        for p in pods
        if any(
            c["type"] == "PodScheduled"
            and c["status"] == "False"
            and c.get("reason") == "Unschedulable"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    ]
    return pods if len(pods) == count and len(unschedulable) == count else None


def _target(live: Fleet, namespace: str, binding: str) -> str | None:
    obj = live.api.get(*BINDING, binding, namespace)
    clusters = ((obj or {}).get("spec") or {}).get("clusters") or []
    return clusters[0]["name"] if clusters else None


def test_waits_with_reasons_until_capacity_appears(live: Fleet, namespace, add_nodes):
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "waiter", workers=2, gpus=4, master_gpus=0))

    def pending_reasons():
        b = live.binding(namespace, "waiter")
        return ((b or {}).get("status") or {}).get("pendingReasons")

    reasons = wait_until(pending_reasons, what="pending reasons")
    assert {r["cluster"] for r in reasons} == set(MEMBERS)

    # The binding and the job are two writes; the job's condition may land a moment later.
    def scheduled_condition():
        conditions = ((live.job(namespace, "waiter") or {}).get("status") or {}).get("conditions")
        return next((c for c in conditions or [] if c["type"] == "Scheduled"), None)

    scheduled = wait_until(scheduled_condition, what="the Scheduled condition on the fleet job")
    assert scheduled["status"] == "False" and scheduled["reason"] == "NoClusterFit"
    assert "member-1:" in scheduled["message"]
    assert any(r == "ScheduleBindingFailed" for r, _, _ in live.events(namespace, "waiter"))
    assert live.copies(namespace, "waiter") == []

    add_nodes("member-3", count=1, gpu=8, labels={"test": namespace})
    wait_until(lambda: live.target(namespace, "waiter"), what="placement")
    assert live.target(namespace, "waiter") == "member-3"
    live.wait_running(namespace, "waiter", "member-3")


def test_status_is_mirrored_through_running_to_succeeded(live: Fleet, namespace, add_nodes):
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "mirror", workers=1, gpus=1))
    live.wait_running(namespace, "mirror", "member-1")
    assert live.state(namespace, "mirror") == "Running"
    live.mark("member-1", namespace, "mirror", "Succeeded")
    wait_until(
        lambda: job_condition(live.job(namespace, "mirror"), "Succeeded"),
        what="Succeeded on the fleet",
    )
    # The operator writes replica counts a moment after the condition: wait for them too.
    status = wait_until(
        lambda: (
            (s := live.job(namespace, "mirror")["status"])
            and (s.get("replicaStatuses") or {}).get("Worker", {}).get("succeeded") == 1
            and s
        ),
        what="replica statuses mirrored",
    )
    assert status["completionTime"] and status["startTime"]
    assert live.state(namespace, "mirror") == "Succeeded"
    wait_until(
        lambda: (live.binding(namespace, "mirror")["status"].get("phase")) == "Succeeded",
        what="binding Succeeded",
    )


def test_deleting_the_fleet_job_cleans_the_member(live: Fleet, namespace, add_nodes):
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "doomed", workers=1, gpus=1))
    live.wait_running(namespace, "doomed", "member-1")
    assert "fleet.dev/cleanup" in live.job(namespace, "doomed")["metadata"]["finalizers"]

    live.api.delete(*PYTORCHJOB, "doomed", namespace)
    wait_until(lambda: live.job(namespace, "doomed") is None, what="fleet job gone")
    wait_until(lambda: live.copies(namespace, "doomed") == [], what="member copy gone")
    wait_until(lambda: live.binding(namespace, "doomed") is None, what="binding collected")
    wait_until(lambda: not live.clusters["member-1"].pods(namespace), what="member pods gone")


def test_propagate_deps_brings_the_configmap(live: Fleet, namespace, add_nodes):
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace, propagate_deps=True))
    live.api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "train-config", "namespace": namespace},
            "data": {"lr": "0.01"},
        }
    )
    job = _job(namespace, "with-deps", workers=1, gpus=1)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        spec = replica["template"]["spec"]
        spec["volumes"] = [{"name": "config", "configMap": {"name": "train-config"}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "config", "mountPath": "/config"}]
    live.api.create(job)
    live.wait_running(namespace, "with-deps", "member-2")
    config = live.clusters["member-2"].get("v1", "ConfigMap", "train-config", namespace)
    assert config is not None and config["data"] == {"lr": "0.01"}


def test_a_policy_that_matches_nothing_leaves_the_job_alone(live: Fleet, namespace, add_nodes):
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("tf-only", namespace, kinds=("TFJob",)))
    live.api.create(_job(namespace, "orphan", workers=1, gpus=1))
    live.settle(namespace)  # a job created after it has been bound and placed
    assert live.binding(namespace, "orphan") is None
    assert live.copies(namespace, "orphan") == []
    assert not (live.job(namespace, "orphan")["metadata"].get("finalizers"))


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (
            {
                "failover": {
                    "application": {
                        "decisionConditions": {"tolerationSeconds": -1},
                        "purgeMode": "Immediately",
                    }
                }
            },
            "spec.failover.application.decisionConditions.tolerationSeconds",
        ),
        (
            {"failover": {"application": {"purgeMode": "Sometimes"}}},
            "spec.failover.application.purgeMode",
        ),
        (
            {
                "placement": {
                    "replicaScheduling": {"customSchedulingType": "Gang", "gangEstimator": "guess"}
                }
            },
            "spec.placement.replicaScheduling.gangEstimator",
        ),
        ({"resourceSelectors": []}, "spec.resourceSelectors"),
    ],
)
def test_invalid_policies_are_rejected_naming_the_field(live: Fleet, namespace, patch, field):
    policy = gang_policy("bad", namespace)
    policy["spec"].update(patch)
    with pytest.raises(ApiError) as err:
        live.api.create(policy)
    assert err.value.status == 422
    assert field in err.value.body


def test_a_broken_member_is_not_ready_and_the_others_keep_working(
    live: Fleet, namespace, add_nodes
):
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "broken-kubeconfig", "namespace": "fleet-system"},
        "stringData": {
            "kubeconfig": (
                "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
                "clusters: [{name: x, cluster: {server: 'https://127.0.0.1:1', "
                "insecure-skip-tls-verify: true}}]\n"
                "users: [{name: x, user: {token: abc}}]\n"
                "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
            )
        },
    }
    member = {
        "apiVersion": "fleet.dev/v1alpha1",
        "kind": "MemberCluster",
        "metadata": {"name": f"broken-{namespace[-4:]}"},
        "spec": {"kubeconfigSecretRef": {"namespace": "fleet-system", "name": "broken-kubeconfig"}},
    }
    live.api.apply(secret)
    live.api.create(member)
    try:

        def not_ready():
            mc = live.api.get("fleet.dev/v1alpha1", "MemberCluster", member["metadata"]["name"])
            conds = ((mc or {}).get("status") or {}).get("conditions") or []
            return next((c for c in conds if c["type"] == "Ready" and c["status"] == "False"), None)

        condition = wait_until(not_ready, what="broken member NotReady")
        assert condition["reason"] == "KubeconfigInvalid"
        assert "insecure-skip-tls-verify" in condition["message"]

        add_nodes("member-3", count=1, gpu=4, labels={"test": namespace})
        live.api.create(gang_policy("gang", namespace))
        live.api.create(_job(namespace, "unaffected", workers=1, gpus=1))
        live.wait_running(namespace, "unaffected", "member-3")
    finally:
        live.api.delete("fleet.dev/v1alpha1", "MemberCluster", member["metadata"]["name"])
        live.api.delete("v1", "Secret", "broken-kubeconfig", "fleet-system")


def test_spec_changes_reach_the_member_copy(live: Fleet, namespace, add_nodes):
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "edited", workers=1, gpus=1))
    live.wait_running(namespace, "edited", "member-2")
    live.api.patch(
        *PYTORCHJOB, "edited", {"spec": {"runPolicy": {"ttlSecondsAfterFinished": 600}}}, namespace
    )

    def member_ttl():
        copy = live.clusters["member-2"].get(*PYTORCHJOB, "edited", namespace) or {}
        return copy.get("spec", {}).get("runPolicy", {}).get("ttlSecondsAfterFinished")

    assert wait_until(member_ttl, what="the change applied in the member") == 600


def test_deleting_the_policy_leaves_placed_jobs_alone(live: Fleet, namespace, add_nodes):
    add_nodes("member-1", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "kept", workers=1, gpus=1))
    live.wait_running(namespace, "kept", "member-1")
    live.api.delete("policy.one.alibabacloud.com/v1alpha1", "PropagationPolicy", "gang", namespace)

    live.mark("member-1", namespace, "kept", "Succeeded")
    wait_until(
        lambda: job_condition(live.job(namespace, "kept"), "Succeeded"),
        what="status still mirrored",
    )
    assert live.copies(namespace, "kept") == ["member-1"]
    # The deletion has no status to wait on: a policy created after it, and a job it governs,
    # placed, say the controller has seen it. Then a job of the deleted policy's, and another
    # sentinel after it, say the controller has looked at that job too.
    live.settle(namespace, "sentinel-1")
    live.api.create(_job(namespace, "not-dispatched", workers=1, gpus=1))
    live.settle(namespace, "sentinel-2")
    assert live.binding(namespace, "not-dispatched") is None
    assert live.copies(namespace, "not-dispatched") == []
    live.api.delete(*PYTORCHJOB, "kept", namespace)
    wait_until(lambda: live.copies(namespace, "kept") == [], what="cleanup still works")


def test_deleting_the_fleet_namespace_cleans_the_member_too(live: Fleet, namespace, add_nodes):
    """The namespace controller may delete the binding before the job; the copy still goes."""
    add_nodes("member-2", count=1, gpu=4, labels={"test": namespace})
    live.api.create(gang_policy("gang", namespace))
    live.api.create(_job(namespace, "in-ns", workers=1, gpus=1))
    live.wait_running(namespace, "in-ns", "member-2")
    live.api.delete("v1", "Namespace", namespace)
    wait_until(
        lambda: live.copies(namespace, "in-ns") == [],
        timeout=90,
        what="the member copy deleted with the fleet namespace",
    )
    assert live.clusters["member-2"].get("v1", "Namespace", namespace) is not None
