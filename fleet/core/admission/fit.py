"""Whether a demand fits a headroom, per resource (a resource the headroom does not list is
not capped)."""

from __future__ import annotations

import math
from collections.abc import Mapping


def fits(demand: Mapping[str, int], headroom: Mapping[str, int]) -> bool:
    for resource, amount in demand.items():
        left = headroom.get(resource)
        if left is not None and amount > left:
            return False
    return True


def first_short(demand: Mapping[str, int], headroom: Mapping[str, int]) -> str | None:
    """The first resource `demand` does not fit in `headroom` (None: it fits)."""
    for resource, amount in demand.items():
        left = headroom.get(resource)
        if left is not None and amount > left:
            return resource
    return None


def asleep(wake: Mapping[str, int], headroom: Mapping[str, int]) -> bool:
    """Whether the headroom is still below every wake threshold (nothing can fit yet)."""
    return all(headroom.get(resource, math.inf) < need for resource, need in wake.items())
