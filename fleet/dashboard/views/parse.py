"""Reading one object into its model without letting a malformed one break a page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from fleet.api import KubeModel, format_age, from_epoch, parse_time

M = TypeVar("M", bound=KubeModel)


def read(model: type[M], obj: Mapping[str, Any]) -> tuple[M | None, str]:
    """The parsed object, or None and one line naming the field and what is wrong with it."""
    try:
        return model.model_validate(obj), ""
    except ValidationError as e:
        error = e.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return None, f"{model.__name__} {key_of(obj)} cannot be read: {where}: {error['msg']}"


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        return "?"
    ns, name = meta.get("namespace"), meta.get("name")
    return f"{ns}/{name}" if ns else str(name)


def age(obj: Mapping[str, Any], now: float) -> str:
    """kubectl's AGE of an object ('' without a readable creationTimestamp)."""
    meta = obj.get("metadata") or {}
    stamp = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    if not isinstance(stamp, str):
        return ""
    try:
        return format_age(parse_time(stamp), from_epoch(now))
    except ValueError:
        return ""
