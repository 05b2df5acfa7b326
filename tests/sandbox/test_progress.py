"""Long steps say what they do, what they build from, and keep saying it while they run.

The toolchain build is driven end to end with a fake `go` (a small Python script) that holds each
step until the test has seen two heartbeats for it, and a clock that moves 30 s per reading, so
the heartbeat is proven on its observable lines without waiting for real minutes.
"""

from __future__ import annotations

import itertools
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from fleet.sandbox.errors import SandboxError
from fleet.sandbox.process import Component, ProcessTable, start, wait_ready
from fleet.sandbox.progress import Heartbeat, elapsed, plural
from fleet.sandbox.toolchain import Binary, GoModule, Toolchain, build_modules, summary

FAKE_GO = """\
#!{python}
import os, sys, time
from pathlib import Path

release = Path(os.environ["FAKE_GO_RELEASE"])
args = sys.argv[1:]
if args[0] == "list":
    key = "modules-" + Path.cwd().name
    print("go: downloading example.com/fake v1.2.3", file=sys.stderr, flush=True)
    print("example.com/fake/internal/a", flush=True)
    print("example.com/fake/cmd/server", flush=True)
elif args[0] == "build":
    out = Path(args[args.index("-o") + 1])
    key = out.name.removesuffix(".partial")
    for package in ("runtime", "example.com/fake/internal/a", "example.com/fake/cmd/server"):
        print(package, file=sys.stderr, flush=True)
    if os.environ.get("FAKE_GO_FAIL") == key:
        sys.exit("# example.com/fake/cmd/server\\nmain.go:3:2: undefined: x")
else:
    sys.exit(f"fake go: unexpected {{args}}")
deadline = time.monotonic() + 60
while not (release / key).exists():  # held until the test has seen two heartbeats
    if time.monotonic() > deadline:
        sys.exit(f"fake go: {{key}} was never released")
    time.sleep(0.01)
if args[0] == "build":
    out.write_bytes(b"\\0" * 2_500_000)
    out.chmod(0o755)
"""

MODULE = GoModule(
    name="fake",
    go="1.22",
    requires={"example.com/fake": "v1.2.3"},
    replaces={"example.com/fake": "v1.2.3", "example.com/pinned": "v0.1.0"},
    binaries=(Binary("fake-server", "example.com/fake/cmd/server"),),
)

#: What each step's heartbeat says once the fake `go` has printed its progress.
RESOLVED = "1 module downloaded, last example.com/fake v1.2.3; 2 packages listed"
COMPILED = "3 packages compiled, last example.com/fake/cmd/server"
#: ... and before it has (the heartbeat may beat before the fake has started).
EARLY = ("0 packages listed", "no package compiled yet")
HEARTBEAT = re.compile(
    r"^\[(?P<name>[\w-]+)\] (?P<step>resolving Go modules|compiling): still running, "
    r"(?P<elapsed>\w+); (?P<detail>.*)$"
)


class Recorder:
    """The progress callback: keeps every line; releases a step of the fake `go` once two
    heartbeats have reported that step's progress from its log."""

    def __init__(self, release: Path) -> None:
        self.lines: list[str] = []
        self.release = release
        self.beats: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self.lock:
            self.lines.append(line)
            match = HEARTBEAT.match(line)
            if not match or match["detail"] not in (RESOLVED, COMPILED):
                return
            key = match["name"] if match["step"] == "compiling" else f"modules-{match['name']}"
            self.beats[key] = self.beats.get(key, 0) + 1
            if self.beats[key] == 2:
                (self.release / key).touch()

    def step(self, prefix: str) -> list[str]:
        return [line for line in self.lines if line.startswith(prefix)]


def assert_heartbeats(beats: list[str], what: str, detail: str) -> None:
    """One beat per interval, each 30 s (one fake-clock reading) after the previous one,
    each with the step's progress; at least two after the step had printed some."""
    for i, beat in enumerate(beats):
        match = HEARTBEAT.match(beat)
        assert match is not None and beat.startswith(f"{what}: still running, "), beat
        assert match["elapsed"] == elapsed(30 * (i + 1)), beat
        assert match["detail"] in (detail, *EARLY), beat
    assert sum(beat.endswith(detail) for beat in beats) >= 2


def fake_clock() -> Callable[[], float]:
    """Each reading is 30 s after the previous one."""
    ticks = itertools.count(0, 30)
    return lambda: float(next(ticks))


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    go = tmp_path / "go"
    go.write_text(FAKE_GO.format(python=sys.executable))
    go.chmod(0o755)
    release = tmp_path / "release"
    release.mkdir()
    monkeypatch.setenv("FAKE_GO_RELEASE", str(release))
    return str(go), release


def test_a_build_reports_each_step_its_inputs_a_heartbeat_and_a_summary(fake_go, tmp_path):
    go, release = fake_go
    say = Recorder(release)
    toolchain = Toolchain(tmp_path / "toolchain")
    logs = toolchain.root / "logs"

    result = build_modules(go, toolchain, [MODULE], say, interval=0.02, clock=fake_clock())

    resolve = say.step("[fake] ")
    assert resolve[0] == (
        "[fake] resolving Go modules for 1 binary: example.com/fake v1.2.3 "
        f"(+1 more pinned by replace); log {logs / 'fake-modules.log'}"
    )
    assert_heartbeats(resolve[1:-1], "[fake] resolving Go modules", RESOLVED)
    assert re.fullmatch(
        rf"\[fake\] modules ready in (\d+h)?\d+m\d\ds; {re.escape(RESOLVED)}", resolve[-1]
    )

    compile_ = say.step("[fake-server] ")
    assert compile_[0] == (
        "[fake-server] compiling example.com/fake/cmd/server (example.com/fake v1.2.3), "
        f"binary 1 of 1; log {logs / 'fake-server.log'}"
    )
    assert_heartbeats(compile_[1:-1], "[fake-server] compiling", COMPILED)
    assert re.fullmatch(
        rf"\[fake-server\] built in (\d+h)?\d+m\d\ds \(2\.5 MB\); {re.escape(COMPILED)}",
        compile_[-1],
    )
    assert say.lines.index(resolve[-1]) < say.lines.index(compile_[0])  # one step after another

    binary = toolchain.binary("fake-server")
    assert [(b.name, b.path, b.size) for b in result.binaries] == [
        ("fake-server", binary, 2_500_000)
    ]
    assert binary.stat().st_size == 2_500_000
    report = summary(toolchain, result.binaries, 95.0, "toolchain")
    assert report[0] == f"toolchain ready in 1m35s, cached in {toolchain.root}:"
    assert re.fullmatch(
        rf"  fake-server\s+2\.5 MB  built in (\d+h)?\d+m\d\ds  {re.escape(str(binary))}", report[1]
    )
    assert report[-1] == f"  Go logs of each step in {logs}"


def test_a_second_build_reuses_the_binary_and_says_so(fake_go, tmp_path):
    go, release = fake_go
    toolchain = Toolchain(tmp_path / "toolchain")
    build_modules(go, toolchain, [MODULE], Recorder(release), interval=0.02, clock=fake_clock())
    again = Recorder(release)

    result = build_modules(go, toolchain, [MODULE], again, interval=0.02, clock=fake_clock())

    binary = toolchain.binary("fake-server")
    assert again.step("[fake-server] ") == [f"[fake-server] already built: {binary}"]
    assert summary(toolchain, result.binaries, 1.0, "toolchain")[1] == (
        f"  fake-server     2.5 MB  already built  {binary}"
    )


def test_a_failed_compile_names_its_log_and_stops_reporting(fake_go, tmp_path, monkeypatch):
    go, release = fake_go
    monkeypatch.setenv("FAKE_GO_FAIL", "fake-server")
    (release / "modules-fake").touch()
    (release / "fake-server").touch()
    say = Recorder(release)
    toolchain = Toolchain(tmp_path / "toolchain")
    with pytest.raises(SandboxError) as err:
        build_modules(go, toolchain, [MODULE], say, interval=0.02, clock=fake_clock())
    log = toolchain.root / "logs" / "fake-server.log"
    assert f"building fake-server failed (go build exited 1); full log: {log}" in str(err.value)
    assert "undefined: x" in str(err.value)
    assert not toolchain.binary("fake-server").exists()


def test_waiting_for_components_names_the_ones_still_awaited(tmp_path):
    """A cluster start repeats which cluster/component it waits for, with the time elapsed."""
    gate = threading.Event()
    lines: list[str] = []
    one_left = "waiting for m2/etcd (1 of 2 ready)"

    def say(line: str) -> None:  # m2 becomes ready once two beats have said it is awaited
        lines.append(line)
        if sum(x.endswith(one_left) for x in lines) == 2:
            gate.set()

    def component(name: str, ready) -> Component:
        return Component(
            name=name,
            argv=["/bin/sleep", "30"],
            log=tmp_path / f"{name}.log",
            ports=[],
            ready=ready,
        )

    table = ProcessTable(tmp_path / "processes")
    started = [
        start(component("m1/etcd", lambda: True), table, die_with_parent=True),
        start(component("m2/etcd", gate.is_set), table, die_with_parent=True),
    ]
    try:
        wait_ready(
            started,
            timeout=60,
            progress=say,
            what="starting etcd",
            interval=0.02,
            clock=fake_clock(),
        )
    finally:
        table.stop_all(grace=0)
    # A beat may come before the first probe of m1 (both then awaited); each is 30 s later.
    both = "waiting for m1/etcd, m2/etcd (0 of 2 ready)"
    assert [line.split("; ")[0] for line in lines] == [
        f"starting etcd: still running, {elapsed(30 * (i + 1))}" for i in range(len(lines))
    ]
    assert all(line.endswith((one_left, both)) for line in lines)
    assert sum(line.endswith(one_left) for line in lines) >= 2


def test_elapsed_is_minutes_and_seconds_then_hours():
    assert [elapsed(s) for s in (0, 5.9, 65, 385, 3723)] == [
        "0m00s",
        "0m05s",
        "1m05s",
        "6m25s",
        "1h02m03s",
    ]
    assert [plural(n, "binary", "binaries") for n in (1, 2, 1234)] == [
        "1 binary",
        "2 binaries",
        "1,234 binaries",
    ]
    with pytest.raises(ValueError, match="interval must be positive"):
        Heartbeat(print, "x", interval=0)
