"""Every example in policies/ parses with the models and means what its comment says."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleet.api import (
    BindingFailover,
    ClusterPropagationPolicy,
    MemberCluster,
    PropagationPolicy,
    WorkloadRef,
    core_taints,
    match_policy,
    parse_object,
    placement_rules,
)
from fleet.core.domainwait import DEFAULT_WAIT_SECONDS
from fleet.core.snapshot import ClusterSnapshot
from fleet.core.taints import untolerated
from fleet.core.topology import TopologyRule
from fleet.kubeconfig import kubeconfig_text_from_secret, load_kubeconfig, validate_kubeconfig

Docs = Callable[[str], list[dict[str, Any]]]
EXPECTED_FILES = {
    "pytorchjob-gang.yaml",
    "pytorchjob-gang-queued.yaml",
    "tfjob-gang.yaml",
    "training-jobs-cluster-wide.yaml",
    "a100-clusters-affinity.yaml",
    "sum-estimator.yaml",
    "fragmentation-scoring.yaml",
    "rack-topology.yaml",
    "membercluster-example.yaml",
    "elasticquotatree-seed.yaml",
}


def _objects(repo: Path, load_docs: Docs) -> dict[str, list[dict[str, Any]]]:
    return {p.name: load_docs(p.read_text()) for p in sorted((repo / "policies").glob("*.yaml"))}


def _by_name(repo: Path, load_docs: Docs) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for docs in _objects(repo, load_docs).values():
        for d in docs:
            if d["kind"] != "Secret":
                obj = parse_object(d)
                out[obj.metadata.name or ""] = obj
    return out


def test_expected_examples_exist(repo: Path) -> None:
    assert {p.name for p in (repo / "policies").glob("*.yaml")} == EXPECTED_FILES


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_each_example_parses_and_round_trips(repo: Path, load_docs: Docs, name: str) -> None:
    docs = load_docs((repo / "policies" / name).read_text())
    assert docs
    for doc in docs:
        if doc["kind"] == "Secret":
            continue
        obj = parse_object(doc)
        assert type(obj).from_dict(obj.to_dict()) == obj
        if isinstance(obj, PropagationPolicy | ClusterPropagationPolicy):
            assert obj.spec.is_gang, name
            assert obj.spec.problems() == [], name


def test_seed_examples(repo: Path, load_docs: Docs) -> None:
    objs = _by_name(repo, load_docs)
    plain, queued = objs["example-policy"], objs["example-policy-queued"]
    assert not plain.spec.queued and queued.spec.queued
    for p in (plain, queued):
        app = p.spec.application_failover
        assert app.decision_conditions.toleration_seconds == 30
        assert app.normalized_purge_mode == "Directly"
    job = WorkloadRef("kubeflow.org/v1", "PyTorchJob", "default", "pytorch-test", {})
    queued_job = WorkloadRef(
        "kubeflow.org/v1", "PyTorchJob", "default", "q", {"fleet.dev/queue": "true"}
    )
    pps = [o for o in objs.values() if isinstance(o, PropagationPolicy)]
    cpps = [o for o in objs.values() if isinstance(o, ClusterPropagationPolicy)]
    assert match_policy(job, pps, cpps).policy is plain
    assert match_policy(queued_job, pps, cpps).policy is queued


def test_cluster_wide_example(repo: Path, load_docs: Docs) -> None:
    objs = _by_name(repo, load_docs)
    cpp = objs["training-jobs"]
    assert isinstance(cpp, ClusterPropagationPolicy)
    tf = WorkloadRef("kubeflow.org/v1", "TFJob", "team-a", "tf", {"team": "ml"})
    m = match_policy(tf, [], [cpp])
    assert m.policy is cpp and m.gang
    assert (
        match_policy(WorkloadRef("kubeflow.org/v1", "TFJob", "team-a", "tf", {}), [], [cpp]).policy
        is None
    )


def test_affinity_example_selects_the_example_member(repo: Path, load_docs: Docs) -> None:
    objs = _by_name(repo, load_docs)
    policy, member = objs["llm-pretrain-a100"], objs["member-hangzhou-a"]
    assert isinstance(member, MemberCluster)
    rules = placement_rules(policy.spec)
    assert rules.affinity is not None
    cluster = ClusterSnapshot.build(member.name, [], labels=member.labels)
    assert rules.affinity.exclude == ("member-maintenance",)
    assert rules.affinity.rejection(cluster) is None
    elsewhere = ClusterSnapshot.build("member-maintenance", [], labels=member.labels)
    assert rules.affinity.rejection(elsewhere) is not None
    taints = core_taints(member.spec.taints)
    assert untolerated(rules.tolerations, taints) is None
    assert untolerated((), taints) is not None


def test_sum_estimator_example_uses_the_extensions(repo: Path, load_docs: Docs) -> None:
    p = _by_name(repo, load_docs)["elastic-jobs-sum-estimator"]
    assert p.spec.gang_estimator == "sum"
    app = p.spec.application_failover
    assert app.max_failovers == 3 and app.cluster_exclusion_seconds == 1800


def test_fragmentation_example_selects_the_score(repo: Path, load_docs: Docs) -> None:
    p = _by_name(repo, load_docs)["inference-jobs-fragmentation"]
    assert p.spec.gang_scoring == "fragmentation" and p.spec.is_gang


def test_rack_topology_example_gives_the_whole_gang_rule(repo: Path, load_docs: Docs) -> None:
    policy = _by_name(repo, load_docs)["training-jobs-one-rack"]
    assert isinstance(policy, PropagationPolicy)
    rule = placement_rules(policy.spec).topology
    assert rule is not None
    assert (rule.level, rule.mode, rule.components) == (
        "topology.kubernetes.io/rack",
        "Required",
        (),
    )
    assert policy.spec.not_acted_on() == []
    summed = PropagationPolicy.from_dict(
        {
            **policy.to_dict(),
            "spec": {
                **policy.spec.to_dict(),
                "placement": {
                    "replicaScheduling": {
                        "customSchedulingType": "Gang",
                        "gangEstimator": "sum",
                        "gangTopology": {"level": "topology.kubernetes.io/rack"},
                    }
                },
            },
        }
    )
    assert summed.spec.placement is not None
    assert placement_rules(summed.spec).topology is not None
    assert any("gangTopology" in line for line in summed.spec.not_acted_on())


def test_membercluster_example_refers_to_its_secret(repo: Path, load_docs: Docs) -> None:
    docs = load_docs((repo / "policies" / "membercluster-example.yaml").read_text())
    secret = next(d for d in docs if d["kind"] == "Secret")
    member = MemberCluster.from_dict(next(d for d in docs if d["kind"] == "MemberCluster"))
    ref = member.spec.kubeconfig_secret_ref
    assert (ref.namespace, ref.name) == (
        secret["metadata"]["namespace"],
        secret["metadata"]["name"],
    )
    text = kubeconfig_text_from_secret(secret, ref.key)
    load_kubeconfig(text)
    # The skeleton is complete except for the placeholder CA, which the validator flags.
    assert [p.field for p in validate_kubeconfig(text)] == [
        "clusters[0].cluster.certificate-authority-data"
    ]


def test_state_preservation_is_acted_on_and_copied_into_the_binding() -> None:
    rules = {"rules": [{"aliasLabelName": "ckpt/step", "jsonPath": "{ .checkpoint.step }"}]}
    policy = PropagationPolicy.from_dict(
        {
            "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
                "placement": {"replicaScheduling": {"customSchedulingType": "Gang"}},
                "failover": {
                    "application": {
                        "decisionConditions": {"tolerationSeconds": 30},
                        "statePreservation": rules,
                    },
                    "cluster": {"statePreservation": rules},
                },
            },
        }
    )
    assert not any("statePreservation" in line for line in policy.spec.not_acted_on())
    copied = BindingFailover.from_policy(policy.spec.failover)
    assert copied is not None
    assert copied.state_preservation is not None and copied.cluster_state_preservation is not None
    assert copied.to_dict()["statePreservation"] == rules
    assert copied.to_dict()["clusterStatePreservation"] == rules


def test_gang_topology_wait_seconds_reaches_the_rule_with_its_default() -> None:
    def policy_of(topology: dict[str, object]) -> PropagationPolicy:
        return PropagationPolicy.from_dict(
            {
                "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
                "kind": "PropagationPolicy",
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {
                    "resourceSelectors": [{"apiVersion": "batch/v1", "kind": "Job"}],
                    "placement": {
                        "replicaScheduling": {
                            "customSchedulingType": "Gang",
                            "gangTopology": topology,
                        }
                    },
                },
            }
        )

    def rule_of(topology: dict[str, object]) -> TopologyRule | None:
        return placement_rules(policy_of(topology).spec).topology

    rack = "topology.kubernetes.io/rack"
    preferred = rule_of({"level": rack, "mode": "Preferred"})
    assert preferred is not None and preferred.wait_seconds == DEFAULT_WAIT_SECONDS
    now = rule_of({"level": rack, "mode": "Preferred", "waitSeconds": 0})
    assert now is not None and now.wait_seconds == 0
    required = rule_of({"level": rack, "waitSeconds": 60})
    assert required is not None and required.wait_seconds == 0
    ignored = policy_of({"level": rack, "waitSeconds": 60}).spec.not_acted_on()
    assert any("waitSeconds" in line for line in ignored)
