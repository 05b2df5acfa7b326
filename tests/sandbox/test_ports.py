"""The sandbox listens below the kernel's ephemeral range, so a stopped cluster's ports stay free
for its restart (no outgoing connection is given one as its source port meanwhile)."""

from __future__ import annotations

import random
import socket
import sys
import threading
from pathlib import Path

from fleet.sandbox.process import (
    Component,
    ProcessTable,
    ephemeral_range,
    free_ports,
    port_is_free,
    start,
)
from fleet.testing.kube import wait_until


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    low, _high = ephemeral_range()
    ports = free_ports(12, rng=random.Random(7))
    assert len(set(ports)) == 12
    assert all(port < low for port in ports)
    assert all(port_is_free(port) for port in ports)


def test_the_range_is_read_from_proc_and_defaults_when_unreadable(tmp_path: Path) -> None:
    file = tmp_path / "ip_local_port_range"
    file.write_text("40000\t50000\n")
    assert ephemeral_range(file) == (40000, 50000)
    assert ephemeral_range(tmp_path / "missing") == (32768, 60999)


def test_a_port_freed_a_moment_later_is_waited_for(tmp_path: Path) -> None:
    """A process that is still exiting holds its ports for a moment: starting a component on
    one waits for it instead of failing."""
    (port,) = free_ports(1, rng=random.Random(11))
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    holder.listen()
    threading.Timer(0.5, holder.close).start()
    component = Component(
        name="t/sleep",
        argv=[sys.executable, "-c", "import time; time.sleep(30)"],
        log=tmp_path / "sleep.log",
        ports=[port],
        ready=lambda: True,
    )
    table = ProcessTable(tmp_path / "processes.jsonl")
    started = start(component, table, die_with_parent=True)
    try:
        assert started.popen.poll() is None
    finally:
        table.stop_all(grace=0)


def test_stopping_waits_until_every_thread_of_the_process_is_gone(tmp_path: Path) -> None:
    (port,) = free_ports(1, rng=random.Random(13))
    code = (
        "import socket, threading, time\n"
        f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen()\n"
        "for _ in range(8): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
        "time.sleep(60)\n"
    )
    component = Component(
        name="t/threads",
        argv=[sys.executable, "-c", code],
        log=tmp_path / "threads.log",
        ports=[port],
        ready=lambda: not port_is_free(port),
    )
    table = ProcessTable(tmp_path / "processes.jsonl")
    started = start(component, table, die_with_parent=True)
    wait_until(lambda: not port_is_free(port), timeout=10, interval=0.05, what="the port bound")
    table.stop(component.name, grace=0)
    assert port_is_free(port)
    started.popen.wait(timeout=5)
