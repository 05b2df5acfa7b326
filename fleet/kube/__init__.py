"""fleet's Kubernetes client: connections from kubeconfigs, one error tree, discovery, an async
client for the controller, a sync one for command lines and tests, and informers.

Errors (all KubeError): ApiError (NotFound, Conflict, Forbidden, Gone, Invalid), Unreachable,
KubeconfigError. Each message names the verb, the object and the server.
"""

from fleet.kube._auth import BearerToken, TokenFile, refresh_deadline
from fleet.kube._client import KubeClient
from fleet.kube._connection import Connection, TlsMaterial, from_kubeconfig, in_cluster, load
from fleet.kube._crds import CRD_API, NotEstablished, established, wait_established
from fleet.kube._discovery import Resource
from fleet.kube._errors import (
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeconfigError,
    KubeconfigProblem,
    KubeError,
    NotFound,
    Unreachable,
)
from fleet.kube._informer import Informer, identity, object_key
from fleet.kube._kubeconfig import (
    Credential,
    KubeconfigContext,
    KubeconfigEntry,
    KubeconfigResolution,
    load_kubeconfig,
    read_kubeconfig_file,
    resolve_context,
)
from fleet.kube._patch import merge_patch
from fleet.kube._ratelimit import RateLimit
from fleet.kube._requests import Obj
from fleet.kube._sync import SyncKubeClient

__all__ = [
    "CRD_API",
    "ApiError",
    "BearerToken",
    "Conflict",
    "Connection",
    "Credential",
    "Forbidden",
    "Gone",
    "Informer",
    "Invalid",
    "KubeClient",
    "KubeError",
    "KubeconfigContext",
    "KubeconfigEntry",
    "KubeconfigError",
    "KubeconfigProblem",
    "KubeconfigResolution",
    "NotEstablished",
    "NotFound",
    "Obj",
    "RateLimit",
    "Resource",
    "SyncKubeClient",
    "TlsMaterial",
    "TokenFile",
    "Unreachable",
    "established",
    "from_kubeconfig",
    "identity",
    "in_cluster",
    "load",
    "load_kubeconfig",
    "merge_patch",
    "object_key",
    "read_kubeconfig_file",
    "refresh_deadline",
    "resolve_context",
    "wait_established",
]
