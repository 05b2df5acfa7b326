"""Reading a kubeconfig: parse it, and resolve a context to its cluster, user and namespace.

Written once for both of fleet's kinds of kubeconfig: the strict rules for member kubeconfigs
taken from Secrets (fleet.kubeconfig) and the permissive reading of the fleet's own kubeconfig
(fleet.kube.load), which may point at files like any kubectl kubeconfig. Every problem names
its field (`contexts[0].context.cluster`), so one round of fixing is enough.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.kube._errors import KubeconfigError, KubeconfigProblem

__all__ = [
    "KubeconfigContext",
    "KubeconfigEntry",
    "KubeconfigResolution",
    "credential",
    "load_kubeconfig",
    "read_kubeconfig_file",
    "resolve_context",
]


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
    entry: KubeconfigEntry, key: str, base: Path | None, out: list[KubeconfigProblem]
) -> Credential | None:
    """`<key>-data` (base64), or the file `<key>` names (relative to `base`, the kubeconfig's
    folder, as kubectl reads it). Problems name the field and the file."""
    path = f"{entry.path}.{key}"
    if data := entry.body.get(f"{key}-data"):
        try:
            return Credential(base64.b64decode("".join(str(data).split()), validate=True))
        except (binascii.Error, ValueError):
            out.append(KubeconfigProblem(f"{path}-data", "is not valid base64"))
            return None
    if name := entry.body.get(key):
        file = Path(str(name)).expanduser()
        if base is not None and not file.is_absolute():
            file = base / file
        try:
            return Credential(file.read_bytes(), file)
        except OSError as exc:
            out.append(KubeconfigProblem(path, f"cannot read {file}: {exc.strerror}"))
    return None
