"""Names fleet derives from other names, kept within Kubernetes' length limits (pure)."""

from __future__ import annotations

import hashlib

#: The most characters a label value (and a DNS-1123 label) may have.
LABEL_VALUE_MAX = 63


def bounded(full: str, limit: int) -> str:
    """`full` when it has at most `limit` characters; else cut, with a hash of the whole name
    after it, so names that differ stay apart and the result stays a valid DNS name (it does
    not end in `.` or `-` before the hash)."""
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:10]
    head = full[: limit - len(digest) - 1].rstrip(".-")
    return f"{head}-{digest}"
