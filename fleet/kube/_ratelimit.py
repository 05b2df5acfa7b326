"""A client-side rate limit per API server: client-go's token bucket (QPS and burst).

Up to `burst` requests go at once; after that one more each 1/`qps` seconds. Each caller takes
its token before it waits, so concurrent callers queue in order and none starves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class RateLimit:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._stamp: float | None = None
        self._now = now
        self._sleep = sleep

    def reserve(self) -> float:
        """Take a token; how long to wait before using it (0 when one was at hand)."""
        now = self._now()
        if self._stamp is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
        self._tokens -= 1.0
        return -self._tokens / self.qps if self._tokens < 0 else 0.0

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await self._sleep(wait)
