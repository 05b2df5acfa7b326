"""The models accept what ACK One and Karmada users write and round-trip what the API returns."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest
import yaml
from _api_samples import KUBECTL_GB, KUBECTL_MC, KUBECTL_PP
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from fleet.api import (
    ApplicationFailoverBehavior,
    BindingFailover,
    ClusterPropagationPolicy,
    FailoverBehavior,
    GangBinding,
    GangComponent,
    GangSpec,
    MemberCluster,
    PolicyRef,
    PropagationPolicy,
    WorkloadReference,
    binding_name,
    constants,
    find_condition,
    normalize_purge_mode,
    parse_list,
    parse_object,
    set_condition,
)
from fleet.core.quantity import parse_quantity

# The two PropagationPolicies of seed 001 (ACK One's PyTorchJob example), verbatim apart from
# the suspension.scheduling line the second one describes.
SEED_GANG = """
apiVersion: policy.one.alibabacloud.com/v1alpha1
kind: PropagationPolicy
metadata:
  name: example-policy # The default namespace is `default`.
spec:
  propagateDeps: true
  # 申明任务运行失败时重新调度。
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 30
      purgeMode: Immediately
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      # 声明使用Gang调度。
      customSchedulingType: Gang
  resourceSelectors:
  - apiVersion: kubeflow.org/v1
    kind: PyTorchJob
"""

SEED_QUEUED = """
apiVersion: policy.one.alibabacloud.com/v1alpha1
kind: PropagationPolicy
metadata:
  name: example-policy # The default namespace is `default`.
spec:
  propagateDeps: true
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 30
      purgeMode: Immediately
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      customSchedulingType: Gang
  suspension:
    scheduling: true
  resourceSelectors:
  - apiVersion: kubeflow.org/v1
    kind: PyTorchJob
"""

# Karmada policies as its documentation writes them (group policy.karmada.io).
KARMADA_EXAMPLES = [
    """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames:
        - member1
        - member2
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference:
        staticWeightList:
          - targetCluster:
              clusterNames:
                - member1
            weight: 1
          - targetCluster:
              clusterNames:
                - member2
            weight: 1
""",
    """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: failover-app
  namespace: apps
spec:
  propagateDeps: true
  priority: 3
  preemption: Always
  conflictResolution: Overwrite
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      labelSelector:
        matchExpressions:
          - key: app
            operator: In
            values: [web, api]
  placement:
    clusterAffinities:
      - affinityName: primary
        labelSelector:
          matchLabels:
            location: dc-a
      - affinityName: backup
        fieldSelector:
          matchExpressions:
            - key: provider
              operator: In
              values: [alibabacloud]
            - key: region
              operator: NotIn
              values: [us-east-1]
    clusterTolerations:
      - key: cluster.karmada.io/not-ready
        operator: Exists
        effect: NoExecute
        tolerationSeconds: 300
    spreadConstraints:
      - spreadByField: region
        maxGroups: 2
        minGroups: 1
      - spreadByField: cluster
        maxGroups: 3
        minGroups: 2
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        dynamicWeight: AvailableReplicas
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 120
      purgeMode: Gracefully
      gracePeriodSeconds: 600
      statePreservation:
        rules:
          - aliasLabelName: app.karmada.io/replicas
            jsonPath: "{ .replicas }"
    cluster:
      purgeMode: Directly
  suspension:
    dispatchingOnClusters:
      clusterNames: [member3]
  activationPreference: Lazy
  preserveResourcesOnDeletion: true
  dependentOverrides: [web-override]
  schedulerName: default-scheduler
  schedulePriority:
    priorityClassSource: KubePriorityClass
    priorityClassName: high-priority
""",
    """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: crd-propagation
spec:
  resourceSelectors:
    - apiVersion: apiextensions.k8s.io/v1
      kind: CustomResourceDefinition
      name: guestbooks.webapp.my.domain
  placement:
    clusterAffinity:
      clusterNames:
        - member1
      exclude:
        - member2
    replicaScheduling:
      replicaSchedulingType: Duplicated
  association: true
  suspension:
    dispatching: true
""",
]


def _load(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def _to_fleet_group(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["apiVersion"] = doc["apiVersion"].replace(
        constants.KARMADA_POLICY_GROUP, constants.POLICY_GROUP
    )
    return doc


# --- Seeds and Karmada compatibility --------------------------------------------------------


def test_seed_gang_policy_parses_with_its_meaning() -> None:
    pp = PropagationPolicy.from_dict(_load(SEED_GANG))
    assert pp.spec.is_gang
    assert not pp.spec.queued
    assert pp.spec.propagate_deps is True
    app = pp.spec.application_failover
    assert app is not None
    assert app.decision_conditions.toleration_seconds == 30
    assert app.purge_mode == "Immediately"
    assert app.normalized_purge_mode == "Directly"
    rs = pp.spec.placement and pp.spec.placement.replica_scheduling
    assert rs and rs.replica_scheduling_type == "Divided"
    assert pp.spec.resource_selectors[0].kind == "PyTorchJob"
    assert pp.spec.problems() == []


def test_seed_queued_policy_enters_the_queue() -> None:
    pp = PropagationPolicy.from_dict(_load(SEED_QUEUED))
    assert pp.spec.is_gang and pp.spec.queued


@pytest.mark.parametrize("text", KARMADA_EXAMPLES)
def test_karmada_policy_applies_once_its_group_is_changed(text: str) -> None:
    doc = _to_fleet_group(_load(text))
    obj = parse_object(doc)
    assert isinstance(obj, PropagationPolicy | ClusterPropagationPolicy)
    assert not obj.spec.is_gang
    # Nothing the user wrote is lost (only Karmada's documented defaults are added).
    dumped = obj.to_dict()
    assert _contains(dumped, doc), json.dumps(dumped, indent=1)


def test_karmada_group_itself_is_not_ours() -> None:
    with pytest.raises(ValueError, match="not a fleet object"):
        parse_object(_load(KARMADA_EXAMPLES[0]))


def _contains(big: Any, small: Any) -> bool:
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and _contains(big[k], v) for k, v in small.items()
        )
    if isinstance(small, list):
        return isinstance(big, list) and len(big) == len(small) and all(map(_contains, big, small))
    return bool(big == small)


def test_server_side_defaults_match_karmada() -> None:
    pp = PropagationPolicy.from_dict(
        {
            "apiVersion": constants.POLICY_API_VERSION,
            "kind": "PropagationPolicy",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}],
                "placement": {"replicaScheduling": {}},
                "failover": {"application": {"decisionConditions": {}}},
            },
        }
    )
    assert pp.spec.priority == 0
    assert pp.spec.preemption == "Never"
    assert pp.spec.conflict_resolution == "Abort"
    assert pp.spec.scheduler_name == "default-scheduler"
    app = pp.spec.application_failover
    assert app is not None and app.decision_conditions.toleration_seconds == 300
    assert app.normalized_purge_mode == "Gracefully"
    rs = pp.spec.placement and pp.spec.placement.replica_scheduling
    assert rs and rs.replica_scheduling_type == "Divided"


@pytest.mark.parametrize(
    ("mode", "normalized"),
    [
        ("Immediately", "Directly"),
        ("Directly", "Directly"),
        ("Graciously", "Gracefully"),
        ("Gracefully", "Gracefully"),
        ("Never", "Never"),
        (None, "Gracefully"),
    ],
)
def test_all_six_purge_spellings_are_accepted_and_normalized(
    mode: str | None, normalized: str
) -> None:
    app = ApplicationFailoverBehavior.from_dict(
        {"decisionConditions": {}, **({"purgeMode": mode} if mode else {})}
    )
    assert app.normalized_purge_mode == normalized
    assert normalize_purge_mode(mode) == normalized


def test_unknown_purge_mode_is_refused() -> None:
    with pytest.raises(ValidationError):
        ApplicationFailoverBehavior.from_dict({"decisionConditions": {}, "purgeMode": "Soon"})
    with pytest.raises(ValueError, match="unknown purgeMode"):
        normalize_purge_mode("Soon")


def _pp(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": constants.POLICY_API_VERSION,
        "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Pod"}], **spec},
    }


@pytest.mark.parametrize(
    "spec",
    [
        {"resourceSelectors": []},
        {"failover": {"application": {"decisionConditions": {"tolerationSeconds": -1}}}},
        {"failover": {"application": {"decisionConditions": {}, "maxFailovers": -1}}},
        {"failover": {"application": {"decisionConditions": {}, "clusterExclusionSeconds": -5}}},
        {"failover": {"application": {"decisionConditions": {}, "gracePeriodSeconds": 0}}},
        {"failover": {"application": {"decisionConditions": {"tolerationSeconds": "30"}}}},
        {"failover": {"application": {"decisionConditions": {"tolerationSeconds": True}}}},
        {"failover": {"application": {}}},
        {"placement": {"replicaScheduling": {"gangEstimator": "fastest"}}},
        {"placement": {"replicaScheduling": {"gangScoring": "smallest"}}},
        {"placement": {"replicaScheduling": {"replicaSchedulingType": "Split"}}},
        {"placement": {"clusterAffinities": [{"affinityName": ""}]}},
        {"placement": {"clusterAfinity": {}}},
        {"preemption": "Sometimes"},
        {"priority": 2**31},
    ],
)
def test_invalid_policies_are_refused(spec: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PropagationPolicy.from_dict(_pp(spec))


def test_fleet_extensions_parse() -> None:
    pp = PropagationPolicy.from_dict(
        _pp(
            {
                "placement": {
                    "replicaScheduling": {
                        "customSchedulingType": "Gang",
                        "gangEstimator": "sum",
                        "gangScoring": "fragmentation",
                    }
                },
                "failover": {
                    "application": {
                        "decisionConditions": {"tolerationSeconds": 0},
                        "maxFailovers": 0,
                        "clusterExclusionSeconds": 600,
                    }
                },
            }
        )
    )
    assert pp.spec.gang_estimator == "sum"
    assert pp.spec.gang_scoring == "fragmentation"
    app = pp.spec.application_failover
    assert app and app.max_failovers == 0 and app.cluster_exclusion_seconds == 600


def test_semantic_problems_are_reported_not_raised() -> None:
    pp = PropagationPolicy.from_dict(
        _pp(
            {
                "placement": {
                    "clusterAffinity": {"clusterNames": ["a"]},
                    "clusterAffinities": [{"affinityName": "g", "clusterNames": ["b"]}],
                    "spreadConstraints": [{"spreadByField": "region", "spreadByLabel": "x"}],
                    "replicaScheduling": {
                        "replicaSchedulingType": "Duplicated",
                        "customSchedulingType": "Gang",
                    },
                },
                "suspension": {
                    "dispatching": True,
                    "dispatchingOnClusters": {"clusterNames": ["a"]},
                },
                "failover": {
                    "application": {
                        "decisionConditions": {},
                        "purgeMode": "Immediately",
                        "gracePeriodSeconds": 60,
                    }
                },
            }
        )
    )
    problems = pp.spec.problems()
    assert len(problems) == 5
    assert any("clusterAffinities" in p for p in problems)
    assert any("gracePeriodSeconds" in p for p in problems)


# --- Round trip of what the API server returns -------------------------------------------------


def _without_nulls(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _without_nulls(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_without_nulls(v) for v in obj]
    return obj


@pytest.mark.parametrize("obj", [KUBECTL_PP, KUBECTL_MC, KUBECTL_GB], ids=["pp", "mc", "gb"])
def test_kubectl_json_round_trips_exactly(obj: dict[str, Any]) -> None:
    parsed = parse_object(json.loads(json.dumps(obj)))
    dumped = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped == _without_nulls(obj)
    assert parsed.to_dict() == dumped
    # And again: parse(dump(x)) == x.
    assert type(parsed).from_dict(dumped) == parsed


def test_python_mode_dump_is_api_ready() -> None:
    mc = MemberCluster.from_dict(KUBECTL_MC)
    dumped = mc.model_dump(by_alias=True, exclude_none=True)
    assert dumped["metadata"]["creationTimestamp"] == "2024-11-20T08:00:00Z"
    yaml.safe_dump(dumped)  # plain types only


def test_populate_by_name() -> None:
    ref = PolicyRef(kind="PropagationPolicy", namespace="default", name="p")
    assert ref.to_dict() == {"kind": "PropagationPolicy", "namespace": "default", "name": "p"}
    sel = WorkloadReference.from_dict(
        {"api_version": "v1", "kind": "Pod", "name": "x", "uid": "u", "namespace": "d"}
    )
    assert sel.to_dict()["apiVersion"] == "v1"


def test_parse_list_reads_kubectl_list_output() -> None:
    items = parse_list({"apiVersion": "v1", "kind": "List", "items": [KUBECTL_PP, KUBECTL_MC]})
    assert [type(i) for i in items] == [PropagationPolicy, MemberCluster]
    assert parse_list(KUBECTL_GB)[0].kind == "GangBinding"


def test_membercluster_helpers() -> None:
    mc = MemberCluster.from_dict(KUBECTL_MC)
    assert mc.ready
    assert mc.allocatable("nvidia.com/gpu") == "128"
    assert mc.labels["gpu-model"] == "a100"
    minimal = MemberCluster.from_dict(
        {
            "apiVersion": "fleet.dev/v1alpha1",
            "kind": "MemberCluster",
            "metadata": {"name": "m"},
            "spec": {"kubeconfigSecretRef": {"namespace": "fleet-system", "name": "m"}},
        }
    )
    assert minimal.spec.kubeconfig_secret_ref.key == "kubeconfig"
    assert not minimal.ready and minimal.allocatable("cpu") is None


# --- Scalars ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1e3", Fraction(1000)),
        ("2k", Fraction(2000)),
        ("1.5", Fraction(3, 2)),
        (4, Fraction(4)),
        ("100n", Fraction(1, 10**7)),
        ("+3E", Fraction(3 * 10**18)),
        ("1e400", Fraction(2**63 - 1)),  # apimachinery takes any int32 exponent; int64 caps
    ],
)
def test_models_and_the_core_read_quantities_alike(q: int | str, value: Fraction) -> None:
    """One grammar: what a fleet object accepts is what placement reads (the core's parser)."""
    assert parse_quantity(q) == value
    component = GangComponent.from_dict({"name": "w", "replicas": 1, "requests": {"cpu": q}})
    assert component.requests == {"cpu": q}


@pytest.mark.parametrize("bad", ["", "1.2.3", "4 Gi", "Gi", "1gi", 1.5, True, None])
def test_bad_quantities_are_refused(bad: Any) -> None:
    with pytest.raises(ValidationError):
        GangComponent.from_dict({"name": "w", "replicas": 1, "requests": {"cpu": bad}})


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi"]))
def test_quantity_suffixes_scale(n: int, suffix: str) -> None:
    factor: dict[str, Fraction] = {
        "": Fraction(1),
        "m": Fraction(1, 1000),
        "k": Fraction(1000),
        "Ki": Fraction(1024),
        "Mi": Fraction(2**20),
        "Gi": Fraction(2**30),
    }
    assert parse_quantity(f"{n}{suffix}") == n * factor[suffix]


def test_times_are_utc_seconds() -> None:
    from fleet.api import PlacementRecord

    naive = PlacementRecord(cluster="a", placed_at=datetime(2024, 1, 2, 3, 4, 5, 678))
    assert naive.to_dict()["placedAt"] == "2024-01-02T03:04:05Z"
    offset = PlacementRecord.from_dict({"cluster": "a", "placedAt": "2024-01-02T11:04:05+08:00"})
    assert offset.placed_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert offset.to_dict()["placedAt"] == "2024-01-02T03:04:05Z"


# --- GangBinding helpers ---------------------------------------------------------------------


def _binding() -> GangBinding:
    return GangBinding.for_workload(
        WorkloadReference(
            api_version="kubeflow.org/v1",
            kind="PyTorchJob",
            namespace="default",
            name="pytorch-test",
            uid="u-1",
        ),
        PolicyRef(kind="PropagationPolicy", namespace="default", name="example-policy"),
        GangSpec(
            min_member=3,
            components=[
                GangComponent(name="master", replicas=1, requests={"nvidia.com/gpu": 1}),
                GangComponent(name="worker", replicas=2, requests={"nvidia.com/gpu": 1}),
            ],
        ),
        estimator="nodes",
        failover=BindingFailover.from_policy(
            FailoverBehavior.from_dict(
                {
                    "application": {
                        "decisionConditions": {"tolerationSeconds": 30},
                        "purgeMode": "Immediately",
                        "maxFailovers": 1,
                        "clusterExclusionSeconds": 60,
                    }
                }
            )
        ),
    )


def test_binding_for_workload_is_deterministic_and_owned() -> None:
    gb = _binding()
    assert (
        gb.metadata.name == "pytorchjob-pytorch-test" == binding_name("PyTorchJob", "pytorch-test")
    )
    assert gb.metadata.namespace == "default"
    owner = (gb.metadata.owner_references or [])[0]
    assert owner.uid == "u-1" and owner.controller and owner.block_owner_deletion
    assert gb.spec.failover and gb.spec.failover.purge_mode == "Directly"
    assert gb.spec.gang.total_replicas == 3
    assert gb == _binding()
    assert gb.target_cluster is None


def test_binding_name_stays_a_valid_unique_dns_subdomain() -> None:
    long_a, long_b = "a" * 250, "a" * 249 + "b"
    na, nb = binding_name("PyTorchJob", long_a), binding_name("PyTorchJob", long_b)
    assert len(na) <= 253 and len(nb) <= 253 and na != nb
    assert binding_name("PyTorchJob", long_a) == na
    dotted = binding_name("TFJob", "x" * 240 + "." + "y" * 30)
    assert not dotted.endswith((".", "-")) and ".-" not in dotted


def test_binding_reads_its_target_and_conditions() -> None:
    gb = GangBinding.from_dict(KUBECTL_GB)
    assert gb.target_cluster == "member-b"
    assert gb.condition("Scheduled") is not None


def test_failover_snapshot_covers_application_and_cluster_failover() -> None:
    both = BindingFailover.from_policy(
        FailoverBehavior.from_dict(
            {
                "application": {"decisionConditions": {"tolerationSeconds": 5}},
                "cluster": {"purgeMode": "Immediately"},
            }
        )
    )
    assert both is not None and both.cluster_purge_mode == "Directly"
    assert both.on_application_failure is None and both.on_cluster_loss is None  # true
    cluster_only = BindingFailover.from_policy(
        FailoverBehavior.from_dict({"cluster": {"purgeMode": "Never"}})
    )
    assert cluster_only is not None
    assert cluster_only.on_application_failure is False
    assert cluster_only.toleration_seconds == 300  # Karmada's default cluster taint toleration
    assert BindingFailover.from_policy(None) is None


def test_set_condition_is_idempotent() -> None:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    t1 = datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    conds = set_condition(None, "Ready", "True", "ClusterReady", "ok", t0)
    again = set_condition(conds, "Ready", "True", "ClusterReady", "ok", t1)
    assert again == conds
    reworded = set_condition(conds, "Ready", "True", "ClusterReady", "still ok", t1)
    assert reworded[0].last_transition_time == t0
    flipped = set_condition(conds, "Ready", "False", "ClusterNotReachable", "timeout", t1)
    assert flipped[0].last_transition_time == t1
    both = set_condition(flipped, "Other", "Unknown", "Probing", "", t1)
    assert [c.type for c in both] == ["Ready", "Other"]
    assert find_condition(both, "Other") is not None


def test_condition_shape_is_enforced() -> None:
    from fleet.api import Condition

    ok = {
        "type": "Ready",
        "status": "True",
        "reason": "ClusterReady",
        "message": "",
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }
    Condition.from_dict(ok)
    for bad in ({"status": "Yes"}, {"reason": "has space"}, {"reason": ""}, {"type": "not valid!"}):
        with pytest.raises(ValidationError):
            Condition.from_dict({**ok, **bad})
    with pytest.raises(ValidationError):
        Condition.from_dict({k: v for k, v in ok.items() if k != "message"})


def test_metadata_keeps_unknown_fields() -> None:
    mc = MemberCluster.from_dict(
        {**KUBECTL_MC, "metadata": {**KUBECTL_MC["metadata"], "futureField": {"x": 1}}}
    )
    assert mc.to_dict()["metadata"]["futureField"] == {"x": 1}


def test_constants_fit_kubernetes_label_rules() -> None:
    import re

    key = re.compile(
        r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
    )
    for name in dir(constants):
        if name.endswith(("_LABEL", "_ANNOTATION")) or name == "FINALIZER":
            assert key.match(getattr(constants, name)), name
    assert constants.MANAGED_BY_LABEL == "fleet.dev/managed-by"
    assert constants.FLEET_UID_LABEL == "fleet.dev/fleet-uid"
    assert constants.BINDING_ANNOTATION == "fleet.dev/binding"
    assert constants.POD_GROUP_NAME_LABEL == "pod-group.scheduling.sigs.k8s.io/name"
    assert (
        constants.POD_GROUP_MIN_AVAILABLE_LABEL == "pod-group.scheduling.sigs.k8s.io/min-available"
    )
    assert constants.COSCHEDULING_POD_GROUP_LABEL == "scheduling.x-k8s.io/pod-group"


def test_workload_reference_from_object() -> None:
    ref = WorkloadReference.from_object(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "ns", "uid": "u-9", "labels": {"a": "b"}},
        }
    )
    assert ref == WorkloadReference(
        api_version="kubeflow.org/v1", kind="PyTorchJob", namespace="ns", name="j", uid="u-9"
    )
    with pytest.raises(ValidationError):
        WorkloadReference.from_object(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}
        )
