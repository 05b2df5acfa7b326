"""The admin client that bootstraps sandbox clusters: server-side apply, reads, waits.

It is fleet's sync client (fleet.kube.SyncKubeClient) with the cluster's admin certificate, so
kinds are found by discovery like everywhere else; failures become SandboxErrors that name the
cluster, the verb and the object.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml

from fleet.kube import Connection, KubeError, SyncKubeClient, wait_established
from fleet.sandbox.errors import SandboxError
from fleet.sandbox.pki import ClusterPki, tls_context

FIELD_MANAGER = "fleet-sandbox"


class AdminClient:
    """Talks to one sandbox API server with its admin certificate."""

    def __init__(
        self,
        endpoint: str,
        pki: ClusterPki | None,
        cluster: str,
        *,
        transport: httpx.BaseTransport | None = None,
        poll_interval: float = 0.2,
    ) -> None:
        """`pki` authenticates as the cluster's admin; tests pass a `transport` instead."""
        self.cluster = cluster
        self.poll_interval = poll_interval
        verify = tls_context(pki.ca_crt, pki.admin_crt, pki.admin_key) if pki else True
        connection = Connection(endpoint, ssl_context=verify, source=f"sandbox cluster {cluster}")
        self.api = SyncKubeClient(connection, name=cluster, timeout=30.0, transport=transport)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self.api.apply(obj, field_manager=FIELD_MANAGER)
        except KubeError as e:
            raise SandboxError(str(e)) from e

    def apply_status(self, obj: Mapping[str, Any]) -> None:
        """Nodes' capacity lives in status, which a create or apply ignores for existing nodes."""
        meta = obj["metadata"]
        try:
            self.api.patch(
                obj["apiVersion"],
                obj["kind"],
                meta["name"],
                {"status": obj["status"]},
                meta.get("namespace"),
                subresource="status",
            )
        except KubeError as e:
            raise SandboxError(str(e)) from e

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        try:
            return self.api.delete(api_version, kind, name, namespace)
        except KubeError as e:
            raise SandboxError(str(e)) from e

    def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        """Every object of a kind; raises KubeError (the caller decides what unhealthy means)."""
        return list(self.api.list(api_version, kind, namespace).get("items") or [])

    def readyz(self) -> int:
        """The API server's /readyz status code; Unreachable if it does not answer."""
        return self.api.get_path("/readyz").status_code

    def wait_established(self, crd_names: Iterable[str], timeout: float = 60.0) -> None:
        """Wait until every CRD is served (fleet.kube.wait_established)."""
        try:
            wait_established(self.api, crd_names, timeout=timeout, poll_interval=self.poll_interval)
        except KubeError as e:
            raise SandboxError(f"{self.cluster}: {e}") from e


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
