"""A sandbox component marked `restart` comes back after it dies, as a member's pod would, and
stays down when it is stopped on purpose (fleet/sandbox/keepalive.py)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

from fleet.sandbox import SandboxError
from fleet.sandbox.keepalive import main, restarts_in
from fleet.sandbox.process import Component, ProcessTable, start, wait_ready
from fleet.testing.kube import wait_until

#: A component that records each start's pid, dies (exit 2) on its first start once it has run
#: past the wrapper's settle time, and then runs until stopped.
_CRASHES_ONCE = """
import os, sys, time
runs = sys.argv[1]
with open(runs, "a") as f:
    f.write(f"{os.getpid()}\\n")
if len(open(runs).read().split()) == 1:
    time.sleep(0.5)
    sys.exit(2)
time.sleep(60)
"""


def _component(tmp_path: Path, code: str, *args: str) -> Component:
    return Component(
        name="m/crashy",
        argv=[sys.executable, "-c", code, *args],
        log=tmp_path / "crashy.log",
        ports=[],
        ready=lambda: True,
        restart=True,
    )


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.is_file() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"


@pytest.fixture
def settle_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrapper's settle time cut to 0.2 s, so a crash after 0.5 s counts as a crash."""
    monkeypatch.setenv("FLEET_SANDBOX_KEEPALIVE_SETTLE", "0.2")


def test_a_component_that_dies_is_started_again_and_says_so_in_its_log(tmp_path, settle_fast):
    table = ProcessTable(tmp_path / "p.jsonl")
    runs = tmp_path / "runs"
    try:
        started = start(_component(tmp_path, _CRASHES_ONCE, str(runs)), table, die_with_parent=True)
        pids = wait_until(lambda: len(p := _pids(runs)) == 2 and p, timeout=20, what="2 starts")
        assert _alive(pids[1]) and not _alive(pids[0])
        assert not table.not_running()  # the wrapper never died
        (line,) = restarts_in(started.component.log)
        assert "exited with code 2" in line
    finally:
        table.stop_all(grace=5)
    # Stopped on purpose: the wrapper and its command are gone, and nothing is started again.
    assert not _alive(pids[1])
    assert _pids(runs) == pids
    assert len(restarts_in(started.component.log)) == 1


def test_a_component_that_cannot_start_still_fails_up_at_once(tmp_path):
    """The first run ending within the settle time is the wrapper's own exit, with its code:
    `fleet sandbox up` names the component as it did without the wrapper."""
    table = ProcessTable(tmp_path / "p.jsonl")
    component = dataclasses.replace(
        _component(tmp_path, "import sys; print('boom'); sys.exit(3)"), ready=lambda: False
    )
    started = start(component, table, die_with_parent=True)
    with pytest.raises(SandboxError, match="m/crashy exited with code 3") as err:
        wait_ready([started], timeout=20)
    assert "boom" in str(err.value)
    assert not restarts_in(component.log)


def test_a_killed_wrapper_takes_its_command_with_it(tmp_path, settle_fast):
    table = ProcessTable(tmp_path / "p.jsonl")
    runs = tmp_path / "runs"
    runs.write_text("0\n")  # past its first run: it sleeps
    try:
        start(_component(tmp_path, _CRASHES_ONCE, str(runs)), table, die_with_parent=True)
        child = wait_until(lambda: len(p := _pids(runs)) == 2 and p[1], what="the command")
    finally:
        table.stop_all(grace=0)  # SIGKILL
    wait_until(lambda: not _alive(child), timeout=10, what="the command gone")


def test_usage_errors_are_refused():
    assert main(["echo"]) == 2
    assert main(["--settle", "1", "--"]) == 2
    assert main(["--bogus", "--", "true"]) == 2
