"""A small admin client for bootstrapping sandbox clusters (server-side apply, reads, waits).

The sandbox only touches a handful of kinds while it brings a cluster up, so a table of their
paths is simpler and faster than discovery; everything else goes through real clients.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from fleet.sandbox.errors import SandboxError
from fleet.sandbox.pki import ClusterPki, tls_context

#: kind -> (API prefix, plural, namespaced)
_PATHS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "Node": ("/api/v1", "nodes", False),
    "Secret": ("/api/v1", "secrets", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Pod": ("/api/v1", "pods", True),
    "CustomResourceDefinition": (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
}


def object_path(kind: str, name: str | None = None, namespace: str | None = None) -> str:
    try:
        prefix, plural, namespaced = _PATHS[kind]
    except KeyError:
        raise SandboxError(f"the sandbox bootstrap client does not know kind {kind}") from None
    path = prefix
    if namespaced and namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{plural}"
    return f"{path}/{name}" if name else path


class AdminClient:
    """Talks to one sandbox API server with its admin certificate."""

    def __init__(self, endpoint: str, pki: ClusterPki, cluster: str) -> None:
        self.cluster = cluster
        self._http = httpx.Client(
            base_url=endpoint,
            verify=tls_context(pki.ca_crt, pki.admin_crt, pki.admin_key),
            timeout=30.0,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        path = object_path(obj["kind"], meta["name"], meta.get("namespace"))
        r = self._http.patch(
            path,
            params={"fieldManager": "fleet-sandbox", "force": "true"},
            content=json.dumps(obj),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
        if r.status_code >= 300:
            raise SandboxError(
                f"{self.cluster}: applying {obj['kind']} {meta['name']} failed: "
                f"{r.status_code} {r.text[:400]}"
            )
        result: dict[str, Any] = r.json()
        return result

    def apply_status(self, obj: Mapping[str, Any]) -> None:
        """Nodes' capacity lives in status, which a create or apply ignores for existing nodes."""
        meta = obj["metadata"]
        path = object_path(obj["kind"], meta["name"], meta.get("namespace")) + "/status"
        r = self._http.patch(
            path,
            content=json.dumps({"status": obj["status"]}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if r.status_code >= 300:
            raise SandboxError(f"{self.cluster}: patching status of {meta['name']}: {r.text[:300]}")

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool:
        r = self._http.delete(object_path(kind, name, namespace))
        if r.status_code == 404:
            return False
        if r.status_code >= 300:
            raise SandboxError(f"{self.cluster}: deleting {kind} {name}: {r.text[:300]}")
        return True

    def list(self, kind: str, namespace: str | None = None, **params: str) -> list[dict[str, Any]]:
        r = self._http.get(object_path(kind, namespace=namespace), params=params)
        r.raise_for_status()
        items: list[dict[str, Any]] = r.json()["items"]
        return items

    def get_raw(self, path: str) -> httpx.Response:
        return self._http.get(path)

    def wait_established(self, crd_names: Iterable[str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for name in crd_names:
            while True:
                r = self._http.get(object_path("CustomResourceDefinition", name))
                conds = r.json().get("status", {}).get("conditions", []) if r.is_success else []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                    break
                if time.monotonic() > deadline:
                    raise SandboxError(f"{self.cluster}: CRD {name} not established in {timeout}s")
                time.sleep(0.2)


def load_manifests(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def kubeconfig(entries: Iterable[tuple[str, str, ClusterPki]], current: str) -> dict[str, Any]:
    """A kubeconfig with one context per cluster, all key material inline (no file paths)."""

    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    clusters, users, contexts = [], [], []
    for name, endpoint, pki in entries:
        clusters.append(
            {
                "name": name,
                "cluster": {"server": endpoint, "certificate-authority-data": b64(pki.ca_crt)},
            }
        )
        users.append(
            {
                "name": f"{name}-admin",
                "user": {
                    "client-certificate-data": b64(pki.admin_crt),
                    "client-key-data": b64(pki.admin_key),
                },
            }
        )
        contexts.append({"name": name, "context": {"cluster": name, "user": f"{name}-admin"}})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
        "current-context": current,
        "preferences": {},
    }
