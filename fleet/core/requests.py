"""What one pod asks of a node, computed as kube-scheduler computes it.

The rules (component-helpers `PodRequests`, KEP-753 for sidecars, API defaulting):

* a container's limit stands in for its missing request, per resource (the API server defaults
  requests from limits when it creates the pod, so the scheduler sees them that way);
* app containers add up; restartable init containers (`restartPolicy: Always`, sidecars) add to
  that sum too and stay running while later init containers run;
* the pod needs max(that sum, the peak of any init container phase), per resource;
* pod-level `spec.resources` (cpu, memory, hugepages-*) override the container aggregate;
* `spec.overhead` (RuntimeClass) is added on top;
* every pod also takes one `pods` slot of the node's allocatable pod count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleet.core.errors import FieldError
from fleet.core.resources import CPU, EMPTY, MEMORY, PODS, Resources

_ONE_POD = Resources({PODS: 1})


def pod_requests(spec: Mapping[str, Any], field: str = "spec") -> Resources:
    """Requests of a pod with this spec, including its `pods: 1` slot."""
    if not isinstance(spec, Mapping):
        raise FieldError(field, f"expected a pod spec object, got {spec!r}")
    containers = _containers(spec.get("containers"), f"{field}.containers")
    inits = _containers(spec.get("initContainers"), f"{field}.initContainers")

    total = EMPTY
    for i, container in enumerate(containers):
        total = total + container_requests(container, f"{field}.containers[{i}]")

    sidecars = EMPTY
    init_peak = EMPTY
    for i, container in enumerate(inits):
        own = container_requests(container, f"{field}.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            total = total + own
            sidecars = sidecars + own
            phase = sidecars
        else:
            phase = own + sidecars
        init_peak = init_peak.max(phase)
    requests = total.max(init_peak)

    requests = _apply_pod_level(requests, spec.get("resources"), f"{field}.resources")
    requests = requests + Resources.parse(spec.get("overhead"), field=f"{field}.overhead")
    return requests.without(PODS) + _ONE_POD


def container_requests(container: Mapping[str, Any], field: str) -> Resources:
    """One container's requests, with its limits standing in for missing requests."""
    resources = container.get("resources")
    if resources is None:
        return EMPTY
    if not isinstance(resources, Mapping):
        raise FieldError(f"{field}.resources", f"expected an object, got {resources!r}")
    requests = Resources.parse(resources.get("requests"), field=f"{field}.resources.requests")
    limits = Resources.parse(resources.get("limits"), field=f"{field}.resources.limits")
    missing = {name: amount for name, amount in limits.items() if name not in requests}
    return requests + missing if missing else requests


def _is_pod_level(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith("hugepages-")


def _apply_pod_level(aggregate: Resources, raw: object, field: str) -> Resources:
    if raw is None:
        return aggregate
    if not isinstance(raw, Mapping):
        raise FieldError(field, f"expected an object, got {raw!r}")
    requests = Resources.parse(raw.get("requests"), field=f"{field}.requests")
    limits = Resources.parse(raw.get("limits"), field=f"{field}.limits")
    effective = {k: v for k, v in requests.items() if _is_pod_level(k)}
    for name, amount in limits.items():
        # Defaulting: a pod-level limit becomes the request unless the containers already ask.
        if _is_pod_level(name) and name not in effective and name not in aggregate:
            effective[name] = amount
    if not effective:
        return aggregate
    merged = aggregate.as_dict()
    merged.update(effective)
    return Resources(merged)


def _containers(raw: object, field: str) -> Sequence[Mapping[str, Any]]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise FieldError(field, f"expected a list of containers, got {raw!r}")
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise FieldError(f"{field}[{i}]", f"expected a container object, got {item!r}")
    return raw
