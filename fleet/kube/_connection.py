"""How to reach one API server: its URL, TLS context and credentials.

Built from a kubeconfig (a member's from a Secret, validated first by fleet.kubeconfig, or the
user's own files, read as kubectl reads them: see Trust) or from the pod's service account.
Credentials live in memory only, inside the Connection: the client key is loaded into the
SSLContext without ever touching disk (see _tls), the service-account token is re-read from
its file when the kubelet rotates it (see _auth), an exec plugin's token is cached until it
expires (see _exec).
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from fleet.kube._auth import BearerToken, TokenFile
from fleet.kube._errors import KubeconfigError, KubeconfigProblem
from fleet.kube._exec import ExecAuth, exec_config
from fleet.kube._kubeconfig import (
    Credential,
    Trust,
    credential,
    merge_kubeconfig_files,
    read_kubeconfig_file,
    refused_in_secret,
    resolve_context,
)
from fleet.kube._tls import client_ssl_context, load_client_certificate

__all__ = ["Connection", "TlsMaterial", "from_kubeconfig", "in_cluster", "load"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclasses.dataclass(frozen=True, repr=False)
class TlsMaterial:
    """The CA, client certificate and key a Connection was built from, for clients that build
    their own TLS (kopf's login): PEM data held in memory, and the user's own file paths when
    the kubeconfig named files. Never a file fleet wrote."""

    ca: Credential | None = None
    certificate: Credential | None = None
    key: Credential | None = None


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class Connection:
    """One API server and how to authenticate to it.

    `ssl_context` is an SSLContext (with the client certificate loaded, if any), True for the
    system's CAs, or False when the kubeconfig says insecure-skip-tls-verify. `auth` adds the
    bearer token to each request (None: the client certificate, or nothing, authenticates).
    """

    server: str
    ssl_context: ssl.SSLContext | bool = True
    auth: httpx.Auth | None = None
    default_namespace: str | None = None
    #: Where this connection came from, for messages: a kubeconfig file and context, a Secret.
    source: str = ""
    #: What `ssl_context` was built from; lives as long as the connection.
    tls: TlsMaterial = dataclasses.field(default_factory=TlsMaterial)

    @property
    def insecure(self) -> bool:
        return self.ssl_context is False

    def bearer_token(self, rejected: str | None = None) -> str | None:
        """The token to send now (re-read from its file if it rotated; from the exec plugin's
        cache, or the plugin run again when the cached one expired or is `rejected`, the token
        a server just answered 401 to), or None."""
        if isinstance(self.auth, ExecAuth):
            return self.auth.token(rejected)
        if isinstance(self.auth, BearerToken | TokenFile):
            return self.auth.token()
        return None

    @property
    def token_expires(self) -> datetime.datetime | None:
        """When the exec plugin's cached token expires (None: no such token, or no expiry)."""
        return self.auth.expires if isinstance(self.auth, ExecAuth) else None

    def __repr__(self) -> str:
        return f"Connection({self.server!r}, source={self.source!r})"


def _tls(
    cluster_path: str,
    cluster: Mapping[str, Any],
    user_path: str,
    tls: TlsMaterial,
    out: list[KubeconfigProblem],
) -> ssl.SSLContext | bool:
    insecure = cluster.get("insecure-skip-tls-verify") in (True, "true", "True")
    ca = tls.ca.data if tls.ca else None
    certificate = tls.certificate.data if tls.certificate else None
    key = tls.key.data if tls.key else None
    if ca is None and not (certificate and key):
        return not insecure
    ca_field = "certificate-authority" + (
        "-data" if cluster.get("certificate-authority-data") else ""
    )
    try:
        context = client_ssl_context(ca=ca, insecure=insecure)
    except (ssl.SSLError, ValueError) as exc:
        out.append(KubeconfigProblem(f"{cluster_path}.{ca_field}", f"not a usable CA: {exc}"))
        return False
    if certificate and key:
        try:
            load_client_certificate(context, certificate, key)
        except (ssl.SSLError, ValueError) as exc:
            out.append(
                KubeconfigProblem(
                    user_path, f"client certificate and key are not a usable pair: {exc}"
                )
            )
    return context


def from_kubeconfig(
    config: Mapping[str, Any],
    context: str | None = None,
    base: Path | None = None,
    *,
    source: str | None = None,
    trust: Trust = Trust.SECRET,
) -> Connection:
    """Resolve `context` (default: current-context) into a Connection.

    `trust` says whose kubeconfig it is (see Trust). The user's own (Trust.USER) may name files,
    read relative to `base` (the kubeconfig's folder) as kubectl reads them, and log in with an
    exec plugin. One handed to fleet as data (Trust.SECRET, the default; member kubeconfigs,
    validated first by fleet.kubeconfig) holds inline data only. auth-provider plugins and basic
    authentication are not supported. Raises KubeconfigError naming every field that stands in
    the way.
    """
    resolution = resolve_context(config, context, require_user=False)
    resolved = resolution.context
    if resolved is None:
        problems = resolution.problems or [
            KubeconfigProblem("current-context", "does not resolve to one cluster and user")
        ]
        raise KubeconfigError(problems, source)
    out: list[KubeconfigProblem] = []
    cluster = resolved.cluster
    user = resolved.user
    if trust is Trust.SECRET:
        out += refused_in_secret(cluster)
        if user is not None:
            out += refused_in_secret(user)
        if out:
            raise KubeconfigError(out, source)
    server = resolved.server.rstrip("/")
    if not server:
        out.append(KubeconfigProblem(f"{cluster.path}.server", "required"))
    ca = credential(cluster, "certificate-authority", base, out)
    certificate: Credential | None = None
    key: Credential | None = None
    auth: httpx.Auth | None = None
    if user is not None:
        body = user.body
        if body.get("auth-provider") is not None:
            out.append(
                KubeconfigProblem(
                    f"{user.path}.auth-provider",
                    "auth-provider plugins are not supported (kubectl removed its own too); "
                    "log in with the provider's exec plugin (gke-gcloud-auth-plugin, kubelogin)",
                )
            )
        if body.get("username") is not None or body.get("password") is not None:
            out.append(
                KubeconfigProblem(
                    f"{user.path}.username",
                    "basic authentication is not supported; use a token or a client certificate",
                )
            )
        certificate = credential(user, "client-certificate", base, out)
        key = credential(user, "client-key", base, out)
        has = {
            k: bool(body.get(k) or body.get(f"{k}-data"))
            for k in ("client-certificate", "client-key")
        }
        if has["client-certificate"] != has["client-key"]:
            missing = "client-key" if has["client-certificate"] else "client-certificate"
            out.append(KubeconfigProblem(f"{user.path}.{missing}-data", "required with its pair"))
        if token := body.get("token"):
            auth = BearerToken(str(token).strip())
        elif token_file := body.get("tokenFile"):
            path = Path(str(token_file)).expanduser()
            if base is not None and not path.is_absolute():
                path = base / path
            try:
                auth = TokenFile(path)
            except OSError as exc:
                out.append(
                    KubeconfigProblem(
                        f"{user.path}.tokenFile", f"cannot read {path}: {exc.strerror}"
                    )
                )
        elif body.get("exec") is not None and not any(has.values()):
            # As kubectl: a token or a client certificate given beside it wins over the plugin.
            plugin = exec_config(
                user.name,
                body["exec"],
                f"{user.path}.exec",
                cluster=cluster.body,
                ca=ca.data if ca else None,
                base=base,
                out=out,
            )
            if plugin is not None:
                auth = ExecAuth(plugin)
    user_path = user.path if user is not None else f"{resolved.context.path}.user"
    tls = TlsMaterial(ca, certificate, key)
    verify = _tls(cluster.path, cluster.body, user_path, tls, out)
    if out:
        raise KubeconfigError(out, source)
    return Connection(
        server=server,
        ssl_context=verify,
        auth=auth,
        default_namespace=resolved.namespace,
        source=source or f"context {resolved.name}",
        tls=tls,
    )


def in_cluster(
    directory: Path = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] | None = None
) -> Connection | None:
    """The pod's own service account, or None outside a pod.

    The CA and the namespace are read once; the token is re-read whenever the kubelet rotates
    it.
    """
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST")
    port = env.get("KUBERNETES_SERVICE_PORT", "443")
    token = directory / "token"
    if not host or not token.is_file():
        return None
    source = f"service account in {directory}"
    try:
        ipaddress.IPv6Address(host)
        host = f"[{host}]"
    except ValueError:
        pass
    ca_file = directory / "ca.crt"
    try:
        ca = ca_file.read_bytes()
        auth = TokenFile(token)
    except OSError as exc:
        raise KubeconfigError.one(
            str(exc.filename), f"cannot read: {exc.strerror}", source
        ) from None
    namespace_file = directory / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else None
    try:
        context = client_ssl_context(ca=ca)
    except (ssl.SSLError, ValueError) as exc:
        raise KubeconfigError.one(str(ca_file), f"not a usable CA: {exc}", source) from None
    return Connection(
        server=f"https://{host}:{port}",
        ssl_context=context,
        auth=auth,
        default_namespace=namespace or None,
        source=source,
        tls=TlsMaterial(ca=Credential(ca, ca_file)),
    )


def kubeconfig_files(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The files `$KUBECONFIG` lists, in order, without empty entries and repeats (kubectl's
    reading of it); empty when it is unset."""
    env = os.environ if environ is None else environ
    files = [Path(p).expanduser() for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    return list(dict.fromkeys(files))


def load(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    """The user's own connection to the fleet, found as kubectl finds it: `kubeconfig` (that one
    file, which must exist), else the files in `$KUBECONFIG` merged (missing ones skipped), else
    the pod's service account, else ~/.kube/config. Read with Trust.USER: files it names are
    read, exec plugins run (lazily, at the first request)."""
    suffix = f" context {context}" if context else ""
    if kubeconfig:
        files = [Path(kubeconfig).expanduser()]
    else:
        files = kubeconfig_files()
        present = [f for f in files if f.exists()]
        if not present and (connection := in_cluster()) is not None:
            return connection
        if files and not present:
            raise KubeconfigError.one(
                "KUBECONFIG", "none of its files exists", os.pathsep.join(map(str, files))
            )
        files = present or [Path.home() / ".kube" / "config"]
    for file in files:
        if not file.exists():
            read_kubeconfig_file(file)  # raises, naming the file
    merged = merge_kubeconfig_files(files)
    where = os.pathsep.join(map(str, files))
    return from_kubeconfig(merged, context, source=f"{where}{suffix}", trust=Trust.USER)
