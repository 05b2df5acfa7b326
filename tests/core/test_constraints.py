import pytest

from fleet.core.constraints import PodConstraints
from fleet.core.errors import FieldError
from fleet.core.selectors import LabelSelector, NodeSelector, Requirement
from fleet.core.taints import Taint, Toleration, parse_tolerations, untolerated


def affinity(*terms: dict[str, object]) -> NodeSelector:
    return NodeSelector.parse({"nodeSelectorTerms": list(terms)}, "affinity")


def expr(key: str, op: str, *values: str) -> dict[str, object]:
    return (
        {"key": key, "operator": op, "values": list(values)}
        if values
        else {"key": key, "operator": op}
    )


LABELS = {"gpu": "a100", "zone": "a", "cores": "64"}


@pytest.mark.parametrize(
    ("requirement", "matches"),
    [
        (expr("gpu", "In", "a100", "h100"), True),
        (expr("gpu", "In", "h100"), False),
        (expr("gpu", "NotIn", "h100"), True),
        (expr("missing", "NotIn", "x"), True),  # a missing label satisfies NotIn
        (expr("gpu", "Exists"), True),
        (expr("missing", "Exists"), False),
        (expr("missing", "DoesNotExist"), True),
        (expr("gpu", "DoesNotExist"), False),
        (expr("cores", "Gt", "32"), True),
        (expr("cores", "Gt", "64"), False),
        (expr("cores", "Lt", "65"), True),
        (expr("gpu", "Gt", "1"), False),  # not an integer label: no match
        (expr("missing", "Lt", "1"), False),
    ],
)
def test_node_affinity_operators(requirement: dict[str, object], matches: bool) -> None:
    selector = affinity({"matchExpressions": [requirement]})
    assert selector.matches(LABELS, "node-1") is matches


def test_terms_are_ored_and_expressions_anded() -> None:
    sel = affinity(
        {"matchExpressions": [expr("gpu", "In", "h100"), expr("zone", "In", "a")]},
        {"matchExpressions": [expr("zone", "In", "a"), expr("cores", "Gt", "8")]},
    )
    assert sel.matches(LABELS, "n")
    assert not sel.matches({"zone": "a", "cores": "4"}, "n")


def test_match_fields_metadata_name() -> None:
    sel = affinity({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})
    assert sel.matches({}, "n1") and not sel.matches({}, "n2")
    not_in = affinity(
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}
    )
    assert not not_in.matches({}, "n1") and not_in.matches({}, "n2")
    assert sel.uses_fields()


def test_empty_term_selects_nothing() -> None:
    assert not affinity({}).matches(LABELS, "n")
    assert not affinity().matches(LABELS, "n")


@pytest.mark.parametrize(
    ("term", "field"),
    [
        ({"matchExpressions": [expr("a", "Bogus", "x")]}, "matchExpressions[0].operator"),
        ({"matchExpressions": [expr("a", "In")]}, "matchExpressions[0].values"),
        ({"matchExpressions": [expr("a", "Exists", "x")]}, "matchExpressions[0].values"),
        ({"matchExpressions": [expr("a", "Gt", "x")]}, "matchExpressions[0].values"),
        (
            {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]},
            "matchFields[0].operator",
        ),
    ],
)
def test_invalid_selectors_name_the_field(term: dict[str, object], field: str) -> None:
    with pytest.raises(FieldError) as err:
        affinity(term)
    assert err.value.field == f"affinity.nodeSelectorTerms[0].{field}"


def test_tolerations_match_like_kubernetes() -> None:
    gpu = Taint("nvidia.com/gpu", "NoSchedule", "present")
    assert Toleration("nvidia.com/gpu", "Exists").tolerates(gpu)
    assert Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule").tolerates(gpu)
    assert not Toleration("nvidia.com/gpu", "Equal", "absent").tolerates(gpu)
    assert not Toleration("nvidia.com/gpu", "Exists", effect="NoExecute").tolerates(gpu)
    assert Toleration(operator="Exists").tolerates(gpu)  # empty key + Exists: everything
    assert not Toleration("other", "Exists").tolerates(gpu)


def test_only_blocking_effects_keep_pods_away() -> None:
    soft = Taint("a", "PreferNoSchedule")
    hard = Taint("b", "NoExecute")
    assert untolerated((), (soft,)) is None
    assert untolerated((), (soft, hard)) == hard
    assert untolerated((Toleration("b", "Exists"),), (soft, hard)) is None


def test_pod_constraints_from_spec_and_rejection_order() -> None:
    spec = {
        "nodeSelector": {"gpu": "a100"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "In", "a")]}]
                }
            }
        },
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    cons = PodConstraints.from_pod_spec(spec, "spec")
    gpu_taint = (Taint("nvidia.com/gpu", "NoSchedule"),)
    assert cons.rejection(LABELS, gpu_taint, False) is None
    assert cons.rejection(LABELS, gpu_taint, True) == "are cordoned"
    assert cons.rejection({"zone": "a"}, (), False) == "lack label gpu=a100"
    assert cons.rejection({"gpu": "a100", "zone": "b"}, (), False) == "fail required node affinity"
    assert (
        cons.rejection(LABELS, (Taint("x", "NoExecute"),), False)
        == "have untolerated taint x:NoExecute"
    )


def test_cordoned_nodes_accept_pods_tolerating_the_unschedulable_taint() -> None:
    tolerant = PodConstraints.of(
        tolerations=parse_tolerations(
            [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], "t"
        )
    )
    assert tolerant.rejection({}, (), True) is None


def test_identity_rules_are_detected() -> None:
    keys = frozenset({"kubernetes.io/hostname"})
    assert PodConstraints.of({"kubernetes.io/hostname": "n1"}).needs_node_identity(keys)
    assert not PodConstraints.of({"gpu": "a"}).needs_node_identity(keys)
    by_name = affinity(
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
    )
    assert PodConstraints.of(affinity=by_name).needs_node_identity(keys)


def test_label_selector_for_clusters() -> None:
    sel = LabelSelector.parse(
        {"matchLabels": {"env": "prod"}, "matchExpressions": [expr("region", "In", "hz", "sh")]}
    )
    assert sel.matches({"env": "prod", "region": "hz"})
    assert sel.first_mismatch({"env": "dev", "region": "hz"}) == "env=prod"
    assert sel.first_mismatch({"env": "prod"}) == "region In [hz, sh]"
    assert LabelSelector().matches({})
    with pytest.raises(FieldError):
        LabelSelector.parse({"matchExpressions": [expr("a", "Gt", "1")]})
    assert str(Requirement("a", "Exists")) == "a Exists"
