"""A workload object (as the API returns it) seen as a gang: pods that must start together.

`gang_from_workload(obj)` is the only entry point the controller needs; the simulator can build a
`Gang` directly with `Gang.of(...)`.

The minimum set. A gang may be allowed to start with `min_member` pods out of its replicas
(minAvailable). Which pods? Roles are filled in the kind's declared order (see `kinds.KINDS`):
Master/Chief/Launcher/PS first, then workers, taking as many pods of each role as are still
needed. A coordinator is what a job cannot start without, so it always belongs to the minimum;
placement checks that the minimum fits, and the rest may start later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from fleet.core.constraints import ANYWHERE, PodConstraints
from fleet.core.errors import FieldError, ObjectError
from fleet.core.explain import plural
from fleet.core.kinds import Kind, Needed, PodSets, RoleMap, SingleTemplate, find_kind, supported
from fleet.core.requests import pod_requests
from fleet.core.resources import EMPTY, Resources, display_rank

LABEL_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"
ANNOTATION_MIN_AVAILABLE = "gang.scheduling.koordinator.sh/min-available"


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

    def __post_init__(self) -> None:
        total = self.total_replicas
        if not 0 <= self.min_member <= total:
            raise ValueError(f"{self.ref}: min_member {self.min_member} not in 0..{total}")

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


def gang_from_workload(obj: Mapping[str, Any], needed: Needed | None = None) -> Gang:
    """Interpret a workload object (plain dict) as a gang; `needed` holds the other objects
    its kind reads the gang from (`kinds.PodSets.needs`: a TrainJob's runtime).

    Raises `WorkloadError` for an unknown kind or a malformed spec; the message names the object
    and the field path (e.g. `spec.tfReplicaSpecs.Worker.replicas`).
    """
    ref = _ref(obj)
    kind = find_kind(ref.api_version, ref.kind)
    if kind is None:
        raise WorkloadError(
            str(ref),
            "kind",
            f"unsupported kind {ref.api_version}/{ref.kind} (supported: {', '.join(supported())})",
        )
    try:
        return _interpret(obj, ref, kind, needed or {})
    except WorkloadError:
        raise
    except FieldError as err:
        raise WorkloadError(str(ref), err.field, err.reason) from err


def _ref(obj: Mapping[str, Any]) -> WorkloadRef:
    if not isinstance(obj, Mapping):
        raise WorkloadError("workload", "", f"expected an object, got {type(obj).__name__}")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        meta = {}
    ref = WorkloadRef(
        str(obj.get("apiVersion") or ""),
        str(obj.get("kind") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )
    if not ref.api_version or not ref.kind:
        raise WorkloadError(str(ref) or "workload", "kind", "apiVersion and kind are required")
    return ref


def _interpret(obj: Mapping[str, Any], ref: WorkloadRef, kind: Kind, needed: Needed) -> Gang:
    spec = _mapping(obj.get("spec"), "spec")
    templates: list[tuple[str, str, int, Mapping[str, Any], str]] = []  # name, role, n, tpl, path
    layout = kind.layout
    effective: dict[str, Mapping[str, Any]] = {}
    default_min: tuple[int, str] | None = None
    if isinstance(layout, RoleMap):
        templates = _role_templates(obj, layout)
    elif isinstance(layout, PodSets):
        sets = layout.read(obj, needed)
        templates = [(s.name, s.name, s.pods, s.template, s.path) for s in sets]
        effective = {s.name: s.effective_spec for s in sets if s.effective_spec is not None}
        if any(s.minimum is not None for s in sets):
            least = sum(s.pods if s.minimum is None else min(s.minimum, s.pods) for s in sets)
            default_min = (least, layout.minimum_source)
    else:
        assert isinstance(layout, SingleTemplate)
        tpl = _mapping(_at(obj, layout.field), layout.field)
        templates = [(layout.component, "", layout.count(spec), tpl, layout.field)]

    components = []
    for name, role, replicas, template, path in templates:
        pod_spec = _mapping(template.get("spec"), f"{path}.spec")
        components.append(
            Component(
                name=name,
                replicas=replicas,
                requests=pod_requests(effective.get(name, pod_spec), f"{path}.spec"),
                constraints=PodConstraints.from_pod_spec(pod_spec, f"{path}.spec"),
                role=role,
            )
        )
    total = sum(c.replicas for c in components)
    min_member, source = _min_member(obj, kind, templates, total, default_min)
    multi_role = not isinstance(layout, SingleTemplate)
    return Gang(ref, tuple(components), min_member, multi_role, source)


def _role_templates(
    obj: Mapping[str, Any], layout: RoleMap
) -> list[tuple[str, str, int, Mapping[str, Any], str]]:
    specs = _mapping(_at(obj, layout.field), layout.field)
    # The training operator normalises role names ("worker" -> "Worker"); so do we.
    canonical = {role.lower(): role for role in layout.roles}
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for key, value in specs.items():
        role = canonical.get(str(key).lower())
        if role is None:
            raise FieldError(
                f"{layout.field}.{key}",
                f"unknown replica type (expected one of {', '.join(layout.roles)})",
            )
        if role in found:
            raise FieldError(f"{layout.field}.{key}", f"replica type {role} given twice")
        found[role] = (str(key), _mapping(value, f"{layout.field}.{key}"))
    out = []
    for role in layout.roles:
        if role not in found:
            continue
        key, replica_spec = found[role]
        path = f"{layout.field}.{key}"
        replicas = replica_spec.get("replicas")
        if replicas is None:
            replicas = 1  # the training operator defaults a missing count to 1
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise FieldError(f"{path}.replicas", f"expected an integer, got {replicas!r}")
        if replicas < 0:
            raise FieldError(f"{path}.replicas", f"must not be negative, got {replicas}")
        template = _mapping(replica_spec.get("template"), f"{path}.template")
        out.append((role.lower(), role, replicas, template, f"{path}.template"))
    return out


def _min_member(
    obj: Mapping[str, Any],
    kind: Kind,
    templates: Sequence[tuple[str, str, int, Mapping[str, Any], str]],
    total: int,
    default: tuple[int, str] | None = None,
) -> tuple[int, str]:
    candidates: list[tuple[object, str]] = []
    if kind.min_available is not None:
        value = _at(obj, kind.min_available)
        if value is not None:
            candidates.append((value, kind.min_available))
    if not candidates:
        for meta_key, key in (
            ("labels", LABEL_MIN_AVAILABLE),
            ("annotations", ANNOTATION_MIN_AVAILABLE),
        ):
            found = _from_templates(templates, meta_key, key)
            if found is not None:
                candidates.append(found)
                break
    if not candidates:
        return default or (total, "all replicas")
    raw, where = candidates[0]
    value = _as_count(raw, where)
    if value < 1:
        raise FieldError(where, f"must be at least 1, got {value}")
    if value > total:
        raise FieldError(where, f"{value} is larger than the {total} replicas of the job")
    return value, where


def _from_templates(
    templates: Sequence[tuple[str, str, int, Mapping[str, Any], str]], meta_key: str, key: str
) -> tuple[object, str] | None:
    """The value of a pod-template label/annotation; roles that set it must agree."""
    first: tuple[object, str] | None = None
    for _name, _role, _n, template, path in templates:
        meta = template.get("metadata") or {}
        values = meta.get(meta_key) if isinstance(meta, Mapping) else None
        if not isinstance(values, Mapping) or key not in values:
            continue
        where = f"{path}.metadata.{meta_key}.{key}"
        if first is None:
            first = (values[key], where)
        elif values[key] != first[0]:
            raise FieldError(where, f"{values[key]!r} disagrees with {first[1]} = {first[0]!r}")
    return first


def _as_count(raw: object, field: str) -> int:
    if isinstance(raw, bool):
        raise FieldError(field, f"expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.strip().isdigit() and raw.strip().isascii():
        return int(raw.strip())
    raise FieldError(field, f"expected an integer, got {raw!r}")


def _at(obj: Mapping[str, Any], path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FieldError(field, f"expected an object, got {value!r}")
    return value
