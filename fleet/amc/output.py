"""How kubectl amc prints: aligned columns as kubectl does, ages, cells, YAML and JSON.

Pure: everything here turns values into text, with the current time passed in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import yaml

from fleet.api import format_age

#: kubectl separates columns by at least three spaces.
GAP = "   "
NONE = "<none>"


def age(stamp: Any, now: datetime) -> str:
    """kubectl's AGE of a time (RFC 3339 text or a datetime); `<unknown>` when there is none."""
    if not stamp:
        return "<unknown>"
    if isinstance(stamp, datetime):
        return format_age(stamp, now)
    try:
        return format_age(str(stamp), now)
    except ValueError:
        return str(stamp)  # already relative, as some servers print it


def cell(value: Any, column: Mapping[str, Any], now: datetime) -> str:
    """One cell of a server-side Table, as kubectl prints it."""
    if value is None or value == "":
        return NONE if column.get("type") != "date" else "<unknown>"
    if column.get("format") == "date" or column.get("type") == "date":
        return age(value, now)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value)) or NONE
    return str(value)


def columns(header: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "") -> str:
    """Rows under a header, each column as wide as its widest cell (no trailing spaces)."""
    body = [list(header), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    return "\n".join(
        indent + GAP.join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in body
    )


def fields(pairs: Iterable[tuple[str, Any]], indent: str = "") -> str:
    """`Label:  value` lines with the values aligned, as `kubectl describe` prints them."""
    items = [
        (f"{label}:", NONE if value is None or value == "" else str(value))
        for label, value in pairs
    ]
    if not items:
        return ""
    width = max(len(label) for label, _ in items) + 2
    return "\n".join(f"{indent}{label.ljust(width)}{value}".rstrip() for label, value in items)


def document(obj: Any, fmt: str) -> str:
    """`-o yaml` or `-o json` of one object or a List, ending in a newline."""
    if fmt == "json":
        return json.dumps(obj, indent=4) + "\n"
    return str(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False))


__all__ = ["GAP", "NONE", "age", "cell", "columns", "document", "fields"]
