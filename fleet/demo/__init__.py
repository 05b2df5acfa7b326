"""`fleet demo`: the seeds' stories, end to end, on a local sandbox.

    runner.py   what a story is given (`Demo`: clusters, steps that wait and verify) and the loop
    layout.py   the demo's four members (member-4 on koord-scheduler) and its setup (CRDs,
                joins, controller)
    seeds.py    the seeds' policies and TFJob, as the stories submit them
    stories/    one story per module; `stories.STORIES` is the order they are told in

`fleet demo` tells every story; `--check` runs without pauses and says `ok:` for each thing a
step proves; any step that does not happen in time stops the demo with one line naming the
story and the step, and exit code 1. Everything stays up afterwards to explore;
`fleet sandbox down` stops it all.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from fleet.demo.layout import bring_up
from fleet.demo.runner import Demo, StepFailed, Story, select, tell
from fleet.demo.stories import STORIES
from fleet.kube import KubeError
from fleet.sandbox import Sandbox, SandboxError
from fleet.sandbox.progress import elapsed

__all__ = ["STORIES", "Demo", "StepFailed", "Story", "run"]


def run(
    state_dir: Path | None = None,
    *,
    check: bool = False,
    stories: Sequence[str] | None = None,
    down: bool = False,
) -> int:
    """Bring the demo fleet up (building what is missing) and tell the stories; 0 when every
    step happened, 1 when one did not (the line before says which)."""
    chosen = select(STORIES, stories)
    sandbox = Sandbox(state_dir)
    demo = Demo(sandbox, check=check)
    started = time.monotonic()
    code = 1
    try:
        try:
            bring_up(demo, die_with_parent=down)
        except StepFailed as e:
            demo.say(f"\ndemo: FAILED: {e}")
            return 1
        except (KubeError, SandboxError) as e:
            demo.say(f"\ndemo: FAILED: {demo.fail(str(e))}")
            return 1
        code = tell(demo, chosen)
    finally:
        demo.close()
        if down:
            sandbox.down(progress=demo.say)
        elif code == 0:
            where = f" --state-dir {state_dir}" if state_dir else ""  # an option of `sandbox`
            demo.say(
                f"\nThe sandbox and the controller keep running. Explore with:\n"
                f"  export KUBECONFIG={sandbox.kubeconfig}"
                "   # contexts: fleet, member-1 .. member-4\n"
                f"  kubectl amc get pod -M\n"
                f"Stop everything with: fleet sandbox{where} down"
            )
    if check:
        verdict = "passed" if code == 0 else "FAILED"
        demo.say(f"demo check {verdict} in {elapsed(time.monotonic() - started)}")
    return code
