"""The sandbox listens below the kernel's ephemeral range, so a stopped cluster's ports stay free
for its restart (no outgoing connection is given one as its source port meanwhile)."""

from __future__ import annotations

import random
from pathlib import Path

from fleet.sandbox.process import ephemeral_range, free_ports, port_is_free


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
