"""`fleet demo --check` end to end: its own sandbox, every story, every step proved.

The demo asserts each step itself (bounded waits on conditions, status and pods); this test runs
it as a user would and holds it to its exit code. Its sandbox is its own (the demo's layout, in
a temporary folder) and is taken down by `--down`; its processes die with the demo if the test
is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(1800)]


def test_demo_check_tells_every_story(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "fleet",
                "demo",
                "--check",
                "--down",
                "--state-dir",
                str(tmp_path / "sandbox"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            timeout=1700,
            check=False,
        )
    output = log.read_text()
    assert result.returncode == 0, f"fleet demo --check exited {result.returncode}:\n{output}"
    assert not (tmp_path / "sandbox").exists(), "--down left the sandbox's state behind"
