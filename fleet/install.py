"""Install fleet's CRDs on a fleet control plane, and join member clusters to it."""

from __future__ import annotations

import base64
import copy
from typing import Any

import yaml

from fleet.api import constants as c
from fleet.api.crdgen import render_crds
from fleet.kube import (
    KubeconfigError,
    KubeconfigProblem,
    SyncKubeClient,
    resolve_context,
    wait_established,
)
from fleet.kubeconfig import check_kubeconfig

#: Where `fleet join` keeps member kubeconfig Secrets.
SECRETS_NAMESPACE = "fleet-system"


def crd_objects() -> list[dict[str, Any]]:
    return [yaml.safe_load(text) for _, text in sorted(render_crds().items())]


def install_crds(fleet: SyncKubeClient, *, timeout: float = 60.0) -> list[str]:
    """Apply fleet's CRDs and wait until the API server serves them (so a `fleet join` or a
    policy right after never meets a 404)."""
    names = []
    for crd in crd_objects():
        fleet.apply(crd, field_manager="fleet-install")
        names.append(crd["metadata"]["name"])
    wait_established(fleet, names, timeout=timeout)
    return names


def member_objects(
    name: str, kubeconfig: dict[str, Any], *, labels: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The Secret and MemberCluster that join a member (the kubeconfig is validated first)."""
    check_kubeconfig(kubeconfig, source=f"kubeconfig for {name}")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-kubeconfig", "namespace": SECRETS_NAMESPACE},
        "type": "Opaque",
        "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()},
    }
    member = {
        "apiVersion": c.FLEET_API_VERSION,
        "kind": "MemberCluster",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {
            "kubeconfigSecretRef": {
                "namespace": SECRETS_NAMESPACE,
                "name": f"{name}-kubeconfig",
                "key": "kubeconfig",
            }
        },
    }
    return [secret, member]


def single_context(kubeconfig: dict[str, Any], context: str | None = None) -> dict[str, Any]:
    """The part of a kubeconfig that one context (default: current) needs, that context current.

    KubeconfigError names what is missing when the context does not resolve."""
    resolution = resolve_context(kubeconfig, context, require_user=False)
    resolved = resolution.context
    if resolved is None:
        problems = resolution.problems or [
            KubeconfigProblem("current-context", "does not resolve to one cluster and user")
        ]
        raise KubeconfigError(problems)
    user = resolved.user
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": resolved.cluster.name, "cluster": copy.deepcopy(dict(resolved.cluster.body))}
        ],
        "users": [{"name": user.name, "user": copy.deepcopy(dict(user.body))}] if user else [],
        "contexts": [
            {"name": resolved.name, "context": copy.deepcopy(dict(resolved.context.body))}
        ],
        "current-context": resolved.name,
    }


def join(
    fleet: SyncKubeClient,
    name: str,
    kubeconfig: dict[str, Any],
    labels: dict[str, str] | None = None,
) -> None:
    """Register a member: its kubeconfig (validated first, so nothing is written for a
    kubeconfig the controller would refuse) in a Secret, and its MemberCluster."""
    objects = member_objects(name, kubeconfig, labels=labels)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SECRETS_NAMESPACE}}
    fleet.apply(namespace, field_manager="fleet-install")
    for obj in objects:
        fleet.apply(obj, field_manager="fleet-install")
