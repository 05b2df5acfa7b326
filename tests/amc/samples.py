"""A PyTorchJob as the fleet and its member hold it, and GangBindings in the shape the
controller writes them (FAILED_OVER: placed again after a failover, an old copy still to go)."""

from __future__ import annotations

from typing import Any

from tests.amc.world import ago

NS = "team-a"
JOB = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs/pytorch-test"
BINDING = f"/apis/fleet.dev/v1alpha1/namespaces/{NS}/gangbindings/pytorchjob-pytorch-test"
EVENTS = f"/api/v1/namespaces/{NS}/events"
PODS = f"/api/v1/namespaces/{NS}/pods"
GPU = {"cpu": "1", "nvidia.com/gpu": "1"}


def job(uid: str, conditions: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "pytorch-test",
            "namespace": NS,
            "uid": uid,
            "creationTimestamp": ago(600),
            **meta,
        },
        "spec": {"pytorchReplicaSpecs": {"Master": {}, "Worker": {"replicas": 2}}},
        "status": {
            "conditions": conditions,
            "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2}},
            "startTime": ago(90),
        },
    }


def condition(type_: str, reason: str, seconds: float, message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": ago(seconds),
    }


def event(
    reason: str, seconds: float, message: str, obj: str, uid: str, **kw: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{obj}.{reason}", "namespace": NS},
        "involvedObject": {"name": obj, "namespace": NS, "uid": uid},
        "type": kw.get("type", "Normal"),
        "reason": reason,
        "message": message,
        "source": {"component": kw.get("source", "fleet")},
        "firstTimestamp": ago(kw.get("first", seconds)),
        "lastTimestamp": ago(seconds),
        "count": kw.get("count", 1),
    }


def binding(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "fleet.dev/v1alpha1",
        "kind": "GangBinding",
        "metadata": {"name": "pytorchjob-pytorch-test", "namespace": NS, "uid": "b-uid"},
        "spec": {
            "resource": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "namespace": NS,
                "name": "pytorch-test",
                "uid": "fleet-uid",
            },
            "policy": {"kind": "PropagationPolicy", "namespace": NS, "name": "gang"},
            "gang": {
                "minMember": 3,
                "components": [
                    {"name": "Master", "replicas": 1, "requests": GPU},
                    {"name": "Worker", "replicas": 2, "requests": GPU},
                ],
            },
            "failover": {"tolerationSeconds": 30, "purgeMode": "Directly", "maxFailovers": 3},
            **status.pop("spec", {}),
        },
        "status": status,
    }


FAILED_OVER = binding(
    spec={
        "clusters": [{"name": "member-2", "replicas": 3}],
        "gracefulEvictionTasks": [
            {
                "fromCluster": "member-1",
                "reason": "ApplicationFailure",
                "purgeMode": "Gracefully",
                "creationTimestamp": ago(100),
                "gracePeriodSeconds": 600,
                "message": "the copy Failed",
            }
        ],
    },
    phase="Running",
    schedulerObservedAffinityName="primary",
    placementHistory=[
        {
            "cluster": "member-1",
            "placedAt": ago(600),
            "removedAt": ago(100),
            "reason": "ApplicationFailure",
        },
        {"cluster": "member-2", "placedAt": ago(100)},
    ],
    failoverHistory=[{"fromCluster": "member-1", "reason": "ApplicationFailure", "time": ago(100)}],
    failoverCount=1,
    excludedClusters=[{"name": "member-1", "reason": "failed over from it"}],
    aggregatedStatus=[
        {"clusterName": "member-2", "applied": True, "health": "Healthy", "jobState": "Running"}
    ],
    conditions=[
        {
            "type": "Scheduled",
            "status": "True",
            "reason": "Success",
            "message": "placed in member-2",
            "lastTransitionTime": ago(100),
        }
    ],
)
