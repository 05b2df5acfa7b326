"""The one question that tells whether a member's guard (fleet.api.guard) is in force for
fleet's token, and the verdict on its answer. Pure: `fleet join` asks it before it stores a new
token (fleet.join.in_force), and the controller asks it again every guard period with the token
it holds (controller/members), so a member admin who deletes the policy or its binding (or
makes the binding only warn) is seen: the MemberCluster turns `Guarded=False` (`GuardMissing`).

The question: a create, as a dry run (`dryRun=All`: never stored), of an empty ConfigMap without
fleet's mark in fleet's own member namespace: RBAC lets fleet create ConfigMaps (a kind
propagateDeps copies) and the guard refuses it twice over (no mark; fleet's own namespace).
"""

from __future__ import annotations

import enum
from typing import Any, Final

__all__ = [
    "GUARD_PROBE_PREFIX",
    "GuardVerdict",
    "denied_by_guard",
    "guard_probe",
    "guard_verdict",
    "refused_by_rbac",
]

#: The name the guard's probe ConfigMap is generated from. None is made: the probe is a dry run.
GUARD_PROBE_PREFIX: Final = "fleet-join-guard-probe-"


def guard_probe(namespace: str) -> dict[str, Any]:
    """A create fleet's RBAC allows and the guard refuses, only ever sent as a dry run with
    fleet's token: an empty ConfigMap without fleet's mark (`fleet.dev/managed-by`). A
    ConfigMap because fleet's ClusterRole lets it create ConfigMaps in every member (a kind
    `propagateDeps` copies), whatever else the member serves (core v1). In fleet's own member
    namespace, which join makes (a create in a missing namespace is refused before admission)
    and which the guard also keeps fleet out of: it denies the probe twice over. Harmless were
    a server to store it: it holds nothing."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"generateName": GUARD_PROBE_PREFIX, "namespace": namespace},
    }


def denied_by_guard(status: int, message: str, policy_name: str) -> bool:
    """Whether an answer (`status`, `message`) is Kubernetes' denial by the guard `policy_name`
    and its binding (of the same name): a ValidatingAdmissionPolicy answers 403 or 422 by its
    validation's reason (the guard's are Forbidden: 403), and says
    `ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request: ...`."""
    said = f"ValidatingAdmissionPolicy '{policy_name}' with binding '{policy_name}' denied request"
    return status in (403, 422) and said in message


def refused_by_rbac(status: int, message: str) -> bool:
    """Whether an answer is RBAC's refusal (`User "..." cannot create resource ...`): a 403 that
    names no admission policy (right after join, the authorizer may not have loaded fleet's
    new ClusterRoleBinding yet)."""
    return (
        status == 403
        and "cannot create resource" in message
        and "ValidatingAdmissionPolicy" not in message
    )


class GuardVerdict(enum.Enum):
    """What an answer to the guard's probe says."""

    #: Denied by the guard, naming it: the guard is in force for fleet's token.
    IN_FORCE = "in force"
    #: The dry run was admitted: the API server has not loaded the guard (yet, right after
    #: join; any more, when its policy or binding was deleted or no longer denies).
    NOT_LOADED = "not loaded"
    #: Refused by RBAC: the API server has not loaded fleet's ClusterRoleBinding (yet).
    RBAC_NOT_LOADED = "RBAC not loaded"
    #: Refused by something else (an admission webhook, another policy): the probe cannot tell.
    UNKNOWN = "unknown"


def guard_verdict(status: int | None, message: str, policy_name: str) -> GuardVerdict:
    """The verdict on one answer to the guard's probe (`status` None: it was admitted)."""
    if status is None:
        return GuardVerdict.NOT_LOADED
    if denied_by_guard(status, message, policy_name):
        return GuardVerdict.IN_FORCE
    if refused_by_rbac(status, message):
        return GuardVerdict.RBAC_NOT_LOADED
    return GuardVerdict.UNKNOWN
