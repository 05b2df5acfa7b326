"""Install fleet's CRDs on a fleet control plane, and join member clusters to it."""

from __future__ import annotations

import base64
import copy
from typing import Any

import yaml

from fleet.api import constants as c
from fleet.api.crdgen import render_crds
from fleet.kube import KubeClient
from fleet.kubeconfig import check_kubeconfig

#: Where `fleet join` keeps member kubeconfig Secrets.
SECRETS_NAMESPACE = "fleet-system"


def crd_objects() -> list[dict[str, Any]]:
    return [yaml.safe_load(text) for _, text in sorted(render_crds().items())]


async def install_crds(fleet: KubeClient) -> list[str]:
    names = []
    for crd in crd_objects():
        await fleet.apply(crd, field_manager="fleet-install")
        names.append(crd["metadata"]["name"])
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


def single_context(kubeconfig: dict[str, Any], context: str) -> dict[str, Any]:
    """The part of a kubeconfig that one context needs, with that context current."""
    ctx = next(x for x in kubeconfig["contexts"] if x["name"] == context)
    cluster = ctx["context"]["cluster"]
    user = ctx["context"].get("user")
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [copy.deepcopy(x) for x in kubeconfig["clusters"] if x["name"] == cluster],
        "users": [copy.deepcopy(x) for x in kubeconfig.get("users", []) if x["name"] == user],
        "contexts": [copy.deepcopy(ctx)],
        "current-context": context,
    }


async def join(
    fleet: KubeClient, name: str, kubeconfig: dict[str, Any], labels: dict[str, str] | None = None
) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SECRETS_NAMESPACE}}
    await fleet.apply(namespace, field_manager="fleet-install")
    for obj in member_objects(name, kubeconfig, labels=labels):
        await fleet.apply(obj, field_manager="fleet-install")
