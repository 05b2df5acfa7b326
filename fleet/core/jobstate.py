"""What a member's copy of a job says about itself: one state word, as `kubectl get` shows it.

The words are fleet's (the lifecycle and failover judge by them); which conditions mean which
word is each kind's (`fleet.core.kinds`): Kubeflow jobs report Created, Running, Restarting,
Succeeded, Failed, Suspended; batch Jobs Complete/Failed (and, before those, SuccessCriteriaMet
and FailureTarget) and active pods. Terminal states win over the others, whatever order the
conditions come in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

JobState = Literal[
    "Pending", "Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed"
]


def first_true(
    status: Mapping[str, Any], precedence: tuple[tuple[str, JobState], ...]
) -> JobState | None:
    """The state of the first condition of `precedence` that is True in `status`."""
    true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    for condition, state in precedence:
        if condition in true:
            return state
    return None
