"""Which member objects fleet put there: the ADOPTION column.

Fleet labels everything it creates in a member with `fleet.dev/managed-by` (its fleet id), and
ACK One's `kubectl amc` prints ADOPTION for the kinds a fleet propagates: the workloads it
dispatches and the dependencies `propagateDeps` takes along. Pods are the member's own (its
training operator makes them), so they get no such column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fleet.api import constants as c
from fleet.core.kinds import ADAPTERS
from fleet.kube import Resource

#: (API group, kind) of everything fleet propagates: the workloads and what `propagateDeps`
#: takes along (`fleet.api.constants.DEPENDENCY_KINDS`).
PROPAGATED: Final = frozenset(
    {(k.api_version.rpartition("/")[0], k.kind) for k in ADAPTERS}
    | {(api.rpartition("/")[0], kind) for kind, api in c.DEPENDENCY_KINDS.items()}
)


def propagated(res: Resource) -> bool:
    """Whether fleet propagates this kind, so its member objects get an ADOPTION column."""
    return (res.group, res.kind) in PROPAGATED


def managed_by(metadata: Mapping[str, Any] | None) -> str | None:
    """The id of the fleet that manages a member object, None when no fleet does."""
    labels = (metadata or {}).get("labels") or {}
    value = labels.get(c.MANAGED_BY_LABEL)
    return str(value) if value else None


def adoption(metadata: Mapping[str, Any] | None) -> str:
    """`Y` when a fleet manages the object, else `N`."""
    return "Y" if managed_by(metadata) else "N"
