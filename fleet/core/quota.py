"""The ElasticQuotaTree as the queue reads it: quota nodes, their limits, and ACK's rules.

An ElasticQuotaTree (`scheduling.sigs.k8s.io/v1beta1`, ACK's Kube Queue and koord-queue) is a tree
of quota nodes `{name, min, max, namespaces, children}`. `max` caps what the jobs under a node may
hold at once, borrowed capacity included; a resource a node's `max` does not list is not capped
there. `min` is what the node is guaranteed and lends while it is idle. `kube-queue/max-jobs` is
read as one more resource of which every dequeued job holds exactly one, so "at most N jobs of this
quota at once" is the same arithmetic as "at most N GPUs" (`MAX_JOBS`).

`check_tree(spec)` builds the tree from the spec as a plain dict (what the API server stores) and
checks it against the rules ACK documents. Every problem names the node's path, the field and the
rule, so the controller can copy it to the tree's status and an Event. A tree with any error is not
built (`TreeCheck.tree is None`): the caller keeps the last valid one in force. Warnings are
reported but do not stop the tree; the only rule that is a warning is `root min == root max`,
because ACK's own published example (the seeds) breaks it and ACK runs that tree.

Nodes are addressed by their *path* (`root/child-2`), which is what koord-queue calls the full
name and keeps in the annotation `kube-queue/quota-fullname` of the node's Queue. Names are unique
in a valid tree, so a name identifies a node too (`QuotaTree.by_name`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

from fleet.core.errors import FieldError
from fleet.core.resources import EMPTY, EPHEMERAL_STORAGE, MEMORY, Resources, format_amount

__all__ = [
    "MAX_JOBS",
    "QUOTA_NAME_LABELS",
    "RULE_CHILDREN_MIN",
    "RULE_MIN_WITHIN_MAX",
    "RULE_NAMESPACES_ON_LEAVES",
    "RULE_NAMESPACE_ONE_LEAF",
    "RULE_NODE_NAME",
    "RULE_QUANTITY",
    "RULE_ROOT_MIN_EQUALS_MAX",
    "RULE_SHAPE",
    "RULE_UNIQUE_NAME",
    "QuotaNode",
    "QuotaProblem",
    "QuotaTree",
    "Severity",
    "TreeCheck",
    "check_tree",
    "describe_amount",
    "queue_name_prefix",
]

MAX_JOBS: Final = "kube-queue/max-jobs"

#: A node's max: resource -> cap. Unlike `Resources` it keeps zeros: `max: {gpu: 0}` caps.
Caps = Mapping[str, int]
_NO_CAPS: Final[Caps] = MappingProxyType({})
"""The resource name ACK uses to cap how many jobs of a quota node are dequeued at once."""

QUOTA_NAME_LABELS: Final = (
    "quota.scheduling.alibabacloud.com/name",
    "quota.scheduling.koordinator.sh/name",
)
"""Labels that name a job's quota node explicitly (ACK's, then Koordinator's); without one the
job's namespace decides."""

Severity = Literal["Error", "Warning"]

RULE_MIN_WITHIN_MAX: Final = "MinWithinMax"
RULE_CHILDREN_MIN: Final = "ChildrenMinWithinParentMin"
RULE_ROOT_MIN_EQUALS_MAX: Final = "RootMinEqualsMax"
RULE_NAMESPACE_ONE_LEAF: Final = "NamespaceInOneLeaf"
RULE_UNIQUE_NAME: Final = "UniqueNodeName"
RULE_NODE_NAME: Final = "NodeName"
RULE_QUANTITY: Final = "Quantity"
RULE_SHAPE: Final = "Shape"
RULE_NAMESPACES_ON_LEAVES: Final = "NamespacesOnLeaves"

_RULE_TEXT: Final = {
    RULE_MIN_WITHIN_MAX: "a node's min <= its max",
    RULE_CHILDREN_MIN: "the sum of the children's min <= the parent's min",
    RULE_ROOT_MIN_EQUALS_MAX: "root min == root max",
    RULE_NAMESPACE_ONE_LEAF: "a namespace belongs to at most one leaf",
    RULE_UNIQUE_NAME: "node names are unique",
    RULE_NODE_NAME: "a node name is a lowercase-able DNS name part",
    RULE_QUANTITY: "quantities are Kubernetes quantities",
    RULE_SHAPE: "a node is {name, min, max, namespaces, children}",
    RULE_NAMESPACES_ON_LEAVES: "namespaces sit on leaves",
}

# Node names become Queue names (lowercased, '_' -> '-') and paths ('/'-separated).
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_NODE_KEYS: Final = frozenset({"name", "min", "max", "namespaces", "children", "attributes"})


@dataclass(frozen=True, slots=True)
class QuotaProblem:
    """One broken rule, with where it is broken."""

    path: str
    """The node's path (`root/child-2`), or the parent's path for a rule about its children."""
    field: str
    """The field in the object, e.g. `spec.root.children[0].min`."""
    rule: str
    """The rule's name (`MinWithinMax`, ...): stable, for machines and docs."""
    message: str
    """What is wrong, in a sentence that names the node, the resource and the amounts."""
    severity: Severity = "Error"

    def __str__(self) -> str:
        return f"{self.path or 'spec.root'}: {self.message} (rule {self.rule}: {self.explain()})"

    def explain(self) -> str:
        """The rule in words."""
        return _RULE_TEXT.get(self.rule, self.rule)


@dataclass(frozen=True, slots=True)
class QuotaNode:
    """One quota node; limits in kube-scheduler's integer units (`fleet.core.resources`)."""

    name: str
    path: str
    field: str
    """Where the node is in the object (`spec.root.children[1]`), for messages."""
    parent: str | None
    children: tuple[str, ...]
    namespaces: tuple[str, ...]
    min: Resources
    """Guaranteed amounts (absent = 0); may include `kube-queue/max-jobs`."""
    max: Caps
    """Caps (a resource absent here is not capped at this node; a listed 0 admits nothing of
    it); may include max-jobs."""
    lineage: tuple[str, ...]
    """This node's path, then its parent's, up to the root: the nodes a job here is charged to."""

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def queue_prefix(self) -> str:
        """The generateName of this node's Queue (see `queue_name_prefix`)."""
        return queue_name_prefix(self.path)


def queue_name_prefix(path: str) -> str:
    """koord-queue's Queue name for a node, before the API server's generated suffix: the path
    lowercased with `/` and `_` turned into `-`, plus a trailing `-` (`root/child-2` ->
    `root-child-2-`, which the server completes to e.g. `root-child-2-v5zxz`)."""
    return path.lower().replace("/", "-").replace("_", "-") + "-"


def describe_amount(resource: str, amount: int) -> str:
    """An amount as users write it in a tree: `4 GPUs`, `1500m CPU`, `3 jobs` for max-jobs, and
    bytes exact (`400000Gi memory`, not a rounded `390.6Ti`), so a message can be compared with
    the YAML it is about."""
    if resource == MAX_JOBS:
        return f"{amount} job{'' if amount == 1 else 's'}"
    if resource in (MEMORY, EPHEMERAL_STORAGE) and amount > 0:
        label = "memory" if resource == MEMORY else resource
        for suffix, power in (
            ("Ei", 60),
            ("Pi", 50),
            ("Ti", 40),
            ("Gi", 30),
            ("Mi", 20),
            ("Ki", 10),
        ):
            if amount % (1 << power) == 0:
                return f"{amount >> power}{suffix} {label}"
    return format_amount(resource, amount)


@dataclass(frozen=True)
class QuotaTree:
    """A valid tree. Build it with `check_tree`; never invalid once built."""

    root: str
    nodes: Mapping[str, QuotaNode]
    """Path -> node, parents before children (depth first, in spec order)."""
    by_name: Mapping[str, str]
    """Node name -> path."""
    by_namespace: Mapping[str, str]
    """Namespace -> path of the node that lists it."""

    def __iter__(self) -> Iterator[QuotaNode]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, path: object) -> bool:
        return path in self.nodes

    def node(self, path: str) -> QuotaNode:
        return self.nodes[path]

    def quota_for(self, namespace: str, labels: Mapping[str, str] | None = None) -> str | None:
        """The path of a job's quota node: the one its quota label names, else the one listing its
        namespace; None when neither exists (the job has no quota)."""
        if labels:
            for key in QUOTA_NAME_LABELS:
                name = labels.get(key)
                if name:
                    return self.by_name.get(name)
        return self.by_namespace.get(namespace)

    def quota_by_label(self, label: str | None, namespace: str) -> str | None:
        """As `quota_for`, given the quota label's value alone (what a queue unit records)."""
        if label:
            return self.by_name.get(label)
        return self.by_namespace.get(namespace)


@dataclass(frozen=True)
class TreeCheck:
    """What `check_tree` found: the tree when no rule is broken, and every problem."""

    tree: QuotaTree | None
    problems: tuple[QuotaProblem, ...]

    @property
    def valid(self) -> bool:
        return self.tree is not None

    @property
    def errors(self) -> tuple[QuotaProblem, ...]:
        return tuple(p for p in self.problems if p.severity == "Error")

    @property
    def warnings(self) -> tuple[QuotaProblem, ...]:
        return tuple(p for p in self.problems if p.severity == "Warning")


@dataclass
class _Draft:
    name: str
    path: str
    field: str
    parent: str | None
    namespaces: tuple[str, ...]
    min: Resources
    max: Caps
    children: list[str]


def check_tree(spec: Mapping[str, Any] | None, *, field: str = "spec") -> TreeCheck:
    """Build and check a tree from an ElasticQuotaTree `spec` (`{"root": {...}}`) as a dict.

    Never raises on bad input: every problem is returned, each naming the node, the field and the
    rule. Children are checked even under a broken node, so one pass reports everything.
    """
    problems: list[QuotaProblem] = []
    drafts: dict[str, _Draft] = {}
    root_raw = spec.get("root") if isinstance(spec, Mapping) else None
    root_field = f"{field}.root"
    if not isinstance(root_raw, Mapping):
        problems.append(
            QuotaProblem("", root_field, RULE_SHAPE, "spec.root is missing or not an object")
        )
        return TreeCheck(None, tuple(problems))
    _walk(root_raw, root_field, None, drafts, problems, set())
    if not drafts:
        return TreeCheck(None, tuple(problems))
    root_path = next(iter(drafts))
    _check_rules(drafts, root_path, problems)
    if any(p.severity == "Error" for p in problems):
        return TreeCheck(None, tuple(problems))
    return TreeCheck(_freeze(drafts, root_path), tuple(problems))


def _walk(
    raw: Mapping[str, Any],
    field: str,
    parent: _Draft | None,
    drafts: dict[str, _Draft],
    problems: list[QuotaProblem],
    names: set[str],
) -> None:
    name = raw.get("name")
    shown = name if isinstance(name, str) and name else f"<{field}>"
    path = f"{parent.path}/{shown}" if parent else shown
    for key in sorted(set(raw) - _NODE_KEYS):
        problems.append(
            QuotaProblem(path, f"{field}.{key}", RULE_SHAPE, f"unknown field {key!r} in a node")
        )
    ok = True
    if not isinstance(name, str) or not name:
        problems.append(QuotaProblem(path, f"{field}.name", RULE_SHAPE, "a node needs a name"))
        ok = False
    elif not _NAME.match(name):
        problems.append(
            QuotaProblem(
                path,
                f"{field}.name",
                RULE_NODE_NAME,
                f"name {name!r} cannot name a Queue: use letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit",
            )
        )
        ok = False
    elif name in names:
        problems.append(
            QuotaProblem(
                path,
                f"{field}.name",
                RULE_UNIQUE_NAME,
                f"name {name!r} is used by another node too",
            )
        )
        ok = False
    if isinstance(name, str) and name:
        names.add(name)
    minimum = _resources(raw.get("min"), f"{field}.min", path, problems)
    maximum = _caps(raw.get("max"), f"{field}.max", path, problems)
    namespaces = _namespaces(raw.get("namespaces"), f"{field}.namespaces", path, problems)
    children_raw = raw.get("children")
    if children_raw is not None and not isinstance(children_raw, list):
        problems.append(
            QuotaProblem(path, f"{field}.children", RULE_SHAPE, "children must be a list")
        )
        children_raw = None
    attributes = raw.get("attributes")
    if attributes is not None and not (
        isinstance(attributes, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in attributes.items())
    ):
        problems.append(
            QuotaProblem(
                path, f"{field}.attributes", RULE_SHAPE, "attributes must map strings to strings"
            )
        )
    draft: _Draft | None = None
    if ok and isinstance(name, str) and path not in drafts:
        parent_path = parent.path if parent else None
        draft = _Draft(name, path, field, parent_path, namespaces, minimum, maximum, [])
        drafts[path] = draft
        if parent is not None:
            parent.children.append(path)
    for i, child in enumerate(children_raw or []):
        child_field = f"{field}.children[{i}]"
        if not isinstance(child, Mapping):
            problems.append(QuotaProblem(path, child_field, RULE_SHAPE, "a child must be a node"))
            continue
        # Under a broken node the children are still checked, against a stand-in parent.
        holder = draft or _Draft(shown, path, field, None, (), EMPTY, _NO_CAPS, [])
        _walk(child, child_field, holder, drafts if draft else {}, problems, names)


def _resources(raw: Any, field: str, path: str, problems: list[QuotaProblem]) -> Resources:
    return Resources(_caps(raw, field, path, problems))


def _caps(raw: Any, field: str, path: str, problems: list[QuotaProblem]) -> Caps:
    """Amounts as written, zeros kept: in a `max`, 0 is a cap (nothing of it), not "no cap"."""
    if raw is None:
        return _NO_CAPS
    if not isinstance(raw, Mapping):
        problems.append(QuotaProblem(path, field, RULE_SHAPE, "must map resource names to amounts"))
        return _NO_CAPS
    amounts: dict[str, int] = {}
    for name, value in raw.items():
        try:
            amounts[str(name)] = Resources.parse({name: value}, field=field).get(str(name), 0)
        except FieldError as err:
            problems.append(QuotaProblem(path, err.field, RULE_QUANTITY, err.reason))
    return MappingProxyType(amounts)


def _namespaces(raw: Any, field: str, path: str, problems: list[QuotaProblem]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(n, str) and n for n in raw):
        problems.append(
            QuotaProblem(path, field, RULE_SHAPE, "namespaces must be a list of namespace names")
        )
        return ()
    return tuple(dict.fromkeys(raw))


def _check_rules(drafts: Mapping[str, _Draft], root: str, problems: list[QuotaProblem]) -> None:
    owner: dict[str, str] = {}
    for draft in drafts.values():
        for resource, low in draft.min.items():
            high = draft.max.get(resource, None)
            if high is not None and low > high:
                problems.append(
                    QuotaProblem(
                        draft.path,
                        f"{draft.field}.min",
                        RULE_MIN_WITHIN_MAX,
                        f"min {describe_amount(resource, low)} is above max "
                        f"{describe_amount(resource, high)} ({resource})",
                    )
                )
        if draft.children:
            total: dict[str, int] = {}
            for child in draft.children:
                for resource, amount in drafts[child].min.items():
                    total[resource] = total.get(resource, 0) + amount
            for resource, amount in sorted(total.items()):
                own = draft.min.get(resource, 0)
                if amount > own:
                    problems.append(
                        QuotaProblem(
                            draft.path,
                            f"{draft.field}.children",
                            RULE_CHILDREN_MIN,
                            f"the children's min add up to {describe_amount(resource, amount)} "
                            f"but this node's min is {describe_amount(resource, own)} ({resource})",
                        )
                    )
            if draft.namespaces:
                problems.append(
                    QuotaProblem(
                        draft.path,
                        f"{draft.field}.namespaces",
                        RULE_NAMESPACES_ON_LEAVES,
                        "a node with children lists namespaces; their jobs are charged from this "
                        "node up",
                        "Warning",
                    )
                )
        for namespace in draft.namespaces:
            first = owner.setdefault(namespace, draft.path)
            if first != draft.path:
                problems.append(
                    QuotaProblem(
                        draft.path,
                        f"{draft.field}.namespaces",
                        RULE_NAMESPACE_ONE_LEAF,
                        f"namespace {namespace!r} is listed by {first} too",
                    )
                )
    top = drafts[root]
    if top.min != Resources(dict(top.max)):
        problems.append(
            QuotaProblem(
                top.path,
                top.field,
                RULE_ROOT_MIN_EQUALS_MAX,
                f"root min ({_listing(top.min)}) differs from root max ({_listing(top.max)}); "
                "the root's max caps the whole tree",
                "Warning",
            )
        )


def _listing(amounts: Mapping[str, int]) -> str:
    if not amounts:
        return "nothing"
    return ", ".join(describe_amount(k, v) for k, v in sorted(amounts.items()))


def _freeze(drafts: Mapping[str, _Draft], root: str) -> QuotaTree:
    nodes: dict[str, QuotaNode] = {}
    by_namespace: dict[str, str] = {}
    for draft in drafts.values():
        lineage = [draft.path]
        parent = draft.parent
        while parent is not None:
            lineage.append(parent)
            parent = drafts[parent].parent
        nodes[draft.path] = QuotaNode(
            name=draft.name,
            path=draft.path,
            field=draft.field,
            parent=draft.parent,
            children=tuple(draft.children),
            namespaces=draft.namespaces,
            min=draft.min,
            max=draft.max,
            lineage=tuple(lineage),
        )
        for namespace in draft.namespaces:
            by_namespace[namespace] = draft.path
    by_name = {node.name: path for path, node in nodes.items()}
    return QuotaTree(root, nodes, by_name, by_namespace)
