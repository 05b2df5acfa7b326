"""Waiting until the member's API server applies the admission policies `fleet join` has just
written there, before join writes the fleet side.

The API server applies a new admission policy only once its own watch has loaded it, a moment
(about a second) after it is stored (RBAC's authorizer loads a new ClusterRoleBinding the same
way), and the controller dispatches to a new MemberCluster at once: whatever fleet does in that
moment goes unchecked. So join asks the member, by dry-run requests (`dryRun=All`: admitted and
answered as a real one, never stored), until the answer shows the policy in force, for a
bounded time, and fails (rolling back) when it never does. One loop (`wait_in_force`), one
probe per policy, each a request and a pure verdict on its answer:
- the scheduling-group policy (a native-gang member), asked with the joining user's
  credentials: a labelled pod comes back joined to its group;
- the guard (fleet.api.guard), asked with fleet's own new token, the only identity it applies
  to: a create RBAC allows fleet but the guard does not is denied, by the guard.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

import httpx

from fleet.api import guardprobe
from fleet.api.guard import admission_policy_name
from fleet.api.guardprobe import GUARD_PROBE_PREFIX, GuardVerdict, guard_probe
from fleet.api.membership import JoinPlan
from fleet.api.schedulinggroup import scheduling_group_name
from fleet.core.gangmarks import KUBERNETES_POD_GROUP_LABEL
from fleet.join.errors import JoinError
from fleet.kube import ApiError, KubeError, SyncKubeClient
from fleet.kubeconfig import check_kubeconfig

__all__ = [
    "GUARD_PROBE_PREFIX",
    "IN_FORCE_WAIT",
    "PROBE_INTERVAL",
    "GuardVerdict",
    "InForceProbe",
    "denied_by_guard",
    "guard_in_force",
    "guard_probe",
    "guard_verdict",
    "joined_pod_group",
    "refused_by_rbac",
    "scheduling_group_in_force",
    "scheduling_group_probe",
    "token_client",
    "wait_guard_in_force",
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


# -- the guard (a member that serves ValidatingAdmissionPolicy) ----------------------------------


def token_client(
    plan: JoinPlan, token: str, name: str, transport: httpx.BaseTransport | None = None
) -> SyncKubeClient:
    """A client of the member that authenticates as fleet with `token` and reaches it exactly
    as the controller will: the kubeconfig join is about to store (`plan.stored_kubeconfig`:
    its server, CA, TLS server name and proxy), read by the controller's own rule
    (fleet.kubeconfig.check_kubeconfig, a Secret's: inline data only). Built from the dict in
    memory: the token goes into the Connection's auth and the CA into its SSLContext, neither
    to a file. `transport` replaces the network (tests)."""
    config = plan.stored_kubeconfig(token)
    resolved = check_kubeconfig(config, source=f"the kubeconfig join stores for {plan.name}")
    return SyncKubeClient(resolved.connection, name=name, transport=transport)


def denied_by_guard(refusal: ApiError, policy_name: str) -> bool:
    """Whether `refusal` is the guard's denial (fleet.api.guardprobe, the one rule)."""
    return guardprobe.denied_by_guard(refusal.status, refusal.message, policy_name)


def refused_by_rbac(refusal: ApiError) -> bool:
    """Whether `refusal` is RBAC's (fleet.api.guardprobe, the one rule)."""
    return guardprobe.refused_by_rbac(refusal.status, refusal.message)


def guard_verdict(refusal: ApiError | None, policy_name: str) -> GuardVerdict:
    """The verdict on one answer to the guard's probe (`refusal`: None when it was admitted),
    by fleet.api.guardprobe's rule."""
    if refusal is None:
        return guardprobe.guard_verdict(None, "", policy_name)
    return guardprobe.guard_verdict(refusal.status, refusal.message, policy_name)


def guard_in_force(fleets: SyncKubeClient, plan: JoinPlan) -> InForceProbe:
    """The guard is in force once the probe, created as a dry run by `fleets` (a client with
    fleet's own token: the guard applies to that identity only), is denied by it. An admitted
    probe and RBAC's refusal are waited through; anything else fails the join, naming the
    probe."""
    name = admission_policy_name(plan.namespace)
    policy = f"validatingadmissionpolicy/{name}"
    configmap = guard_probe(plan.namespace)
    probe = (
        f"the dry-run probe that tells whether {policy} is in force (a ConfigMap without "
        f"fleet's mark created in namespace {plan.namespace} with fleet's token)"
    )

    def ask() -> str | None:
        refusal = None
        try:
            fleets.create(configmap, dry_run=True)
        except ApiError as e:
            refusal = e
        except KubeError as e:
            raise JoinError(f"{probe} failed in {fleets.name}: {e}") from None
        verdict = guard_verdict(refusal, name)
        if verdict is GuardVerdict.IN_FORCE:
            return None
        if verdict is GuardVerdict.NOT_LOADED:
            return (
                "a ConfigMap without fleet's mark is still admitted when fleet's token creates it"
            )
        if verdict is GuardVerdict.RBAC_NOT_LOADED and refusal is not None:
            return (
                "the guard was never seen denying fleet's token, which RBAC still refuses (the "
                f"API server has not loaded fleet's ClusterRoleBinding: {refusal.message})"
            )
        raise JoinError(
            f"{fleets.name} refused {probe} with neither the guard's denial nor RBAC's: {refusal}"
        )

    return InForceProbe(
        policy,
        ask,
        "fleet's token would act unguarded there (RBAC alone: it could read Secrets through "
        "patch and write objects fleet did not create)",
    )


def wait_guard_in_force(
    member: SyncKubeClient,
    plan: JoinPlan,
    token: str,
    say: Callable[[str], None],
    sleep: Callable[[float], None],
    transport: httpx.BaseTransport | None = None,
) -> float:
    """Wait until the member's API server applies the guard join has just written, proven with
    fleet's new `token` itself; the seconds waited. Until then the token may act with RBAC
    alone, and the controller would use it as soon as the MemberCluster is written. The
    client made with the token (`token_client`) is closed after."""
    with token_client(plan, token, member.name, transport) as fleets:
        return wait_in_force(guard_in_force(fleets, plan), member.name, plan, say, sleep)
