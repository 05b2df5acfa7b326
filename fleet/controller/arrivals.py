"""The learned workload mix survives a restart or a leader change: rebuilt from the bindings.

The fragmentation score ranks clusters by the mix of gangs that recently arrived
(`fleet.core.arrivals.RecentArrivals`), which the controller learns as it binds each new gang
(`claims.bind`). That is memory: a restarted controller, or a standby that starts leading, would
rank by each gang's own shape alone until enough gangs arrived again. But every gang that
arrived and is still on the fleet has a GangBinding holding its shape (`spec.gang`), and the
replica lists them all when it starts leading (`BindingStore.warm`): the arrivals are replayed
from them, oldest first (by creation, then namespace and name), so the mix is the one the
arrivals would have built from the same gangs in the same order. Gangs whose jobs were deleted
meanwhile are not there: the mix follows the gangs the fleet still holds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from fleet.api import GangBinding
from fleet.core.arrivals import RecentArrivals
from fleet.core.resources import PODS, Resources
from fleet.core.workload import Component, Gang, WorkloadRef
from fleet.kube import Obj

log = logging.getLogger(__name__)

#: Every pod takes one `pods` slot (`fleet.core.requests`); a binding's requests leave it out.
_ONE_POD = Resources({PODS: 1})


def gang_of_binding(binding: GangBinding) -> Gang:
    """The gang a binding records (`spec.gang`): its roles' pods and per-pod requests, in the
    order its adapter listed them, and its minimum (what the arrivals count)."""
    resource = binding.spec.resource
    spec = binding.spec.gang
    components = tuple(
        Component(
            comp.name,
            comp.replicas,
            Resources.parse(comp.requests or {}, field=f"spec.gang.components[{i}].requests")
            + _ONE_POD,
        )
        for i, comp in enumerate(spec.components)
    )
    ref = WorkloadRef(resource.api_version, resource.kind, resource.namespace or "", resource.name)
    return Gang(ref, components, min(spec.min_member, spec.total_replicas))


def rebuilt(arrivals: RecentArrivals, bindings: Iterable[Obj]) -> RecentArrivals:
    """Arrivals with the same window as `arrivals`, having observed every gang `bindings`
    record, oldest first. A binding that cannot be read is left out (and logged)."""
    fresh = RecentArrivals(arrivals.window, arrivals.refresh, arrivals.shapes)
    for obj in sorted(bindings, key=_arrival_order):
        try:
            gang = gang_of_binding(GangBinding.from_dict(obj))
        except (ValueError, TypeError) as err:
            meta = obj.get("metadata") or {}
            log.warning(
                "GangBinding %s/%s: its gang cannot be read (%s); left out of the workload mix",
                meta.get("namespace"),
                meta.get("name"),
                err,
            )
            continue
        fresh.observe(gang)
    return fresh


def _arrival_order(obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


__all__ = ["gang_of_binding", "rebuilt"]
