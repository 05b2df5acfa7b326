"""Member copies of JobSet and Ray jobs: the gang written per member scheduler, and the
PodGroup fleet writes beside them on coscheduling members (their operators make none)."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.api import constants as c
from fleet.controller import copies
from fleet.core.gangmarks import COSCHEDULING, KOORDINATOR
from fleet.core.kinds import adapter_for
from fleet.testing.workloads import jobset, raycluster, rayjob


def _fleet(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"] |= {"namespace": "team-a", "uid": "u-1", "resourceVersion": "7"}
    return obj


@pytest.mark.parametrize("make", [jobset, rayjob, raycluster])
def test_coscheduling_copy_labels_every_template_with_fleets_pod_group(make):
    obj = _fleet(make("j"))
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None and kind.fleet_pod_group
    out = copies.member_copy(
        obj, kind, min_member=3, binding="b", fleet_id="f", gang_scheduler=COSCHEDULING
    )
    templates = kind.templates(out)
    assert len(templates) == 2
    for t in templates:
        labels = t.template["metadata"]["labels"]
        assert labels[c.COSCHEDULING_POD_GROUP_LABEL] == "j"
        assert c.POD_GROUP_NAME_LABEL not in labels
    member_obj = {**out, "metadata": {**out["metadata"], "uid": "member-uid"}}
    group = kind.pod_group(member_obj, min_member=3, gang_scheduler=COSCHEDULING)
    assert group is not None
    assert group["metadata"]["name"] == "j" and group["metadata"]["namespace"] == "team-a"
    assert group["spec"] == {"minMember": 3}
    (owner,) = group["metadata"]["ownerReferences"]
    assert owner["uid"] == "member-uid" and owner["kind"] == obj["kind"]


@pytest.mark.parametrize("make", [jobset, rayjob, raycluster])
def test_koordinator_copy_carries_the_seeds_pod_group_labels_and_no_pod_group(make):
    obj = _fleet(make("j"))
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    out = copies.member_copy(
        obj, kind, min_member=4, binding="b", fleet_id="f", gang_scheduler=KOORDINATOR
    )
    for t in kind.templates(out):
        labels = t.template["metadata"]["labels"]
        assert labels[c.POD_GROUP_NAME_LABEL] == "j"
        assert labels[c.POD_GROUP_MIN_AVAILABLE_LABEL] == "4"
        assert c.COSCHEDULING_POD_GROUP_LABEL not in labels
    assert kind.pod_group(out, min_member=4, gang_scheduler=KOORDINATOR) is None
    # no runPolicy is invented for kinds that have none
    assert "runPolicy" not in out["spec"]


def test_rayjob_copy_labels_only_its_clusters_templates():
    obj = _fleet(rayjob("j"))
    kind = adapter_for(obj["apiVersion"], obj["kind"])
    assert kind is not None
    out = copies.member_copy(
        obj, kind, min_member=3, binding="b", fleet_id="f", gang_scheduler=COSCHEDULING
    )
    cluster = out["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["template"]["metadata"]["labels"][c.ROLE_LABEL] == "head"
    worker = cluster["workerGroupSpecs"][0]["template"]["metadata"]["labels"]
    assert worker[c.ROLE_LABEL] == "workers"
    assert "submitterPodTemplate" not in out["spec"]
