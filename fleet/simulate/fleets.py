"""Fleet descriptions: the member clusters and their nodes, as `NodeInfo` the engine understands.

Readers: `philly_fleet` (one member per Philly virtual cluster, 8-GPU nodes), `alibaba_fleet`
(the v2023 GPU nodes, one member per GPU model) and `load_fleet` (the documented CSV or YAML
format for users' own fleets). Every node gets a `pods` allocatable (110, the kubelet default)
because every pod takes one pod slot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.core.inventory import NodeInfo
from fleet.core.resources import CPU, GPU, MEMORY, PODS, Resources
from fleet.simulate.csvio import count, quantity, rows
from fleet.simulate.errors import DataError

#: The kubelet's default `maxPods`.
DEFAULT_POD_SLOTS = 110
GPU_MODEL_LABEL = "fleet.dev/gpu-model"
#: The node label racks are given under (`with_racks`), the level topology runs ask for.
RACK_LABEL = "topology.kubernetes.io/rack"
_MIB = 1 << 20


@dataclass(frozen=True)
class MemberSpec:
    name: str
    nodes: tuple[NodeInfo, ...]
    labels: Mapping[str, str] = field(default_factory=dict)

    def total(self, resource: str) -> int:
        return sum(int(n.allocatable.get(resource, 0)) for n in self.nodes)


@dataclass(frozen=True)
class FleetSpec:
    """The member clusters in list order (the `first` baseline uses this order)."""

    members: tuple[MemberSpec, ...]
    source: str = ""

    def total(self, resource: str = GPU) -> int:
        return sum(m.total(resource) for m in self.members)

    def describe(self) -> str:
        nodes = sum(len(m.nodes) for m in self.members)
        return f"{len(self.members)} members, {nodes} nodes, {self.total(GPU)} GPUs"


def with_racks(fleet: FleetSpec, per_rack: int = 8, label: str = RACK_LABEL) -> FleetSpec:
    """The fleet with a rack on every node: each member's nodes, in list order, `per_rack` to
    a rack (`<member>-r000`, `<member>-r001`, ...; the last rack of a member may be smaller).
    A node that already has the label keeps it."""
    if per_rack < 1:
        raise ValueError(f"nodes per rack must be at least 1, got {per_rack}")
    members = []
    for member in fleet.members:
        nodes = tuple(
            node
            if label in node.labels
            else NodeInfo(
                node.name,
                node.allocatable,
                {**node.labels, label: f"{member.name}-r{i // per_rack:03d}"},
                node.taints,
                node.unschedulable,
            )
            for i, node in enumerate(member.nodes)
        )
        members.append(MemberSpec(member.name, nodes, member.labels))
    return FleetSpec(tuple(members), fleet.source)


def _node(name: str, gpu: int, extra: Mapping[str, int], labels: Mapping[str, str]) -> NodeInfo:
    alloc = {PODS: DEFAULT_POD_SLOTS, **extra, GPU: gpu}
    return NodeInfo(name, Resources(alloc), dict(labels))


def philly_fleet(path: str | Path, gpus_per_node: int = 8) -> FleetSpec:
    """`vc,node num`: each VC one member of `node num` nodes with `gpus_per_node` GPUs (the
    trace gives no CPU or memory, and Philly gangs ask only for GPUs)."""
    path = Path(path)
    members = []
    for line, row in rows(path, ("vc", "node num")):
        vc = row["vc"]
        if not vc:
            raise DataError(path, line, "vc: empty")
        nodes = count(path, line, "node num", row["node num"], minimum=1)
        members.append(
            MemberSpec(
                vc, tuple(_node(f"{vc}-{i:03d}", gpus_per_node, {}, {}) for i in range(nodes))
            )
        )
    return _checked(path, members)


def alibaba_fleet(path: str | Path) -> FleetSpec:
    """`sn,cpu_milli,memory_mib,gpu,model`: one member per GPU model (named after it, lowercase),
    members ordered by GPU count, largest first."""
    path = Path(path)
    by_model: dict[str, list[NodeInfo]] = {}
    for line, row in rows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model")):
        if not row["sn"] or not row["model"]:
            raise DataError(path, line, "sn and model must not be empty")
        extra = {
            CPU: count(path, line, "cpu_milli", row["cpu_milli"]),
            MEMORY: count(path, line, "memory_mib", row["memory_mib"]) * _MIB,
        }
        gpu = count(path, line, "gpu", row["gpu"])
        model = row["model"]
        by_model.setdefault(model, []).append(
            _node(row["sn"], gpu, extra, {GPU_MODEL_LABEL: model})
        )
    members = [
        MemberSpec(model.lower(), tuple(nodes), {GPU_MODEL_LABEL: model})
        for model, nodes in by_model.items()
    ]
    members.sort(key=lambda m: (-m.total(GPU), m.name))
    return _checked(path, members)


# The documented formats --------------------------------------------------------------------------
FLEET_REQUIRED = ("member",)
FLEET_OPTIONAL = ("nodes", "gpu", "cpu", "memory", "pods", "labels", "prefix")


def load_fleet(path: str | Path) -> FleetSpec:
    """A user's fleet: `.csv` (one row per group of identical nodes) or `.yaml`/`.yml`; see
    docs/simulate.md."""
    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        return _load_yaml(path)
    groups: dict[str, list[NodeInfo]] = {}
    for line, row in rows(path, FLEET_REQUIRED, FLEET_OPTIONAL):
        member = row["member"]
        if not member:
            raise DataError(path, line, "member: empty")
        spec: dict[str, Any] = {k: v for k, v in row.items() if v and k != "member"}
        if "labels" in spec:
            spec["labels"] = _label_text(path, line, spec["labels"])
        nodes = groups.setdefault(member, [])
        nodes.extend(_group(path, line, member, len(nodes), spec))
    return _checked(path, [MemberSpec(name, tuple(nodes)) for name, nodes in groups.items()])


def _label_text(path: Path, line: int, text: str) -> dict[str, str]:
    """`a=b;c=d` (a comma would clash with CSV)."""
    out = {}
    for part in text.split(";"):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise DataError(path, line, f"labels: expected key=value;key=value, got {text!r}")
        out[key.strip()] = value.strip()
    return out


def _group(
    path: Path, line: int, member: str, first: int, spec: Mapping[str, Any]
) -> Iterable[NodeInfo]:
    unknown = sorted(set(spec) - set(FLEET_OPTIONAL))
    if unknown:
        known = ", ".join(FLEET_OPTIONAL)
        raise DataError(path, line, f"unknown field(s) {', '.join(unknown)} (known: {known})")
    nodes = count(path, line, "nodes", str(spec.get("nodes", 1)), minimum=1)
    gpu = count(path, line, "gpu", str(spec.get("gpu", 0)))
    slots = count(path, line, "pods", str(spec.get("pods", DEFAULT_POD_SLOTS)), minimum=1)
    extra = {PODS: slots}
    for column, resource in (("cpu", CPU), ("memory", MEMORY)):
        if column in spec:
            extra[resource] = quantity(path, line, column, resource, str(spec[column]))
    labels = spec.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in labels.items()
    ):
        raise DataError(path, line, "labels: expected a map of strings")
    labels = {str(k): str(v) for k, v in labels.items()}
    prefix = str(spec.get("prefix") or member)
    return [_node(f"{prefix}-{first + i:04d}", gpu, extra, labels) for i in range(nodes)]


class _LineLoader(yaml.SafeLoader):
    """Records each mapping's line under `__line__` so errors can point at it."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping = loader.construct_mapping(node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load_yaml(path: Path) -> FleetSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DataError(path, None, f"cannot read: {err.strerror or err}") from err
    try:
        doc = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise DataError(path, mark.line + 1 if mark else None, f"not YAML: {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("members"), list):
        raise DataError(path, 1, "expected a mapping with a list under `members`")
    members = []
    for entry in doc["members"]:
        if not isinstance(entry, dict):
            raise DataError(path, None, "members: every entry must be a mapping")
        line = int(entry.pop("__line__"))
        name = entry.pop("name", None)
        if not isinstance(name, str) or not name:
            raise DataError(path, line, "name: every member needs a name")
        labels = entry.pop("labels", {}) or {}
        if isinstance(labels, dict):
            labels.pop("__line__", None)
        groups = entry.pop("nodes", None)
        if entry:
            raise DataError(path, line, f"unknown field(s) {', '.join(sorted(entry))}")
        if not isinstance(groups, list) or not groups:
            raise DataError(path, line, f"member {name}: `nodes` must be a non-empty list")
        if not isinstance(labels, dict):
            raise DataError(path, line, "labels: expected a map of strings")
        nodes: list[NodeInfo] = []
        for group in groups:
            if not isinstance(group, dict):
                raise DataError(path, line, f"member {name}: every node group must be a mapping")
            group_line = int(group.pop("__line__"))
            if "count" in group:
                if "nodes" in group:
                    raise DataError(path, group_line, "give count or nodes, not both")
                group["nodes"] = group.pop("count")
            if isinstance(group.get("labels"), dict):
                group["labels"].pop("__line__", None)
            nodes.extend(_group(path, group_line, name, len(nodes), group))
        members.append(MemberSpec(name, tuple(nodes), {str(k): str(v) for k, v in labels.items()}))
    return _checked(path, members)


def _checked(path: Path, members: list[MemberSpec]) -> FleetSpec:
    if not members:
        raise DataError(path, None, "no member clusters")
    names: set[str] = set()
    nodes: set[str] = set()
    for member in members:
        if member.name in names:
            raise DataError(path, None, f"member {member.name!r} appears twice")
        names.add(member.name)
        for node in member.nodes:
            if node.name in nodes:
                raise DataError(path, None, f"node {node.name!r} appears twice")
            nodes.add(node.name)
    return FleetSpec(tuple(members), str(path))
