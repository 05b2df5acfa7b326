"""A member that gang-schedules with Kubernetes' own Workload API (`gangmarks.KUBERNETES`):
every kind's pods name the native PodGroup fleet writes beside the copy (by a label the
member's admission policy turns into `spec.schedulingGroup`), and that PodGroup holds the
gang's minimum as `minCount` and, when the whole gang must share one domain, that level as its
topology constraint."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.controller import copies
from fleet.core.assignment import Domain, whole_gang_level
from fleet.core.gangmarks import (
    KUBERNETES,
    KUBERNETES_POD_GROUP_API,
    KUBERNETES_POD_GROUP_LABEL,
    POD_GROUP_NAME_LABEL,
)
from fleet.core.kinds import ADAPTERS, adapter_for, gang_from_workload
from fleet.core.kinds.adapter import NATIVE_POD_GROUP_ACCESS
from fleet.testing.workloads import pytorchjob

from .test_pod_marks import NS, _every_kind, _fleet

RACK = "topology.kubernetes.io/rack"


def _member_copy(obj: dict[str, Any], needed: dict[Any, Any]) -> tuple[Any, dict[str, Any], int]:
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    gang = gang_from_workload(obj, needed)
    out = copies.member_copy(
        obj,
        kind,
        min_member=gang.min_member,
        binding="b",
        fleet_id="f",
        gang_scheduler=KUBERNETES,
        needed=needed,
    )
    # As the member returns it: with its own UID.
    out["metadata"] = {**out["metadata"], "uid": "member-uid"}
    return kind, out, gang.min_member


@pytest.mark.parametrize(("obj", "needed"), _every_kind(), ids=lambda x: x.get("kind", ""))
def test_every_kinds_pods_name_the_native_pod_group_written_beside_the_copy(obj, needed):
    kind, out, min_member = _member_copy(obj, needed)
    name = obj["metadata"]["name"]
    pods = kind.pod_templates(out, needed)
    assert pods
    for t in pods:
        labels = t.template["metadata"]["labels"]
        assert labels[KUBERNETES_POD_GROUP_LABEL] == name
        assert POD_GROUP_NAME_LABEL not in labels  # ACK's labels mean nothing there
    group = kind.pod_group(out, min_member=min_member, gang_scheduler=KUBERNETES)
    assert group is not None
    assert group["apiVersion"] == KUBERNETES_POD_GROUP_API and group["kind"] == "PodGroup"
    assert group["metadata"]["name"] == name and group["metadata"]["namespace"] == NS
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": min_member}}}
    (owner,) = group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (obj["kind"], "member-uid", True)


def test_the_pod_group_carries_the_level_the_whole_gang_must_share():
    kind, out, _ = _member_copy(_fleet(pytorchjob("j", workers=3)), {})
    group = kind.pod_group(out, min_member=4, gang_scheduler=KUBERNETES, topology=RACK)
    assert group is not None
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}


def test_a_users_own_pod_group_label_is_kept():
    job = _fleet(pytorchjob("j"))
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        spec["template"].setdefault("metadata", {}).setdefault("labels", {})[
            KUBERNETES_POD_GROUP_LABEL
        ] = "mine"
    kind, out, _ = _member_copy(job, {})
    assert {
        t.template["metadata"]["labels"][KUBERNETES_POD_GROUP_LABEL] for t in kind.templates(out)
    } == {"mine"}


def test_every_kinds_member_role_may_write_native_pod_groups():
    for adapter in ADAPTERS:
        member, _fleet_side = adapter.accesses()
        assert NATIVE_POD_GROUP_ACCESS in member, adapter.kind
    assert NATIVE_POD_GROUP_ACCESS.group == "scheduling.k8s.io"


@pytest.mark.parametrize(
    ("domains", "level"),
    [
        ((), None),
        ((Domain(RACK, "r1"),), RACK),  # the policy's whole-gang rule
        ((Domain(RACK, "r1", ("master", "worker")),), RACK),  # every pod set grouped
        ((Domain(RACK, "r1", ("worker",)),), None),  # one pod set only: node affinity keeps it
        ((Domain(RACK, "r1", required=False),), None),  # preferred: the member may spread it
        ((Domain(RACK, "r1", ("worker",)), Domain(RACK, "r2", ("master",))), None),
    ],
)
def test_whole_gang_level(domains, level):
    assert whole_gang_level(domains, ("master", "worker")) == level
