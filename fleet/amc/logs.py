"""`kubectl amc logs`: a job's pod log, read through the API server of the member it runs in.

The job's GangBinding says which member holds it, so nobody has to find the member and switch
contexts first. How the member names the pods is the kind adapter's to say (`pod_name`):
Kubeflow's training operator names them `<job>-<replica type, lowercased>-<index>`
(`pytorch-test-worker-0`); the gang's roles and sizes come from the binding, so a replica that
does not exist is refused with the ones that do. Kinds whose pods are named at random (batch/v1
Job) are found by their owner, the member copy.

The member's API server reads the log from the node's kubelet (`pods/<pod>/log`), exactly as
`kubectl logs` does against that member.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Final

from pydantic import ValidationError

from fleet.amc.errors import EXIT_OK, AmcError, MemberUnavailable
from fleet.amc.members import Fleet
from fleet.api import GangBinding, GangComponent, binding_name
from fleet.api import constants as c
from fleet.core.kinds import KindAdapter, adapter_for
from fleet.kube import NotFound, Obj, SyncKubeClient

#: kubectl's annotation naming the container `kubectl logs` reads by default.
DEFAULT_CONTAINER_ANNOTATION: Final = "kubectl.kubernetes.io/default-container"
#: How many pending reasons an unplaced job's error quotes.
_REASONS_QUOTED: Final = 3

_REPLICA = re.compile(r"^(?P<role>[A-Za-z][A-Za-z0-9]*)(?:-(?P<index>\d+))?$")


@dataclass(frozen=True)
class LogsRequest:
    word: str
    name: str
    namespace: str
    replica: str | None = None
    container: str | None = None
    follow: bool = False
    tail: int | None = None

    @classmethod
    def parse(
        cls,
        job: str,
        namespace: str,
        replica: str | None = None,
        container: str | None = None,
        follow: bool = False,
        tail: int | None = None,
    ) -> LogsRequest:
        word, slash, name = job.partition("/")
        if not slash or not word or not name or "/" in name:
            raise AmcError(f"expected KIND/NAME, like pytorchjob/pytorch-test, not {job!r}")
        return cls(word, name, namespace, replica, container, follow, tail)


def replica_pods(adapter: KindAdapter, job: str, components: Sequence[GangComponent]) -> list[str]:
    """Every pod name the member's operator gives a job's replicas, role by role."""
    return [
        adapter.pod_name(job, component.name.lower(), index)
        for component in components
        for index in range(component.replicas)
    ]


def replica_pod(
    adapter: KindAdapter, job: str, components: Sequence[GangComponent], replica: str | None
) -> str:
    """The pod of `replica` (`worker-1`, `Worker-1`, `ps`: index 0), or of the job's default
    replica: the first of the kind's `log_roles` it has (master, chief, launcher, worker), else
    the first role's first pod. Only for kinds whose pods are named (`names_pods`)."""
    roles = {component.name.lower(): component for component in components}
    if replica is None:
        preferred = [r for r in adapter.log_roles if roles.get(r)]
        role = preferred[0] if preferred else next(iter(roles), "")
        if not role or not roles[role].replicas:
            raise AmcError(f"{job} has no replicas to read a log from")
        return adapter.pod_name(job, role, 0)
    match = _REPLICA.match(replica.strip())
    role = match.group("role").lower() if match else ""
    index = int(match.group("index") or 0) if match else 0
    component = roles.get(role)
    if component is None or index >= component.replicas:
        pods = replica_pods(adapter, job, components)
        have = ", ".join(f"{p.removeprefix(job + '-')}" for p in pods)
        raise AmcError(f"{job} has no replica {replica!r} (replicas: {have or 'none'})")
    return adapter.pod_name(job, role, index)


def default_container(pod: Obj) -> tuple[str | None, list[str]]:
    """The container `kubectl logs` would read (the annotated default, else the first), and
    all of them."""
    spec = pod.get("spec") or {}
    names = [str(ct.get("name")) for ct in spec.get("containers") or []]
    annotated = ((pod.get("metadata") or {}).get("annotations") or {}).get(
        DEFAULT_CONTAINER_ANNOTATION
    )
    if annotated in names:
        return str(annotated), names
    return (names[0] if names else None), names


def _binding(fleet: Fleet, kind: str, name: str, namespace: str | None) -> GangBinding:
    try:
        raw = fleet.client.get(
            c.FLEET_API_VERSION, "GangBinding", binding_name(kind, name), namespace
        )
    except NotFound:
        raw = None
    if raw is None:
        raise AmcError(
            f"{kind} {namespace}/{name} has no GangBinding: fleet has not claimed it, so it runs "
            "in no member (does a Gang PropagationPolicy select it?)"
        )
    try:
        return GangBinding.from_dict(raw)
    except ValidationError as e:
        raise AmcError(
            f"GangBinding {namespace}/{binding_name(kind, name)} cannot be read: "
            f"{e.errors()[0]['msg']}"
        ) from None


def _not_placed(kind: str, namespace: str | None, name: str, binding: GangBinding) -> AmcError:
    status = binding.status
    reasons = [
        f"{p.cluster}: {p.reason}" for p in (status.pending_reasons if status else None) or []
    ]
    why = f": {'; '.join(reasons[:_REASONS_QUOTED])}" if reasons else ""
    # The binding names the closest clusters and counts them all (pendingReasonCounts).
    counted = sum(((status.pending_reason_counts if status else None) or {}).values())
    total = max(len(reasons), counted)
    more = f" (and {total - _REASONS_QUOTED} more)" if total > _REASONS_QUOTED else ""
    phase = (status.phase if status else None) or "Pending"
    return AmcError(f"{kind} {namespace}/{name} runs in no member yet (phase {phase}){why}{more}")


def _owned_pods(client: SyncKubeClient, owner_uid: str, namespace: str | None) -> list[Obj]:
    pods = client.list("v1", "Pod", namespace).get("items") or []
    return sorted(
        (
            pod
            for pod in pods
            if any(
                ref.get("uid") == owner_uid
                for ref in (pod.get("metadata") or {}).get("ownerReferences") or []
            )
        ),
        key=lambda pod: str(pod["metadata"]["name"]),
    )


def _labelled_pod(
    client: SyncKubeClient,
    request: LogsRequest,
    kind: tuple[str, str],
    adapter: KindAdapter,
    components: Sequence[GangComponent],
) -> Obj:
    """A pod the member's operator made for the copy (JobSet, Ray, TrainJob), found by the
    labels it puts on them (`KindAdapter.pods_of`); `replica` is `<role>-<index>` (`worker-1`,
    `head`), a pod name or an index."""
    ns, member = request.namespace, client.name
    copy = client.get(*kind, request.name, ns)
    if copy is None:
        raise AmcError(f"{kind[1]} {ns}/{request.name} is not in {member} (yet)")
    selector = adapter.pods_of(copy)
    listed = client.list("v1", "Pod", ns, label_selector=selector) if selector else {}
    pods: list[Obj] = list(listed.get("items") or [])
    if not pods:
        raise AmcError(f"{kind[1]} {ns}/{request.name} has no pods in {member} (yet)")
    order = [component.name.lower() for component in components]

    def role(pod: Obj) -> str:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        value = str(labels.get(adapter.role_label or "", "")).lower()
        return next((name for name in order if value.startswith(name)), value)

    def rank(pod: Obj) -> tuple[int, str]:
        r = role(pod)
        return (order.index(r) if r in order else len(order), str(pod["metadata"]["name"]))

    pods = sorted(pods, key=rank)
    if request.replica is None:
        return pods[0]
    wanted = request.replica.strip()
    by_name = [p for p in pods if p["metadata"]["name"] == wanted]
    if by_name:
        return by_name[0]
    if wanted.isdigit() and int(wanted) < len(pods):
        return pods[int(wanted)]
    match = _REPLICA.match(wanted)
    if match:
        of_role = [p for p in pods if role(p) == match.group("role").lower()]
        index = int(match.group("index") or 0)
        if index < len(of_role):
            return of_role[index]
    counts: dict[str, int] = {}
    for pod in pods:
        counts[role(pod)] = counts.get(role(pod), 0) + 1
    have = ", ".join(f"{r}-0..{n - 1}" for r, n in counts.items())
    raise AmcError(
        f"{kind[1]} {ns}/{request.name} has no replica {wanted!r} in {member} "
        f"(replicas: {have}; or a pod name or index)"
    )


def _pick_pod(
    client: SyncKubeClient, request: LogsRequest, kind: tuple[str, str], binding: GangBinding
) -> Obj:
    ns = request.namespace
    member = client.name
    components = binding.spec.gang.components
    adapter = adapter_for(*kind)
    if adapter is not None and adapter.role_label is not None:
        return _labelled_pod(client, request, kind, adapter, components)
    if adapter is not None and adapter.names_pods:
        name = replica_pod(adapter, request.name, components, request.replica)
        pod = client.get("v1", "Pod", name, ns)
        if pod is None:
            raise AmcError(
                f"pod {name} not found in namespace {ns} of {member} (its training operator has "
                "not made it yet, or the job was cleaned up)"
            )
        return pod
    # One pod template, pods named at random: the member copy's own pods, by owner.
    copy = client.get(*kind, request.name, ns)
    if copy is None:
        raise AmcError(f"{kind[1]} {ns}/{request.name} is not in {member} (yet)")
    pods = _owned_pods(client, str(copy["metadata"]["uid"]), ns)
    names = [str(p["metadata"]["name"]) for p in pods]
    if request.replica is None:
        if not pods:
            raise AmcError(f"{kind[1]} {ns}/{request.name} has no pods in {member} (yet)")
        return pods[0]
    chosen = [p for p in pods if p["metadata"]["name"] == request.replica]
    if request.replica.isdigit() and int(request.replica) < len(pods):
        chosen = [pods[int(request.replica)]]
    if not chosen:
        have = ", ".join(names) or "none"
        raise AmcError(
            f"{kind[1]} {ns}/{request.name} has no pod {request.replica!r} in {member} "
            f"(pods, by name or index: {have})"
        )
    return chosen[0]


def run(fleet: Fleet, request: LogsRequest, out: IO[bytes] | None = None) -> int:
    """Find the pod and copy its log to `out` (stdout) as it arrives."""
    try:
        res = fleet.client.lookup(request.word)
    except NotFound:
        raise AmcError(f"the fleet serves no resource type {request.word!r}") from None
    if not res.namespaced:
        raise AmcError(f"{res.kind} is cluster-scoped: it is no job with pods to read logs from")
    ns = request.namespace
    if fleet.client.get(res.api_version, res.kind, request.name, ns) is None:
        raise AmcError(f'{res.kind} "{request.name}" not found in namespace {ns} on the fleet')
    binding = _binding(fleet, res.kind, request.name, ns)
    target = binding.target_cluster
    if target is None:
        raise _not_placed(res.kind, ns, request.name, binding)
    try:
        client = fleet.connect(target)
    except MemberUnavailable as e:
        raise AmcError(e.problem.message) from None
    pod = _pick_pod(client, request, (res.api_version, res.kind), binding)
    container = request.container
    if container is None:
        container, names = default_container(pod)
        if len(names) > 1:
            print(f'Defaulted container "{container}" out of: {", ".join(names)}', file=sys.stderr)
    stream = out if out is not None else sys.stdout.buffer
    for chunk in client.pod_log(
        ns,
        str(pod["metadata"]["name"]),
        container=container,
        follow=request.follow,
        tail_lines=request.tail,
    ):
        stream.write(chunk)
        stream.flush()
    return EXIT_OK
