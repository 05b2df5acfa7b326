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
    KubeconfigContext,
    KubeconfigEntry,
    Trust,
    client_certificate_fields,
    credential,
    entry_problems,
    insecure_skip_tls_verify,
    merge_kubeconfig_files,
    read_kubeconfig_file,
    resolve_context,
)
from fleet.kube._tls import client_ssl_context, load_client_certificate

__all__ = ["Connection", "TlsMaterial", "connect_context", "from_kubeconfig", "in_cluster", "load"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclasses.dataclass(frozen=True, repr=False)
class TlsMaterial:
    """The CA, client certificate and key a Connection was built from (`fleet join` stores the
    CA it reached a member with): PEM data held in memory, and the user's own file paths when
    the kubeconfig named files. Never a file fleet wrote."""

    ca: Credential | None = None
    certificate: Credential | None = None
    key: Credential | None = None


@dataclasses.dataclass(frozen=True, repr=False, eq=False)
class Connection:
    """One API server and how to authenticate to it.

    `ssl_context` is an SSLContext (with the client certificate loaded, if any, and checking
    the server's certificate against `tls_server_name` if the kubeconfig names one), True for
    the system's CAs, or False when the kubeconfig says insecure-skip-tls-verify. `auth` adds
    the bearer token to each request (None: the client certificate, or nothing, authenticates).
    `proxy` is the kubeconfig's proxy-url (None: the environment's HTTPS_PROXY, as kubectl).
    """

    server: str
    ssl_context: ssl.SSLContext | bool = True
    auth: httpx.Auth | None = None
    default_namespace: str | None = None
    #: Where this connection came from, for messages: a kubeconfig file and context, a Secret.
    source: str = ""
    #: What `ssl_context` was built from; lives as long as the connection.
    tls: TlsMaterial = dataclasses.field(default_factory=TlsMaterial)
    #: The kubeconfig's tls-server-name, which `ssl_context` checks and sends (SNI).
    tls_server_name: str | None = None
    #: The kubeconfig's proxy-url: an http:// or https:// proxy (HTTP CONNECT).
    proxy: str | None = None

    @property
    def insecure(self) -> bool:
        """Whether the server goes unverified (insecure-skip-tls-verify, with or without a
        client certificate to present)."""
        context = self.ssl_context
        return context is False or (
            isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_NONE
        )

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

    def client_options(self, transport: Any = None) -> dict[str, Any]:
        """httpx.Client's (or AsyncClient's) arguments for this connection: the one place they
        are made. A `transport` (tests: an httpx.MockTransport) replaces the network, proxy and
        all (httpx would route around it through the proxy)."""
        return {
            "base_url": self.server,
            "verify": self.ssl_context,
            "auth": self.auth,
            "proxy": self.proxy if transport is None else None,
            "transport": transport,
        }

    def __repr__(self) -> str:
        return f"Connection({self.server!r}, source={self.source!r})"


def _tls(
    cluster: KubeconfigEntry,
    user_path: str,
    tls: TlsMaterial,
    server_name: str | None,
    out: list[KubeconfigProblem],
) -> ssl.SSLContext | bool:
    """What the client verifies the server with, and presents itself with: the one place a
    Connection's SSLContext is made from a kubeconfig."""
    insecure = insecure_skip_tls_verify(cluster.body)
    ca = tls.ca.data if tls.ca else None
    certificate = tls.certificate.data if tls.certificate else None
    key = tls.key.data if tls.key else None
    if ca is None and not (certificate and key) and not server_name:
        return not insecure
    ca_field = "certificate-authority" + (
        "-data" if cluster.body.get("certificate-authority-data") else ""
    )
    try:
        context = client_ssl_context(ca=ca, insecure=insecure, server_name=server_name)
    except (ssl.SSLError, ValueError) as exc:
        out.append(KubeconfigProblem(f"{cluster.path}.{ca_field}", f"not a usable CA: {exc}"))
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


def _auth(
    resolved: KubeconfigContext,
    ca: Credential | None,
    base: Path | None,
    trust: Trust,
    out: list[KubeconfigProblem],
) -> httpx.Auth | None:
    """The user's token (inline, or, under Trust.USER only, a file or an exec plugin's)."""
    user = resolved.user
    if user is None:
        return None
    body = user.body
    if token := body.get("token"):
        return BearerToken(str(token).strip())
    if trust is not Trust.USER:
        return None  # files and plugins: refused_in_secret, never read nor run
    if token_file := body.get("tokenFile"):
        path = Path(str(token_file)).expanduser()
        if base is not None and not path.is_absolute():
            path = base / path
        try:
            return TokenFile(path)
        except OSError as exc:
            out.append(
                KubeconfigProblem(f"{user.path}.tokenFile", f"cannot read {path}: {exc.strerror}")
            )
            return None
    if body.get("exec") is not None and not any(client_certificate_fields(body).values()):
        # As kubectl: a token or a client certificate given beside it wins over the plugin.
        plugin = exec_config(
            user.name,
            body["exec"],
            f"{user.path}.exec",
            cluster=resolved.cluster.body,
            ca=ca.data if ca else None,
            base=base,
            out=out,
        )
        if plugin is not None:
            return ExecAuth(plugin)
    return None


def connect_context(
    resolved: KubeconfigContext,
    base: Path | None = None,
    *,
    source: str | None = None,
    trust: Trust = Trust.SECRET,
) -> Connection:
    """The Connection a resolved context describes, whose entries already passed
    `entry_problems` (from_kubeconfig's, or fleet.kubeconfig's for a member's Secret). Under
    Trust.SECRET it reads no file and runs no plugin whatever the entries say. Raises
    KubeconfigError for what only building shows: data that is not base64, a CA or a
    certificate/key pair OpenSSL refuses, a file that cannot be read."""
    out: list[KubeconfigProblem] = []
    cluster, user = resolved.cluster, resolved.user
    server = resolved.server.rstrip("/")
    if not server:
        out.append(KubeconfigProblem(f"{cluster.path}.server", "required"))
    ca = credential(cluster, "certificate-authority", base, out, trust)
    certificate = credential(user, "client-certificate", base, out, trust) if user else None
    key = credential(user, "client-key", base, out, trust) if user else None
    auth = _auth(resolved, ca, base, trust, out)
    user_path = user.path if user is not None else f"{resolved.context.path}.user"
    tls = TlsMaterial(ca, certificate, key)
    server_name = str(cluster.body.get("tls-server-name") or "").strip() or None
    verify = _tls(cluster, user_path, tls, server_name, out)
    if out:
        raise KubeconfigError(out, source)
    return Connection(
        server=server,
        ssl_context=verify,
        auth=auth,
        default_namespace=resolved.namespace,
        source=source or f"context {resolved.name}",
        tls=tls,
        tls_server_name=server_name,
        proxy=str(cluster.body.get("proxy-url") or "").strip() or None,
    )


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
    authentication are not supported (entry_problems). Raises KubeconfigError naming every field
    that stands in the way.
    """
    resolution = resolve_context(config, context, require_user=False)
    resolved = resolution.context
    if resolved is None:
        problems = resolution.problems or [
            KubeconfigProblem("current-context", "does not resolve to one cluster and user")
        ]
        raise KubeconfigError(problems, source)
    out = entry_problems(resolved.cluster, trust)
    if resolved.user is not None:
        out += entry_problems(resolved.user, trust)
    if out and trust is Trust.SECRET:
        raise KubeconfigError(out, source)
    try:
        connection = connect_context(resolved, base, source=source, trust=trust)
    except KubeconfigError as exc:
        raise KubeconfigError(out + exc.problems, source) from None
    if out:
        raise KubeconfigError(out, source)
    return connection


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
