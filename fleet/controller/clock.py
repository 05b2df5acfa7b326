"""Time for the shell, injectable: the controller never reads the clock directly.

The core takes time as a parameter; the shell asks a `Clock` for it, so tests drive a reconcile
through a failover window without waiting for it.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock time, epoch seconds: what is persisted (timers, history)."""

    def monotonic(self) -> float:
        """Monotonic seconds: what in-memory expiries (snapshot reservations) are measured in."""


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK: Clock = SystemClock()
