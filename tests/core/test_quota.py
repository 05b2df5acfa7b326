"""ElasticQuotaTree: the seeds' tree, every validation rule with its message, queue naming."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.core.quota import (
    MAX_JOBS,
    RULE_CHILDREN_MIN,
    RULE_MIN_WITHIN_MAX,
    RULE_NAMESPACE_ONE_LEAF,
    RULE_NAMESPACES_ON_LEAVES,
    RULE_NODE_NAME,
    RULE_QUANTITY,
    RULE_ROOT_MIN_EQUALS_MAX,
    RULE_SHAPE,
    RULE_UNIQUE_NAME,
    check_tree,
    describe_amount,
    queue_name_prefix,
)
from fleet.core.resources import GPU
from fleet.demo.seeds import QUOTA_TREE

GiB = 1 << 30

#: The seeds' tree (001_*.txt): the demo's copy, which tests/demo checks against
#: policies/elasticquotatree-seed.yaml.
SEED_SPEC: dict[str, Any] = QUOTA_TREE["spec"]


def tree_of(root: dict[str, Any]) -> dict[str, Any]:
    return {"root": root}


def leaf(name: str, *, min: Any = None, max: Any = None, ns: Any = None) -> dict[str, Any]:
    node: dict[str, Any] = {"name": name}
    if min is not None:
        node["min"] = min
    if max is not None:
        node["max"] = max
    if ns is not None:
        node["namespaces"] = ns
    return node


def rules(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(p.rule, p.path, p.severity) for p in check_tree(spec).problems]


def test_seed_tree_is_in_force_with_the_root_rule_as_a_warning():
    check = check_tree(SEED_SPEC)
    assert check.valid and check.tree is not None
    assert [(p.rule, p.severity) for p in check.problems] == [(RULE_ROOT_MIN_EQUALS_MAX, "Warning")]
    tree = check.tree
    assert list(tree.nodes) == ["root", "root/child-2"]
    child = tree.node("root/child-2")
    assert child.max[MAX_JOBS] == 1
    assert child.max["cpu"] == 10_000_000  # millicores
    assert child.max["memory"] == 10000 * GiB
    assert child.lineage == ("root/child-2", "root")
    assert tree.node("root").max[MAX_JOBS] == 10_000_000_000
    assert tree.node("root").max["memory"] == 400000 * GiB
    assert tree.quota_for("default") == "root/child-2"
    assert tree.quota_for("kube-system") is None


def test_root_warning_names_both_sides_exactly():
    (problem,) = check_tree(SEED_SPEC).problems
    assert problem.path == "root" and problem.field == "spec.root"
    assert "9999 CPU, 40Gi memory" in problem.message
    assert "400000Gi memory" in problem.message and "100000 GPUs" in problem.message
    assert "root min == root max" in str(problem)


def test_queue_names_follow_the_seeds():
    check = check_tree(SEED_SPEC)
    assert check.tree is not None
    assert [n.queue_prefix for n in check.tree] == ["root-", "root-child-2-"]
    assert queue_name_prefix("root/Team_A/sub_b") == "root-team-a-sub-b-"


def test_min_above_max_names_node_resource_and_amounts():
    spec = tree_of(
        {
            "name": "root",
            "min": {GPU: 8},
            "max": {GPU: 8},
            "children": [leaf("a", min={GPU: 4, "cpu": 2}, max={GPU: 2, "cpu": 1})],
        }
    )
    check = check_tree(spec)
    assert not check.valid
    problems = [p for p in check.problems if p.rule == RULE_MIN_WITHIN_MAX]
    assert [(p.path, p.field) for p in problems] == [("root/a", "spec.root.children[0].min")] * 2
    assert any("min 4 GPUs is above max 2 GPUs (nvidia.com/gpu)" in p.message for p in problems)
    assert any("min 2 CPU is above max 1 CPU" in p.message for p in problems)


def test_min_of_a_resource_max_does_not_list_is_fine():
    spec = tree_of(
        {"name": "root", "min": {GPU: 8}, "max": {GPU: 8}, "children": [leaf("a", min={GPU: 8})]}
    )
    assert check_tree(spec).valid


def test_children_min_above_parent_min():
    spec = tree_of(
        {
            "name": "root",
            "min": {GPU: 8},
            "max": {GPU: 8},
            "children": [leaf("a", min={GPU: 6}, max={GPU: 8}), leaf("b", min={GPU: 4})],
        }
    )
    check = check_tree(spec)
    assert not check.valid
    (problem,) = check.errors
    assert problem.rule == RULE_CHILDREN_MIN and problem.path == "root"
    assert problem.field == "spec.root.children"
    assert "add up to 10 GPUs but this node's min is 8 GPUs" in problem.message


def test_children_min_counts_against_an_absent_parent_min():
    spec = tree_of(
        {
            "name": "root",
            "min": {GPU: 8},
            "max": {GPU: 8},
            "children": [{"name": "mid", "children": [leaf("a", min={GPU: 1})]}],
        }
    )
    assert (RULE_CHILDREN_MIN, "root/mid", "Error") in rules(spec)


def test_namespace_in_two_leaves():
    spec = tree_of(
        {
            "name": "root",
            "children": [leaf("a", ns=["x", "y"]), leaf("b", ns=["y"])],
        }
    )
    check = check_tree(spec)
    (problem,) = check.errors
    assert problem.rule == RULE_NAMESPACE_ONE_LEAF and problem.path == "root/b"
    assert "namespace 'y' is listed by root/a too" in problem.message


def test_node_names_are_unique_across_levels():
    spec = tree_of({"name": "root", "children": [{"name": "a", "children": [leaf("a")]}]})
    check = check_tree(spec)
    (problem,) = check.errors
    assert (
        problem.rule == RULE_UNIQUE_NAME
        and problem.field == "spec.root.children[0].children[0].name"
    )
    assert "'a' is used by another node too" in problem.message


@pytest.mark.parametrize(
    ("node", "rule", "text"),
    [
        ({"name": ""}, RULE_SHAPE, "needs a name"),
        ({"name": "a b"}, RULE_NODE_NAME, "cannot name a Queue"),
        ({"name": "a/b"}, RULE_NODE_NAME, "cannot name a Queue"),
        ({"name": "a", "max": {GPU: "lots"}}, RULE_QUANTITY, "unparsable quantity"),
        ({"name": "a", "min": {GPU: -1}}, RULE_QUANTITY, "negative quantity"),
        ({"name": "a", "max": [1]}, RULE_SHAPE, "must map resource names"),
        ({"name": "a", "namespaces": "default"}, RULE_SHAPE, "list of namespace names"),
        ({"name": "a", "children": {}}, RULE_SHAPE, "children must be a list"),
        ({"name": "a", "weight": 3}, RULE_SHAPE, "unknown field 'weight'"),
        ({"name": "a", "attributes": {"k": 1}}, RULE_SHAPE, "attributes must map strings"),
    ],
)
def test_malformed_nodes_are_reported_not_raised(node, rule, text):
    check = check_tree(tree_of({"name": "root", "children": [node]}))
    assert not check.valid
    assert any(p.rule == rule and text in p.message for p in check.problems), check.problems


def test_quantity_problem_names_the_field():
    check = check_tree(tree_of({"name": "root", "children": [leaf("a", max={GPU: "x"})]}))
    (problem,) = check.problems
    assert problem.field == "spec.root.children[0].max.nvidia.com/gpu"


def test_missing_root():
    for spec in (None, {}, {"root": "x"}):
        check = check_tree(spec)
        assert not check.valid and check.problems[0].rule == RULE_SHAPE


def test_problems_under_a_broken_node_are_still_found():
    spec = tree_of(
        {
            "name": "root",
            "children": [{"name": "bad name", "children": [leaf("c", max={GPU: "x"})]}],
        }
    )
    found = {p.rule for p in check_tree(spec).problems}
    assert {RULE_NODE_NAME, RULE_QUANTITY} <= found


def test_namespaces_on_an_inner_node_warn_and_charge_from_there():
    spec = tree_of(
        {
            "name": "root",
            "children": [{"name": "mid", "namespaces": ["x"], "children": [leaf("a")]}],
        }
    )
    check = check_tree(spec)
    assert check.valid and check.tree is not None
    assert [p.rule for p in check.warnings] == [RULE_NAMESPACES_ON_LEAVES]
    assert check.tree.quota_for("x") == "root/mid"


def test_quota_label_wins_over_namespace():
    check = check_tree(tree_of({"name": "root", "children": [leaf("a", ns=["x"]), leaf("b")]}))
    assert check.tree is not None
    tree = check.tree
    assert tree.quota_for("x", {"quota.scheduling.alibabacloud.com/name": "b"}) == "root/b"
    assert tree.quota_for("x", {"quota.scheduling.koordinator.sh/name": "b"}) == "root/b"
    assert tree.quota_for("x", {"quota.scheduling.alibabacloud.com/name": "nope"}) is None
    assert tree.quota_for("x", {"other": "b"}) == "root/a"
    assert tree.quota_by_label("b", "x") == "root/b"


def test_describe_amount():
    assert describe_amount(MAX_JOBS, 1) == "1 job"
    assert describe_amount("memory", 400000 * GiB) == "400000Gi memory"
    assert describe_amount("memory", 1536 * (1 << 20)) == "1536Mi memory"
    assert describe_amount("cpu", 1500) == "1500m CPU"
    assert describe_amount(GPU, 2) == "2 GPUs"
