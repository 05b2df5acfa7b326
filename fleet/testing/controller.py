"""Run fleet controller replicas as real processes, so tests can kill them like a node would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fleet.sandbox.keepalive import kill_when_parent_exits


class ControllerProcess:
    """One `fleet controller` replica with its own log file."""

    def __init__(
        self, kubeconfig: Path, identity: str, log_dir: Path, *extra: str, context: str = "fleet"
    ) -> None:
        self.identity = identity
        self.argv = [
            sys.executable,
            "-m",
            "fleet",
            "controller",
            "--kubeconfig",
            str(kubeconfig),
            "--context",
            context,
            "--id",
            identity,
            *extra,
        ]
        self.log = log_dir / f"controller-{identity}.log"
        self.popen: subprocess.Popen[bytes] | None = None
        self.metrics_port: int | None = None

    def start(self) -> ControllerProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                preexec_fn=kill_when_parent_exits,
            )
        return self

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup, no lease release, as when a node dies."""
        if self.popen is not None and self.running:
            self.popen.kill()
            self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen is not None and self.running:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
