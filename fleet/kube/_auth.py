"""Bearer tokens, including ones that rotate on disk.

A pod's service-account token is a projected volume: the kubelet replaces the file before the
token expires (at 80% of its lifetime, hourly by default). A client that read it once at start
fails with 401 an hour later. client-go re-reads such a file once a minute; TokenFile re-reads it
whenever it changed (one stat per request), so a rotated token is used from the next request on.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import os
import threading
from collections.abc import Generator
from pathlib import Path

import httpx

__all__ = ["BearerToken", "TokenFile", "refresh_deadline"]


class BearerToken(httpx.Auth):
    """A fixed token (the kubeconfig's `token`)."""

    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request

    def __repr__(self) -> str:
        return "BearerToken(<hidden>)"


class TokenFile(httpx.Auth):
    """The token in a file, re-read when the file changes (rotation)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._token = ""
        self.reads = 0
        self.token()  # fail now, naming the file, rather than at the first request

    def token(self) -> str:
        """The current token; reads the file again only if it changed since the last read."""
        st = os.stat(self.path)  # follows the kubelet's ..data symlink swap
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if stamp != self._seen:
                self._token = self.path.read_text().strip()
                self._seen = stamp
                self.reads += 1
            return self._token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        yield request

    def __repr__(self) -> str:
        return f"TokenFile({str(self.path)!r})"


def _claims(token: str) -> dict[str, object]:
    try:
        payload = token.split(".")[1]
        decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        claims = json.loads(decoded)
    except (IndexError, ValueError, binascii.Error):
        return {}
    return claims if isinstance(claims, dict) else {}


def refresh_deadline(
    token: str,
    now: dt.datetime,
    *,
    longest: dt.timedelta = dt.timedelta(minutes=10),
    shortest: dt.timedelta = dt.timedelta(seconds=30),
) -> dt.datetime:
    """When a client holding `token` (read at `now`) should read it again.

    A bound service-account token says when it was issued (`iat`) and when it expires (`exp`,
    or the earlier `kubernetes.io.warnafter` when the API server extended it). The kubelet
    writes a new one at 80% of that lifetime, or after 24 hours; reading again at 90% (or 25
    hours) picks it up while the old one is still valid. A token that says nothing is read
    again after `longest`. Never sooner than `shortest`, so a token past its prime does not
    make a client log in again and again.
    """
    claims = _claims(token)
    issued = claims.get("iat")
    expires = claims.get("exp")
    inner = claims.get("kubernetes.io")
    if isinstance(inner, dict) and isinstance(inner.get("warnafter"), int | float):
        expires = inner["warnafter"]
    if (
        not isinstance(issued, int | float)
        or not isinstance(expires, int | float)
        or expires <= issued
    ):
        return now + max(longest, shortest)
    at = issued + min(0.9 * (expires - issued), 25 * 3600)
    return max(now + shortest, dt.datetime.fromtimestamp(at, dt.UTC))
