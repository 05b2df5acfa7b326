"""Bring the sandbox up and down again and again, as a new user would, and count failures.

    .venv/bin/python bench/sandbox_updown.py [--runs 20] [--members 3]

Each run is `fleet sandbox up --config <N members>` then `fleet sandbox down`, as separate
processes with a state folder of their own. A failed run prints the command's last lines and
keeps going. At the end: runs, failures, and the time `up` took (median, p90, max). Issue #14's
bring-up crash hit about one run in four; this is the loop that shows it is gone.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def _fleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleet", *args], capture_output=True, text=True, check=False
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--members", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fleet-updown-"))
    config = work / "sandbox.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "members": [
                    {"name": f"member-{i}", "nodes": [{"name": "gpu", "count": 2, "gpu": 8}]}
                    for i in range(1, args.members + 1)
                ]
            }
        )
    )
    state = work / "state"
    ups: list[float] = []
    failures = 0
    for run in range(1, args.runs + 1):
        t0 = time.monotonic()
        up = _fleet("sandbox", "--state-dir", str(state), "up", "--config", str(config))
        took = time.monotonic() - t0
        down = _fleet("sandbox", "--state-dir", str(state), "down")
        if up.returncode == 0 and down.returncode == 0:
            ups.append(took)
            print(f"run {run:2d}: up in {took:5.1f}s, down ok", flush=True)
            continue
        failures += 1
        print(f"run {run:2d}: FAILED (up exit {up.returncode}, down exit {down.returncode})")
        for line in (up.stdout + up.stderr + down.stderr).splitlines()[-8:]:
            print(f"    {line}")
    print(f"\n{args.runs} runs, {failures} failed, {args.members} members each")
    if ups:
        ups.sort()
        p90 = ups[min(len(ups) - 1, int(0.9 * len(ups)))]
        print(
            f"up: median {statistics.median(ups):.1f}s, p90 {p90:.1f}s, max {ups[-1]:.1f}s "
            f"(over {len(ups)} good runs)"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
