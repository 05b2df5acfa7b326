"""fleet's Kubernetes client: connections from kubeconfigs, one error tree, discovery, an async
client for the controller, a sync one for command lines and tests, and informers.

Errors (all KubeError): ApiError (NotFound, Conflict, Forbidden, Gone, Invalid), Unreachable,
KubeconfigError, ExecPluginError. Each message names the verb, the object and the server.
"""

from fleet.kube._auth import BearerToken, TokenFile, refresh_deadline
from fleet.kube._client import KubeClient
from fleet.kube._connection import (
    Connection,
    TlsMaterial,
    connect_context,
    from_kubeconfig,
    in_cluster,
    kubeconfig_files,
    load,
)
from fleet.kube._crds import CRD_API, NotEstablished, established, wait_established
from fleet.kube._discovery import Resource
from fleet.kube._errors import (
    ApiError,
    Conflict,
    ExecPluginError,
    Forbidden,
    Gone,
    Invalid,
    KubeconfigError,
    KubeconfigProblem,
    KubeError,
    NotFound,
    Unreachable,
)
from fleet.kube._exec import EXEC_API_VERSIONS, ExecAuth, ExecConfig
from fleet.kube._informer import REFUSED, Informer, identity, object_key
from fleet.kube._kubeconfig import (
    JOIN_HINT,
    Credential,
    KubeconfigContext,
    KubeconfigEntry,
    KubeconfigResolution,
    Trust,
    entry_problems,
    load_kubeconfig,
    merge_kubeconfig_files,
    read_kubeconfig_file,
    refused_in_secret,
    resolve_context,
)
from fleet.kube._patch import merge_patch
from fleet.kube._ratelimit import RateLimit
from fleet.kube._requests import Obj
from fleet.kube._sync import SyncKubeClient

__all__ = [
    "CRD_API",
    "EXEC_API_VERSIONS",
    "JOIN_HINT",
    "REFUSED",
    "ApiError",
    "BearerToken",
    "Conflict",
    "Connection",
    "Credential",
    "ExecAuth",
    "ExecConfig",
    "ExecPluginError",
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
    "Trust",
    "Unreachable",
    "connect_context",
    "entry_problems",
    "established",
    "from_kubeconfig",
    "identity",
    "in_cluster",
    "kubeconfig_files",
    "load",
    "load_kubeconfig",
    "merge_kubeconfig_files",
    "merge_patch",
    "object_key",
    "read_kubeconfig_file",
    "refresh_deadline",
    "refused_in_secret",
    "resolve_context",
    "wait_established",
]
