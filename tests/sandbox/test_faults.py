"""Bad input and faults: each names the component and its log, and leaves nothing running."""

from __future__ import annotations

import os
import socket
import stat
import sys
from pathlib import Path

import pytest

from fleet.sandbox import Sandbox, SandboxConfig, SandboxError, Toolchain, ensure_toolchain
from fleet.sandbox.process import Component, ProcessTable, start, wait_ready
from fleet.sandbox.toolchain import Binary, GoModule, build_modules, find_go
from fleet.testing.kube import wait_until


def test_missing_go_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FLEET_GO", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxError, match="no `go` is on PATH"):
        ensure_toolchain(progress=lambda _m: None)


def test_failed_module_download_names_the_module_and_its_log(tmp_path):
    bogus = GoModule(
        name="bogus",
        go="1.22",
        requires={"example.invalid/fleet/nope": "v0.0.1"},
        replaces={},
        binaries=(Binary("nope", "example.invalid/fleet/nope/cmd/nope"),),
    )
    with pytest.raises(SandboxError) as err:
        build_modules(find_go(), Toolchain(tmp_path), [bogus], lambda _m: None)
    log = tmp_path / "logs" / "bogus-modules.log"
    assert "building bogus failed" in str(err.value)
    assert str(log) in str(err.value)
    assert log.is_file()


def _component(tmp_path: Path, argv: list[str], ports: list[int] | None = None) -> Component:
    return Component(
        name="test/thing",
        argv=argv,
        log=tmp_path / "thing.log",
        ports=ports or [],
        ready=lambda: False,
    )


def test_port_in_use_names_the_component_and_port(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(SandboxError, match=rf"test/thing: port {port} .* already in use"):
            start(
                _component(tmp_path, ["/bin/true"], [port]),
                ProcessTable(tmp_path / "p"),
                die_with_parent=True,
            )


def test_component_dying_on_start_names_it_and_its_log(tmp_path):
    table = ProcessTable(tmp_path / "p.jsonl")
    script = tmp_path / "dies.sh"
    script.write_text("#!/bin/sh\necho 'boom: cannot listen' >&2\nexit 3\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    started = start(_component(tmp_path, [str(script)]), table, die_with_parent=True)
    with pytest.raises(SandboxError) as err:
        wait_ready([started], timeout=10)
    message = str(err.value)
    assert "test/thing exited with code 3" in message
    assert str(tmp_path / "thing.log") in message
    assert "boom: cannot listen" in message


@pytest.mark.toolchain
def test_failed_up_stops_everything_it_started(tmp_path):
    """A sandbox whose API server dies: clear error, and etcd (already up) is stopped too."""
    real = ensure_toolchain(progress=lambda _m: None)
    fake = Toolchain(tmp_path / "toolchain")
    fake.bin_dir.mkdir(parents=True)
    fake.crd_dir.symlink_to(real.crd_dir)
    for binary in real.bin_dir.iterdir():
        (fake.bin_dir / binary.name).symlink_to(binary)
    (fake.bin_dir / "kube-apiserver").unlink()
    broken = fake.bin_dir / "kube-apiserver"
    broken.write_text("#!/bin/sh\necho 'error: simulated crash on start' >&2\nexit 1\n")
    broken.chmod(0o755)

    sandbox = Sandbox(tmp_path / "state")
    config = SandboxConfig.default(members=1)
    with pytest.raises(SandboxError) as err:
        sandbox.up(config, toolchain=fake, progress=lambda _m: None, die_with_parent=True)
    message = str(err.value)
    assert "kube-apiserver exited with code 1" in message
    assert "kube-apiserver.log" in message and "simulated crash" in message
    records = [r for r in sandbox.processes.records() if r.alive()]
    assert records == []
    sandbox.down(progress=lambda _m: None)
    assert not (tmp_path / "state").exists()


def test_down_is_safe_twice_and_after_a_crash(tmp_path):
    sandbox = Sandbox(tmp_path / "state")
    sandbox.down(progress=lambda _m: None)
    # A crashed `up` leaves a recorded process behind: down must stop it.
    sleeper = start(
        _component(tmp_path, ["/bin/sleep", "300"]), sandbox.processes, die_with_parent=True
    )
    sandbox.down(progress=lambda _m: None)
    assert sleeper.popen.wait(timeout=10) is not None
    sandbox.down(progress=lambda _m: None)


def test_bad_config_file_names_the_file_and_field(tmp_path):
    bad = tmp_path / "sandbox.yaml"
    bad.write_text("members:\n- name: Member_1\n  nodes: [{count: -1}]\n")
    with pytest.raises(SandboxError) as err:
        SandboxConfig.load(bad)
    assert str(bad) in str(err.value)
    assert "members.0.name" in str(err.value) and "members.0.nodes.0.count" in str(err.value)


def test_pid_reuse_is_never_signalled(tmp_path):
    """A record whose pid now belongs to another process (different start time) is left alone."""
    table = ProcessTable(tmp_path / "p.jsonl")
    from fleet.sandbox.process import ProcessRecord

    table.add(ProcessRecord("test/ghost", os.getpid(), start_ticks=1, log="x"))
    assert table.stop_all() == []


def test_a_component_that_died_is_listed_as_not_running_and_a_restarted_one_is_not(tmp_path):
    """What an e2e failure reports: the components whose last start has exited."""
    table = ProcessTable(tmp_path / "processes.jsonl")

    def component(name: str, code: str) -> Component:
        return Component(
            name=name,
            argv=[sys.executable, "-c", code],
            log=tmp_path / f"{name.replace('/', '-')}.log",
            ports=[],
            ready=lambda: True,
        )

    try:
        dies = start(component("m/dies", "print('bye')"), table, die_with_parent=True)
        restarted = component("m/restarted", "import time; time.sleep(30)")
        start(restarted, table, die_with_parent=True)
        table.stop(restarted.name, grace=0)
        start(restarted, table, die_with_parent=True)
        dies.popen.wait(timeout=10)
        wait_until(
            lambda: [r.component for r in table.not_running()] == ["m/dies"],
            timeout=10,
            what="only the component that exited listed",
        )
    finally:
        table.stop_all(grace=0)
