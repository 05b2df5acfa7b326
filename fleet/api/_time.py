"""Kubernetes time formats, written once: metav1.Time, metav1.MicroTime, and kubectl's AGE.

The API server stores times as RFC 3339 strings in UTC; fleet's core works in epoch seconds.
Every conversion between the two goes through here.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = [
    "format_age",
    "format_micro_time",
    "format_time",
    "from_epoch",
    "parse_time",
    "to_epoch",
]


def _to_utc(value: datetime) -> datetime:
    # Kubernetes times are UTC; a naive datetime is taken as UTC.
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def from_epoch(seconds: float) -> datetime:
    """Epoch seconds as an aware UTC datetime, cut to whole seconds as metav1.Time keeps them."""
    return datetime.fromtimestamp(int(seconds), UTC)


def to_epoch(value: datetime) -> float:
    return _to_utc(value).timestamp()


def format_time(value: datetime | float) -> str:
    """metav1.Time: RFC 3339 in UTC with second precision (`2006-01-02T15:04:05Z`)."""
    if not isinstance(value, datetime):
        value = from_epoch(value)
    return _to_utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(value: datetime | float) -> str:
    """metav1.MicroTime (Leases, events.k8s.io): microsecond precision."""
    if not isinstance(value, datetime):
        value = datetime.fromtimestamp(value, UTC)
    return _to_utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as the API server writes it (`Z` or an offset, with or without a
    fraction); ValueError otherwise."""
    return _to_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


def format_age(since: datetime | str, now: datetime) -> str:
    """kubectl's AGE column: `45s`, `3m12s`, `47m`, `5h`, `12d`."""
    then = parse_time(since) if isinstance(since, str) else _to_utc(since)
    seconds = max(int((_to_utc(now) - then).total_seconds()), 0)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 600:
        return f"{seconds // 60}m{seconds % 60}s"
    if seconds < 3 * 3600:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"
