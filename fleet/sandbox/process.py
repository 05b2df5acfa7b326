"""Start, watch and stop the sandbox's component processes.

Each process gets its own session (so stopping it stops its children too), its own log file, and
a record on disk (pid plus the kernel's start time for that pid) written before we wait for it,
so `fleet sandbox down` can stop whatever an interrupted or crashed `up` left behind without ever
signalling an unrelated process that happens to reuse the pid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from fleet.sandbox import keepalive
from fleet.sandbox.errors import SandboxError
from fleet.sandbox.keepalive import kill_when_parent_exits
from fleet.sandbox.progress import HEARTBEAT_SECONDS, Clock, Heartbeat, Progress


@dataclasses.dataclass(frozen=True)
class ProcessRecord:
    """What we need to find a started process again, from another invocation."""

    component: str
    pid: int
    start_ticks: int
    log: str

    def alive(self) -> bool:
        return _start_ticks(self.pid) == self.start_ticks


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


class ProcessTable:
    """The on-disk list of processes one sandbox started (append-only while starting)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self) -> list[ProcessRecord]:
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            with contextlib.suppress(ValueError, TypeError, KeyError):
                out.append(ProcessRecord(**json.loads(line)))
        return out

    def add(self, record: ProcessRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(dataclasses.asdict(record)) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def not_running(self) -> list[ProcessRecord]:
        """The components whose last start is no longer running (died, or stopped on purpose)."""
        last = {r.component: r for r in self.records()}
        return [r for r in last.values() if not r.alive()]

    def stop(self, component: str, grace: float = 10.0) -> bool:
        """Stop one component (SIGTERM, then SIGKILL); False if it was not running."""
        live = [r for r in self.records() if r.component == component and r.alive()]
        self._terminate(live, grace)
        return bool(live)

    def stop_all(self, grace: float = 10.0) -> list[str]:
        """Stop every recorded process that is still the one we started; return their names."""
        live = [r for r in self.records() if r.alive()]
        self._terminate(live, grace)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        return [r.component for r in live]

    @staticmethod
    def _terminate(live: list[ProcessRecord], grace: float) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds (at once when grace is 0)."""
        for record in live:
            _signal_group(record.pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(r.alive() for r in live):
            time.sleep(0.1)
        for record in live:
            if record.alive():
                _signal_group(record.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_running_threads(r.pid) for r in live):
            time.sleep(0.05)


def _running_threads(pid: int) -> bool:
    """Whether any thread of `pid` has not exited yet. A killed process's first thread is a
    zombie (not `alive`) while its other threads still tear down, and its sockets stay bound
    until the last one is gone: a cluster started again at once found its etcd port taken."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        if raw[raw.rindex(")") + 2] not in "ZX":
            return True
    return False


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


#: Where the kernel picks the source port of an outgoing connection (Linux's default range when
#: /proc says nothing else).
_EPHEMERAL_DEFAULT = (32768, 60999)
#: The lowest port the sandbox listens on.
_LOWEST_PORT = 10000


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's range for outgoing connections' source ports."""
    try:
        low, high = (int(x) for x in path.read_text().split()[:2])
    except (OSError, ValueError):
        return _EPHEMERAL_DEFAULT
    return low, high


def free_ports(count: int, *, rng: random.Random | None = None) -> list[int]:
    """Ports free now, outside the kernel's ephemeral range (all held open together, so they
    are distinct).

    A cluster stopped in a test is started again on the same ports. Were they ephemeral, any
    client's outgoing connection could take one as its source port while the cluster is down,
    and the restart would find it in use; below the ephemeral range no connection is given one.
    """
    pick = rng or random.SystemRandom()
    low, _high = ephemeral_range()
    top = max(low - 1, _LOWEST_PORT + count)
    socks: list[socket.socket] = []
    try:
        for _ in range(50 * count):
            if len(socks) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", pick.randint(_LOWEST_PORT, top)))
            except OSError:
                s.close()
                continue
            socks.append(s)
        while len(socks) < count:  # a crowded low range: let the kernel choose
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


Probe = Callable[[], bool]


@dataclasses.dataclass(frozen=True)
class Component:
    """One process of a sandbox cluster and how to tell that it is ready."""

    name: str
    argv: Sequence[str]
    log: Path
    ports: Sequence[int]
    ready: Probe
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    cwd: Path | None = None
    #: Started again when it dies, as kubelet restarts a member's crashed scheduler or
    #: operator (fleet/sandbox/keepalive.py); stopping it on purpose stops it for good.
    restart: bool = False


@dataclasses.dataclass
class Started:
    component: Component
    popen: subprocess.Popen[bytes]
    since: float


#: How long a port that is taken is waited for before starting a component (a process that is
#: still exiting holds its ports for a moment).
PORT_WAIT_SECONDS = 10.0


def start(component: Component, table: ProcessTable, *, die_with_parent: bool) -> Started:
    """Launch one component after checking its ports; record it before returning."""
    for port in component.ports:
        deadline = time.monotonic() + PORT_WAIT_SECONDS
        while not port_is_free(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not port_is_free(port):
            raise SandboxError(
                f"{component.name}: port {port} on 127.0.0.1 is already in use "
                "(another sandbox or program holds it); stop it or choose other ports"
            )
    binary = Path(component.argv[0])
    if not os.access(binary, os.X_OK):
        raise SandboxError(f"{component.name}: binary {binary} is missing or not executable")
    component.log.parent.mkdir(parents=True, exist_ok=True)
    log = component.log.open("ab")
    env = {**os.environ, **component.env}
    try:
        argv = list(component.argv)
        if component.restart:
            # Run as a file, with no site-packages and no fleet import: a wrapper per component
            # costs a bare interpreter (about 12 MiB), not the sandbox's modules.
            argv = [sys.executable, "-S", keepalive.__file__, "--", *argv]
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=component.cwd,
            start_new_session=True,
            preexec_fn=kill_when_parent_exits if die_with_parent else None,
        )
    finally:
        log.close()
    ticks = _start_ticks(popen.pid) or 0
    table.add(ProcessRecord(component.name, popen.pid, ticks, str(component.log)))
    return Started(component, popen, time.monotonic())


def wait_ready(
    started: Iterable[Started],
    timeout: float,
    *,
    progress: Progress | None = None,
    what: str = "",
    interval: float = HEARTBEAT_SECONDS,
    clock: Clock = time.monotonic,
) -> None:
    """Wait until every component answers its probe; fail fast, naming the one that died.

    With `progress`, say every `interval` seconds (by `clock`) which components are still
    awaited, under the step name `what`; the timeout is always real time.
    """
    pending = list(started)
    total = len(pending)
    if progress is None:
        _wait_ready(pending, timeout)
        return

    def awaited() -> str:  # runs on the heartbeat's thread: read a copy
        current = list(pending)
        names = ", ".join(s.component.name for s in current)
        return f"waiting for {names} ({total - len(current)} of {total} ready)"

    with Heartbeat(progress, what, detail=awaited, interval=interval, clock=clock):
        _wait_ready(pending, timeout)


def _wait_ready(pending: list[Started], timeout: float) -> None:
    """Poll `pending` (removing what is ready, in place) until it is empty."""
    deadline = time.monotonic() + timeout
    while pending:
        for s in list(pending):
            rc = s.popen.poll()
            if rc is not None:
                raise SandboxError(
                    f"{s.component.name} exited with code {rc} while starting; "
                    f"log: {s.component.log}\n{log_tail(s.component.log)}"
                )
            if s.component.ready():
                pending.remove(s)
        if not pending:
            return
        if time.monotonic() > deadline:
            names = ", ".join(s.component.name for s in pending)
            logs = "\n".join(f"  {s.component.name}: {s.component.log}" for s in pending)
            raise SandboxError(
                f"{names} did not become ready within {timeout:.0f}s; logs:\n{logs}\n"
                f"{log_tail(pending[0].component.log)}"
            )
        time.sleep(0.2)


def log_tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line[:300] for line in text[-lines:])
