"""A small async Kubernetes client: connections from kubeconfigs, verbs, discovery, informers."""

from fleet.kube._client import ApiError, KubeClient, Obj, Resource, Unreachable
from fleet.kube._connection import Connection, ConnectionError_, from_kubeconfig, load
from fleet.kube._informer import Informer, object_key

__all__ = [
    "ApiError",
    "Connection",
    "ConnectionError_",
    "Informer",
    "KubeClient",
    "Obj",
    "Resource",
    "Unreachable",
    "from_kubeconfig",
    "load",
    "object_key",
]
