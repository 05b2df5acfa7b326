"""How to reach one API server: its URL, TLS context and credentials, from a kubeconfig.

Member kubeconfigs come from Secrets and are validated first (inline data only, see
fleet.kubeconfig); the fleet's own kubeconfig may reference files, like any client's.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

_SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConnectionError_(ValueError):
    """A kubeconfig we cannot turn into a connection."""


@dataclasses.dataclass(frozen=True)
class Connection:
    server: str
    ssl_context: ssl.SSLContext | bool
    headers: Mapping[str, str]
    #: For kopf's login handler: the same credentials as files/values.
    ca_path: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    token: str | None = None
    default_namespace: str | None = None


def _data_or_file(entry: Mapping[str, Any], key: str, base: Path | None) -> bytes | None:
    if data := entry.get(f"{key}-data"):
        return base64.b64decode(data)
    if path := entry.get(key):
        p = Path(path)
        if base is not None and not p.is_absolute():
            p = base / p
        return p.read_bytes()
    return None


def _private_file(data: bytes, suffix: str) -> str:
    """ssl needs files for a client certificate; keep them private and process-scoped."""
    fd, path = tempfile.mkstemp(prefix="fleet-", suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def from_kubeconfig(
    config: Mapping[str, Any], context: str | None = None, base: Path | None = None
) -> Connection:
    """Resolve `context` (default: current-context) into a Connection."""

    def named(section: str, name: str) -> Mapping[str, Any]:
        for item in config.get(section) or []:
            if item.get("name") == name:
                inner: Mapping[str, Any] = item.get(section[:-1]) or {}
                return inner
        raise ConnectionError_(f"kubeconfig has no {section[:-1]} named {name!r}")

    ctx_name = context or config.get("current-context")
    if not ctx_name:
        raise ConnectionError_("kubeconfig has no current-context and none was given")
    ctx = named("contexts", ctx_name)
    cluster = named("clusters", ctx.get("cluster", ""))
    user = named("users", ctx.get("user", "")) if ctx.get("user") else {}
    server = str(cluster.get("server", "")).rstrip("/")
    if not server:
        raise ConnectionError_(f"cluster of context {ctx_name!r} has no server")
    ca = _data_or_file(cluster, "certificate-authority", base)
    ca_path = _private_file(ca, ".crt") if ca else None
    verify: ssl.SSLContext | bool
    if cluster.get("insecure-skip-tls-verify"):
        verify = False
    else:
        verify = ssl.create_default_context(cafile=ca_path) if ca_path else True
    cert = _data_or_file(user, "client-certificate", base)
    key = _data_or_file(user, "client-key", base)
    cert_path = key_path = None
    if cert and key:
        cert_path, key_path = _private_file(cert, ".crt"), _private_file(key, ".key")
        if isinstance(verify, bool):
            verify = ssl.create_default_context() if verify else _unverified()
        verify.load_cert_chain(cert_path, key_path)
    headers: dict[str, str] = {}
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(user["tokenFile"]).read_text().strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return Connection(
        server=server,
        ssl_context=verify,
        headers=headers,
        ca_path=ca_path,
        cert_path=cert_path,
        key_path=key_path,
        token=token,
        default_namespace=ctx.get("namespace"),
    )


def _unverified() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def load(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    """The fleet's own connection: in-cluster service account, else a kubeconfig file."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
    if path is None and (_SA_DIR / "token").is_file():
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if host:
            token = (_SA_DIR / "token").read_text().strip()
            ca_path = str(_SA_DIR / "ca.crt")
            return Connection(
                server=f"https://{host}:{port}",
                ssl_context=ssl.create_default_context(cafile=ca_path),
                headers={"Authorization": f"Bearer {token}"},
                ca_path=ca_path,
                token=token,
            )
    file = Path(path or Path.home() / ".kube" / "config").expanduser()
    try:
        config = yaml.safe_load(file.read_text())
    except OSError as e:
        raise ConnectionError_(f"cannot read kubeconfig {file}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ConnectionError_(f"kubeconfig {file} is not valid YAML: {e}") from e
    if not isinstance(config, dict):
        raise ConnectionError_(f"kubeconfig {file} is not a mapping")
    return from_kubeconfig(config, context, base=file.parent)
