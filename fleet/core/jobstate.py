"""What a member's copy of a job says about itself: one state word, as `kubectl get` shows it.

Kubeflow jobs report conditions (Created, Running, Restarting, Succeeded, Failed, Suspended);
batch Jobs report Complete/Failed conditions and active pods. Terminal states win over the
others, whatever order the conditions come in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

JobState = Literal[
    "Pending", "Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed"
]

_PRECEDENCE: tuple[tuple[str, JobState], ...] = (
    ("Failed", "Failed"),
    ("Succeeded", "Succeeded"),
    ("Complete", "Succeeded"),
    ("Suspended", "Suspended"),
    ("Restarting", "Restarting"),
    ("Running", "Running"),
    ("Created", "Created"),
)


def job_state(status: Mapping[str, Any] | None) -> JobState:
    status = status or {}
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    for condition, state in _PRECEDENCE:
        if condition in true:
            return state
    if status.get("active"):
        return "Running"
    return "Pending"
