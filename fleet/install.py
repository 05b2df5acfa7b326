"""Install fleet's CRDs on a fleet control plane (joining members is fleet.join's)."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from fleet.api.access import FLEET_SECRETS_NAMESPACE
from fleet.api.crdgen import render_crds
from fleet.kube import (
    KubeconfigError,
    KubeconfigProblem,
    SyncKubeClient,
    resolve_context,
    wait_established,
)

#: Where `fleet join` keeps member kubeconfig Secrets.
SECRETS_NAMESPACE = FLEET_SECRETS_NAMESPACE


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
