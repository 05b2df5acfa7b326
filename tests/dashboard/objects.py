"""Objects as the fleet and its members hold them, for the dashboard's tests."""

from __future__ import annotations

from typing import Any

from fleet.api import constants as c

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
CREATED = "2025-12-31T23:50:00Z"  # ten minutes before NOW
NS = "team-a"
UID = "uid-train"

Obj = dict[str, Any]


def member_cluster(name: str, *, ready: bool = True, scheduler: str = "Coscheduling") -> Obj:
    return {
        "apiVersion": c.FLEET_API_VERSION,
        "kind": "MemberCluster",
        "metadata": {"name": name, "creationTimestamp": CREATED, "resourceVersion": "1"},
        "spec": {
            "kubeconfigSecretRef": {"namespace": "fleet-system", "name": f"{name}-kubeconfig"}
        },
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "ProbeSucceeded" if ready else "ProbeFailed",
                    "message": "" if ready else "connection refused",
                    "lastTransitionTime": CREATED,
                }
            ],
            "gangScheduler": scheduler,
            "kubernetesVersion": "v1.34.4",
            "nodeCount": 2,
            "resources": {
                "allocatable": {"nvidia.com/gpu": "16", "cpu": "64"},
                "allocated": {"nvidia.com/gpu": "6"},
            },
        },
    }


def node(name: str, gpus: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "status": {
            "allocatable": {
                "cpu": "32",
                "memory": "128Gi",
                "nvidia.com/gpu": str(gpus),
                "pods": "110",
            }
        },
    }


def pod(name: str, node_name: str, gpus: int, *, uid_label: str | None = UID) -> Obj:
    labels = {c.FLEET_UID_LABEL: uid_label} if uid_label else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": labels,
            "creationTimestamp": CREATED,
            "resourceVersion": "1",
        },
        "spec": {
            "nodeName": node_name,
            "containers": [
                {"name": "main", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}
            ],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "main", "ready": True, "restartCount": 1}],
        },
    }


def binding(name: str = "train", **status: Any) -> Obj:
    return {
        "apiVersion": c.FLEET_API_VERSION,
        "kind": "GangBinding",
        "metadata": {
            "name": f"pytorchjob-{name}",
            "namespace": NS,
            "creationTimestamp": CREATED,
            "resourceVersion": "1",
        },
        "spec": {
            "resource": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "namespace": NS,
                "name": name,
                "uid": UID if name == "train" else f"uid-{name}",
            },
            "policy": {"kind": "PropagationPolicy", "namespace": NS, "name": "gang"},
            "gang": {
                "minMember": 3,
                "components": [
                    {"name": "Master", "replicas": 1, "requests": {"nvidia.com/gpu": "4"}},
                    {"name": "Worker", "replicas": 2, "requests": {"nvidia.com/gpu": "4"}},
                ],
            },
        },
        "status": status,
    }


WAITING = {
    "phase": "Pending",
    "conditions": [
        {
            "type": "Scheduled",
            "status": "False",
            "reason": "NoClusterFit",
            "message": "0/2 clusters can hold the gang",
            "lastTransitionTime": CREATED,
        }
    ],
    "pendingReasons": [
        {
            "cluster": "member-1",
            "code": "Insufficient",
            "reason": "needs 3 pods x 4 GPUs; the largest free block on one node is 2",
            "facts": {"resource": "nvidia.com/gpu", "perPod": 4, "largestFree": 2},
        },
        {"cluster": "member-2", "code": "NotReady", "reason": "member-2 is not Ready"},
    ],
    "pendingReasonCounts": {"NotReady": 1, "Insufficient": 1},
}

RUNNING = {
    "phase": "Running",
    "placementHistory": [
        {
            "cluster": "member-2",
            "placedAt": "2025-12-31T23:51:00Z",
            "removedAt": "2025-12-31T23:55:00Z",
            "reason": "ClusterLost",
        },
        {"cluster": "member-1", "placedAt": "2025-12-31T23:56:00Z"},
    ],
    "failoverHistory": [
        {"fromCluster": "member-2", "reason": "ClusterLost", "time": "2025-12-31T23:55:00Z"}
    ],
    "failoverCount": 1,
    "aggregatedStatus": [
        {
            "clusterName": "member-1",
            "applied": True,
            "health": "Healthy",
            "status": {"conditions": [{"type": "Running", "status": "True"}]},
        }
    ],
}


def placed(status: Obj, cluster: str = "member-1") -> Obj:
    obj = binding(**status)
    obj["spec"]["clusters"] = [{"name": cluster, "replicas": 3}]
    return obj


def quota_tree(spec: Obj | None = None) -> Obj:
    return {
        "apiVersion": c.ELASTIC_QUOTA_API_VERSION,
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system", "generation": 1},
        "spec": spec
        or {
            "root": {
                "name": "root",
                "min": {"nvidia.com/gpu": "8"},
                "max": {"nvidia.com/gpu": "8"},
                "children": [
                    {
                        "name": "child-1",
                        "min": {"nvidia.com/gpu": "2"},
                        "max": {"nvidia.com/gpu": "8", "kube-queue/max-jobs": "1"},
                        "namespaces": [NS],
                    },
                    {
                        "name": "child-2",
                        "min": {"nvidia.com/gpu": "6"},
                        "max": {"nvidia.com/gpu": "8"},
                        "namespaces": ["team-b"],
                    },
                ],
            }
        },
        "status": {"state": "Active", "valid": True},
    }


def queue(path: str, used: Obj | None = None, waiting: int = 0, dequeued: int = 0) -> Obj:
    name = path.replace("/", "-") + "-x1"
    return {
        "apiVersion": c.QUEUE_API_VERSION,
        "kind": "Queue",
        "metadata": {
            "name": name,
            "namespace": "kube-queue",
            "annotations": {c.QUOTA_FULLNAME_ANNOTATION: path},
        },
        "spec": {"queuePolicy": "Priority"},
        "status": {"quota": path, "used": used, "waiting": waiting, "dequeued": dequeued},
    }


def unit(
    name: str,
    phase: str,
    *,
    created: str = CREATED,
    priority: int = 0,
    message: str = "",
    quota: str = "root/child-1",
) -> Obj:
    return {
        "apiVersion": c.QUEUE_API_VERSION,
        "kind": "QueueUnit",
        "metadata": {"name": f"pytorchjob-{name}", "namespace": NS, "creationTimestamp": created},
        "spec": {
            "consumerRef": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "namespace": NS,
                "name": name,
                "uid": f"uid-{name}",
            },
            "queue": "root-child-1-x1",
            "resource": {"nvidia.com/gpu": "4"},
            "priority": priority,
        },
        "status": {"phase": phase, "message": message, "quota": quota},
    }


def reservation(name: str, phase: str | None, node_name: str | None = None, **extra: Any) -> Obj:
    status: Obj = {"phase": phase} if phase else {}
    if node_name:
        status["nodeName"] = node_name
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {
            "name": name,
            "labels": {c.FLEET_UID_LABEL: UID, c.ROLE_LABEL: "worker"},
            "annotations": {c.BINDING_ANNOTATION: f"{NS}/pytorchjob-train"},
            "creationTimestamp": CREATED,
        },
        "status": {**status, **extra},
    }
