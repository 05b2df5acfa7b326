"""Which resources an API server serves: `(apiVersion, kind)` or a user's word -> Resource.

One cache per server, filled from the server's discovery documents (`/api/v1`, `/apis`,
`/apis/<group>/<version>`) and emptied by `forget` (a CRD was installed or removed). The cache
does no I/O: the clients' shared requests (_requests) fetch what it lacks, so the async
controller client, the sync CLI client, `kubectl amc` and the sandbox bootstrap all resolve
kinds the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

__all__ = ["Discovery", "Resource", "group_version_path"]


def group_version_path(api_version: str) -> str:
    """`v1` -> `/api/v1`; `kubeflow.org/v1` -> `/apis/kubeflow.org/v1`."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API, and the words a user may call it by."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The collection (no name) or object path; cluster-wide when no namespace is given."""
        path = group_version_path(self.api_version)
        if self.namespaced and namespace:
            path += f"/namespaces/{quote(namespace, safe='')}"
        path += f"/{self.plural}"
        if name:
            path += f"/{quote(name, safe='')}"
            if subresource:
                path += f"/{subresource}"
        return path

    def names(self) -> set[str]:
        """What `kubectl get <word>` accepts: plural, singular, kind in any case, short names."""
        return {
            self.plural,
            self.singular or self.kind.lower(),
            self.kind.lower(),
            *self.short_names,
        }

    def describe(self, namespace: str | None = None, name: str | None = None) -> str:
        """`Secret fleet-system/member-1-kubeconfig`, `Node n1`, `Pod in team-a`, `Node`."""
        if name:
            where = f"{namespace}/{name}" if self.namespaced and namespace else name
            return f"{self.kind} {where}"
        if self.namespaced and namespace:
            return f"{self.kind} in {namespace}"
        return self.kind


def resources_of(api_version: str, listing: Mapping[str, Any]) -> Iterator[Resource]:
    """The resources of one group version's APIResourceList (subresources left out)."""
    for item in listing.get("resources") or []:
        name = str(item.get("name") or "")
        if not name or "/" in name:
            continue
        yield Resource(
            api_version=api_version,
            kind=str(item.get("kind") or ""),
            plural=name,
            namespaced=bool(item.get("namespaced")),
            singular=str(item.get("singularName") or ""),
            short_names=tuple(item.get("shortNames") or ()),
        )


def preferred_versions(groups: Mapping[str, Any]) -> list[str]:
    """The preferred `group/version` of every group in an APIGroupList, in the server's order."""
    out = []
    for group in groups.get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        versions = [v.get("groupVersion") for v in group.get("versions") or []]
        chosen = preferred or (versions[0] if versions else None)
        if chosen:
            out.append(str(chosen))
    return out


class Discovery:
    """The discovery cache of one API server."""

    def __init__(self) -> None:
        self._by_version: dict[str, dict[str, Resource]] = {}
        #: Every group version the server prefers, core first, once all were listed.
        self._all: list[str] | None = None

    def forget(self) -> None:
        """Drop everything: the next lookups ask the server again."""
        self._by_version.clear()
        self._all = None

    def find(self, api_version: str, kind: str) -> Resource | None:
        return (self._by_version.get(api_version) or {}).get(kind)

    def learn(self, api_version: str, listing: Mapping[str, Any]) -> None:
        """Remember one group version's resources (replacing what was known of it)."""
        self._by_version[api_version] = {r.kind: r for r in resources_of(api_version, listing)}

    def knows(self, api_version: str) -> bool:
        return api_version in self._by_version

    @property
    def complete(self) -> bool:
        """Whether every preferred group version has been listed (lookups by word need it)."""
        return self._all is not None

    def mark_complete(self, versions: list[str]) -> None:
        self._all = ["v1", *(v for v in versions if v != "v1")]

    def match(self, word: str) -> Resource | None:
        """The resource a user means by `word` (`pytorchjob`, `PyTorchJobs`, `po`, or qualified
        with its group: `pytorchjobs.kubeflow.org`): core first, then groups in the server's
        order, as kubectl resolves it."""
        want = word.strip().lower()
        name, _, group = want.partition(".")
        order = list(self._all or [])
        order += [v for v in self._by_version if v not in order]
        for api_version in order:
            for res in (self._by_version.get(api_version) or {}).values():
                if group and res.group != group:
                    continue
                if (name if group else want) in res.names():
                    return res
        return None
