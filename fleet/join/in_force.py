"""Waiting until the member's API server applies the admission policies `fleet join` has just
written there, before join writes the fleet side.

The API server applies a new admission policy only once its own watch has loaded it, a moment
(about a second) after it is stored, and the controller dispatches to a new MemberCluster at
once: whatever fleet does in that moment goes unchecked. So join asks the member, by dry-run
requests (`dryRun=All`: admitted and answered as a real one, never stored), until the answer
shows the policy in force, for a bounded time, and fails (rolling back) when it never does.
One loop (`wait_in_force`), one probe per policy: the request and the verdict on its answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from fleet.api.membership import JoinPlan
from fleet.api.schedulinggroup import scheduling_group_name
from fleet.core.gangmarks import KUBERNETES_POD_GROUP_LABEL
from fleet.join.errors import JoinError
from fleet.kube import ApiError, SyncKubeClient

__all__ = [
    "IN_FORCE_WAIT",
    "PROBE_INTERVAL",
    "InForceProbe",
    "joined_pod_group",
    "scheduling_group_in_force",
    "scheduling_group_probe",
    "wait_in_force",
    "wait_scheduling_group_in_force",
]

#: How long join waits for the member's API server to apply a policy it has just written (its
#: own watch loads a new admission policy about a second after).
IN_FORCE_WAIT: Final = 30.0
#: How often it asks meanwhile.
PROBE_INTERVAL: Final = 0.25
#: The PodGroup the scheduling-group probe pod asks for by its label. None is made: the probe
#: is a dry run.
PROBE_POD_GROUP: Final = "fleet-join-probe"
PROBE_IMAGE: Final = "registry.k8s.io/pause:3.10"


@dataclasses.dataclass(frozen=True)
class InForceProbe:
    """One question to the member whose answer tells whether `policy` is in force there."""

    #: The policy, as kubectl names it (`kind/name`).
    policy: str
    #: Sends the probe once: None when the answer shows the policy in force, else what came
    #: back instead (for the timeout's message). JoinError when the member refuses the probe
    #: itself.
    ask: Callable[[], str | None]
    #: What would go wrong were the fleet side written without the policy in force.
    stakes: str


def wait_in_force(
    probe: InForceProbe,
    member: str,
    plan: JoinPlan,
    say: Callable[[str], None],
    sleep: Callable[[float], None],
) -> float:
    """Ask `probe` until its policy is in force in `member`; the seconds waited. Bounded by the
    time slept between probes (each a few milliseconds): JoinError, naming the policy, the
    member and the last answer, once IN_FORCE_WAIT is up."""
    waited = 0.0
    while True:
        instead = probe.ask()
        if instead is None:
            say(f"member {plan.name}: {probe.policy} in force after {waited:.1f}s")
            return waited
        if waited >= IN_FORCE_WAIT:
            raise JoinError(
                f"{probe.policy} is not in force in {member} after {IN_FORCE_WAIT:.0f}s: "
                f"{instead}, so {probe.stakes}"
            )
        if not waited:
            say(
                f"member {plan.name}: waiting until the API server applies {probe.policy} (it "
                "loads a new admission policy a moment after it is written)"
            )
        sleep(PROBE_INTERVAL)
        waited += PROBE_INTERVAL


# -- the scheduling-group policy (a native-gang member) -----------------------------------------


def scheduling_group_probe(namespace: str, service_account: str) -> dict[str, Any]:
    """A pod the scheduling-group policy acts on (it carries the pod-group label and has no
    scheduling group), only ever sent as a dry run. Harmless were a server to store it: it asks
    for a node no cluster has, runs pause, mounts no token, and passes the restricted Pod
    Security level (so a namespace enforcing it does not refuse the probe). It runs as fleet's
    ServiceAccount, which join has just made in `namespace`: the namespace's `default` one may
    not be there yet, and a pod naming a missing ServiceAccount is refused."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "fleet-join-probe-",
            "namespace": namespace,
            "labels": {KUBERNETES_POD_GROUP_LABEL: PROBE_POD_GROUP},
        },
        "spec": {
            "serviceAccountName": service_account,
            "automountServiceAccountToken": False,
            "nodeSelector": {"fleet.dev/join-probe": "no-such-node"},
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65535,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "pause",
                    "image": PROBE_IMAGE,
                    "resources": {"limits": {"cpu": "10m", "memory": "16Mi"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def joined_pod_group(pod: Mapping[str, Any]) -> str | None:
    """The PodGroup admission joined `pod` to (`spec.schedulingGroup.podGroupName`), if any."""
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return str(group) if group else None


def scheduling_group_in_force(member: SyncKubeClient, plan: JoinPlan) -> InForceProbe:
    """The scheduling-group policy is in force once the probe pod, created as a dry run with
    the joining user's credentials, comes back joined to the group its label names."""
    policy = f"mutatingadmissionpolicy/{scheduling_group_name(plan.namespace)}"
    pod = scheduling_group_probe(plan.namespace, plan.service_account)

    def ask() -> str | None:
        try:
            answer = member.create(pod, dry_run=True)
        except ApiError as e:
            raise JoinError(
                f"{member.name} refused the dry-run probe pod (labelled "
                f"{KUBERNETES_POD_GROUP_LABEL}) that tells whether {policy} is in force: {e}"
            ) from None
        if joined_pod_group(answer) == PROBE_POD_GROUP:
            return None
        return (
            f"a pod labelled {KUBERNETES_POD_GROUP_LABEL} still comes back without "
            "spec.schedulingGroup"
        )

    return InForceProbe(policy, ask, "fleet's pods would be scheduled outside their gangs")


def wait_scheduling_group_in_force(
    member: SyncKubeClient,
    plan: JoinPlan,
    say: Callable[[str], None],
    sleep: Callable[[float], None],
) -> float:
    """Wait until the member's API server applies the scheduling-group policy join has just
    written; the seconds waited. A job dispatched before then would have its pods created
    outside their PodGroup, scheduled one by one, its gang lost without a word."""
    return wait_in_force(scheduling_group_in_force(member, plan), member.name, plan, say, sleep)
