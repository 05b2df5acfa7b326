"""fleet's Helm chart as users install it: rendered by the pinned helm, run under its RBAC.

The end-to-end controller authenticates as the chart's ServiceAccount, so a permission the chart
forgets fails the tests instead of a user's first install.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from fleet.sandbox.toolchain import ensure_helm
from fleet.testing.kube import ClusterClient

CHART = Path(__file__).resolve().parents[2] / "helm" / "fleet"
RELEASE = "fleet"
RBAC_KINDS = frozenset(
    {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
)


def render_chart(namespace: str, *set_values: str) -> list[dict[str, Any]]:
    """`helm template` of the chart (CRDs included), as a list of objects."""
    argv = [str(ensure_helm()), "template", RELEASE, str(CHART), "--namespace", namespace]
    argv += ["--include-crds", *(f"--set={v}" for v in set_values)]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise AssertionError(f"helm template {CHART} failed:\n{out.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def service_account_kubeconfig(
    api: ClusterClient, base: dict[str, Any], namespace: str, name: str
) -> dict[str, Any]:
    """`base` (one context) with its user replaced by a token of that ServiceAccount."""
    token = api.service_account_token(namespace, name)
    context = next(c for c in base["contexts"] if c["name"] == base["current-context"])
    user = f"system:serviceaccount:{namespace}:{name}"
    return {
        **base,
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{**context, "context": {**context["context"], "user": user}}],
    }
