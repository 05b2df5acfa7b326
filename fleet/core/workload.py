"""A workload object (as the API returns it) seen as a gang: pods that must start together.

What a gang is, whatever its kind: each kind's adapter reads its objects into one
(`fleet.core.kinds.gang_from_workload`); the simulator builds one directly with `Gang.of(...)`.

The minimum set. A gang may be allowed to start with `min_member` pods out of its replicas
(minAvailable). Which pods? Roles are filled in the order the kind's adapter lists them (see
`fleet.core.kinds`): Master/Chief/Launcher/PS first, then workers, taking as many pods of each
role as are still needed. A coordinator is what a job cannot start without, so it always
belongs to the minimum; placement checks that the minimum fits, and the rest may start later.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from fleet.core.constraints import ANYWHERE, PodConstraints
from fleet.core.errors import ObjectError
from fleet.core.explain import plural
from fleet.core.resources import EMPTY, Resources, display_rank
from fleet.core.topology import TopologyRule


class WorkloadError(ObjectError):
    """The workload cannot be interpreted; the message names the object and the field."""


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass(frozen=True, slots=True)
class Component:
    """One role of a gang: `replicas` identical pods, each asking for `requests`."""

    name: str
    replicas: int
    requests: Resources
    constraints: PodConstraints = ANYWHERE
    role: str = ""

    def plural(self, count: int) -> str:
        """`1 master`, `4 workers`, `2 ps`: how sentences count this component's pods."""
        return plural(self.name, count)


@dataclass(frozen=True)
class Gang:
    """Every pod of one job; `min_member` of them must be placed together."""

    ref: WorkloadRef
    components: tuple[Component, ...]
    min_member: int
    #: Kubeflow-style jobs print per-role replicas (`{c:0,[{master 1} {worker 2}]}`);
    #: single-template kinds print a replica count (`{c:4}`), as Karmada does.
    multi_role: bool = True
    #: Where `min_member` came from, for explanations.
    min_source: str = "all replicas"
    #: Topology rules (Kueue's pod-set annotations, or the policy's whole-gang default).
    topology: tuple[TopologyRule, ...] = ()

    def __post_init__(self) -> None:
        total = self.total_replicas
        if not 0 <= self.min_member <= total:
            raise ValueError(f"{self.ref}: min_member {self.min_member} not in 0..{total}")
        names = {c.name for c in self.components}
        for rule in self.topology:
            unknown = [c for c in rule.components if c not in names]
            if unknown:
                raise ValueError(f"{self.ref}: topology names unknown components {unknown}")

    def with_default_topology(self, rule: TopologyRule | None) -> Gang:
        """The gang with the policy's default `rule` when its templates asked for none."""
        if rule is None or self.topology:
            return self
        return replace(self, topology=(rule,))

    def with_topology(self, *rules: TopologyRule) -> Gang:
        return replace(self, topology=tuple(rules))

    @classmethod
    def of(
        cls,
        *components: Component,
        min_member: int | None = None,
        name: str = "gang",
        namespace: str = "default",
        multi_role: bool = True,
    ) -> Gang:
        """Build a gang by hand (simulator, tests)."""
        total = sum(c.replicas for c in components)
        return cls(
            WorkloadRef("fleet.dev/v1", "Gang", namespace, name),
            tuple(components),
            total if min_member is None else min_member,
            multi_role,
            "all replicas" if min_member is None else "given",
        )

    @property
    def total_replicas(self) -> int:
        return sum(c.replicas for c in self.components)

    @cached_property
    def derived(self) -> dict[object, object]:
        """Answers that are pure functions of this gang alone (its topology rules' pods as
        items, ...), kept with it so a decision works them out once, not once per member."""
        return {}

    @cached_property
    def minimum(self) -> tuple[tuple[Component, int], ...]:
        """(component, pods) of the minimum set, roles filled in declared order."""
        needed = self.min_member
        out = []
        for component in self.components:
            take = min(needed, component.replicas)
            needed -= take
            if take:
                out.append((component, take))
        return tuple(out)

    @cached_property
    def minimum_requests(self) -> Resources:
        """Total requests of the minimum set (pod slots included)."""
        out = EMPTY
        for component, count in self.minimum:
            out = out + component.requests * count
        return out

    @cached_property
    def demand_key(self) -> tuple[tuple[str, Resources, int], ...]:
        """(component name, per-pod requests, pods) of the minimum set: everything a screen on
        aggregates and its sentence depend on. Gangs with equal keys get equal verdicts."""
        return tuple((c.name, c.requests, n) for c, n in self.minimum)

    @cached_property
    def minimum_parts(self) -> tuple[tuple[str, int], ...]:
        """(component name, pods) of the minimum set."""
        return tuple((c.name, n) for c, n in self.minimum)

    @cached_property
    def peak_requests(self) -> tuple[tuple[str, int, Component, int], ...]:
        """Per resource, the largest per-pod amount in the minimum set, with the component
        (and its pod count) that asks it: what the single largest node block must cover."""
        peaks: dict[str, tuple[int, Component, int]] = {}
        for component, count in self.minimum:
            for name, amount in component.requests.items():
                if name not in peaks or amount > peaks[name][0]:
                    peaks[name] = (amount, component, count)
        return tuple((name, *peaks[name]) for name in sorted(peaks, key=display_rank))

    def accelerator_demands(self, accelerator: str) -> tuple[tuple[int, int], ...]:
        """(per-pod amount, pods) of `accelerator` in the minimum set, largest amount first."""
        cache = self._accelerator_cache
        if accelerator not in cache:
            sizes: dict[int, int] = {}
            for component, count in self.minimum:
                size = component.requests.get(accelerator, 0)
                if size > 0:
                    sizes[size] = sizes.get(size, 0) + count
            cache[accelerator] = tuple(sorted(sizes.items(), reverse=True))
        return cache[accelerator]

    @cached_property
    def _accelerator_cache(self) -> dict[str, tuple[tuple[int, int], ...]]:
        return {}
