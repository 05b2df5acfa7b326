"""Reading a kubeconfig: parse it, merge a `$KUBECONFIG` list, and resolve a context to its
cluster, user and namespace.

Written once for both of fleet's kinds of kubeconfig, and `Trust` is the one place that says
which rules each gets: the user's own files (`fleet.kube.load`: `--kubeconfig`, `$KUBECONFIG`,
`~/.kube/config`) are read as kubectl reads them, files and exec plugins included; a kubeconfig
someone handed fleet in a Secret (a member's) holds inline data only (`refused_in_secret`, and
fleet.kubeconfig's stricter checks on top). `entry_problems` is the one copy of the rules an
entry follows to be used at all (basic authentication, the certificate/key pair, the proxy):
from_kubeconfig applies them to the entries it connects with, fleet.kubeconfig to every entry
of a member's kubeconfig. Every problem names its field (`contexts[0].context.cluster`), so one
round of fixing is enough.
"""

from __future__ import annotations

import base64
import binascii
import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

from fleet.kube._errors import KubeconfigError, KubeconfigProblem

__all__ = [
    "JOIN_HINT",
    "KubeconfigContext",
    "KubeconfigEntry",
    "KubeconfigResolution",
    "Trust",
    "client_certificate_fields",
    "credential",
    "entry_problems",
    "insecure_skip_tls_verify",
    "load_kubeconfig",
    "merge_kubeconfig_files",
    "read_kubeconfig_file",
    "refused_in_secret",
    "resolve_context",
]


class Trust(enum.Enum):
    """Whose kubeconfig it is, which decides what it may make fleet do.

    USER: the user's own kubeconfig files, on the user's own machine or in a pod the user
    runs: kubectl's rules. Files it names are read (relative to the file that holds them) and
    exec credential plugins run.

    SECRET: a kubeconfig handed to fleet as data, in a Secret (a member's): whoever wrote the
    Secret must never make fleet read its files or run a command, so it holds inline data only
    (`refused_in_secret`). The default for a kubeconfig in memory.
    """

    USER = "user"
    SECRET = "secret"


#: What to do instead of an exec or auth-provider plugin in a member's kubeconfig Secret.
JOIN_HINT = "join the member with `fleet join`, which stores a token for fleet's own ServiceAccount"

#: The proxies a connection can go through (proxy-url): an HTTP CONNECT tunnel, to a proxy
#: reached over http or https. kubectl also speaks socks5, which neither httpx nor aiohttp (kopf)
#: do without another library: refused, naming the field, rather than ignored.
PROXY_SCHEMES: Final = ("http", "https")

#: Fields that name files, and their inline replacements, by entry kind.
_FILE_FIELDS = {
    "cluster": {"certificate-authority": "certificate-authority-data"},
    "user": {
        "client-certificate": "client-certificate-data",
        "client-key": "client-key-data",
        "tokenFile": "token",
    },
}


def load_kubeconfig(text: str | bytes, source: str | None = None) -> dict[str, Any]:
    """Parse kubeconfig YAML (or JSON) into a dict; KubeconfigError if it is not a mapping."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeconfigError.one("(document)", f"not valid YAML: {exc}", source) from None
    if not isinstance(loaded, dict):
        raise KubeconfigError.one("(document)", "is not a YAML mapping", source)
    return loaded


def read_kubeconfig_file(path: Path) -> dict[str, Any]:
    """A kubeconfig file, parsed; KubeconfigError names the file when it cannot be read."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise KubeconfigError.one("(file)", f"cannot read: {exc.strerror}", str(path)) from None
    return load_kubeconfig(text, str(path))


@dataclass(frozen=True)
class KubeconfigEntry:
    """One named item of `clusters`, `contexts` or `users`, and where it sits in the file."""

    section: str
    index: int
    name: str
    body: Mapping[str, Any]

    @property
    def path(self) -> str:
        """The field path of the entry's body, for messages: `users[1].user`."""
        return f"{self.section}[{self.index}].{self.section[:-1]}"


@dataclass(frozen=True)
class KubeconfigContext:
    """What a context resolves to."""

    name: str
    context: KubeconfigEntry
    cluster: KubeconfigEntry
    user: KubeconfigEntry | None
    namespace: str | None

    @property
    def server(self) -> str:
        return str(self.cluster.body.get("server") or "").strip()


@dataclass(frozen=True)
class KubeconfigResolution:
    """Every entry by name (duplicates kept, so they can be reported), the resolved context if
    it resolves to exactly one cluster and user, and every problem met on the way."""

    clusters: dict[str, list[KubeconfigEntry]]
    contexts: dict[str, list[KubeconfigEntry]]
    users: dict[str, list[KubeconfigEntry]]
    context: KubeconfigContext | None
    problems: list[KubeconfigProblem] = field(default_factory=list)


def _entries(
    config: Mapping[str, Any], section: str, out: list[KubeconfigProblem]
) -> dict[str, list[KubeconfigEntry]]:
    """Name -> entries for one of clusters/contexts/users, noting shape errors."""
    inner = section[:-1]
    raw = config.get(section)
    by_name: dict[str, list[KubeconfigEntry]] = {}
    if raw is None:
        return by_name
    if not isinstance(raw, list):
        out.append(KubeconfigProblem(section, "must be a list"))
        return by_name
    for i, item in enumerate(raw):
        path = f"{section}[{i}]"
        if not isinstance(item, Mapping):
            out.append(KubeconfigProblem(path, "must be a mapping with name and " + inner))
            continue
        name = item.get("name")
        body = item.get(inner)
        if not isinstance(name, str) or not name:
            out.append(KubeconfigProblem(f"{path}.name", "required"))
            continue
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            out.append(KubeconfigProblem(f"{path}.{inner}", "must be a mapping"))
            continue
        by_name.setdefault(name, []).append(KubeconfigEntry(section, i, name, body))
    for name, found in by_name.items():
        for entry in found[1:]:
            out.append(
                KubeconfigProblem(f"{section}[{entry.index}].name", f"duplicate name {name!r}")
            )
    return by_name


def resolve_context(
    config: Mapping[str, Any], context: str | None = None, *, require_user: bool = True
) -> KubeconfigResolution:
    """Resolve `context` (default: current-context) to one cluster and (if required) one user.

    Never raises: problems are collected in the KubeconfigResolution, and `context` is None when the
    context does not resolve unambiguously.
    """
    out: list[KubeconfigProblem] = []
    clusters = _entries(config, "clusters", out)
    contexts = _entries(config, "contexts", out)
    users = _entries(config, "users", out)

    def done(resolved: KubeconfigContext | None = None) -> KubeconfigResolution:
        return KubeconfigResolution(clusters, contexts, users, resolved, out)

    names = ", ".join(repr(n) for n in contexts) or "none defined"
    chosen: Any = context if context is not None else config.get("current-context")
    where = "context" if context is not None else "current-context"
    if not isinstance(chosen, str) or not chosen:
        out.append(KubeconfigProblem("current-context", f"required (contexts: {names})"))
        return done()
    if chosen not in contexts:
        out.append(KubeconfigProblem(where, f"context {chosen!r} not found ({names})"))
        return done()
    if len(contexts[chosen]) > 1:
        return done()  # the duplicate is already reported
    ctx = contexts[chosen][0]
    found: dict[str, KubeconfigEntry | None] = {"cluster": None, "user": None}
    resolvable = True
    for ref, table, section in (("cluster", clusters, "clusters"), ("user", users, "users")):
        target = ctx.body.get(ref)
        path = f"{ctx.path}.{ref}"
        if not isinstance(target, str) or not target:
            if ref == "cluster" or require_user:
                out.append(KubeconfigProblem(path, "required"))
                resolvable = False
        elif target not in table:
            out.append(KubeconfigProblem(path, f"{ref} {target!r} not found in {section}"))
            resolvable = False
        elif len(table[target]) == 1:
            found[ref] = table[target][0]
        else:
            resolvable = False  # the duplicate is already reported
    cluster = found["cluster"]
    if not resolvable or cluster is None:
        return done()
    namespace = ctx.body.get("namespace")
    return done(KubeconfigContext(chosen, ctx, cluster, found["user"], namespace or None))


@dataclass(frozen=True, repr=False)
class Credential:
    """PEM (or other secret) bytes from a kubeconfig, and the user's file they came from, if
    any (never a file fleet wrote)."""

    data: bytes
    path: Path | None = None


def credential(
    entry: KubeconfigEntry,
    key: str,
    base: Path | None,
    out: list[KubeconfigProblem],
    trust: Trust = Trust.SECRET,
) -> Credential | None:
    """`<key>-data` (base64), or the file `<key>` names (relative to `base`, the kubeconfig's
    folder, as kubectl reads it), never under Trust.SECRET. Problems name the field and the
    file."""
    path = f"{entry.path}.{key}"
    if data := entry.body.get(f"{key}-data"):
        try:
            return Credential(base64.b64decode("".join(str(data).split()), validate=True))
        except (binascii.Error, ValueError):
            out.append(KubeconfigProblem(f"{path}-data", "is not valid base64"))
            return None
    if trust is Trust.USER and (name := entry.body.get(key)):
        file = Path(str(name)).expanduser()
        if base is not None and not file.is_absolute():
            file = base / file
        try:
            return Credential(file.read_bytes(), file)
        except OSError as exc:
            out.append(KubeconfigProblem(path, f"cannot read {file}: {exc.strerror}"))
    return None


def insecure_skip_tls_verify(cluster: Mapping[str, Any]) -> bool:
    """Whether a cluster entry says not to verify the server (as kubectl reads the flag)."""
    return cluster.get("insecure-skip-tls-verify") in (True, "true", "True")


def refused_in_secret(entry: KubeconfigEntry) -> list[KubeconfigProblem]:
    """What a kubeconfig from a Secret may not hold (Trust.SECRET): file paths, which would read
    the controller's disk, exec or auth-provider plugins, which would run a command in it, and
    insecure-skip-tls-verify, which would talk to whoever answers. The one copy of the rule:
    fleet.kubeconfig reports these, and from_kubeconfig refuses to connect with them."""
    kind = entry.section[:-1]
    out = [
        KubeconfigProblem(f"{entry.path}.{key}", f"file paths are not allowed; use {inline}")
        for key, inline in _FILE_FIELDS.get(kind, {}).items()
        if entry.body.get(key)
    ]
    if kind == "cluster" and insecure_skip_tls_verify(entry.body):
        out.append(
            KubeconfigProblem(
                f"{entry.path}.insecure-skip-tls-verify",
                "insecure TLS verification is not allowed; provide certificate-authority-data",
            )
        )
    if kind == "user":
        for plugin in ("exec", "auth-provider"):
            if entry.body.get(plugin) is not None:
                out.append(
                    KubeconfigProblem(
                        f"{entry.path}.{plugin}",
                        f"{plugin} plugins are not allowed in a kubeconfig Secret; {JOIN_HINT}",
                    )
                )
    return out


def _proxy_problems(entry: KubeconfigEntry) -> list[KubeconfigProblem]:
    value = entry.body.get("proxy-url")
    if value is None:
        return []
    field_path = f"{entry.path}.proxy-url"
    try:
        url = urlsplit(str(value).strip())
        url.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError as exc:
        return [KubeconfigProblem(field_path, f"{value!r} is not a valid URL ({exc})")]
    scheme = url.scheme.lower()
    if scheme.startswith("socks"):
        return [
            KubeconfigProblem(
                field_path, f"{scheme} proxies are not supported; use an http:// or https:// proxy"
            )
        ]
    if scheme not in PROXY_SCHEMES or not url.hostname:
        return [KubeconfigProblem(field_path, f"{value!r} must be an http:// or https:// URL")]
    return []


def entry_problems(entry: KubeconfigEntry, trust: Trust) -> list[KubeconfigProblem]:
    """Why fleet cannot use a cluster or user entry as it is, under `trust`: the one copy of
    these rules. Under Trust.SECRET, what a Secret may not hold (refused_in_secret); under
    either, basic authentication and auth-provider plugins (not supported), a client
    certificate without its key or the other way round, a proxy fleet cannot speak, a
    tls-server-name that is not a name."""
    kind = entry.section[:-1]
    path, body = entry.path, entry.body
    out = refused_in_secret(entry) if trust is Trust.SECRET else []
    if kind == "cluster":
        out += _proxy_problems(entry)
        name = body.get("tls-server-name")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            out.append(KubeconfigProblem(f"{path}.tls-server-name", "must be a host name"))
        return out
    if trust is Trust.USER and body.get("auth-provider") is not None:
        out.append(
            KubeconfigProblem(
                f"{path}.auth-provider",
                "auth-provider plugins are not supported (kubectl removed its own too); "
                "log in with the provider's exec plugin (gke-gcloud-auth-plugin, kubelogin)",
            )
        )
    if body.get("username") is not None or body.get("password") is not None:
        out.append(
            KubeconfigProblem(
                f"{path}.username",
                "basic authentication is not supported; use a token or a client certificate",
            )
        )
    has = client_certificate_fields(body)
    if has["client-certificate"] != has["client-key"]:
        missing = "client-key" if has["client-certificate"] else "client-certificate"
        out.append(KubeconfigProblem(f"{path}.{missing}-data", "required with its pair"))
    return out


def client_certificate_fields(user: Mapping[str, Any]) -> dict[str, bool]:
    """Whether a user entry gives a client certificate, and a client key (as data or a file)."""
    return {
        k: bool(user.get(k) or user.get(f"{k}-data") is not None)
        for k in ("client-certificate", "client-key")
    }


def _absolute(value: Any, base: Path) -> Any:
    if not isinstance(value, str) or not value:
        return value
    path = Path(value).expanduser()
    return value if path.is_absolute() else str(base / path)


def _resolve_paths(section: str, item: Any, base: Path) -> Any:
    """An entry with its relative file paths made absolute against `base` (its file's folder),
    as client-go's ResolveLocalPaths does: an exec command only when it names a folder (a bare
    name is looked up on PATH)."""
    kind = section[:-1]
    if not isinstance(item, Mapping) or not isinstance(item.get(kind), Mapping):
        return item
    body = dict(item[kind])
    for key in _FILE_FIELDS.get(kind, {}):
        if key in body:
            body[key] = _absolute(body[key], base)
    plugin = body.get("exec")
    if kind == "user" and isinstance(plugin, Mapping):
        command = plugin.get("command")
        if isinstance(command, str) and os.sep in command:
            body["exec"] = {**plugin, "command": _absolute(command, base)}
    return {**item, kind: body}


def merge_kubeconfig_files(files: Sequence[Path]) -> dict[str, Any]:
    """The `$KUBECONFIG` list, merged as kubectl merges it.

    The first file that defines a cluster, user or context of a given name wins; the first
    non-empty current-context wins; relative paths are resolved against the folder of the file
    that held the entry; files that do not exist are skipped. A file that exists but cannot be
    read or parsed is an error naming it. A name defined twice in one file stays a problem.
    """
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    sections: dict[str, list[Any]] = {"clusters": [], "contexts": [], "users": []}
    for file in files:
        if not file.exists():
            continue
        config = read_kubeconfig_file(file)
        base = file.absolute().parent
        if not merged.get("current-context") and config.get("current-context"):
            merged["current-context"] = config["current-context"]
        for section, entries in sections.items():
            raw = config.get(section)
            if raw is None:
                continue
            if not isinstance(raw, list):
                raise KubeconfigError.one(section, "must be a list", str(file))
            earlier = {e.get("name") for e in entries if isinstance(e, Mapping)}
            for item in raw:
                name = item.get("name") if isinstance(item, Mapping) else None
                if name is not None and name in earlier:
                    continue  # an earlier file defines it: that one wins
                entries.append(_resolve_paths(section, item, base))
    merged.update(sections)
    return merged
