"""Small pure parts of the controller: the policy index, and fleet's job condition."""

from __future__ import annotations

from fleet.api import PropagationPolicy, placement_rules
from fleet.controller.policies import PolicyIndex, PolicyReport
from fleet.controller.status_mirror import with_fleet_condition
from fleet.core.kinds import adapter_for
from fleet.testing.workloads import gang_policy, pytorchjob


def test_policy_affinity_becomes_the_engines_rules():
    policy = gang_policy("p", "ns", cluster_names=["member-1"])
    policy["spec"]["placement"]["clusterAffinity"] |= {
        "exclude": ["member-3"],
        "labelSelector": {
            "matchLabels": {"gpu": "a100"},
            "matchExpressions": [{"key": "region", "operator": "In", "values": ["east"]}],
        },
    }
    affinity = placement_rules(PropagationPolicy.from_dict(policy).spec).affinity
    assert affinity is not None
    assert affinity.cluster_names == ("member-1",) and affinity.exclude == ("member-3",)
    assert affinity.label_selector is not None
    assert affinity.label_selector.matches({"gpu": "a100", "region": "east"})
    assert not affinity.label_selector.matches({"gpu": "a100", "region": "west"})
    assert (
        placement_rules(PropagationPolicy.from_dict(gang_policy("q", "ns")).spec).affinity is None
    )


def test_policy_index_matches_only_in_the_workloads_namespace_and_skips_bad_policies():
    index = PolicyIndex()
    assert index.upsert(gang_policy("gang", "team-a")) == PolicyReport(gang=True)
    broken = gang_policy("broken", "team-a")
    broken["spec"]["failover"]["application"]["purgeMode"] = "Sometimes"
    assert index.upsert(broken).problems  # reported, and ignored
    job = pytorchjob("j", namespace="team-a")
    assert index.match(job).gang and index.match(job).policy.metadata.name == "gang"
    assert not index.match(pytorchjob("j", namespace="team-b")).gang
    index.remove("PropagationPolicy", "team-a", "gang")
    assert index.match(job).policy is None


def test_fields_fleet_does_not_act_on_are_reported_for_gang_policies():
    policy = gang_policy("karmada", "ns")
    policy["spec"]["placement"]["spreadConstraints"] = [{"spreadByField": "cluster"}]
    policy["spec"]["dependentOverrides"] = ["my-override"]
    ignored = PolicyIndex().upsert(policy).ignored
    assert [x.split(":")[0] for x in ignored] == [
        "spec.placement.spreadConstraints",
        "spec.dependentOverrides",
    ]


def test_a_gang_policy_selecting_a_kind_fleet_does_not_dispatch_is_told_so():
    policy = gang_policy("mpi", "ns")
    policy["spec"]["resourceSelectors"] = [
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"},
        {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob"},
    ]
    (said,) = PolicyIndex().upsert(policy).ignored
    assert said.startswith("spec.resourceSelectors[1]: kubeflow.org/v2beta1 MPIJob is no kind")


def test_fleets_condition_goes_first_so_the_state_column_keeps_the_jobs_state():
    member = [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]
    kind = adapter_for("kubeflow.org/v1", "PyTorchJob")
    assert kind is not None
    out = with_fleet_condition(kind, member, "True", "Success", "scheduled", 1_700_000_000)
    assert [c["type"] for c in out] == ["Scheduled", "Created", "Running"]
    again = with_fleet_condition(kind, out, "True", "Success", "scheduled", 1_700_000_999)
    assert again == out  # unchanged: no new timestamps, so no write
