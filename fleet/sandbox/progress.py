"""Progress a person can trust: what a long step does, and that it is still doing it.

A cold toolchain build spends minutes inside single `go build` calls, and a sandbox start waits on
many processes at once; minutes of silence cannot be told from a hang. A `Heartbeat` repeats a
step's name with the time elapsed (and, when the step can tell, how far it got) every `interval`
seconds until the step ends. It runs on its own thread, so the step itself can simply block on
its subprocess. The clock and the interval are parameters, so a test can drive a heartbeat
without waiting for real minutes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

#: Receives one line of progress for a person to read.
Progress = Callable[[str], None]
Clock = Callable[[], float]

#: How often a running step reports; the promise to the user is "at least every 30 s".
HEARTBEAT_SECONDS = 20.0


def elapsed(seconds: float) -> str:
    """`0m05s`, `6m25s`, `1h02m03s`: short, and the same width for the minutes of a build."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def plural(count: int, one: str, many: str) -> str:
    """`1 binary`, `7 binaries`, `1,234 packages`."""
    return f"{count:,} {one if count == 1 else many}"


class Heartbeat:
    """While the `with` block runs, say `"<what>: still running, <elapsed>[; <detail>]"`.

    `detail` is asked at each beat for how far the step got (a count from its log, the parts
    still awaited); an empty answer is left out. The first beat comes one interval after entry;
    a step shorter than that says nothing more than its own start and end lines.
    """

    def __init__(
        self,
        say: Progress,
        what: str,
        *,
        detail: Callable[[], str] | None = None,
        interval: float = HEARTBEAT_SECONDS,
        clock: Clock = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"heartbeat interval must be positive, got {interval}")
        self._say = say
        self._what = what
        self._detail = detail
        self._interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat {what}", daemon=True)
        self.started = 0.0

    def __enter__(self) -> Heartbeat:
        self.started = self._clock()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def seconds(self) -> float:
        """Time since the step started, by the heartbeat's clock."""
        return self._clock() - self.started

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            line = f"{self._what}: still running, {elapsed(self.seconds())}"
            extra = self._detail() if self._detail else ""
            self._say(f"{line}; {extra}" if extra else line)
