"""The story runner: what every story is given (`Demo`), and the loop that tells them.

A story is a `Story`: a name, a title, `run(demo)` and `reset(demo)`. `run` is a sequence of
steps; each step says what it shows (`demo.step`) and then proves it happened by waiting for an
observable condition with a bounded timeout (`demo.expect`) or checking a fact (`demo.check`).
A step that does not happen raises `StepFailed`, which names the story, the step and what was
awaited; the runner prints that one line and `fleet demo` exits 1.

Every story starts from the demo's layout (`layout.DEMO_CONFIG`): before a story runs, its
`reset` removes what an earlier run of it left (jobs, added nodes), and after it, unless it is
the last one told, its `reset` runs again, so the next story finds the fleet as the layout
describes it. The last story's objects stay for the user to explore.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fleet import amc
from fleet.api import binding_name
from fleet.kube import KubeError
from fleet.sandbox import Sandbox, SandboxError
from fleet.sandbox.progress import Heartbeat, elapsed
from fleet.testing.kube import ClusterClient
from fleet.testing.workloads import JOB_NAME_LABEL

T = TypeVar("T")

BINDING = ("fleet.dev/v1alpha1", "GangBinding")
#: How long a step waits for what it shows, unless it says otherwise. Generous: the sandbox
#: shares two cores with everything else on the machine.
DEFAULT_TIMEOUT = 120.0


def bold(text: str) -> str:
    """Bold on a terminal; plain in a log or a pipe."""
    return f"\033[1m{text}\033[0m" if sys.stdout.isatty() else text


class StepFailed(Exception):
    """A step's condition did not come true in time (or a fact it checks was false)."""

    def __init__(self, story: str, step: str, what: str) -> None:
        super().__init__(f"story {story!r}, step {step!r}: {what}")
        self.story = story
        self.step = step
        self.what = what


@dataclass(frozen=True)
class Story:
    """One story of the demo. `run` tells it; `reset` removes what it (or an earlier run of it)
    left in the sandbox and must be safe to call on a sandbox where it never ran."""

    name: str
    title: str
    run: Callable[[Demo], None]
    reset: Callable[[Demo], None]


@dataclass
class Demo:
    """What a story is given: the sandbox, clients for its clusters, and the step helpers."""

    sandbox: Sandbox
    #: `--check`: nobody watches; never pause, and print a verdict for every expectation.
    check: bool = False
    out: Callable[[str], None] = field(default=lambda line: print(line, flush=True))
    story: str = ""
    step_title: str = ""
    steps: int = 0
    _clients: dict[str, ClusterClient] = field(default_factory=dict)

    # -- clusters -----------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.sandbox.kubeconfig

    @property
    def fleet(self) -> ClusterClient:
        return self.cluster("fleet")

    def cluster(self, name: str) -> ClusterClient:
        """A client for `fleet` or a member, through the sandbox's merged kubeconfig."""
        if name not in self._clients:
            self._clients[name] = ClusterClient(
                str(self.kubeconfig), name, field_manager="fleet-demo"
            )
        return self._clients[name]

    @property
    def members(self) -> list[str]:
        return self.sandbox.members()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # -- steps --------------------------------------------------------------------------------

    def say(self, line: str = "") -> None:
        self.out(line)

    def step(self, title: str) -> None:
        """Start the next step: what it shows, in a line a person reads first."""
        self.steps += 1
        self.step_title = title
        self.out("\n" + bold(f"-- {self.story} {self.steps}. {title}"))

    def fail(self, what: str) -> StepFailed:
        return StepFailed(self.story, self.step_title, what)

    def expect(
        self,
        probe: Callable[[], T | None],
        what: str,
        timeout: float = DEFAULT_TIMEOUT,
        interval: float = 0.5,
    ) -> T:
        """Wait until `probe` returns something truthy (and return it); after `timeout` seconds
        the step fails naming `what`. A wait longer than 20 s says it is still waiting."""
        started = time.monotonic()
        deadline = started + timeout
        with Heartbeat(self.out, f"  waiting for {what} (up to {timeout:.0f}s)"):
            while True:
                value = probe()
                if value:
                    if self.check:
                        self.out(f"  ok: {what} ({time.monotonic() - started:.1f}s)")
                    return value
                if time.monotonic() > deadline:
                    raise self.fail(f"timed out after {timeout:.0f}s waiting for {what}")
                time.sleep(interval)

    def verify(self, fact: bool, what: str) -> None:
        """A fact the step shows that holds now (no waiting): the step fails if it does not."""
        if not fact:
            raise self.fail(f"expected {what}")
        if self.check:
            self.out(f"  ok: {what}")

    # -- showing commands ---------------------------------------------------------------------

    def amc(self, command: str) -> str:
        """Run `kubectl amc ...` (fleet.amc itself) on the fleet; show and return its output."""
        self.out(f"$ {command}")
        args = command.split()
        if args[:2] != ["kubectl", "amc"]:
            raise ValueError(f"not a kubectl amc command: {command}")
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = amc.main([*args[2:], "--kubeconfig", str(self.kubeconfig), "--context", "fleet"])
        text = buffer.getvalue()
        for line in text.rstrip("\n").splitlines():
            self.out(line)
        if code != 0:
            raise self.fail(f"`{command}` exited {code}")
        return text

    def kubectl(self, command: str, context: str = "fleet") -> None:
        """Show a kubectl command and its real output, when kubectl is installed (only shown:
        what a step proves, it proves through the API)."""
        self.out(f"$ {command}" + ("" if context == "fleet" else f"   # in {context}"))
        args = command.split()
        if shutil.which("kubectl") is None:
            self.out("  (kubectl is not installed; skipping)")
            return
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        result = subprocess.run(
            [*args, "--context", context],
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        for line in (result.stdout + result.stderr).rstrip("\n").splitlines():
            self.out(line)

    def pause(self, next_title: str) -> None:
        """Between stories, a person at a terminal reads before the next one starts."""
        if self.check or not sys.stdin.isatty():
            return
        with contextlib.suppress(EOFError):
            input(f"\n[Enter] for the next story: {next_title} ")

    # -- questions stories ask ----------------------------------------------------------------

    def binding(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
        return self.fleet.get(*BINDING, binding_name(kind, name), namespace) or {}

    def target(self, kind: str, name: str, namespace: str = "default") -> str | None:
        clusters = (self.binding(kind, name, namespace).get("spec") or {}).get("clusters") or []
        return str(clusters[0]["name"]) if clusters else None

    def pods(self, member: str, job: str, namespace: str = "default") -> list[dict[str, Any]]:
        return self.cluster(member).pods(namespace, f"{JOB_NAME_LABEL}={job}")

    def running_in(self, member: str, job: str, count: int, namespace: str = "default") -> bool:
        """Whether `job` has exactly `count` pods in `member`, every one Running."""
        pods = self.pods(member, job, namespace)
        return len(pods) == count and all(
            (p.get("status") or {}).get("phase") == "Running" for p in pods
        )

    def situation(self, api: tuple[str, str], name: str, namespace: str = "default") -> str:
        """Where a job stands, in lines: its binding (phase, target, conditions, pending
        reasons), its last Events on the fleet, and in each member its copy, its pods (phase,
        node, why not scheduled), the member's nodes (taints, unschedulable) and its last
        FailedScheduling Events. For a failed wait's message: never raises."""
        lines: list[str] = []

        def said(what: str, read: Callable[[], list[str]]) -> None:
            try:
                lines.extend(read())
            except (KubeError, KeyError, TypeError) as e:
                lines.append(f"{what}: unreadable ({e})")

        def binding() -> list[str]:
            found = self.binding(api[1], name, namespace)
            status = found.get("status") or {}
            out = [f"binding: phase {status.get('phase')}, target {self.target(api[1], name)}"]
            out += [
                f"  {c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}"
                for c in status.get("conditions") or []
            ]
            out += [
                f"  pending in {r.get('cluster')}: {r.get('reason')}"
                for r in status.get("pendingReasons") or []
            ]
            return out

        def events() -> list[str]:
            found = sorted(
                self.fleet.events(namespace, name), key=lambda e: str(e.get("lastTimestamp"))
            )
            return [f"event {e.get('reason')}: {e.get('message')}" for e in found[-8:]]

        def member(m: str) -> list[str]:
            client = self.cluster(m)
            copy = client.get(*api, name, namespace)
            out = [f"{m}: copy {'present' if copy is not None else 'absent'}"]
            for pod in self.pods(m, name, namespace):
                status = pod.get("status") or {}
                why = [
                    f"{c.get('reason')}: {c.get('message')}"
                    for c in status.get("conditions") or []
                    if c.get("type") == "PodScheduled" and c.get("status") != "True"
                ]
                out.append(
                    f"  pod {pod['metadata']['name']}: {status.get('phase')} on "
                    f"{(pod.get('spec') or {}).get('nodeName')} {'; '.join(why)}".rstrip()
                )
            if copy is not None or out[1:]:
                for node in client.items("v1", "Node"):
                    spec = node.get("spec") or {}
                    taints = [f"{t.get('key')}:{t.get('effect')}" for t in spec.get("taints") or []]
                    out.append(
                        f"  node {node['metadata']['name']}"
                        f"{' unschedulable' if spec.get('unschedulable') else ''} {taints or ''}"
                    )
                refused = [
                    e
                    for e in client.items("v1", "Event", namespace)
                    if e.get("reason") == "FailedScheduling"
                    and str(e["involvedObject"].get("name", "")).startswith(name)
                ]
                refused.sort(key=lambda e: str(e.get("lastTimestamp")))
                out += [f"  FailedScheduling: {e.get('message')}" for e in refused[-4:]]
            return out

        said("binding", binding)
        said("events", events)
        for m in self.members:
            said(m, functools.partial(member, m))
        return "\n".join(lines)

    def delete_jobs(
        self, api: tuple[str, str], names: Sequence[str], namespace: str = "default"
    ) -> None:
        """Delete jobs from the fleet and wait until no member holds a copy or a pod of them;
        then delete their GangBindings (the garbage collector would, in its own time) and wait
        until they are gone, so a job created again under the same name starts afresh."""
        for name in names:
            self.fleet.delete(*api, name, namespace)

        def gone() -> bool:
            return all(self.fleet.get(*api, n, namespace) is None for n in names) and all(
                self.cluster(m).get(*api, n, namespace) is None and not self.pods(m, n, namespace)
                for m in self.members
                for n in names
            )

        self.expect(gone, f"{', '.join(names)} gone from the fleet and every member", 180)
        bindings = [binding_name(api[1], name) for name in names]
        for binding in bindings:
            self.fleet.delete(*BINDING, binding, namespace)
        self.expect(
            lambda: all(self.fleet.get(*BINDING, b, namespace) is None for b in bindings),
            f"GangBinding {', '.join(bindings)} gone",
        )


def amc_rows(table: str, job: str) -> list[dict[str, str]]:
    """The rows of a `kubectl amc get` table whose NAME starts with the job's name, as
    column -> cell."""
    lines = [line for line in table.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split()
    return [
        dict(zip(header, line.split(), strict=False))
        for line in lines[1:]
        if line.startswith(f"{job}-")
    ]


# -- the loop ---------------------------------------------------------------------------------


def select(stories: Sequence[Story], names: Sequence[str] | None) -> list[Story]:
    """The stories to tell, in the demo's order; an unknown name is a usage error."""
    if not names:
        return list(stories)
    known = {s.name for s in stories}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"no story named {', '.join(unknown)} (stories: {', '.join(s.name for s in stories)})"
        )
    return [s for s in stories if s.name in names]


def tell(demo: Demo, stories: Sequence[Story]) -> int:
    """Tell `stories` in order on a running demo fleet; 0, or 1 after naming the failed step."""
    started = time.monotonic()
    for i, story in enumerate(stories):
        demo.story, demo.steps, demo.step_title = story.name, 0, "(clearing an earlier run)"
        demo.out("\n" + bold(f"== {story.name}: {story.title}"))
        try:
            story.reset(demo)
            story_started = time.monotonic()
            story.run(demo)
            demo.out(
                f"\n== {story.name}: done in {elapsed(time.monotonic() - story_started)}, "
                f"{demo.steps} steps"
            )
            if i + 1 < len(stories):
                demo.step_title = "(tidying up for the next story)"
                story.reset(demo)
        except StepFailed as e:
            demo.out(f"\ndemo: FAILED: {e}")
            return 1
        except (KubeError, SandboxError) as e:
            demo.out(f"\ndemo: FAILED: {demo.fail(str(e))}")
            return 1
        if i + 1 < len(stories):
            demo.pause(stories[i + 1].title)
    told = ", ".join(s.name for s in stories)
    count = f"{len(stories)} {'story' if len(stories) == 1 else 'stories'}"
    demo.out(f"\ndemo: {count} told ({told}) in {elapsed(time.monotonic() - started)}")
    return 0
