"""Objects as `kubectl get -o json` returns them (server defaults applied), shared by tests."""

from __future__ import annotations

from typing import Any

KUBECTL_PP: dict[str, Any] = {
    "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
    "kind": "PropagationPolicy",
    "metadata": {
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": '{"apiVersion":"..."}\n'
        },
        "creationTimestamp": "2024-11-20T08:15:02Z",
        "generation": 2,
        "managedFields": [
            {
                "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {".": {}, "f:propagateDeps": {}}},
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "time": "2024-11-20T08:15:02Z",
            }
        ],
        "name": "example-policy",
        "namespace": "default",
        "resourceVersion": "48213",
        "uid": "5f0c1f9e-3a55-4b8e-9a0c-0f6e3d0b1c2d",
        "selfLink": (
            "/apis/policy.one.alibabacloud.com/v1alpha1"
            "/namespaces/default/propagationpolicies/example-policy"
        ),
    },
    "spec": {
        "conflictResolution": "Abort",
        "failover": {
            "application": {
                "decisionConditions": {"tolerationSeconds": 30},
                "purgeMode": "Immediately",
            }
        },
        "placement": {
            "replicaScheduling": {
                "customSchedulingType": "Gang",
                "replicaSchedulingType": "Divided",
            }
        },
        "preemption": "Never",
        "priority": 0,
        "propagateDeps": True,
        "resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
        "schedulerName": "default-scheduler",
    },
}

KUBECTL_MC: dict[str, Any] = {
    "apiVersion": "fleet.dev/v1alpha1",
    "kind": "MemberCluster",
    "metadata": {
        "creationTimestamp": "2024-11-20T08:00:00Z",
        "generation": 1,
        "labels": {"gpu-model": "a100", "topology.kubernetes.io/region": "cn-hangzhou"},
        "name": "member-a",
        "resourceVersion": "100",
        "uid": "0d6c5c1b-7d0e-4a4f-b1b2-8a6a1f1e2a11",
    },
    "spec": {
        "kubeconfigSecretRef": {
            "key": "kubeconfig",
            "name": "member-a",
            "namespace": "fleet-system",
        },
        "taints": [{"effect": "NoSchedule", "key": "fleet.dev/spot", "value": "true"}],
    },
    "status": {
        "conditions": [
            {
                "lastTransitionTime": "2024-11-20T08:00:05Z",
                "message": "probe succeeded in 12ms",
                "observedGeneration": 1,
                "reason": "ClusterReady",
                "status": "True",
                "type": "Ready",
            }
        ],
        "kubernetesVersion": "v1.31.2",
        "lastProbeTime": "2024-11-20T09:00:00Z",
        "nodeCount": 16,
        "resources": {
            "allocatable": {"cpu": "1536", "memory": "12Ti", "nvidia.com/gpu": "128", "pods": 1760},
            "allocated": {"cpu": "250500m", "memory": "1200Gi", "nvidia.com/gpu": "48"},
        },
    },
}

KUBECTL_GB: dict[str, Any] = {
    "apiVersion": "fleet.dev/v1alpha1",
    "kind": "GangBinding",
    "metadata": {
        "creationTimestamp": "2024-11-20T09:00:00Z",
        "generation": 3,
        "name": "pytorchjob-pytorch-test",
        "namespace": "default",
        "ownerReferences": [
            {
                "apiVersion": "kubeflow.org/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "PyTorchJob",
                "name": "pytorch-test",
                "uid": "9b2f7c1e-0000-4000-8000-000000000001",
            }
        ],
        "resourceVersion": "777",
        "uid": "aa2f7c1e-0000-4000-8000-000000000002",
    },
    "spec": {
        "clusters": [
            {
                "components": [
                    {"name": "master", "replicas": 1},
                    {"name": "worker", "replicas": 2},
                ],
                "name": "member-b",
                "replicas": 3,
            }
        ],
        "estimator": "nodes",
        "failover": {
            "clusterExclusionSeconds": 1800,
            "maxFailovers": 3,
            "purgeMode": "Directly",
            "tolerationSeconds": 30,
        },
        "gang": {
            "components": [
                {
                    "name": "master",
                    "replicas": 1,
                    "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 1},
                },
                {
                    "name": "worker",
                    "replicas": 2,
                    "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 1},
                },
            ],
            "minMember": 3,
        },
        "gracefulEvictionTasks": [
            {
                "creationTimestamp": "2024-11-20T09:10:00Z",
                "fromCluster": "member-a",
                "message": "unhealthy for 30s",
                "purgeMode": "Directly",
                "reason": "ApplicationFailure",
            }
        ],
        "policy": {"kind": "PropagationPolicy", "name": "example-policy", "namespace": "default"},
        "resource": {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": "pytorch-test",
            "namespace": "default",
            "uid": "9b2f7c1e-0000-4000-8000-000000000001",
        },
    },
    "status": {
        "aggregatedStatus": [
            {
                "applied": True,
                "clusterName": "member-b",
                "health": "Healthy",
                "jobState": "Running",
                "status": {
                    "conditions": [{"type": "Running", "status": "True"}],
                    "replicaStatuses": {"Master": {"active": 1}},
                },
            }
        ],
        "clusterLostSince": None,
        "conditions": [
            {
                "lastTransitionTime": "2024-11-20T09:10:01Z",
                "message": "placed in member-b",
                "reason": "Success",
                "status": "True",
                "type": "Scheduled",
            },
            {
                "lastTransitionTime": "2024-11-20T09:10:02Z",
                "message": "",
                "reason": "FullyAppliedSuccess",
                "status": "True",
                "type": "FullyApplied",
            },
        ],
        "excludedClusters": [
            {"name": "member-a", "reason": "ApplicationFailure", "until": "2024-11-20T09:40:00Z"}
        ],
        "failoverCount": 1,
        "failoverHistory": [
            {
                "fromCluster": "member-a",
                "reason": "ApplicationFailure",
                "time": "2024-11-20T09:10:00Z",
            }
        ],
        "observedGeneration": 3,
        "pendingReasons": [{"cluster": "member-c", "reason": "no node has 1 free nvidia.com/gpu"}],
        "phase": "Running",
        "placementHistory": [
            {
                "cluster": "member-a",
                "placedAt": "2024-11-20T09:00:01Z",
                "reason": "ApplicationFailure",
                "removedAt": "2024-11-20T09:10:00Z",
            },
            {"cluster": "member-b", "placedAt": "2024-11-20T09:10:01Z"},
        ],
    },
}
