"""The newest copy of each fleet object the controller has seen, from watches and its own writes.

Reconciles read from here instead of asking the API server each time, as controller-runtime's
cache does. Copies only move forward (by resourceVersion), so a late watch event never replaces
what a write just returned; writes guarded by resourceVersion turn any remaining staleness into
a conflict that is retried with a fresh read.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

Obj = dict[str, Any]


def _version(obj: Obj) -> int | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and rv.isdigit() else None


class Newest(Generic[K]):
    def __init__(self) -> None:
        self._objects: dict[K, Obj] = {}

    def get(self, key: K) -> Obj | None:
        return self._objects.get(key)

    def offer(self, key: K, obj: Obj) -> None:
        """Keep `obj` unless what we hold is newer (same object, higher resourceVersion)."""
        held = self._objects.get(key)
        if held is not None:
            same = (held.get("metadata") or {}).get("uid") == (obj.get("metadata") or {}).get("uid")
            ours, theirs = _version(held), _version(obj)
            if same and ours is not None and theirs is not None and ours > theirs:
                return
        self._objects[key] = obj

    def drop(self, key: K) -> None:
        self._objects.pop(key, None)

    def items(self) -> list[tuple[K, Obj]]:
        """Every object held, with its key (a snapshot: safe to iterate across awaits)."""
        return list(self._objects.items())
