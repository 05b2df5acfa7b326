"""Policy matching follows Karmada's precedence; affinities become plain data for placement."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fleet.api import (
    ClusterPropagationPolicy,
    LabelSelector,
    PlacementRules,
    PolicyRef,
    PropagationPolicy,
    Specificity,
    Taint,
    Toleration,
    WorkloadRef,
    cluster_fields,
    core_taints,
    core_tolerations,
    label_selector_matches,
    match_policy,
    placement_rules,
)
from fleet.api.matching import policy_specificity
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import no_execute_grace, untolerated

JOB = WorkloadRef(
    api_version="kubeflow.org/v1",
    kind="PyTorchJob",
    namespace="default",
    name="pytorch-test",
    labels={"team": "ml", "size": "large"},
)
GANG = {"placement": {"replicaScheduling": {"customSchedulingType": "Gang"}}}


def pp(
    name: str,
    selector: dict[str, Any] | None = None,
    *,
    namespace: str = "default",
    gang: bool = True,
    **spec: Any,
) -> PropagationPolicy:
    sel = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", **(selector or {})}
    return PropagationPolicy.from_dict(
        {
            "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceSelectors": [sel], **(GANG if gang else {}), **spec},
        }
    )


def cpp(
    name: str, selector: dict[str, Any] | None = None, *, gang: bool = True, **spec: Any
) -> ClusterPropagationPolicy:
    sel = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", **(selector or {})}
    return ClusterPropagationPolicy.from_dict(
        {
            "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
            "kind": "ClusterPropagationPolicy",
            "metadata": {"name": name},
            "spec": {"resourceSelectors": [sel], **(GANG if gang else {}), **spec},
        }
    )


def name_of(match: Any) -> str | None:
    return match.policy.metadata.name if match.policy else None


def test_no_policy() -> None:
    m = match_policy(JOB, [], [])
    assert m.policy is None and not m.gang and m.specificity is Specificity.NONE
    assert "no PropagationPolicy" in m.reason and "default/pytorch-test" in m.reason


def test_propagation_policy_beats_cluster_policy_even_with_lower_priority() -> None:
    m = match_policy(
        JOB, [pp("ns-policy")], [cpp("cluster-policy", {"name": "pytorch-test"}, priority=100)]
    )
    assert name_of(m) == "ns-policy" and m.gang
    assert m.ref == PolicyRef(kind="PropagationPolicy", namespace="default", name="ns-policy")


def test_cluster_policy_applies_when_no_namespaced_policy_matches() -> None:
    m = match_policy(JOB, [pp("other-ns", namespace="elsewhere")], [cpp("cluster-policy")])
    assert name_of(m) == "cluster-policy"
    assert m.ref == PolicyRef(kind="ClusterPropagationPolicy", name="cluster-policy")


def test_higher_priority_wins_over_specificity() -> None:
    m = match_policy(JOB, [pp("by-name", {"name": "pytorch-test"}), pp("by-kind", priority=1)], [])
    assert name_of(m) == "by-kind"


def test_specificity_name_beats_label_beats_kind() -> None:
    by_kind = pp("a-kind")
    by_label = pp("b-label", {"labelSelector": {"matchLabels": {"team": "ml"}}})
    by_name = pp("c-name", {"name": "pytorch-test"})
    assert name_of(match_policy(JOB, [by_kind, by_label, by_name], [])) == "c-name"
    assert name_of(match_policy(JOB, [by_kind, by_label], [])) == "b-label"
    assert match_policy(JOB, [by_kind, by_label], []).specificity is Specificity.LABEL_SELECTOR
    assert name_of(match_policy(JOB, [by_kind], [])) == "a-kind"


def test_alphabetical_tie_break() -> None:
    m = match_policy(JOB, [pp("zeta"), pp("alpha"), pp("mid")], [])
    assert name_of(m) == "alpha"
    m = match_policy(JOB, [], [cpp("zeta"), cpp("beta")])
    assert name_of(m) == "beta"


@pytest.mark.parametrize(
    "selector",
    [
        {"name": "other-job"},
        {"labelSelector": {"matchLabels": {"team": "web"}}},
        {
            "labelSelector": {
                "matchExpressions": [{"key": "size", "operator": "NotIn", "values": ["large"]}]
            }
        },
        {"namespace": "other"},
        {"apiVersion": "kubeflow.org/v2"},
        {"kind": "TFJob"},
    ],
)
def test_non_matching_selectors(selector: dict[str, Any]) -> None:
    assert match_policy(JOB, [pp("p", selector)], []).policy is None


def test_name_set_ignores_label_selector() -> None:
    p = pp("p", {"name": "pytorch-test", "labelSelector": {"matchLabels": {"team": "web"}}})
    assert match_policy(JOB, [p], []).specificity is Specificity.NAME


def test_best_selector_of_a_policy_counts() -> None:
    p = PropagationPolicy.from_dict(
        {
            "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "multi", "namespace": "default"},
            "spec": {
                "resourceSelectors": [
                    {"apiVersion": "kubeflow.org/v1", "kind": "TFJob"},
                    {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"},
                    {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytorch-test"},
                ]
            },
        }
    )
    assert policy_specificity(p, JOB) is Specificity.NAME


def test_non_gang_winner_governs_but_is_not_fleets() -> None:
    m = match_policy(JOB, [pp("plain", gang=False, priority=5), pp("gang")], [])
    assert name_of(m) == "plain" and not m.gang
    assert "only 'Gang' policies are fleet's to act on" in m.reason
    odd = pp("odd", gang=False, placement={"replicaScheduling": {"customSchedulingType": "gang"}})
    m = match_policy(JOB, [odd], [])
    assert not m.gang and "'gang'" in m.reason


def test_cluster_policy_skips_reserved_namespaces() -> None:
    system_job = WorkloadRef("kubeflow.org/v1", "PyTorchJob", "kube-system", "j")
    assert match_policy(system_job, [], [cpp("c")]).policy is None
    assert name_of(match_policy(system_job, [], [cpp("c")], reserved_namespaces=())) == "c"
    assert name_of(match_policy(system_job, [pp("p", namespace="kube-system")], [])) == "p"


def test_deleting_policies_are_ignored() -> None:
    doomed = pp("a-doomed")
    doomed.metadata.deletion_timestamp = datetime(2024, 1, 1, tzinfo=UTC)
    assert name_of(match_policy(JOB, [doomed, pp("b-live")], [])) == "b-live"


def test_claim_is_kept_without_preemption() -> None:
    claim = PolicyRef(kind="PropagationPolicy", namespace="default", name="old")
    m = match_policy(JOB, [pp("old"), pp("new", priority=10)], [], claimed_by=claim)
    assert name_of(m) == "old" and "keeps its claim" in m.reason


def test_preemption_always_by_higher_priority_pp() -> None:
    claim = PolicyRef(kind="PropagationPolicy", namespace="default", name="old")
    pols = [pp("old", priority=1), pp("new", priority=2, preemption="Always")]
    assert name_of(match_policy(JOB, pols, [], claimed_by=claim)) == "new"
    same = [pp("old", priority=2), pp("new", priority=2, preemption="Always")]
    assert name_of(match_policy(JOB, same, [], claimed_by=claim)) == "old"


def test_pp_with_preemption_takes_from_any_cpp_regardless_of_priority() -> None:
    claim = PolicyRef(kind="ClusterPropagationPolicy", name="c")
    m = match_policy(
        JOB, [pp("p", priority=-5, preemption="Always")], [cpp("c", priority=50)], claimed_by=claim
    )
    assert name_of(m) == "p" and "preempts ClusterPropagationPolicy c" in m.reason
    m = match_policy(JOB, [pp("p", priority=-5)], [cpp("c", priority=50)], claimed_by=claim)
    assert name_of(m) == "c"


def test_cpp_preempts_only_lower_priority_cpp() -> None:
    claim_c = PolicyRef(kind="ClusterPropagationPolicy", name="c1")
    m = match_policy(
        JOB,
        [],
        [cpp("c1", priority=1), cpp("c2", priority=2, preemption="Always")],
        claimed_by=claim_c,
    )
    assert name_of(m) == "c2"
    claim_p = PolicyRef(kind="PropagationPolicy", namespace="default", name="p")
    m = match_policy(
        JOB, [pp("p")], [cpp("c2", priority=99, preemption="Always")], claimed_by=claim_p
    )
    assert name_of(m) == "p"


def test_stale_claim_falls_back_to_normal_selection() -> None:
    claim = PolicyRef(kind="PropagationPolicy", namespace="default", name="gone")
    assert name_of(match_policy(JOB, [pp("here")], [], claimed_by=claim)) == "here"
    no_longer = PolicyRef(kind="PropagationPolicy", namespace="default", name="narrowed")
    pols = [pp("narrowed", {"name": "something-else"}), pp("here")]
    assert name_of(match_policy(JOB, pols, [], claimed_by=no_longer)) == "here"


def test_workload_ref_from_object() -> None:
    ref = WorkloadRef.from_object(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "ns", "labels": {"a": "b"}},
        }
    )
    assert ref == WorkloadRef("kubeflow.org/v1", "PyTorchJob", "ns", "j", {"a": "b"})


# --- Label selectors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {}, True),
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "x"}, False),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]},
            {"a": "c"},
            True,
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
    ],
)
def test_label_selector_semantics(selector: Any, labels: dict[str, str], expected: bool) -> None:
    parsed = None if selector is None else LabelSelector.from_dict(selector)
    assert label_selector_matches(parsed, labels) is expected


# --- The policy's placement rules, evaluated by the core ----------------------------------------


def _cluster(name: str, labels: dict[str, str]) -> ClusterSnapshot:
    return ClusterSnapshot.build(name, [], labels=labels, fields=cluster_fields(labels))


def test_cluster_affinity_becomes_the_engines_rules() -> None:
    p = pp(
        "aff",
        placement={
            "clusterAffinity": {
                "labelSelector": {
                    "matchLabels": {"gpu-model": "a100"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}],
                },
                "fieldSelector": {
                    "matchExpressions": [
                        {"key": "region", "operator": "In", "values": ["cn-hangzhou"]}
                    ]
                },
                "clusterNames": ["m1", "m2", "m3"],
                "exclude": ["m3"],
            },
            "replicaScheduling": {"customSchedulingType": "Gang"},
        },
    )
    rules = placement_rules(p.spec)
    assert rules.groups == ()
    affinity = rules.affinity
    assert affinity is not None
    good = {"gpu-model": "a100", "tier": "gold", "topology.kubernetes.io/region": "cn-hangzhou"}
    assert affinity.rejection(_cluster("m1", good)) is None
    assert "exclude" in (affinity.rejection(_cluster("m3", good)) or "")
    assert "clusterNames" in (affinity.rejection(_cluster("m9", good)) or "")
    assert "labelSelector" in (affinity.rejection(_cluster("m1", {**good, "tier": "silver"})) or "")
    moved = {**good, "topology.kubernetes.io/region": "cn-beijing"}
    assert "fieldSelector" in (affinity.rejection(_cluster("m1", moved)) or "")
    assert cluster_fields({**good, "fleet.dev/provider": "ali"}) == {
        "provider": "ali",
        "region": "cn-hangzhou",
    }


def test_no_affinity_means_unrestricted() -> None:
    assert placement_rules(pp("p").spec) == PlacementRules()
    assert placement_rules(None) == PlacementRules()
    empty = pp("e", placement={"clusterAffinity": {"clusterNames": []}})
    assert placement_rules(empty.spec).affinity is None


def test_cluster_affinities_groups_in_order() -> None:
    p = pp(
        "groups",
        placement={
            "clusterAffinities": [
                {"affinityName": "primary", "labelSelector": {"matchLabels": {"dc": "a"}}},
                {"affinityName": "backup", "clusterNames": ["b1"]},
            ]
        },
    )
    rules = placement_rules(p.spec)
    assert [g.name for g in rules.groups] == ["primary", "backup"]
    assert rules.affinity is None
    assert rules.groups[0].affinity.rejection(_cluster("x", {"dc": "a"})) is None
    assert rules.groups[1].affinity.rejection(_cluster("b1", {})) is None
    assert rules.groups[1].affinity.rejection(_cluster("x", {"dc": "a"})) is not None


# --- Taints and tolerations (the core's semantics, corev1.ToleratesTaint) --------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (
            {"key": "spot", "operator": "Exists"},
            {"key": "spot", "value": "x", "effect": "NoSchedule"},
            True,
        ),
        (
            {"key": "spot", "value": "x"},
            {"key": "spot", "value": "x", "effect": "NoSchedule"},
            True,
        ),
        (
            {"key": "spot", "value": "y"},
            {"key": "spot", "value": "x", "effect": "NoSchedule"},
            False,
        ),
        ({"operator": "Exists"}, {"key": "any", "effect": "NoExecute"}, True),
        (
            {"key": "spot", "operator": "Exists", "effect": "NoExecute"},
            {"key": "spot", "effect": "NoSchedule"},
            False,
        ),
        ({"key": "other", "operator": "Exists"}, {"key": "spot", "effect": "NoSchedule"}, False),
        # An empty key with Equal matches any key whose value is equal (corev1, literally).
        ({"value": "x"}, {"key": "any", "value": "x", "effect": "NoSchedule"}, True),
    ],
)
def test_toleration_semantics(
    toleration: dict[str, Any], taint: dict[str, Any], expected: bool
) -> None:
    (tol,) = core_tolerations([Toleration.from_dict(toleration)])
    (tnt,) = core_taints([Taint.from_dict(taint)])
    assert tol.tolerates(tnt) is expected


def test_policy_tolerations_leave_only_untolerated_blocking_taints() -> None:
    p = pp(
        "t",
        placement={
            "clusterTolerations": [
                {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "drain",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 60,
                },
            ]
        },
    )
    tolerations = placement_rules(p.spec).tolerations
    taints = core_taints(
        [
            Taint.from_dict({"key": "spot", "effect": "NoSchedule"}),
            Taint.from_dict({"key": "maintenance", "effect": "NoExecute"}),
            Taint.from_dict({"key": "soft", "effect": "PreferNoSchedule"}),
        ]
    )
    assert str(untolerated(tolerations, taints)) == "maintenance:NoExecute"
    drain = core_taints([Taint.from_dict({"key": "drain", "effect": "NoExecute"})])
    assert untolerated(tolerations, drain) is None  # tolerated for now...
    assert no_execute_grace(tolerations, drain) == (drain[0], 60.0)  # ...for 60 s
