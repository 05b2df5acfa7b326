"""JSON merge patches (RFC 7386) that turn one object into another."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that makes `current` equal `desired`: changed values, nested objects
    patched key by key, and `None` for every key `desired` no longer has (a merge patch that
    only carries the desired object would leave those in place). Lists are replaced whole, as
    a merge patch does. Empty when they are equal."""
    patch: dict[str, Any] = {key: None for key in current if key not in desired}
    for key, value in desired.items():
        old = current.get(key)
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            nested = merge_patch(old, value)
            if nested:
                patch[key] = nested
        elif key not in current or old != value:
            patch[key] = value
    return patch
