"""Run a sandbox component again when it dies, as kubelet restarts a crashed control-plane pod.

A real member's scheduler or operator that panics is back within seconds (its pod's
restartPolicy); a sandbox process that panicked stayed dead, and every later test on that member
waited for nothing. koord-scheduler v1.8.0 has a known panic when a Reservation leaves while a
pod is in flight (koordinator-sh/koordinator#3127, fixed after v1.8.0), and fleet deletes
Reservations as part of its work, so a sandbox that means to behave like a member restarts it.

`python -S fleet/sandbox/keepalive.py [--settle S] -- ARGV...` (run as a file: it imports
nothing but the standard library, so each wrapper is a bare interpreter) runs ARGV with this
process's stdout/stderr (the component's log) and:

- passes SIGTERM/SIGINT on and exits with the command when it is stopped;
- exits with the command's code when the first run ends within `--settle` seconds (default 20,
  or $FLEET_SANDBOX_KEEPALIVE_SETTLE): a component that cannot start fails `fleet sandbox up` at
  once, as it would without this wrapper;
- otherwise starts it again after a back-off (1 s, doubling to 30 s, reset after a run of a
  minute), writing one line to the log each time.

It sits in the component's process group: stopping the group stops both; and its command dies
with it (PR_SET_PDEATHSIG), so a SIGKILLed wrapper never leaves the component behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

_PR_SET_PDEATHSIG = 1

#: The default of `--settle` (tests shorten it).
SETTLE_ENV = "FLEET_SANDBOX_KEEPALIVE_SETTLE"
#: The line written to the component's log before each restart (read by `restarts_in`).
RESTART_MARK = "fleet-sandbox-keepalive:"

_FIRST_BACKOFF = 1.0
_MAX_BACKOFF = 30.0
_STEADY_SECONDS = 60.0


def kill_when_parent_exits() -> None:
    """Runs in a child before its exec: the kernel kills it when the process that started it
    exits (every sandbox process in tests, and every wrapped component)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: keepalive.py [--settle SECONDS] -- COMMAND [ARG...]"
    if "--" not in args:
        print(usage, file=sys.stderr)
        return 2
    split = args.index("--")
    options, command = args[:split], args[split + 1 :]
    settle = float(os.environ.get(SETTLE_ENV, "20"))
    if options:
        if len(options) != 2 or options[0] != "--settle":
            print(usage, file=sys.stderr)
            return 2
        settle = float(options[1])
    if not command:
        print(usage, file=sys.stderr)
        return 2
    return _supervise(command, settle)


def _supervise(command: list[str], settle: float) -> int:
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    backoff = _FIRST_BACKOFF
    first = True
    while True:
        started = time.monotonic()
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, preexec_fn=kill_when_parent_exits
        )
        if stopping:  # stopped while this start was under way: the signal missed it
            child.terminate()
        code = child.wait()
        ran = time.monotonic() - started
        if stopping or (first and ran < settle):
            return code
        first = False
        if ran >= _STEADY_SECONDS:
            backoff = _FIRST_BACKOFF
        print(
            f"{RESTART_MARK} {command[0]} exited with code {code} after {ran:.0f}s; "
            f"starting it again in {backoff:.0f}s",
            flush=True,
        )
        deadline = time.monotonic() + backoff
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
        if stopping:
            return code
        backoff = min(backoff * 2, _MAX_BACKOFF)


def restarts_in(log: Path) -> list[str]:
    """The restart lines this wrapper wrote to a component's log, oldest first."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.startswith(RESTART_MARK)]


if __name__ == "__main__":
    sys.exit(main())
