"""Validate a member cluster's kubeconfig before fleet connects with it.

A kubeconfig taken from a Secret is input from whoever registered the cluster. Like Kueue's
MultiKueue, fleet refuses anything that would let that input run a program in the controller
(exec and auth-provider plugins), read the controller's files (certificate and token paths), or
talk to the member without verifying it (insecure-skip-tls-verify, plain http). Every problem is
reported at once, each naming its field, so one round of fixing is enough.

How a context resolves to its cluster and user is fleet.kube's (resolve_context), shared with
the reading of the user's own kubeconfig, and so are the rules an entry follows to be used at
all (fleet.kube.entry_problems: what a Secret may never hold under Trust.SECRET, basic
authentication, the certificate/key pair, the proxy), which this module applies to every entry
and from_kubeconfig to those it connects with. The stricter checks on top (https, PEM that
parses, credentials present) are here. A kubeconfig is parsed and checked once: the
ResolvedKubeconfig carries the Connection built from it (fleet.kube.connect_context), which the
controller, its token renewal and `kubectl amc` use as it is.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from fleet.kube import (
    Connection,
    KubeconfigEntry,
    KubeconfigError,
    KubeconfigProblem,
    Trust,
    connect_context,
    entry_problems,
    load_kubeconfig,
    resolve_context,
)

__all__ = [
    "DEFAULT_SECRET_KEY",
    "KubeconfigError",
    "KubeconfigProblem",
    "ResolvedKubeconfig",
    "check_kubeconfig",
    "connection_from_secret",
    "kubeconfig_from_secret",
    "kubeconfig_text_from_secret",
    "load_kubeconfig",
    "validate_kubeconfig",
]

DEFAULT_SECRET_KEY: Final = "kubeconfig"

_PEM_FIELDS: Final = {
    "cluster": ("certificate-authority-data",),
    "user": ("client-certificate-data", "client-key-data"),
}
_DNS_LABEL: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$")


@dataclass(frozen=True)
class ResolvedKubeconfig:
    """A validated kubeconfig, what its current-context resolves to, and the Connection it
    describes (Trust.SECRET: inline data only), built once."""

    config: dict[str, Any]
    context: str
    cluster: str
    user: str
    server: str
    namespace: str | None
    connection: Connection = field(compare=False, repr=False)

    @property
    def token(self) -> str | None:
        """The current user's token (None: it authenticates with a client certificate)."""
        return self.connection.bearer_token()


# --- Reading the Secret ----------------------------------------------------------------------


def _get(obj: Any, key: str, attr: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, attr, None)


def _secret_name(secret: Any) -> str:
    meta = _get(secret, "metadata", "metadata") or {}
    ns, name = _get(meta, "namespace", "namespace"), _get(meta, "name", "name")
    if name:
        return f"{ns}/{name}" if ns else str(name)
    return "<unnamed>"


def _decode_data_value(value: str | bytes, where: str) -> str:
    """A Secret `data` value is base64; tolerate raw bytes and plain text put there by hand."""
    if isinstance(value, bytes):
        raw = value
    else:
        compact = "".join(value.split())
        try:
            raw = base64.b64decode(compact, validate=True)
        except (binascii.Error, ValueError):
            # Not base64 at all (a kubeconfig has ':' and spaces): it was written as plain text.
            return value
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KubeconfigError(
            [KubeconfigProblem(where, "is not UTF-8 text (after base64 decoding)")]
        ) from None


def kubeconfig_text_from_secret(secret: Any, key: str = DEFAULT_SECRET_KEY) -> str:
    """The kubeconfig text in a Secret (a dict as the API returns it, or a V1Secret).

    Looks in `data` (base64, or plain text tolerated) and then `stringData` (plain).
    """
    name = _secret_name(secret)
    data = _get(secret, "data", "data") or {}
    string_data = _get(secret, "stringData", "string_data") or {}
    where = f"Secret {name} data[{key!r}]"
    if key in data and data[key] is not None:
        text = _decode_data_value(data[key], where)
    elif key in string_data and string_data[key] is not None:
        text = str(string_data[key])
    else:
        keys = sorted(set(data) | set(string_data))
        present = ", ".join(repr(k) for k in keys) if keys else "none"
        raise KubeconfigError(
            [
                KubeconfigProblem(
                    f"Secret {name}",
                    f"has no key {key!r} (keys present: {present})",
                )
            ]
        )
    if not text.strip():
        raise KubeconfigError([KubeconfigProblem(where, "is empty")])
    return text


# --- Validation ------------------------------------------------------------------------------


def _server_problems(server: Any, field: str) -> list[KubeconfigProblem]:
    if not isinstance(server, str) or not server.strip():
        return [KubeconfigProblem(field, "required: the API server's https:// URL")]
    try:
        url = urlsplit(server.strip())
        port = url.port
    except ValueError as exc:
        return [KubeconfigProblem(field, f"{server!r} is not a valid URL ({exc})")]
    out: list[KubeconfigProblem] = []
    if url.scheme.lower() != "https":
        out.append(KubeconfigProblem(field, f"{server!r} must use https"))
    if url.username is not None or url.password is not None:
        out.append(KubeconfigProblem(field, "must not carry credentials in the URL"))
    host = url.hostname or ""
    if not host:
        out.append(KubeconfigProblem(field, f"{server!r} has no host"))
    else:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            labels = host.rstrip(".").split(".")
            if len(host) > 253 or not all(_DNS_LABEL.match(lbl) for lbl in labels):
                out.append(KubeconfigProblem(field, f"{host!r} is not a valid host name"))
    if port == 0:
        out.append(KubeconfigProblem(field, "port 0 is not valid"))
    if url.query or url.fragment:
        out.append(KubeconfigProblem(field, "must not have a query or fragment"))
    return out


def _pem_problem(value: Any, field: str) -> KubeconfigProblem | None:
    if not isinstance(value, str) or not value.strip():
        return KubeconfigProblem(field, "must be non-empty base64-encoded PEM")
    try:
        decoded = base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        return KubeconfigProblem(field, "is not valid base64")
    if b"-----BEGIN " not in decoded:
        return KubeconfigProblem(field, "does not decode to PEM data")
    return None


def _entry_problems(entry: KubeconfigEntry) -> list[KubeconfigProblem]:
    """fleet.kube's rules for an entry under Trust.SECRET, and PEM data that does not parse."""
    out = entry_problems(entry, Trust.SECRET)
    kind, body, path = entry.section[:-1], entry.body, entry.path
    for key in _PEM_FIELDS[kind]:
        if key in body:
            problem = _pem_problem(body[key], f"{path}.{key}")
            if problem:
                out.append(problem)
    return out


def _cluster_problems(entry: KubeconfigEntry) -> list[KubeconfigProblem]:
    return _entry_problems(entry) + _server_problems(
        entry.body.get("server"), f"{entry.path}.server"
    )


def _user_problems(entry: KubeconfigEntry, resolved: bool) -> list[KubeconfigProblem]:
    path, user = entry.path, entry.body
    out = _entry_problems(entry)
    has_cert, has_key = "client-certificate-data" in user, "client-key-data" in user
    if "token" in user and (not isinstance(user["token"], str) or not user["token"].strip()):
        out.append(KubeconfigProblem(f"{path}.token", "is empty"))
    plugin = user.get("exec") is not None or user.get("auth-provider") is not None
    if resolved and not plugin and not (user.get("token") or (has_cert and has_key)):
        out.append(
            KubeconfigProblem(
                path,
                "no usable credentials: set token, or client-certificate-data and client-key-data",
            )
        )
    return out


def _validate(
    config: Mapping[str, Any], source: str | None = None
) -> tuple[list[KubeconfigProblem], ResolvedKubeconfig | None]:
    out: list[KubeconfigProblem] = []
    if config.get("kind") not in (None, "Config"):
        out.append(KubeconfigProblem("kind", f"must be Config, not {config.get('kind')!r}"))
    if config.get("apiVersion") not in (None, "v1"):
        out.append(KubeconfigProblem("apiVersion", f"must be v1, not {config.get('apiVersion')!r}"))
    resolution = resolve_context(config)
    out += resolution.problems
    resolved = resolution.context
    resolved_user = resolved.user.name if resolved and resolved.user else None
    for found in resolution.clusters.values():
        for cluster in found:
            out += _cluster_problems(cluster)
    for name, users in resolution.users.items():
        for user in users:
            out += _user_problems(user, resolved=name == resolved_user)
    if resolved is None and not out:
        out.append(KubeconfigProblem("current-context", "does not resolve to one cluster and user"))
    connection: Connection | None = None
    if not out and resolved is not None and resolved.user is not None:
        try:
            connection = connect_context(resolved, source=source, trust=Trust.SECRET)
        except KubeconfigError as exc:
            out += exc.problems  # a CA or key pair OpenSSL refuses
    if out or resolved is None or resolved.user is None or connection is None:
        return sorted(out, key=_problem_order(config)), None
    return [], ResolvedKubeconfig(
        config=dict(config),
        context=resolved.name,
        cluster=resolved.cluster.name,
        user=resolved.user.name,
        server=resolved.server,
        namespace=resolved.namespace,
        connection=connection,
    )


def _problem_order(config: Mapping[str, Any]) -> Any:
    # Report in document order (top-level keys, then clusters, contexts, users) so the list
    # reads like the file.
    sections = [
        "(document)",
        "kind",
        "apiVersion",
        "current-context",
        "clusters",
        "contexts",
        "users",
    ]

    def key(p: KubeconfigProblem) -> tuple[int, int, str]:
        head = re.match(r"^([a-zA-Z()-]+)(?:\[(\d+)\])?", p.field)
        name = head.group(1) if head else p.field
        index = int(head.group(2)) if head and head.group(2) else -1
        rank = sections.index(name) if name in sections else len(sections)
        return rank, index, p.field

    return key


def _as_config(config: Mapping[str, Any] | str | bytes) -> Mapping[str, Any]:
    return load_kubeconfig(config) if isinstance(config, str | bytes) else config


def validate_kubeconfig(config: Mapping[str, Any] | str | bytes) -> list[KubeconfigProblem]:
    """Every problem with a kubeconfig (parsed dict or YAML text); empty means usable."""
    try:
        return _validate(_as_config(config))[0]
    except KubeconfigError as exc:
        return exc.problems


def check_kubeconfig(
    config: Mapping[str, Any] | str | bytes, source: str | None = None
) -> ResolvedKubeconfig:
    """The resolved kubeconfig, or KubeconfigError listing every problem."""
    try:
        problems, resolved = _validate(_as_config(config), source)
    except KubeconfigError as exc:
        raise KubeconfigError(exc.problems, source) from None
    if problems or resolved is None:
        raise KubeconfigError(problems, source)
    return resolved


def kubeconfig_from_secret(secret: Any, key: str = DEFAULT_SECRET_KEY) -> ResolvedKubeconfig:
    """Read, parse and validate the kubeconfig in a Secret; KubeconfigError names the Secret."""
    source = f"Secret {_secret_name(secret)} key {key!r}"
    text = kubeconfig_text_from_secret(secret, key)
    return check_kubeconfig(text, source)


def connection_from_secret(secret: Any, key: str = DEFAULT_SECRET_KEY) -> Connection:
    """The Connection a member's kubeconfig Secret describes, by the Secret rules (Trust.SECRET:
    validated here, inline data only, no plugin ever runs); KubeconfigError names the Secret."""
    return kubeconfig_from_secret(secret, key).connection
